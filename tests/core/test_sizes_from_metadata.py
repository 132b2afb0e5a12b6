"""One rule for sizes: what a bus's metadata says, unless given; a given size that disagrees
is an error naming both; a file without metadata needs both sizes."""
import os
import pathlib

import pytest

from mappedbus_py import BusMismatchError, MappedBusReader, MappedBusWriter, PriceUpdate
from mappedbus_py.formats.busmeta import meta_path

SIZE = 100_000


def test_a_reader_and_a_writer_of_an_existing_bus_take_the_sizes_from_its_metadata(bus_path):
    with MappedBusWriter(bus_path, SIZE, 32) as w:
        w.write(PriceUpdate(source=1, price=2, quantity=3))
    with MappedBusWriter(bus_path) as w:
        assert (w.file_size, w.record_size) == (SIZE, 32)
        w.write(PriceUpdate(source=4, price=5, quantity=6))
    with MappedBusReader(bus_path) as r:
        assert (r.file_size, r.record_size) == (SIZE, 32)
        assert [rec.decode({PriceUpdate.type_id: PriceUpdate}).source for rec in r.records(0)] \
            == [1, 4]
    with MappedBusReader(bus_path, record_size=32) as r:
        assert r.file_size == SIZE


def test_a_size_that_disagrees_with_the_metadata_names_both(bus_path):
    with MappedBusWriter(bus_path, SIZE, 32):
        pass
    with pytest.raises(BusMismatchError, match="record_size 32, not 12"):
        MappedBusReader(bus_path, record_size=12).open()
    with pytest.raises(BusMismatchError, match="file_size 100000, not 5000"):
        MappedBusWriter(bus_path, 5000).open()


def test_a_file_without_metadata_needs_both_sizes(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8):
        pass
    os.unlink(meta_path(bus_path))
    with pytest.raises(ValueError, match="record_size not given and it has no metadata file"):
        MappedBusReader(bus_path, SIZE)
    with pytest.raises(ValueError, match="file_size and record_size not given"):
        MappedBusWriter(bus_path)


def test_bytes_and_pathlike_paths_are_taken(bus_path):
    with MappedBusWriter(pathlib.Path(bus_path), SIZE, 8) as w:
        w.write(b"p")
    with MappedBusReader(os.fsencode(bus_path)) as r:
        assert r.path == bus_path and r.read(0).data == b"p"
    with pytest.raises(TypeError, match="str, bytes or os.PathLike"):
        MappedBusReader(12, SIZE, 8)
