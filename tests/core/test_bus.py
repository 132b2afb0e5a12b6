"""Writer and reader behaviour in one process: every API call, positions, timeouts."""
import math
import os
import time

import numpy as np
import pytest

from mappedbus_py import (BusClosedError, BusFullError, MappedBusReader, MappedBusWriter,
                          PriceUpdate, Record, RollingBusReader, Token, Trade)
from mappedbus_py.errors import BusMismatchError
from mappedbus_py.formats.layout import FIRST_RECORD_OFFSET, PAGE_SIZE, record_offset, slot_size

SIZE = 100_000


def test_bytes_like_payloads_of_every_kind_are_written_and_read_back(bus_path):
    payloads = [b"", b"a", bytearray(b"bc"), memoryview(b"xdefx")[1:4],
                np.arange(4, dtype=np.uint8), np.array([1, 2], dtype="<i4"), b"x" * 16]
    with MappedBusWriter(bus_path, SIZE, 16) as w:
        assert all(w.write(p) for p in payloads)
        assert w.write(b"0123456789", 2, 3)
    with MappedBusReader(bus_path, SIZE, 16) as r:
        got = [rec.data for rec in r.records(timeout=0.01)]
    assert got == [bytes(p) for p in payloads] + [b"234"]


def test_java_style_reading_of_objects_and_byte_arrays(bus_path):
    with MappedBusWriter(bus_path, SIZE, 20) as w:
        w.write(PriceUpdate(1, 2, 3))
        w.write(b"raw")
        w.write(Trade(9, 1.5, 2))
    pu, tr, buf = PriceUpdate(), Trade(), bytearray(20)
    with MappedBusReader(bus_path, SIZE, 20) as r:
        assert r.next() and r.read_type() == 0
        assert r.read_message(pu) is pu and (pu.source, pu.price, pu.quantity) == (1, 2, 3)
        assert r.next() and r.read_buffer(buf) == 3 and buf[:3] == b"raw"
        assert r.next() and r.read_type() == 2 and r.read_message(tr) == Trade(9, 1.5, 2)
        # the current record stays readable, in any order, until the next next()
        assert r.read_type() == 2 and r.read_message(tr).price == 1.5
        assert not r.next()
        with pytest.raises(RuntimeError, match="no current record"):
            r.read_type()


def test_read_into_reads_the_next_record_without_allocating(bus_path):
    with MappedBusWriter(bus_path, SIZE, 12) as w:
        for i in range(5):
            w.write(PriceUpdate(i, i * 10, i * 100))
    msg = PriceUpdate()
    seen = []
    with MappedBusReader(bus_path, SIZE, 12) as r:
        while r.read_into(msg):
            seen.append(msg.price)
    assert seen == [0, 10, 20, 30, 40]


def test_read_returns_records_and_none_when_nothing_is_ready(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w, MappedBusReader(bus_path, SIZE, 8) as r:
        assert r.read(0) is None
        w.write(Token(1, 2))
        rec = r.read(0)
        assert isinstance(rec, Record)
        assert (rec.position, rec.type, rec.payload) == (8, 0, Token(1, 2).to_bytes())
        t0 = time.monotonic()
        assert r.read(timeout=0.05) is None
        assert time.monotonic() - t0 >= 0.05


def test_blocking_read_wakes_when_a_record_arrives_from_another_thread(bus_path):
    import threading
    with MappedBusWriter(bus_path, SIZE, 8) as w, MappedBusReader(bus_path, SIZE, 8) as r:
        threading.Timer(0.05, lambda: w.write(b"late")).start()
        rec = r.read(timeout=5)
        assert rec.data == b"late"
        assert r.wait(timeout=0.01) is False


def test_iteration_yields_every_record_then_raises_bus_full_like_read(bus_path):
    fsize = record_offset(5, 4)      # exactly five 4-byte records
    with MappedBusWriter(bus_path, fsize, 4) as w:
        for i in range(5):
            w.write(bytes([i]))
        with pytest.raises(BusFullError):
            w.write(b"x")
    with MappedBusReader(bus_path, fsize, 4) as r:
        got = []
        with pytest.raises(BusFullError):
            for rec in r:
                got.append(rec.data)
        assert got == [bytes([i]) for i in range(5)]
    # The same end through every read call: a full bus is never mistaken for a quiet one.
    with MappedBusReader(bus_path, fsize, 4, start=record_offset(5, 4)) as r:
        for call in (r.next, r.wait, r.read, lambda: r.read(0), lambda: list(r.records(0)),
                     lambda: r.read_batch(bytearray(4), timeout=0)):
            with pytest.raises(BusFullError):
                call()


def test_full_bus_raises_eof_and_the_reader_ends_without_a_timeout(bus_path):
    fsize = record_offset(3, 16) + 10    # room for 3 records and a bit
    with MappedBusWriter(bus_path, fsize, 16) as w:
        for i in range(3):
            assert w.write(b"%d" % i)
        for _ in range(3):
            with pytest.raises(BusFullError, match="full"):
                w.write(b"no room")
    with MappedBusReader(bus_path, fsize, 16, timeout=60.0) as r:
        assert [r.read(0).data for _ in range(3)] == [b"0", b"1", b"2"]
        t0 = time.monotonic()
        with pytest.raises(BusFullError):
            r.next()
        assert time.monotonic() - t0 < 1


def test_positions_start_at_an_offset_or_at_the_end(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w:
        for i in range(4):
            w.write(bytes([i]))
        third = record_offset(2, 8)
        with MappedBusReader(bus_path, SIZE, 8, start=third) as r:
            assert [x.data for x in r.records(timeout=0)] == [b"\2", b"\3"]
            assert r.position == record_offset(4, 8)
        with MappedBusReader(bus_path, SIZE, 8, start="end") as r:
            assert r.read(0) is None
            w.write(b"new")
            assert r.read(0).data == b"new"
            r.seek(FIRST_RECORD_OFFSET)
            assert r.read(0).data == b"\0"
            r.seek_end()
            assert r.position == record_offset(5, 8)
            with pytest.raises(ValueError, match="not a record boundary"):
                r.seek(9)


def test_has_recovered_turns_true_after_the_records_present_at_open(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w:
        w.write(b"a")
        w.write(b"b")
        with MappedBusReader(bus_path, SIZE, 8) as r:
            w.write(b"c")
            assert not r.has_recovered()
            r.read(0)
            assert not r.has_recovered()
            r.read(0)
            assert r.has_recovered()


def test_timeout_reads_in_seconds_and_set_timeout_takes_milliseconds(bus_path):
    r = MappedBusReader(bus_path, SIZE, 8)
    assert r.timeout == 2.0
    assert MappedBusReader(bus_path, SIZE, 8, timeout=0.5).timeout == 0.5
    r.set_timeout(150)               # Java's setTimeout: milliseconds
    assert r.timeout == 0.15
    r.timeout = 0.25
    assert r.timeout == 0.25
    with pytest.raises(ValueError, match="milliseconds"):
        r.set_timeout(-1)
    with pytest.raises(ValueError, match="seconds"):
        r.timeout = -1


@pytest.mark.parametrize("timeout", [0, 0.0, 0.009, -1, float("nan")])
def test_a_rollback_timeout_below_the_floor_is_refused_naming_what_it_means(bus_path, timeout):
    # On read calls timeout=0 means "don't wait"; on the constructor it is the rollback
    # deadline, and 0 would roll back healthy writers descheduled mid-record.
    with pytest.raises(ValueError, match="rollback timeout.*at least 0.01 s"):
        MappedBusReader(bus_path, SIZE, 8, timeout=timeout)
    with pytest.raises(ValueError, match="rollback timeout"):
        RollingBusReader(bus_path + ".d", timeout=timeout)
    r = MappedBusReader(bus_path, SIZE, 8)
    with pytest.raises(ValueError, match="rollback timeout"):
        r.timeout = timeout
    with pytest.raises(ValueError, match="rollback timeout"):
        r.set_timeout(timeout * 1000)
    assert r.timeout == 2.0


def test_an_infinite_rollback_timeout_never_rolls_back(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w, \
            MappedBusReader(bus_path, SIZE, 8, timeout=math.inf) as r:
        w._allocate_only(b"slow")
        assert r.read(timeout=0.05) is None and r.rollbacks == 0
        assert r.timeout > 1e9


def test_batches_round_trip_through_numpy_structured_arrays(bus_path):
    dt = PriceUpdate.numpy_dtype()
    rows = np.zeros(1000, dt)
    rows["source"] = 7
    rows["price"] = np.arange(1000)
    rows["quantity"] = -np.arange(1000)
    with MappedBusWriter(bus_path, SIZE * 10, 12) as w:
        assert w.write_batch(rows) == 1000
        w.write(PriceUpdate(1, 2, 3))
        assert w.write_batch(rows[:3], meta=[5, 6, 7]) == 3
    out = np.zeros(600, dt)
    meta = np.zeros(600, np.int32)
    with MappedBusReader(bus_path, SIZE * 10, 12) as r:
        assert r.read_batch(out, meta, timeout=0) == 600
        assert (out == rows[:600]).all() and (meta == 0).all()
        assert r.read_batch(out, meta, timeout=0) == 404
        assert (out[:400] == rows[600:]).all()
        assert tuple(out[400]) == (1, 2, 3)
        assert list(meta[401:404]) == [5, 6, 7]
        assert r.read_batch(out, timeout=0) == 0


def test_batch_reads_into_a_2d_byte_array(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w:
        for i in range(10):
            w.write(bytes([i]) * 8)
    out = np.zeros((4, 8), np.uint8)
    with MappedBusReader(bus_path, SIZE, 8) as r:
        assert r.read_batch(out, timeout=0) == 4
        assert (out[:, 0] == [0, 1, 2, 3]).all()


def test_batch_write_stops_at_the_end_and_reports_what_it_committed(bus_path):
    fsize = record_offset(5, 12)
    rows = np.zeros(8, PriceUpdate.numpy_dtype())
    rows["price"] = np.arange(8)
    with MappedBusWriter(bus_path, fsize, 12) as w:
        with pytest.raises(BusFullError) as info:
            w.write_batch(rows)
        assert info.value.committed == 5
    with MappedBusReader(bus_path, fsize, 12) as r:
        out = np.zeros(8, PriceUpdate.numpy_dtype())
        assert r.read_batch(out, timeout=0) == 5 and list(out["price"][:5]) == [0, 1, 2, 3, 4]


def test_two_writers_in_one_process_interleave_on_one_bus(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as a, MappedBusWriter(bus_path, SIZE, 8) as b:
        for i in range(10):
            (a if i % 2 else b).write(bytes([i]))
    with MappedBusReader(bus_path, SIZE, 8) as r:
        assert [x.data[0] for x in r.records(timeout=0)] == list(range(10))


def test_uncommitted_record_costs_one_timeout_and_later_records_still_arrive(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w:
        w.write(b"before")
        w._allocate_only(b"crashed")
        for i in range(3):
            w.write(b"after%d" % i)
    with MappedBusReader(bus_path, SIZE, 8, timeout=0.1) as r:
        t0 = time.monotonic()
        got = [r.read(timeout=3).data for _ in range(4)]
        assert time.monotonic() - t0 < 2.0
        assert r.read(0) is None
    assert got == [b"before", b"after0", b"after1", b"after2"]
    assert (r.rollbacks, r.skipped) == (1, 1)


def test_slow_writer_whose_record_was_rolled_back_gets_false(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w, MappedBusReader(bus_path, SIZE, 8, timeout=0.01) as r:
        pos = w._allocate_only(b"slow")
        assert r.read(timeout=0.05) is None      # polls until the stall is seen and rolled back
        assert r.skipped == 1 and r.rollbacks == 1
        assert w._commit_at(pos) is False
        assert w.write(b"fast") is True
        assert r.read(0).data == b"fast"


def test_a_batch_of_crashed_slots_costs_one_timeout_not_one_each(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w:
        for _ in range(20):
            w._allocate_only(b"dead")
        w.write(b"alive")
    with MappedBusReader(bus_path, SIZE, 8, timeout=0.1) as r:
        t0 = time.monotonic()
        rec = r.read(timeout=10)
        took = time.monotonic() - t0
    assert rec.data == b"alive" and r.rollbacks == 20
    assert took < 1.0      # 20 timeouts would be 2 s


def test_two_readers_roll_back_a_stall_once_and_agree(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w:
        w._allocate_only(b"x")
        w.write(b"y")
    with MappedBusReader(bus_path, SIZE, 8, timeout=0.02) as r1, \
            MappedBusReader(bus_path, SIZE, 8, timeout=0.02) as r2:
        a = [x.data for x in r1.records(timeout=0.5)]
        b = [x.data for x in r2.records(timeout=0.5)]
    assert a == b == [b"y"]
    assert r1.rollbacks + r2.rollbacks == 1 and r1.skipped == r2.skipped == 1


def test_file_is_created_rounded_to_a_page_with_owner_only_permissions(bus_path):
    with MappedBusWriter(bus_path, 5000, 8):
        pass
    st = os.stat(bus_path)
    assert st.st_size == 2 * PAGE_SIZE
    assert st.st_mode & 0o777 == 0o600
    with open(bus_path, "rb") as f:
        assert f.read(8) == (8).to_bytes(8, "little")
        assert f.read() == bytes(2 * PAGE_SIZE - 8)


def test_file_mode_is_settable(bus_path):
    old = os.umask(0)
    try:
        with MappedBusWriter(bus_path, 5000, 8, mode=0o640):
            pass
    finally:
        os.umask(old)
    assert os.stat(bus_path).st_mode & 0o777 == 0o640


def test_reopening_with_a_smaller_size_never_shrinks_the_file(bus_path):
    with MappedBusWriter(bus_path, 3 * PAGE_SIZE, 8) as w:
        for i in range(100):
            w.write(bytes([i]))
        # With its metadata file the other size is refused; without it (a file of the Java
        # original) it is opened, and still never shrunk.
        with pytest.raises(BusMismatchError, match="file_size"):
            MappedBusWriter(bus_path, PAGE_SIZE, 8).open()
        os.unlink(bus_path + ".meta")
        with MappedBusWriter(bus_path, PAGE_SIZE, 8) as small:
            assert small.write(b"s")
        assert os.stat(bus_path).st_size == 3 * PAGE_SIZE
        assert w.write(b"still ok")
    with MappedBusReader(bus_path, 3 * PAGE_SIZE, 8) as r:
        assert len(list(r.records(timeout=0))) == 102


def test_bus_on_disk_works_like_one_in_ram(disk_bus_path):
    with MappedBusWriter(disk_bus_path, SIZE, 12) as w:
        w.write(PriceUpdate(1, 2, 3))
    with MappedBusReader(disk_bus_path, SIZE, 12) as r:
        assert PriceUpdate.from_bytes(r.read(0).payload) == PriceUpdate(1, 2, 3)


def test_files_larger_than_4_gib_work(tmp_path):
    path = str(tmp_path / "big.bus")
    fsize = 5 * 2**30
    slot = slot_size(16)
    near_end = 8 + ((fsize - 8) // slot - 10) * slot     # ten slots before the end
    with MappedBusWriter(path, fsize, 16, preallocate=False) as w:
        w.write(b"first")
    with open(path, "r+b") as f:         # jump the limit past 4 GiB, as if 300 M records came before
        f.write(near_end.to_bytes(8, "little"))
    with MappedBusWriter(path, fsize, 16, preallocate=False) as w:
        for i in range(10):
            assert w.write(b"far %d" % i)
        with pytest.raises(BusFullError):
            w.write(b"one too many")
    with MappedBusReader(path, fsize, 16) as r:
        assert r.read(0).data == b"first"
        r.seek(near_end)
        got = [r.read(0) for _ in range(10)]
    assert [x.data for x in got] == [b"far %d" % i for i in range(10)]
    assert got[-1].position > 2**32
    assert os.stat(path).st_size == fsize


def test_batch_read_waits_for_the_first_record_then_takes_what_is_ready(bus_path):
    import threading
    out = np.zeros(8, PriceUpdate.numpy_dtype())
    with MappedBusWriter(bus_path, SIZE, 12) as w, MappedBusReader(bus_path, SIZE, 12) as r:
        t0 = time.monotonic()
        assert r.read_batch(out, timeout=0.05) == 0
        assert time.monotonic() - t0 >= 0.05
        threading.Timer(0.05, lambda: [w.write(PriceUpdate(i, i, i)) for i in range(3)]).start()
        n = r.read_batch(out, timeout=5)
        n += r.read_batch(out[n:], timeout=1)
        assert n == 3 and list(out["price"][:3]) == [0, 1, 2]


def test_open_with_wait_waits_for_a_writer_to_create_the_bus(bus_path):
    import threading
    import time
    found = {}

    def late_writer():
        time.sleep(0.3)
        with MappedBusWriter(bus_path, 100_000, 12) as w:
            found["id"] = w.bus_id
    t = threading.Thread(target=late_writer)
    t.start()
    t0 = time.monotonic()
    with MappedBusReader(bus_path, 100_000, 12).open(wait=10) as r:
        assert time.monotonic() - t0 >= 0.25
        t.join()
        assert r.bus_id == found["id"]
    with pytest.raises(FileNotFoundError):
        MappedBusReader(bus_path + "-none", 100_000, 12).open(wait=0.1)
