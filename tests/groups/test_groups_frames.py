"""Work groups on framed buses (issue 36; docs/groups.md, "Framed buses"; protocol:
mappedbus_py/groups/_group_frames.h): a message, whatever its slot count, goes whole to one
member, is acked once, comes back whole when its member dies, and goes whole to a framed
dead-letter bus."""
import hashlib
import json
import os
import random
import signal
import struct
import subprocess
import sys
import time

import pytest

from mappedbus_py import MappedBusWriter, RollingBusReader, RollingBusWriter
from mappedbus_py.formats import layout
from mappedbus_py.groups import GroupReader

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
RECORD = 248                    # slots of 256 bytes


def _message(i, n):
    # message i of n bytes: its index first (when it fits), then bytes of a seeded generator
    body = random.Random(i).randbytes(n)
    return (struct.pack("<q", i) + body[8:]) if n >= 8 else body


def _digest(b):
    return hashlib.blake2b(b, digest_size=16).hexdigest()


def _sizes(count, seed=7):
    rng = random.Random(seed)
    sizes = [0, 1, 8, RECORD - 16, 256, 257, 3 * 256, 1 << 20]
    while len(sizes) < count:
        r = rng.random()
        sizes.append(rng.randrange(0, 64) if r < 0.4 else rng.randrange(64, 4 * 256)
                     if r < 0.8 else rng.randrange(4 * 256, 64 << 10) if r < 0.97
                     else rng.randrange(64 << 10, (1 << 20) + 1))
    rng.shuffle(sizes)
    return sizes


MEMBER = r"""
import json, sys, hashlib
from mappedbus_py.groups import GroupReader
out = []
window = int(sys.argv[2]) if sys.argv[2] != "None" else None
with GroupReader(sys.argv[1], "g", window=window) as m:
    print("ready", flush=True)
    sys.stdin.readline()
    while True:
        rec = m.read(timeout=60)
        if rec is None:
            break
        if rec.topic == "stop":                      # one stop per member: each takes one
            m.ack(rec)
            break
        if m.ack(rec):
            out.append([rec.position, len(rec.payload),
                        hashlib.blake2b(rec.payload, digest_size=16).hexdigest()])
json.dump(out, sys.stdout)
"""


def _env():
    return dict(os.environ, PYTHONPATH=os.path.abspath(ROOT))


@pytest.mark.parametrize("window", [None, 16])
def test_three_member_processes_ack_every_message_once_whole(tmp_path, window):
    # window 16: messages of more slots than the window, entries lapped many times over
    bus = str(tmp_path / "bus")
    sizes = _sizes(300)
    expected = {}
    with MappedBusWriter(bus, file_size=48 << 20, record_size=RECORD, frames=True) as w:
        pass
    procs = [subprocess.Popen([sys.executable, "-c", MEMBER, bus, str(window)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, env=_env(), text=True) for _ in range(3)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        with MappedBusWriter(bus, file_size=48 << 20, record_size=RECORD, frames=True) as w:
            for i, n in enumerate(sizes):
                payload = _message(i, n)
                w.write(payload)
                expected[i] = (n, _digest(payload))
            for _ in procs:
                w.write(b"", topic="stop")
        results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    got = [tuple(r[1:]) for out in results for r in out]
    assert sorted(got) == sorted(expected.values())          # each once, whole, identical
    positions = [r[0] for out in results for r in out]
    assert len(set(positions)) == len(positions) == len(sizes)
    assert sum(1 for out in results if out) >= 2               # shared among members


HOLDER = r"""
import sys, time
from mappedbus_py.groups import GroupReader
m = GroupReader(sys.argv[1], "g")
rec = m.read(timeout=5)
print(rec.position, len(rec.payload), flush=True)
time.sleep(60)
"""


def test_member_killed_holding_a_multi_slot_message_redelivered_whole(tmp_path):
    bus = str(tmp_path / "bus")
    big = _message(1, 100_000)                     # 391 slots
    with MappedBusWriter(bus, file_size=4 << 20, record_size=RECORD, frames=True) as w:
        w.write(big)
        w.write(b"after")
    p = subprocess.Popen([sys.executable, "-c", HOLDER, bus], stdout=subprocess.PIPE,
                         env=_env(), text=True)
    try:
        pos, n = map(int, p.stdout.readline().split())
        assert (pos, n) == (layout.FIRST_RECORD_OFFSET, len(big))
        with GroupReader(bus, "g") as m:
            after = m.read(timeout=5)                 # the next message, not a continuation
            assert after.payload == b"after" and after.deliveries == 1
            assert m.read(0) is None                  # the holder is alive: nothing else
            p.send_signal(signal.SIGKILL)
            p.wait()
            rec = m.read(timeout=5)
            assert rec is not None and rec.position == pos and rec.deliveries == 2
            assert rec.payload == big
            assert m.ack(rec) and m.ack(after)
            assert m.read(0) is None
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_reject_of_a_big_message_lands_whole_on_a_framed_dead_letter_bus(tmp_path):
    bus = str(tmp_path / "bus")
    big = _message(3, (1 << 20) + 12345)
    with MappedBusWriter(bus, file_size=8 << 20, record_size=RECORD, frames=True) as w:
        w.write(b"small", topic="jobs")
        w.write(big, topic="jobs")
    with GroupReader(bus, "g") as m:
        a, b = m.read(0), m.read(0)
        assert (a.payload, a.topic, b.topic) == (b"small", "jobs", "jobs")
        assert b.payload == big and m.ack(a)
        assert m.reject(b) and not m.ack(b)
        assert m.read(0) is None
        dead = m.dead_letter_path
    with RollingBusReader(dead) as r:
        letters = list(r.records(timeout=0))
    assert len(letters) == 1 and letters[0].framed
    data = letters[0].payload
    pos, deliveries, meta = struct.unpack_from("<qii", data)
    assert (pos, deliveries) == (b.position, 1) and meta < 0      # the frame's meta
    assert data[layout.GROUP_DEAD_NAME_OFFSET:].startswith(b"g\0")
    assert data[layout.GROUP_DEAD_HEADER_SIZE:] == big and letters[0].topic == "jobs"


def test_objects_and_max_deliveries_on_a_framed_bus(tmp_path):
    bus = str(tmp_path / "bus")
    with MappedBusWriter(bus, file_size=1 << 20, record_size=RECORD, frames=True) as w:
        w.write_object({"job": 1, "data": list(range(500))})
    with GroupReader(bus, "g", max_deliveries=2) as m:
        r1 = m.read(0)
        assert r1.object() == {"job": 1, "data": list(range(500))}
        assert m.release(r1)
        r2 = m.read(0)
        assert r2.deliveries == 2 and r2.object()["job"] == 1 and m.release(r2)
        assert m.read(0) is None                     # out of deliveries: dead-lettered
        with RollingBusReader(m.dead_letter_path) as r:
            (letter,) = list(r.records(timeout=0))
        assert letter.payload[layout.GROUP_DEAD_HEADER_SIZE:] == r1.payload


def test_a_message_whose_writer_died_is_skipped_whole(tmp_path):
    bus = str(tmp_path / "bus")
    mid = _message(5, 5000)                          # 20 slots of bytes that are no headers
    with MappedBusWriter(bus, file_size=1 << 20, record_size=RECORD, frames=True) as w:
        w.write(b"first")
        w.write(mid)
        w.write(b"last")
    with GroupReader(bus, "peek") as m:
        recs = [m.read(0) for _ in range(3)]
    dead_at = recs[1].position
    with open(bus, "r+b") as f:                      # its writer "died" before the commit
        f.seek(dead_at)
        f.write(struct.pack("<i", 0))
    with GroupReader(bus, "g", timeout=0.2) as m:
        a = m.read(timeout=5)
        b = m.read(timeout=5)
        assert (a.payload, b.payload) == (b"first", b"last")
        assert b.position == recs[2].position
        assert m.ack(a) and m.ack(b) and m.read(0) is None


def test_rolling_framed_bus_across_segments(tmp_path):
    bus = str(tmp_path / "rolling")
    sizes = _sizes(120, seed=11)
    sizes = [min(n, 900_000) for n in sizes]
    with RollingBusWriter(bus, segment_size=1 << 20, record_size=RECORD, frames=True) as w:
        for i, n in enumerate(sizes):
            w.write(_message(i, n), topic="even" if i % 2 == 0 else None)
    seen = {}
    with GroupReader(bus, "g") as a, GroupReader(bus, "g") as b:
        members = [a, b]
        idle = 0
        k = 0
        while idle < 4:
            m = members[k % 2]
            k += 1
            rec = m.read(0.05)
            if rec is None:
                idle += 1
                continue
            idle = 0
            assert m.ack(rec) and rec.position not in seen
            seen[rec.position] = (rec.payload, rec.topic)
    # each once, whole, in bus order the order written, with its topic
    ordered = [seen[p] for p in sorted(seen)]
    assert ordered == [(_message(i, n), "even" if i % 2 == 0 else None)
                       for i, n in enumerate(sizes)]
    assert len({p // (1 << 20) for p in seen}) >= 4             # over several segments


def test_unframed_bus_still_hands_out_single_slots(tmp_path):
    bus = str(tmp_path / "bus")
    with MappedBusWriter(bus, file_size=1 << 20, record_size=32) as w:
        for i in range(5):
            w.write(b"%d" % i)
    with GroupReader(bus, "g") as m:
        recs = [m.read(0) for _ in range(5)]
        assert [r.payload.rstrip(b"\0") for r in recs] == [b"%d" % i for i in range(5)]
        assert [r.topic for r in recs] == [None] * 5 and not recs[0].framed
        assert all(m.ack(r) for r in recs) and m.read(0) is None


@pytest.mark.parametrize("rolling", [False, True])
def test_topics_members_get_only_their_topics_once(tmp_path, rolling):
    bus = str(tmp_path / "bus")
    topics = ["a" if i % 7 == 0 else "b" if i % 3 else None for i in range(400)]
    if rolling:
        w = RollingBusWriter(bus, segment_size=1 << 20, record_size=RECORD, frames=True)
    else:
        w = MappedBusWriter(bus, file_size=8 << 20, record_size=RECORD, frames=True)
    with w:
        for i, t in enumerate(topics):
            w.write(_message(i, (i * 37) % 3000 + 8), topic=t)
    got = {}
    with GroupReader(bus, "only-a", topics=["a"]) as m1, \
            GroupReader(bus, "only-a", topics=["a"]) as m2, \
            GroupReader(bus, "untagged-and-b", topics=[None, "b"]) as other:
        for m in (m1, m2, m1, m2) * 40:
            rec = m.read(0)
            if rec is not None:
                assert rec.topic == "a" and m.ack(rec)
                i = struct.unpack_from("<q", rec.payload)[0]
                assert i not in got and rec.payload == _message(i, (i * 37) % 3000 + 8)
                got[i] = rec.topic
        assert m1.read(0) is None and m2.read(0) is None
        n_other = 0
        while (rec := other.read(0)) is not None:
            assert rec.topic in (None, "b") and other.ack(rec)
            n_other += 1
    assert sorted(got) == [i for i, t in enumerate(topics) if t == "a"]
    assert n_other == sum(1 for t in topics if t != "a")


def test_topics_need_a_framed_bus(tmp_path):
    bus = str(tmp_path / "bus")
    with MappedBusWriter(bus, file_size=1 << 20, record_size=32) as w:
        w.write(b"x")
    with pytest.raises(TypeError, match="framed"):
        GroupReader(bus, "g", topics=["a"])


def test_a_slot_count_lost_from_the_group_file_is_read_from_the_bus(tmp_path):
    # A member that died between taking a message and moving `end`, whose entry's slot count
    # was then overwritten (a racer of an older lap): the next member reads the count from
    # the bus's frame meta, for `end` (acquire) and for `start` (ack).
    bus = str(tmp_path / "bus")
    msgs = [_message(0, 5000), b"one", _message(2, 3000)]
    with MappedBusWriter(bus, file_size=1 << 20, record_size=RECORD, frames=True) as w:
        for m in msgs:
            w.write(m)
    with GroupReader(bus, "g") as a:
        r0 = a.read(0)
        path = a.group_path
        with open(path, "r+b") as f:
            f.seek(layout.GROUP_ENTRIES_OFFSET + layout.GROUP_ENTRY_SLOTS_OFFSET)
            f.write(struct.pack("<q", 0))                  # entry(0)'s slot count lost
            f.seek(layout.GROUP_END_OFFSET)
            f.write(struct.pack("<q", 0))                  # `end` not moved past it
        r1 = a.read(0)
        assert r1 is not None and r1.payload == b"one"     # past message 0's 20 slots
        assert r0.payload == msgs[0] and a.ack(r0) and a.ack(r1)
        r2 = a.read(0)
        assert r2.payload == msgs[2] and a.ack(r2) and a.read(0) is None
        with open(path, "rb") as f:
            f.seek(layout.GROUP_START_OFFSET)
            start = struct.unpack("<q", f.read(8))[0]
            f.seek(layout.GROUP_END_OFFSET)
            end = struct.unpack("<q", f.read(8))[0]
        assert start == end == (r2.position - layout.FIRST_RECORD_OFFSET) // (RECORD + 8) + 12


WRITER = r"""
import random, struct, sys, time
from mappedbus_py import MappedBusWriter
with MappedBusWriter(sys.argv[1], file_size=128 << 20, record_size=248, frames=True) as w:
    print("ready", flush=True)
    i = 0
    while True:
        n = random.Random(i).choice([0, 50, 3000, 200_000, 1 << 20])
        body = random.Random(i).randbytes(n)
        w.write((struct.pack("<q", i) + body[8:]) if n >= 8 else body)
        i += 1
        time.sleep(0.002)           # room for 0.3 s of writing; a 1 MiB copy is often cut
"""


def test_writer_killed_mid_message_no_member_gets_part_of_it(tmp_path):
    bus = str(tmp_path / "bus")
    with MappedBusWriter(bus, file_size=128 << 20, record_size=RECORD, frames=True):
        pass
    p = subprocess.Popen([sys.executable, "-c", WRITER, bus], stdout=subprocess.PIPE,
                         env=_env(), text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(0.3)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    with MappedBusWriter(bus, file_size=128 << 20, record_size=RECORD, frames=True) as w:
        w.write(b"after the kill")
    with GroupReader(bus, "g", timeout=0.5) as a, GroupReader(bus, "g", timeout=0.5) as b:
        got = []
        while True:
            rec = a.read(timeout=3) or b.read(0)
            assert rec is not None
            (a if a.ack(rec) else b).ack(rec)
            if rec.payload == b"after the kill":
                break
            got.append(rec.payload)
    assert got
    for payload in got:                         # each whole: regenerated from its index
        if len(payload) >= 8:
            i = struct.unpack_from("<q", payload)[0]
            n = random.Random(i).choice([0, 50, 3000, 200_000, 1 << 20])
            assert payload == _message(i, n)


@pytest.mark.parametrize("frames", [True, False])
def test_a_run_of_skips_longer_than_the_window_does_not_stop_the_group(tmp_path, frames):
    bus = str(tmp_path / "bus")
    with MappedBusWriter(bus, file_size=1 << 20, record_size=RECORD if frames else 32,
                         frames=frames) as w:
        for i in range(40):
            w.write(b"rolled back %d" % i)
        w.write(b"wanted")
    slot = (RECORD if frames else 32) + 8
    with open(bus, "r+b") as f:                      # 40 messages of one slot rolled back
        for i in range(40):
            f.seek(layout.FIRST_RECORD_OFFSET + i * slot)
            f.write(struct.pack("<i", 2))
    with GroupReader(bus, "g", window=16) as m:
        rec = m.read(timeout=2)
        assert rec is not None and rec.payload.rstrip(b"\0") == b"wanted" and m.ack(rec)


def test_an_other_topic_message_longer_than_the_window_is_skipped(tmp_path):
    bus = str(tmp_path / "bus")
    with MappedBusWriter(bus, file_size=1 << 20, record_size=RECORD, frames=True) as w:
        w.write(b"x" * 100 * 256, topic="b")        # 101 slots, the window 16
        w.write(b"y" * 30 * 256, topic="b")
        w.write(b"for a", topic="a")
    with GroupReader(bus, "g", window=16, topics=["a"]) as m:
        rec = m.read(timeout=2)
        assert rec is not None and rec.payload == b"for a" and m.ack(rec)
        assert m.read(0) is None
