"""Frames on a rolling bus: messages that meet a segment's end pad it and go whole into the
next segment; topics, objects and consumers across segments; racing writers."""
import json
import os
import random
import shutil
import subprocess
import sys

import numpy as np
import pytest

from mappedbus_py import BusMismatchError, RollingBusReader, RollingBusWriter
from mappedbus_py.formats import layout

CHILD = os.path.join(os.path.dirname(__file__), "..", "support", "frames_child.py")
SEG = 64 << 10
REC = 56
SLOT = REC + 8


@pytest.fixture
def rolling_dir(tmp_path_factory):
    base = "/dev/shm" if os.path.isdir("/dev/shm") else str(tmp_path_factory.getbasetemp())
    path = os.path.join(base, f"mbframes-{os.getpid()}-{random.randrange(1 << 40):x}.d")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_messages_meeting_a_segments_end_go_whole_into_the_next(rolling_dir):
    rng = np.random.default_rng(3)
    sizes = [int(x) for x in rng.integers(0, 20_000, 60)] + [0, 1, SEG - 8 - 24 - 64]
    msgs = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in sizes]
    with RollingBusWriter(rolling_dir, SEG, REC, frames=True) as w:
        assert w.max_message == (SEG - 8) // SLOT * SLOT - 24
        for m in msgs:
            assert w.write(m)
        with pytest.raises(ValueError, match="never spans files"):
            w.write(bytes(w.max_message + 1))
        assert w.segment >= 8             # many segment ends met
    with RollingBusReader(rolling_dir) as r:
        got = []
        for rec in r.records(timeout=0):
            seg, off = divmod(rec.position, SEG)
            slots = layout.frame_slots(len(rec.payload), REC)
            assert off + slots * SLOT <= SEG            # never across a segment's end
            got.append(rec.payload)
    assert got == msgs


def test_topics_and_objects_across_segments(rolling_dir):
    with RollingBusWriter(rolling_dir, SEG, REC, frames=True) as w:
        for i in range(200):
            w.write_object({"i": i, "a": np.arange(i * 10)}, topic="even" if i % 2 == 0 else "odd")
    with RollingBusReader(rolling_dir, topics=["odd"]) as r:
        got = [rec.object() for rec in r.records(timeout=0)]
    assert [o["i"] for o in got] == list(range(1, 200, 2))
    assert all(np.array_equal(o["a"], np.arange(o["i"] * 10)) for o in got)
    with RollingBusReader(rolling_dir) as r:
        topics = [rec.topic for rec in r.records(timeout=0)]
    assert topics == ["even", "odd"] * 100


def test_a_consumer_goes_on_across_segments(rolling_dir):
    with RollingBusWriter(rolling_dir, SEG, REC, frames=True) as w:
        for i in range(30):
            w.write(bytes([i]) * 9_000)
    with RollingBusReader(rolling_dir, consumer="c") as r:
        for i in range(17):
            assert r.read(timeout=0).payload == bytes([i]) * 9_000
        r.commit()
    with RollingBusReader(rolling_dir, consumer="c") as r:
        assert [rec.payload[0] for rec in r.records(timeout=0)] == list(range(17, 30))


def test_frames_must_match_the_bus(rolling_dir):
    RollingBusWriter(rolling_dir, SEG, REC, frames=True).open().close()
    with pytest.raises(BusMismatchError, match="frames=True"):
        RollingBusWriter(rolling_dir).open()
    with pytest.raises(ValueError, match="multiple of 8"):
        RollingBusWriter(rolling_dir + "x", SEG, 20, frames=True)


def test_racing_writers_on_a_rolling_bus(rolling_dir):
    RollingBusWriter(rolling_dir, 1 << 20, 248, frames=True).open().close()
    ws = [subprocess.Popen([sys.executable, CHILD, "write", rolling_dir, str(i), "30",
                            str(200_000), "rolling", "topics"]) for i in range(3)]
    rs = [subprocess.Popen([sys.executable, CHILD, "read", rolling_dir, str(n), "20", "rolling",
                            *t], stdout=subprocess.PIPE, text=True)
          for n, t in ((90, []), (90, []), (30, ["t0"]))]
    try:
        for w in ws:
            assert w.wait(timeout=300) == 0
        outs = [json.loads(r.communicate(timeout=300)[0]) for r in rs]
    finally:
        for p in ws + rs:
            if p.poll() is None:
                p.kill()
    a, b, t0 = outs
    assert a["bad"] == [] and a == b and len(a["order"]) == 90
    assert t0["bad"] == []
    with_ids = [x for x in a["order"] if x[0] >= 0]
    assert [x for x in t0["order"] if x[0] >= 0] == [x for x in with_ids if x[1] % 3 == 0]


def test_large_messages_move_the_spare_on_by_their_slots_not_their_count(rolling_dir):
    # 1 KiB slots, 1 MiB segments: about ten 100 kB messages a segment. The spare's file is
    # made (and prefaulted) in the background from the segment's first look-ahead; the
    # look-ahead countdown counts slots, so the messages look at it often enough to link it
    # from the middle on: long before the roll, and not before the middle.
    from mappedbus_py.rolling import segment_path
    from mappedbus_py.rolling.directory import read_limit
    import time
    msg = b"m" * 100_000
    with RollingBusWriter(rolling_dir, 1 << 20, 1016, frames=True) as w:
        assert w.write(msg)
        assert w._job is not None and w._job.early, "no spare started at the first look"
        deadline = time.monotonic() + 30
        while not w._job.call.done:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        while read_limit(w._fd) < (1 << 19):
            assert not os.path.exists(segment_path(rolling_dir, 1))
            assert w.write(msg)
        assert w.write(msg)
        assert w._k == 0, "the segment rolled before the test could look"
        assert os.path.exists(segment_path(rolling_dir, 1))


class _HeldMapping:
    """A spare's background mapping that is not done until the test says so, and refuses to
    be waited for before that (a roll that waited for it would fail the write)."""

    def __init__(self, call):
        self.call = call
        self.released = False

    @property
    def done(self):
        return self.released and self.call.done

    def wait(self):
        assert self.released, "a write waited for the next segment's pages to be mapped"
        return self.call.wait()


def test_a_roll_enters_the_next_segment_while_its_pages_are_still_being_mapped(rolling_dir,
                                                                              monkeypatch):
    from mappedbus_py.rolling import roller
    real = roller.BackgroundCall
    held = []

    class Calls:
        fallocate = staticmethod(real.fallocate)
        unmap = staticmethod(real.unmap)

        @staticmethod
        def populate(w, made):
            call = real.populate(w, made)
            if call is not None:
                held.append(_HeldMapping(call))
                return held[-1]
            return call

    monkeypatch.setattr(roller, "BackgroundCall", Calls)
    msgs = [bytes([i % 251]) * 100_000 for i in range(25)]
    w = RollingBusWriter(rolling_dir, 1 << 20, 1016, frames=True).open()
    try:
        i = 0
        while w._k == 0:
            assert w.write(msgs[i])
            i += 1
        assert held and not held[0].released     # entered with its mapping still running
        for h in held:
            h.released = True
        while i < len(msgs):
            for h in held:
                h.released = True
            assert w.write(msgs[i])
            i += 1
    finally:
        for h in held:
            h.released = True
        w.close()
    with RollingBusReader(rolling_dir) as r:
        assert [rec.payload for rec in r.records(timeout=0)] == msgs


@pytest.mark.parametrize("payload", ["zeros", "random"])
@pytest.mark.parametrize("compress", [None, "zstd"])
def test_the_archiver_moves_framed_segments_of_multi_slot_messages(rolling_dir, tmp_path,
                                                                   payload, compress):
    # A continuation slot holds payload, not a status: read as one, zeros looked uncommitted
    # for ever (nothing moved) and random bytes an impossible status (the archiver stopped).
    from mappedbus_py.formats.archive import list_archived
    rng = np.random.default_rng(5)
    sizes = [int(x) for x in rng.integers(0, 6_000, 120)] + [0, 1]
    msgs = [bytes(n) if payload == "zeros" else rng.integers(0, 256, n, np.uint8).tobytes()
            for n in sizes]
    arch = str(tmp_path / "archive")
    with RollingBusWriter(rolling_dir, SEG, REC, frames=True, archive=arch, archive_after=0,
                          compress=compress) as w:
        for i, m in enumerate(msgs):
            assert w.write(m, topic="odd" if i % 2 else None)
        assert w.segment >= 3
        assert w.archiver.wait_idle(20), "full framed segments stayed hot"
        assert sorted(list_archived(arch)) == list(range(w.segment))
    with RollingBusReader(rolling_dir) as r:
        got = [(bytes(rec.data), rec.topic) for rec in r.records(0)]
    assert got == [(m, "odd" if i % 2 else None) for i, m in enumerate(msgs)]
