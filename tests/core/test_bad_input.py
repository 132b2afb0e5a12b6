"""Every bad input gets a clear exception naming the problem; nothing committed is damaged."""
import os
import struct

import pytest

from mappedbus_py import (BusClosedError, BusFullError, CorruptBusError, MappedBusReader,
                          MappedBusWriter, Message, PriceUpdate, Trade, fixed_bytes)
from mappedbus_py.errors import BusMismatchError, UnsafeBusFileError
from mappedbus_py.formats.layout import record_offset

SIZE = 100_000


def committed(path, fsize, rsize):
    with MappedBusReader(path, fsize, rsize, read_only=True) as r:
        r._set_timeout_ns(0)        # skip a stalled slot at first sight
        return [(x.position, x.meta, x.payload) for x in r.records(timeout=0)]


@pytest.fixture
def bus_with_records(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w:
        for i in range(3):
            w.write(b"rec%d" % i)
    return bus_path


def test_payload_longer_than_record_size_is_refused_before_allocating(bus_with_records):
    before = committed(bus_with_records, SIZE, 8)
    with MappedBusWriter(bus_with_records, SIZE, 8) as w:
        limit = MappedBusReader(bus_with_records, SIZE, 8).open().limit
        with pytest.raises(ValueError, match="payload of 9 bytes is longer than record_size 8"):
            w.write(b"123456789")
        with pytest.raises(ValueError, match="takes 20 bytes, more than record_size 8"):
            w.write(Trade())
        with pytest.raises(ValueError, match="outside the"):
            w.write(b"abc", 2, 5)
        with pytest.raises(ValueError, match="outside the"):
            w.write(b"abc", -1)
        assert MappedBusReader(bus_with_records, SIZE, 8).open().limit == limit
    assert committed(bus_with_records, SIZE, 8) == before


@pytest.mark.parametrize("fsize, rsize, message", [
    (0, 8, "file_size must be positive"),
    (-5, 8, "file_size must be positive"),
    (SIZE, 0, "record_size must be positive"),
    (SIZE, -1, "record_size must be positive"),
    (20, 8, "cannot hold one record"),
    (SIZE, 2**31, "record_size must be at most"),
])
def test_bad_sizes_are_refused_with_the_reason(bus_path, fsize, rsize, message):
    for cls in (MappedBusWriter, MappedBusReader):
        with pytest.raises(ValueError, match=message):
            cls(bus_path, fsize, rsize)
    assert not os.path.exists(bus_path)


def test_non_integer_sizes_are_type_errors(bus_path):
    with pytest.raises(TypeError, match="must be an integer"):
        MappedBusWriter(bus_path, 1000.0, 8)


def test_writing_things_that_are_not_payloads_is_a_type_error(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w:
        for bad in ("text", 5, None, [1, 2]):
            with pytest.raises(TypeError):
                w.write(bad)
    assert committed(bus_path, SIZE, 8) == []


def test_stored_length_out_of_range_is_reported_as_corrupt(bus_with_records):
    with open(bus_with_records, "r+b") as f:      # lengths of record 0 and 1: 99 and -1
        f.seek(record_offset(0, 8) + 4)
        f.write(struct.pack("<i", 99))
        f.seek(record_offset(1, 8) + 4)
        f.write(struct.pack("<i", -1))
    buf = bytearray(64)
    with MappedBusReader(bus_with_records, SIZE, 8) as r:
        for length in (99, -1):
            assert r.next()
            with pytest.raises(CorruptBusError, match=f"stores length {length}, outside 0..8"):
                r.read_buffer(buf)
            with pytest.raises(CorruptBusError):
                r.read_bytes()
        assert r.next() and r.read_bytes() == b"rec2"    # later records are intact
    assert buf == bytearray(64)


def test_status_out_of_range_is_reported_as_corrupt_and_can_be_stepped_over(bus_with_records):
    with open(bus_with_records, "r+b") as f:
        f.seek(record_offset(1, 8))
        f.write(struct.pack("<i", 7))
    with MappedBusReader(bus_with_records, SIZE, 8) as r:
        assert r.read(0).data == b"rec0"
        with pytest.raises(CorruptBusError, match=f"record at {record_offset(1, 8)} has status 7"):
            r.next()
        r.seek(record_offset(2, 8))
        assert r.read(0).data == b"rec2"


def test_limit_off_the_record_grid_is_refused_at_open(bus_with_records):
    # Its metadata file names the record_size; without one (a file of the Java original)
    # the same file opened with another record_size puts the limit off the grid.
    for cls in (MappedBusWriter, MappedBusReader):
        with pytest.raises(BusMismatchError, match="record_size 8, not 12"):
            cls(bus_with_records, SIZE, 12).open()
    os.unlink(bus_with_records + ".meta")
    for cls in (MappedBusWriter, MappedBusReader):
        with pytest.raises(CorruptBusError, match="not a record boundary for record_size 12"):
            cls(bus_with_records, SIZE, 12).open()
    with open(bus_with_records, "r+b") as f:
        f.write(struct.pack("<q", 3))
    with pytest.raises(CorruptBusError, match="limit 3"):
        MappedBusWriter(bus_with_records, SIZE, 8).open()


def test_limit_past_the_end_means_a_full_bus_not_a_crash(bus_with_records):
    before = committed(bus_with_records, SIZE, 8)
    huge = record_offset(10**12, 8)
    with open(bus_with_records, "r+b") as f:
        f.write(struct.pack("<q", huge))
    with MappedBusWriter(bus_with_records, SIZE, 8) as w:
        with pytest.raises(BusFullError):
            w.write(b"x")
    with MappedBusReader(bus_with_records, SIZE, 8) as r:
        r._set_timeout_ns(0)
        got = [x.data for x in r.records(timeout=0)][:3]
    assert got == [b"rec0", b"rec1", b"rec2"]
    assert committed(bus_with_records, SIZE, 8)[:3] == before


def test_negative_limit_is_refused_at_open(bus_with_records):
    with open(bus_with_records, "r+b") as f:
        f.write(struct.pack("<q", -16))
    with pytest.raises(CorruptBusError, match="limit -16"):
        MappedBusReader(bus_with_records, SIZE, 8).open()


def test_closed_or_unopened_writer_and_reader_refuse_to_work(bus_path):
    w = MappedBusWriter(bus_path, SIZE, 8)
    with pytest.raises(BusClosedError, match="closed"):
        w.write(b"x")
    r = MappedBusReader(bus_path, SIZE, 8)
    with pytest.raises(BusClosedError, match="closed"):
        r.next()
    w.open()
    r.open()
    w.write(b"x")
    w.close()
    w.close()
    r.close()
    with pytest.raises(BusClosedError):
        w.write(b"y")
    for call in (r.next, r.read, r.read_type, lambda: r.read_batch(bytearray(8))):
        with pytest.raises(BusClosedError):
            call()
    assert w.closed and r.closed


def test_paths_that_cannot_be_opened_raise_os_errors_naming_them(tmp_path):
    missing_dir = str(tmp_path / "no" / "such" / "dir" / "bus")
    with pytest.raises(FileNotFoundError) as info:
        MappedBusWriter(missing_dir, SIZE, 8).open()
    assert info.value.filename == missing_dir
    with pytest.raises(UnsafeBusFileError, match="is a directory"):
        MappedBusWriter(str(tmp_path), SIZE, 8).open()
    with pytest.raises(FileNotFoundError):
        MappedBusReader(str(tmp_path / "absent"), SIZE, 8, read_only=True).open()


def test_read_only_reader_of_a_short_file_says_why(bus_path):
    with MappedBusWriter(bus_path, 4096, 8):
        pass
    os.unlink(bus_path + ".meta")     # no metadata to name the size: the length tells
    with pytest.raises(ValueError, match="shorter than the 8192 bytes"):
        MappedBusReader(bus_path, 8000, 8, read_only=True).open()


def test_destination_buffer_too_small_leaves_the_record_current(bus_with_records):
    with MappedBusReader(bus_with_records, SIZE, 8) as r:
        assert r.next()
        with pytest.raises(ValueError, match="does not fit"):
            r.read_buffer(bytearray(2))
        with pytest.raises(ValueError, match="does not fit"):
            r.read_buffer(bytearray(8), 6)
        with pytest.raises(BufferError, match="not writable"):
            r.read_buffer(b"immutable")
        assert r.read_bytes() == b"rec0"


def test_message_larger_than_record_size_cannot_be_read_into(bus_with_records):
    with MappedBusReader(bus_with_records, SIZE, 8) as r:
        assert r.next()
        with pytest.raises(ValueError, match="more than record_size 8"):
            r.read_message(PriceUpdate())
        with pytest.raises(TypeError, match="needs a Message"):
            r.read_message(bytearray(8))


def test_batch_rows_longer_than_record_size_are_refused(bus_path):
    import numpy as np
    with MappedBusWriter(bus_path, SIZE, 8) as w:
        with pytest.raises(ValueError, match="rows of 12 bytes"):
            w.write_batch(np.zeros(3, PriceUpdate.numpy_dtype()))
        with pytest.raises(ValueError, match="meta has shape"):
            w.write_batch(np.zeros((3, 8), np.uint8), meta=[1, 2])
    with MappedBusReader(bus_path, SIZE, 8) as r:
        with pytest.raises(ValueError, match="rows of 12 bytes"):
            r.read_batch(np.zeros(3, PriceUpdate.numpy_dtype()))
        with pytest.raises(ValueError, match="meta must be an int32"):
            r.read_batch(np.zeros((3, 8), np.uint8), np.zeros(3, np.int64))
    assert committed(bus_path, SIZE, 8) == []


def test_close_is_refused_while_a_buffer_of_the_mapping_is_alive(bus_path):
    from mappedbus_py._core._mapping import MappedFile
    f = MappedFile(bus_path, 4096)
    view = memoryview(f)
    with pytest.raises(BufferError, match="exported"):
        f.close()
    view.release()
    f.close()
    with pytest.raises(ValueError, match="closed"):
        memoryview(f)
