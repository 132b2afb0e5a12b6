"""The Python API's traps (issue 13): one unit for time, one default wait, sizes and
positions as any integer but never a bool, out-of-range metadata, decoding by type, and
writers/readers handed to spawned processes."""
import multiprocessing
import os
import pathlib
import pickle
import shutil
import uuid

import numpy as np
import pytest

from mappedbus_py import (BusFullError, MappedBusReader, MappedBusWriter, PriceUpdate,
                          RollingBusReader, RollingBusWriter, Trade)
from mappedbus_py.formats.layout import record_offset

SIZE = 1 << 16


@pytest.fixture
def bus_dir():
    base = pathlib.Path("/dev/shm") if os.path.isdir("/dev/shm") else pathlib.Path("/tmp")
    path = base / f"mbapi-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    yield str(path)
    shutil.rmtree(path, ignore_errors=True)


# -- time: seconds everywhere -------------------------------------------------------------

def test_constructor_timeout_is_seconds_and_rolls_back_a_stall_after_that_long(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w:
        w._allocate_only(b"stalled")
        w.write(b"after")
    # 0.2 s, not 0.2 ms: a reader polling for 0.1 s must not have rolled the stall back yet.
    with MappedBusReader(bus_path, SIZE, 8, timeout=0.2) as r:
        assert r.timeout == 0.2
        assert r.read(timeout=0.1) is None
        assert r.rollbacks == 0
        assert r.read(timeout=10).data == b"after"
        assert r.rollbacks == 1


def test_rolling_reader_timeout_is_seconds_too(bus_dir):
    with RollingBusWriter(bus_dir, 1 << 16, 8) as w:
        w.write(b"x")
    with RollingBusReader(bus_dir, timeout=0.5) as r:
        assert r.timeout == 0.5
        r.set_timeout(250)                   # Java's millisecond setter
        assert r.timeout == 0.25
        assert r.read(0).data == b"x"
    with pytest.raises(ValueError, match="seconds"):
        RollingBusReader(bus_dir, timeout=-1)


def test_every_wait_defaults_to_waiting_until_a_record_comes(bus_path):
    import threading
    with MappedBusWriter(bus_path, SIZE, 8) as w, MappedBusReader(bus_path, SIZE, 8) as r:
        later = threading.Timer(0.3, lambda: w.write(b"late"))
        later.start()
        try:
            assert r.read().data == b"late"      # read() waited: it did not return None
        finally:
            later.join()
        later = threading.Timer(0.3, lambda: w.write(b"batch"))
        later.start()
        try:
            out = np.zeros((2, 8), np.uint8)
            assert r.read_batch(out) == 1        # so did read_batch()
        finally:
            later.join()
        assert r.read(0) is None and r.read_batch(out, timeout=0) == 0


# -- bad values ----------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [MappedBusWriter, MappedBusReader])
def test_a_bool_is_not_a_size(bus_path, cls):
    with pytest.raises(TypeError, match="record_size must be an integer, got bool"):
        cls(bus_path, SIZE, True)
    with pytest.raises(TypeError, match="file_size"):
        cls(bus_path, True, 8)


def test_numpy_integers_are_sizes_and_positions(bus_path):
    with MappedBusWriter(bus_path, np.int64(SIZE), np.int32(8)) as w:
        assert (w.file_size, w.record_size) == (SIZE, 8)
        for i in range(3):
            w.write(b"%d" % i)
    second = np.int64(record_offset(1, 8))
    with MappedBusReader(bus_path, np.uint32(SIZE), np.int16(8), start=second) as r:
        assert r.read(0).data == b"1"
        r.seek(np.int64(record_offset(0, 8)))
        assert r.read(0).data == b"0"
        with pytest.raises(TypeError):
            r.seek(True)


def test_rolling_bus_takes_numpy_sizes_and_positions(bus_dir):
    with RollingBusWriter(bus_dir, np.int64(1 << 16), np.int64(8)) as w:
        w.write(b"a")
        w.write(b"b")
    with RollingBusReader(bus_dir, np.int64(1 << 16), np.int32(8)) as r:
        r.read(0)
        r.seek(np.int64(r.position))
        assert r.read(0).data == b"b"


@pytest.mark.parametrize("cls", [MappedBusReader, RollingBusReader])
def test_an_unknown_start_names_the_accepted_values(bus_path, cls):
    with pytest.raises(ValueError, match=r"start must be None .*'end'.*record position.*'begin'"):
        cls(bus_path, SIZE, 8, start="begin")
    with pytest.raises(ValueError, match="start must be"):
        cls(bus_path, SIZE, 8, start=1.5)


def test_batch_metadata_outside_int32_is_refused_not_truncated(bus_path):
    rows = np.zeros((1, 8), np.uint8)
    with MappedBusWriter(bus_path, SIZE, 8) as w:
        with pytest.raises(ValueError, match=r"meta 1099511627783 is outside the int32 range"):
            w.write_batch(rows, meta=np.array([2**40 + 7]))
        with pytest.raises(ValueError, match="outside the int32 range"):
            w.write_batch(rows, meta=2**31)
        with pytest.raises(TypeError, match="meta"):
            w.write_batch(rows, meta=True)
        with pytest.raises(TypeError, match="integers"):
            w.write_batch(rows, meta=np.array([1.5]))
        assert w.write_batch(rows, meta=np.int64(-5)) == 1     # numpy scalars are ints
    with MappedBusReader(bus_path, SIZE, 8) as r:
        assert r.read(0).meta == -5
        assert r.read(0) is None        # nothing of the refused batches was written


# -- decoding by type ----------------------------------------------------------------------

def test_decode_turns_each_record_into_its_message_class_or_bytes(bus_path):
    with MappedBusWriter(bus_path, SIZE, 32) as w:
        w.write(PriceUpdate(source=1, price=100, quantity=5))
        w.write(b"raw bytes")
        w.write(Trade(id=7, price=1.5, quantity=3))
    with MappedBusReader(bus_path, SIZE, 32) as r:
        recs = [r.read(0) for _ in range(3)]
    types = {PriceUpdate.type_id: PriceUpdate, Trade.type_id: Trade}
    got = [rec.decode(types) for rec in recs]
    assert got == [PriceUpdate(1, 100, 5), b"raw bytes", Trade(7, 1.5, 3)]
    assert type(got[0]) is PriceUpdate and type(got[2]) is Trade
    # A sequence of classes is keyed by their type ids.
    assert [rec.decode([PriceUpdate, Trade]) for rec in recs] == got


# -- other processes -----------------------------------------------------------------------

def _child_write(w, q):
    q.put((w.closed, w.write(b"child")))


def _child_read(r, q):
    q.put((r.closed, r.position, r.timeout, r.read(timeout=10).data))


def _spawn(target, obj):
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=target, args=(obj, q))
    p.start()
    try:
        for _ in range(120):
            try:
                return q.get(timeout=1)
            except Exception:
                assert p.is_alive(), f"the child died (exit code {p.exitcode})"
        raise AssertionError("the child gave no answer in 120 s")
    finally:
        p.join(60)


def test_an_open_writer_and_reader_reopen_the_bus_by_path_in_a_spawned_child(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8, mode=0o640) as w:
        w.write(b"first")
        assert _spawn(_child_write, w) == (False, True)
    with MappedBusReader(bus_path, SIZE, 8, timeout=0.75) as r:
        assert r.read(0).data == b"first"
        # The child continues where this reader is: at the child's record.
        assert _spawn(_child_read, r) == (False, r.position, 0.75, b"child")
    assert os.stat(bus_path).st_mode & 0o777 == 0o640


def test_a_closed_reader_pickles_closed_with_its_options():
    r = MappedBusReader("/nonexistent/bus", SIZE, 8, timeout=0.5, start="end", read_only=True)
    c = pickle.loads(pickle.dumps(r))
    assert c.closed and (c.path, c.file_size, c.record_size, c.timeout, c.read_only) == \
        ("/nonexistent/bus", SIZE, 8, 0.5, True)


def test_rolling_writer_and_reader_pickle_by_path(bus_dir):
    with RollingBusWriter(bus_dir, 1 << 16, 8) as w:
        w.write(b"one")
        c = pickle.loads(pickle.dumps(w))
        assert not c.closed
        c.write(b"two")
        c.close()
    with RollingBusReader(bus_dir, timeout=0.5) as r:
        assert r.read(0).data == b"one"
        c = pickle.loads(pickle.dumps(r))
        try:
            assert (c.position, c.timeout) == (r.position, 0.5)
            assert c.read(0).data == b"two"
        finally:
            c.close()


def test_records_at_the_end_of_a_full_bus_raise_like_next(bus_path):
    fsize = record_offset(2, 8)
    with MappedBusWriter(bus_path, fsize, 8) as w:
        w.write(b"a")
        w.write(b"b")
    with MappedBusReader(bus_path, fsize, 8) as r:
        got = []
        with pytest.raises(BusFullError):
            for rec in r.records(timeout=5):
                got.append(rec.data)
        assert got == [b"a", b"b"]


def test_the_readme_use_example_prints_the_message_and_the_raw_bytes(bus_path):
    # The Python guide's first example (the README's until issue 34) writes a PriceUpdate and raw
    # bytes to one bus: what it prints must show both (it printed "0 b''" for the message before
    # decode()).
    import re
    import subprocess
    import sys
    readme = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md").read_text()
    example = re.findall(r"^```python\n(.*?)^```", readme, re.S | re.M)[0]
    assert "/dev/shm/prices" in example
    example = example.replace("/dev/shm/prices", bus_path).replace("timeout=5)", "timeout=0.2)")
    out = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True,
                         timeout=120, check=True).stdout.splitlines()
    assert out[:2] == ["PriceUpdate [source=1, price=100, quantity=5]", "b'raw bytes'"]
