"""read_view on a framed bus (docs/messages.md): the next message as a read-only memoryview
of the mapping, no copy; valid until the next read_view() or close(), which release it; a
writer killed mid-message still costs the reader the whole message, never a partial view."""
import signal
import subprocess
import sys

import numpy as np
import pytest

from mappedbus_py import MappedBusReader, MappedBusWriter


def test_read_view_gives_every_message_whole_and_read_only(bus_path):
    sizes = [0, 1, 40, 1000, 65_537, 1 << 20]
    rng = np.random.default_rng(2)
    msgs = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in sizes]
    with MappedBusWriter(bus_path, 4 << 20, 56, frames=True) as w:
        for m in msgs:
            assert w.write(m)
    with MappedBusReader(bus_path) as r:
        for m in msgs:
            v = r.read_view(timeout=0)
            assert isinstance(v, memoryview) and v.readonly
            assert v.nbytes == len(m) and bytes(v) == m
            with pytest.raises(TypeError):
                v[:1] = b"x"
        assert r.read_view(timeout=0) is None
        assert r.read_view(timeout=0.01) is None


def test_the_next_read_view_and_close_release_the_last_view(bus_path):
    with MappedBusWriter(bus_path, 1 << 20, 56, frames=True) as w:
        w.write(b"first")
        w.write(b"second")
    r = MappedBusReader(bus_path).open()
    first = r.read_view()
    second = r.read_view()
    with pytest.raises(ValueError):
        bytes(first)                    # released: an error, never stale memory
    assert bytes(second) == b"second"
    r.close()
    with pytest.raises(ValueError):
        bytes(second)


def test_an_array_made_from_a_view_outlives_it_and_holds_the_mapping(bus_path):
    arr = np.arange(10_000, dtype=np.float64)
    with MappedBusWriter(bus_path, 1 << 20, 248, frames=True) as w:
        w.write(arr)
        w.write(b"next")
    r = MappedBusReader(bus_path).open()
    got = np.frombuffer(r.read_view(), dtype=np.float64)
    assert bytes(r.read_view()) == b"next"
    assert np.array_equal(got, arr)     # the view could not be released: it stays mapped
    with pytest.raises(BufferError):
        r.close()
    del got
    r.close()
    assert r.closed


def test_read_view_needs_a_framed_bus(bus_path):
    with MappedBusWriter(bus_path, 1 << 16, 12) as w:
        w.write(b"x" * 12)
    with MappedBusReader(bus_path) as r, pytest.raises(TypeError, match="framed"):
        r.read_view(timeout=0)


DIE = """
import os, sys
from mappedbus_py import MappedBusWriter
w = MappedBusWriter(sys.argv[1], frames=True).open()
w.write(b"before")
w._frame_allocate_only(100_000, 5_000, set_count=True, publish=True)
os.kill(os.getpid(), 9)
"""


def test_a_writer_killed_mid_message_costs_the_view_reader_the_whole_message(bus_path):
    MappedBusWriter(bus_path, 1 << 20, 56, frames=True).open().close()
    p = subprocess.run([sys.executable, "-c", DIE, bus_path], timeout=60)
    assert p.returncode == -signal.SIGKILL
    with MappedBusWriter(bus_path, frames=True, liveness=False) as w:
        w.write(b"after")
    with MappedBusReader(bus_path, timeout=60) as r:    # a dead claim: no timeout waited
        assert bytes(r.read_view(timeout=5)) == b"before"
        assert bytes(r.read_view(timeout=5)) == b"after"
        assert r.read_view(timeout=0) is None
