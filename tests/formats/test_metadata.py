"""The metadata file of a single-file bus (PATH.meta): written by the initialising writer,
checked by everyone before anything is written; files without one (the Java original's)
keep the legacy grid checks."""
import os
import shutil
import struct
import time

import pytest

from conftest import GOLDEN
from mappedbus_py import MappedBusReader, MappedBusWriter
from mappedbus_py.formats.busmeta import meta_path, read_meta
from mappedbus_py.errors import BusMismatchError, CorruptBusError
from mappedbus_py.formats.layout import record_offset

SIZE = 100_000


def test_the_first_writer_writes_metadata_with_its_sizes_and_the_inode(bus_path):
    with MappedBusWriter(bus_path, SIZE, 12) as w:
        meta = read_meta(meta_path(bus_path))
        assert (meta.kind, meta.record_size, meta.file_size) == ("single", 12, SIZE)
        assert meta.inode == os.stat(bus_path).st_ino
        assert w.bus_id == meta.id
        with MappedBusReader(bus_path, SIZE, 12) as r:
            assert r.bus_id == meta.id
    assert os.stat(meta_path(bus_path)).st_mode & 0o777 == 0o600


def test_a_reader_with_another_record_size_cannot_roll_back_a_committed_record(bus_path):
    # The reported bug: a reader opened with record_size 8 on a record_size-12 bus read
    # the first record's payload as the next slot's status and "rolled it back", changing
    # a committed record's type. Now it is refused before it writes anything.
    with MappedBusWriter(bus_path, SIZE, 12) as w:
        w.write(b"\0" * 12)
        w._allocate_only(b"\0" * 12)        # a slot that a wrong-grid reader would time out
    before = open(bus_path, "rb").read()
    with pytest.raises(BusMismatchError, match="record_size 12, not 8"):
        MappedBusReader(bus_path, SIZE, 8, timeout=0.01).open()
    assert open(bus_path, "rb").read() == before
    with MappedBusReader(bus_path, SIZE, 12, timeout=10.0) as r:
        rec = r.read(0)
        assert rec.position == 8 and rec.meta == 12


def test_a_second_writer_with_another_record_size_is_refused_on_a_fresh_bus(bus_path):
    with MappedBusWriter(bus_path, SIZE, 16):
        before = open(bus_path, "rb").read()
        with pytest.raises(BusMismatchError, match="record_size 16, not 24"):
            MappedBusWriter(bus_path, SIZE, 24).open()
        assert open(bus_path, "rb").read() == before


@pytest.mark.parametrize("cls", [MappedBusWriter, MappedBusReader])
def test_another_file_size_is_refused(bus_path, cls):
    with MappedBusWriter(bus_path, SIZE, 8):
        pass
    length = os.stat(bus_path).st_size
    for other in (SIZE // 2, SIZE * 2):
        with pytest.raises(BusMismatchError, match=f"file_size {SIZE}, not {other}"):
            cls(bus_path, other, 8).open()
    assert os.stat(bus_path).st_size == length


def test_a_bus_recreated_under_the_same_path_gets_a_new_id(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w:
        first = w.bus_id
    os.unlink(bus_path)          # the metadata file stays behind, stale
    with MappedBusWriter(bus_path, SIZE, 16) as w:
        assert w.bus_id not in (None, first)
        assert read_meta(meta_path(bus_path)).record_size == 16


def test_a_file_without_metadata_opens_with_no_bus_id(tmp_path):
    path = str(tmp_path / "legacy.bus")
    shutil.copyfile(GOLDEN / "objects-r12.bus", path)
    os.chmod(path, 0o600)
    with MappedBusWriter(path, os.path.getsize(path), 12) as w, \
            MappedBusReader(path, os.path.getsize(path), 12) as r:
        assert w.bus_id is None and r.bus_id is None
    assert not os.path.exists(meta_path(path))     # nobody adds metadata to a live legacy bus


def test_legacy_reader_checks_every_limit_it_loads_on_its_grid(tmp_path):
    # Without metadata, a limit that moves off the grid later (another record_size's
    # writer) is caught when loaded, before any rollback.
    path = str(tmp_path / "legacy.bus")
    with MappedBusWriter(path, SIZE, 8) as w:
        w.write(b"a")
    os.unlink(meta_path(path))
    with MappedBusReader(path, SIZE, 8, timeout=0.01) as r:
        assert r.read(0).data == b"a"
        with open(path, "r+b") as f:            # a writer with record_size 12 allocated one
            f.write(struct.pack("<q", 24 + 20))
        with pytest.raises(CorruptBusError, match="limit 44 is not a record boundary"):
            for _ in range(64):                 # a caught-up reader loads it now and then
                r.next()
    with open(path, "rb") as f:
        f.seek(record_offset(1, 8))
        assert f.read(4) == bytes(4)            # nothing rolled back


def test_legacy_reader_rechecks_the_limit_just_before_a_rollback(tmp_path):
    path = str(tmp_path / "legacy.bus")
    with MappedBusWriter(path, SIZE, 8) as w:
        w._allocate_only(b"x")
    os.unlink(meta_path(path))
    with MappedBusReader(path, SIZE, 8, timeout=0.2) as r:
        for _ in range(64):                     # the limit is loaded, the stall's clock starts
            assert not r.next()
        with open(path, "r+b") as f:            # the limit goes off the grid meanwhile
            f.write(struct.pack("<q", 8 + 16 + 4))
        time.sleep(0.3)
        with pytest.raises(CorruptBusError, match="not a record boundary"):
            r.next()                            # timed out: checks before rolling back
    with open(path, "rb") as f:
        f.seek(8)
        assert struct.unpack("<i", f.read(4))[0] == 0    # not rolled back


def test_segment_mode_uses_no_metadata_and_never_creates_or_grows(tmp_path):
    path = str(tmp_path / "seg.bus")
    for cls in (MappedBusWriter, MappedBusReader):
        with pytest.raises(FileNotFoundError):
            cls(path, SIZE, 8, _segment=True).open()
    assert not os.path.exists(path)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.ftruncate(fd, 4096)
    os.close(fd)
    for cls in (MappedBusWriter, MappedBusReader):
        with pytest.raises(ValueError, match="shorter than"):
            cls(path, SIZE, 8, _segment=True).open()
    assert os.path.getsize(path) == 4096
    os.truncate(path, 102400)
    with MappedBusWriter(path, SIZE, 8, _segment=True) as w:
        assert w.bus_id is None and w.write(b"s")
    with MappedBusReader(path, SIZE, 8, _segment=True) as r:
        os.unlink(path)              # retention removes segments that are still mapped
        assert r.read(0).data == b"s"
        for _ in range(1 << 17):
            r.next()                 # no BusReplacedError for a segment
    assert not os.path.exists(meta_path(path))
    with open(path + "x", "wb"):
        pass
    os.chmod(path + "x", 0o666)
    with pytest.raises(Exception, match="mode 0666"):   # the other checks still apply
        MappedBusReader(path + "x", SIZE, 8, _segment=True).open()



def test_a_reader_that_opens_while_a_writer_creates_the_bus_waits_for_it(bus_path):
    # What a writer leaves between creating the file (O_EXCL) and sizing it under its lock:
    # an empty file. A reader opening then must wait for the bus, not call it the wrong size.
    import threading
    os.close(os.open(bus_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    got = {}

    def read():
        try:
            with MappedBusReader(bus_path, 100_000, 12, lock_timeout=10) as r:
                got["id"] = r.bus_id
        except Exception as e:      # noqa: BLE001 - reported below
            got["error"] = e
    t = threading.Thread(target=read)
    t.start()
    time.sleep(0.2)
    assert t.is_alive()             # still waiting: an empty file is not a bus yet
    with MappedBusWriter(bus_path, 100_000, 12) as w:
        t.join(10)
        assert got == {"id": w.bus_id}


def test_an_empty_file_no_writer_initialises_is_not_found_after_the_lock_timeout(bus_path):
    os.close(os.open(bus_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    t0 = time.monotonic()
    with pytest.raises(FileNotFoundError, match="empty file"):
        MappedBusReader(bus_path, 100_000, 12, lock_timeout=0.3).open()
    assert time.monotonic() - t0 >= 0.3
    assert os.path.getsize(bus_path) == 0 and not os.path.exists(meta_path(bus_path))
