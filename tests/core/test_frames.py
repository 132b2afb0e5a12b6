"""Frames, the readers' side (docs/design/frames.md, docs/messages.md): whole messages of any
size, the shared vectors read as their manifest says, read_into, objects, topics, consumers,
and a writer that dies mid-message costing a whole message, the same for every reader."""
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

from mappedbus_py import (BusFullError, BusMismatchError, CorruptBusError, MappedBusReader,
                          MappedBusWriter, MessageTooSmallBufferError)
from mappedbus_py.formats import layout

VECTORS = os.path.join(os.path.dirname(__file__), "..", "vectors")


def cases():
    with open(os.path.join(VECTORS, "frames.json")) as f:
        return json.load(f)["files"]


def copy_vector(case, tmp_path):
    dst = tmp_path / case["file"]
    shutil.copyfile(os.path.join(VECTORS, case["file"]), dst)
    os.chmod(dst, 0o600)
    if case["topics_file"]:
        shutil.copyfile(os.path.join(VECTORS, case["topics_file"]), str(dst) + ".topics")
        os.chmod(str(dst) + ".topics", 0o600)
    return str(dst)


@pytest.mark.parametrize("case", cases(), ids=lambda c: c["file"])
def test_every_vector_reads_as_its_manifest_says(case, tmp_path):
    path = copy_vector(case, tmp_path)
    want = [(f["position"], bytes.fromhex(f["payload_hex"])) for f in case["frames"]
            if f["delivered"]]
    with MappedBusReader(path, case["file_size"], case["record_size"], frames=True,
                         timeout=0.05) as r:
        got = []
        while True:
            try:
                rec = r.read(timeout=0)
            except BusFullError:
                break
            if rec is None:
                break
            got.append((rec.position, rec.payload))
            fr = next(f for f in case["frames"] if f["position"] == rec.position)
            assert rec.flags == fr["flags"]
    assert got == want
    for names, positions in case.get("filters", {}).items():
        with MappedBusReader(path, case["file_size"], case["record_size"], frames=True,
                             topics=names.split(",")) as r:
            got = [rec.position for rec in r.records(timeout=0)]
            assert got == positions, names


def test_a_message_of_every_size_comes_back_whole(bus_path):
    sizes = [0, 1, 40, 41, 63, 64, 65, 1000, 4096, 65_537, 1 << 20]
    rng = np.random.default_rng(1)
    msgs = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in sizes]
    with MappedBusWriter(bus_path, 4 << 20, 56, frames=True) as w:
        for m in msgs:
            assert w.write(m)
    with MappedBusReader(bus_path) as r:
        assert r.frames
        got = [rec.payload for rec in r.records(timeout=0)]
    assert got == msgs


def test_read_into_a_buffer_and_a_too_small_one_consumes_nothing(bus_path):
    arr = np.arange(100_000, dtype=np.float64)
    with MappedBusWriter(bus_path, 4 << 20, 248, frames=True) as w:
        w.write(arr)
        w.write(b"next")
    with MappedBusReader(bus_path) as r:
        small = np.zeros(10, dtype=np.float64)
        with pytest.raises(MessageTooSmallBufferError) as e:
            r.read_into(small)
        assert e.value.length == arr.nbytes
        assert not small.any()
        out = np.empty_like(arr)
        assert r.read_into(out) == arr.nbytes
        assert np.array_equal(out, arr)
        buf = bytearray(10)
        assert r.read_into(buf) == 4 and buf[:4] == b"next"
        assert r.read_into(buf) is None
        with pytest.raises(TypeError):
            r.read_into(b"read-only bytes")


@dataclasses.dataclass
class Tick:
    symbol: str
    prices: np.ndarray
    size: int = 0


def test_objects_round_trip(bus_path):
    objs = [{"a": 1, "b": [1, 2, {"c": None}]}, np.arange(50_000, dtype=np.int32),
            Tick("ABC", np.linspace(0, 1, 1000), 7), "text", None, b"raw" * 1000]
    with MappedBusWriter(bus_path, 4 << 20, 120, frames=True) as w:
        for o in objs:
            assert w.write_object(o)
        w.write(b"not an object")
    with MappedBusReader(bus_path) as r:
        first = r.read(timeout=0)
        assert first.object() == objs[0]
        arr = r.read(timeout=0).object()
        assert np.array_equal(arr, objs[1]) and not arr.flags.writeable   # a view of payload
        tick = r.read_object(timeout=0)
        assert tick.symbol == "ABC" and tick.size == 7
        assert np.array_equal(tick.prices, objs[2].prices)
        tick.prices[0] = 5.0                                 # read_object's own copy
        assert r.read_object(timeout=0) == "text"
        assert r.read_object(timeout=0) is None and r.position > 0
        assert r.read_object(timeout=0) == objs[5]
        with pytest.raises(TypeError, match="bytes, not an object"):
            r.read_object(timeout=0)
        assert r.read_object(timeout=0) is None              # nothing left


class Upper:
    @staticmethod
    def dumps(obj):
        return obj.upper().encode()

    @staticmethod
    def loads(data):
        return data.decode().lower()


def test_a_serializer_on_both_sides(bus_path):
    with MappedBusWriter(bus_path, 1 << 16, 56, frames=True, serializer=Upper) as w:
        w.write_object("hello")
    with MappedBusReader(bus_path) as r:
        rec = r.read(timeout=0)
        assert rec.payload == b"HELLO"
        with pytest.raises(TypeError, match="serializer"):
            rec.object()
    with MappedBusReader(bus_path, serializer=Upper) as r:
        assert r.read_object(timeout=0) == "hello"
    with pytest.raises(TypeError, match="dumps"):
        MappedBusWriter(bus_path, frames=True, serializer=object())


def test_topic_filters_in_one_total_order(bus_path):
    with MappedBusWriter(bus_path, 1 << 20, 56, frames=True) as w:
        for i in range(300):
            w.write(b"o%d" % i, topic="orders")
            if i % 3 == 0:
                w.write(b"q%d" % i, topic="quotes")
            if i % 50 == 0:
                w.write(b"u%d" % i)
    def read(**kw):
        with MappedBusReader(bus_path, **kw) as r:
            return [(rec.position, rec.topic, rec.payload) for rec in r.records(timeout=0)]
    every = read()
    quotes = read(topics=["quotes"])
    both = read(topics=["quotes", None])
    assert quotes == [x for x in every if x[1] == "quotes"] and len(quotes) == 100
    assert both == [x for x in every if x[1] in ("quotes", None)]
    assert read(topics=["nobody"]) == []
    assert {x[1] for x in every} == {"orders", "quotes", None}
    with pytest.raises(TypeError, match="list of topic names"):
        MappedBusReader(bus_path, topics="quotes")
    with pytest.raises(TypeError):
        MappedBusReader(bus_path, topics=[3])


def test_a_topic_named_after_the_reader_opened(bus_path):
    w = MappedBusWriter(bus_path, 1 << 20, 56, frames=True).open()
    r = MappedBusReader(bus_path, topics=["late"]).open()
    w.write(b"x", topic="early")
    assert r.read(timeout=0) is None
    w.write(b"y", topic="late")
    assert r.read(timeout=0).payload == b"y"
    w.close()
    r.close()


def test_a_named_consumer_goes_on_from_its_committed_message(bus_path):
    with MappedBusWriter(bus_path, 1 << 20, 56, frames=True) as w:
        for i in range(6):
            w.write(bytes([i]) * (100 * i))
    with MappedBusReader(bus_path, consumer="c") as r:
        for i in range(3):
            assert r.read(timeout=0).payload == bytes([i]) * (100 * i)
        r.commit()
    with MappedBusReader(bus_path, consumer="c") as r:
        assert [rec.payload for rec in r.records(timeout=0)] == \
            [bytes([i]) * (100 * i) for i in range(3, 6)]


def test_batch_and_message_reads_are_refused_on_a_framed_bus(bus_path):
    with MappedBusWriter(bus_path, 1 << 16, 56, frames=True) as w:
        w.write(b"x")
    with MappedBusReader(bus_path) as r:
        with pytest.raises(TypeError, match="framed"):
            r.read_batch(np.zeros(4, dtype="u8"))


# -- a writer that dies mid-message ------------------------------------------------------

DIE = """
import os, sys
from mappedbus_py import MappedBusWriter
w = MappedBusWriter(sys.argv[1], frames=True).open()
w.write(b"before")
w._frame_allocate_only(int(sys.argv[2]), int(sys.argv[3]), set_count=sys.argv[4] == "1",
                       publish=sys.argv[5] == "1")
os.kill(os.getpid(), 9)
"""


@pytest.mark.parametrize("length, written, set_count", [(100_000, 5_000, True),
                                                        (100_000, 0, False),
                                                        (10, 10, True)])
def test_a_writer_killed_mid_message_costs_the_whole_message_at_once(bus_path, length, written,
                                                                     set_count):
    MappedBusWriter(bus_path, 1 << 20, 56, frames=True).open().close()
    p = subprocess.run([sys.executable, "-c", DIE, bus_path, str(length), str(written),
                        "1" if set_count else "0", "1"], timeout=60)
    assert p.returncode == -signal.SIGKILL
    with MappedBusWriter(bus_path, frames=True, liveness=False) as w:
        w.write(b"after")
    readers = [MappedBusReader(bus_path, timeout=60).open() for _ in range(2)]
    for r in readers:       # the claim's writer is dead: no timeout waited (60 s)
        got = [rec.payload for rec in r.records(timeout=5)]
        assert got == [b"before", b"after"]
        r.close()


def test_a_message_with_no_claim_times_out_whole(bus_path):
    MappedBusWriter(bus_path, 1 << 20, 56, frames=True).open().close()
    p = subprocess.run([sys.executable, "-c", DIE, bus_path, "200000", "0", "0", "0"],
                       timeout=60)
    assert p.returncode == -signal.SIGKILL
    with MappedBusWriter(bus_path, frames=True, liveness=False) as w:
        w.write(b"after")
    with MappedBusReader(bus_path, timeout=0.05) as r:
        assert [rec.payload for rec in r.records(timeout=2)] == [b"before", b"after"]
        assert r.rollbacks >= 1
    with MappedBusReader(bus_path, timeout=0.05) as r:     # a second reader agrees
        assert [rec.payload for rec in r.records(timeout=2)] == [b"before", b"after"]
