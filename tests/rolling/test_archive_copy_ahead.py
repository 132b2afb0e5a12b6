"""Copy ahead (issue 37; formats/layout.py, "WHEN a segment moves"; docs/journal.md): while
nothing is due and archive_after >= 1, the archiver writes the copy of the segment due next
(the oldest full hot one, once settled) to a temporary file of the archive, fsynced, the
segment still hot and nothing named in the archive; its move, once due, takes that file over
(the segment is not read again). A copy ahead whose segment is gone is dropped. A kill during a
copy ahead: tests/reliability/test_archive_kill.py."""
import dataclasses
import os
import shutil
import struct
import time

import pytest

from mappedbus_py import RollingBusReader, RollingBusWriter
from mappedbus_py.formats.archive import archive_config, list_archived
from mappedbus_py.formats.layout import (ARCHIVER_EARLY_FILL_PERCENT, FIRST_RECORD_OFFSET,
                                         META_FILE, TMP_PREFIX)
from mappedbus_py.rolling import archive as archive_mod
from mappedbus_py.rolling.archive import Archiver
from mappedbus_py.rolling.directory import (list_segments, read_bus_meta, segment_limit,
                                            segment_path)

SEG = 16 * 1024
RS = 24


@pytest.fixture
def dirs():
    hot = f"/dev/shm/mbcopyahead-{os.getpid()}-{time.monotonic_ns()}"
    yield hot, hot + "-archive"
    shutil.rmtree(hot, ignore_errors=True)
    shutil.rmtree(hot + "-archive", ignore_errors=True)


def _tmps(arch):
    return [x for x in os.listdir(arch) if x.startswith(TMP_PREFIX)]


def _bus_with_archiver(hot, arch, compress, after=1, **archive_opts):
    """A bus with an archive and this test's Archiver holding its lock (the writer's own
    archiver process, a real child process, finds it taken and moves nothing)."""
    RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=after,
                     compress=compress, **archive_opts).open().close()
    meta = read_bus_meta(hot)
    a = Archiver(hot, meta, archive_config(meta, os.path.join(hot, META_FILE)))
    assert a.run_once() == [] and a._holding
    return a


def _look(a):
    """One look of the archiver, as its loop makes them, and the copy ahead it started (in
    its copier thread) finished: what the look moved."""
    moved = a.run_once()
    for made in list(a._copied.values()):
        made.result(timeout=30)
    return moved


def _write_until(w, hot, i, k, past_half):
    # writes until segment k is current with records, below (or past) the early-move fill
    def there():
        if k not in list_segments(hot) or segment_limit(hot, k) <= FIRST_RECORD_OFFSET:
            return False
        return (segment_limit(hot, k) * 100 > SEG * ARCHIVER_EARLY_FILL_PERCENT) == past_half
    while not there():
        w.write(struct.pack("<qq", i, 0))
        i += 1
    return i


@pytest.mark.parametrize("compress", ["none", "zstd"])
def test_the_segment_due_next_is_copied_ahead_and_its_move_takes_the_copy_over(
        dirs, compress, monkeypatch):
    hot, arch = dirs
    a = _bus_with_archiver(hot, arch, compress)
    reads = []          # the segments' copies made: ahead (from its mapping) or at a move
    real_read_all, real_copy_ahead = archive_mod._read_all, archive_mod.copy_ahead

    def counted(path, allow_foreign):
        reads.append(os.path.abspath(path))
        return real_read_all(path, allow_foreign)

    def counted_ahead(hot_dir, cfg, index, *args, **kw):
        made = real_copy_ahead(hot_dir, cfg, index, *args, **kw)
        if made is not None:
            reads.append(os.path.abspath(segment_path(hot_dir, index)))
        return made
    monkeypatch.setattr(archive_mod, "_read_all", counted)
    monkeypatch.setattr(archive_mod, "copy_ahead", counted_ahead)
    seg0 = os.path.abspath(segment_path(hot, 0))
    try:
        with RollingBusWriter(hot) as w:
            i = _write_until(w, hot, 0, 1, past_half=False)
            assert a.candidates() == [] and _look(a) == []
            # copied ahead: a temporary file of the archive, the segment hot, nothing named
            tmps = _tmps(arch)
            assert len(tmps) == 1 and tmps[0].startswith(
                f"{TMP_PREFIX}{os.path.basename(archive_mod.archived_path(arch, 0, compress))}-")
            assert list_archived(arch) == {} and 0 in list_segments(hot)
            assert reads.count(seg0) == 1
            assert _look(a) == [] and len(_tmps(arch)) == 1 and reads.count(seg0) == 1
            i = _write_until(w, hot, i, 1, past_half=True)
            assert a.candidates() == [0]
            assert _look(a) == [0]
            # the move took the copy over: segment 0 not read again, no temporary file left
            assert reads.count(seg0) == 1
            assert set(list_archived(arch)) == {0} and 0 not in list_segments(hot)
            assert _tmps(arch) == []
            # the next one (1) is copied ahead once the writer rolls past it
            i = _write_until(w, hot, i, 2, past_half=False)
            assert _look(a) == [] and len(_tmps(arch)) == 1
            assert reads.count(os.path.abspath(segment_path(hot, 1))) == 1
    finally:
        a.stop()
    assert _tmps(arch) == []                # stop() drops a copy ahead not used
    with RollingBusReader(hot) as r:
        got = [struct.unpack_from("<q", rec.data)[0] for rec in r.records(0)]
    assert got == list(range(i))


def test_a_copy_ahead_whose_segment_is_gone_is_dropped(dirs):
    hot, arch = dirs
    a = _bus_with_archiver(hot, arch, "lz4")
    try:
        with RollingBusWriter(hot) as w:
            _write_until(w, hot, 0, 1, past_half=False)
            assert _look(a) == [] and len(_tmps(arch)) == 1
            os.unlink(segment_path(hot, 0))         # as hot retention would
            assert _look(a) == []
            assert _tmps(arch) == [] and list_archived(arch) == {}
    finally:
        a.stop()



def test_looks_without_archive_retention_never_list_the_archive(dirs, monkeypatch):
    # A look costs one listing of the hot directory however many segments the archive holds
    # (it used to list the archive at every look, for a retention it did not have).
    hot, arch = dirs
    a = _bus_with_archiver(hot, arch, "none", after=0)
    listed = []
    real = archive_mod.list_archived
    monkeypatch.setattr(archive_mod, "list_archived", lambda d: listed.append(d) or real(d))
    try:
        moved = []
        with RollingBusWriter(hot) as w:
            i = 0
            for k in (1, 2, 3):
                i = _write_until(w, hot, i, k, past_half=False)
                moved += _look(a)
        assert moved == [0, 1, 2] and sorted(real(arch)) == [0, 1, 2]
        assert listed == []
    finally:
        a.stop()
    # with a retention, the archive is listed and the retention applied
    cfg = dataclasses.replace(a.cfg, retain_segments=1)
    assert archive_mod.apply_archive_retention(cfg, a.meta) == [0, 1]
    assert listed == [arch] and sorted(real(arch)) == [2]


def test_an_archiver_applies_the_archive_retention_at_each_look_from_its_own_listing(
        dirs, monkeypatch):
    # The archive is listed at the first look (then at most once every ARCHIVE_FULL_LOOK_S,
    # here an hour): each look after applies the retention to what the archiver knows it moved
    # and removed, without listing the archive.
    hot, arch = dirs
    monkeypatch.setattr(archive_mod, "ARCHIVE_FULL_LOOK_S", 3600)
    listed = []
    real = archive_mod.list_archived
    monkeypatch.setattr(archive_mod, "list_archived", lambda d: listed.append(d) or real(d))
    a = _bus_with_archiver(hot, arch, "lz4", after=0, archive_retain_segments=2)
    try:
        first = listed.count(arch)
        with RollingBusWriter(hot) as w:
            i = 0
            for k in range(1, 7):
                i = _write_until(w, hot, i, k, past_half=False)
                assert a.run_once() == [k - 1]
                assert sorted(real(arch)) == list(range(max(0, k - 2), k))
            assert listed.count(arch) == first          # no look after the first listed it
            # A segment removed by hand is seen at the next full listing (made due here): the
            # retention counts what is there (4 and 6 kept), not what the archiver moved (which
            # would remove 4 too).
            os.unlink(os.path.join(arch, real(arch)[5]))
            a._archived._listed_ns = 0
            i = _write_until(w, hot, i, 7, past_half=False)
            assert a.run_once() == [6]
            assert listed.count(arch) == first + 1 and sorted(real(arch)) == [4, 6]
    finally:
        a.stop()


@pytest.mark.parametrize("rs", [RS, 13])       # 13: a slot of 21 bytes, statuses misaligned
def test_a_full_segment_with_a_slot_not_committed_is_neither_settled_nor_copied_ahead(dirs, rs):
    # The copy ahead checks the statuses through the mapping it copies (compiled
    # slots_settled, acquire loads): one uncommitted slot anywhere, even the last, keeps the
    # segment hot and makes no temporary file, whatever the slot's alignment.
    hot, arch = dirs
    RollingBusWriter(hot, SEG, rs, archive=arch, archive_after=1).open().close()
    meta = read_bus_meta(hot)
    cfg = archive_config(meta, os.path.join(hot, META_FILE))
    a = Archiver(hot, meta, cfg)
    assert a.run_once() == []
    with RollingBusWriter(hot) as w:
        while (segment_limit(hot, 1) or 0) <= FIRST_RECORD_OFFSET:     # segment 0 full
            w.write(bytes(rs))
    seg0 = segment_path(hot, 0)
    slot = 8 + rs
    last = FIRST_RECORD_OFFSET + ((SEG - FIRST_RECORD_OFFSET) // slot - 1) * slot
    for at in (FIRST_RECORD_OFFSET + 7 * slot, last):
        with open(seg0, "r+b") as f:
            f.seek(at)
            f.write(struct.pack("<i", 0))          # NOT_SET: a writer between claim and commit
        assert not archive_mod.settled(seg0, SEG, rs)
        assert archive_mod.copy_ahead(hot, cfg, 0, SEG, record_size=rs) is None
        assert _tmps(arch) == []
        with open(seg0, "r+b") as f:
            f.seek(at)
            f.write(struct.pack("<i", 1))          # committed
        assert archive_mod.settled(seg0, SEG, rs)
    made = archive_mod.copy_ahead(hot, cfg, 0, SEG, record_size=rs)
    assert made is not None and made.index == 0 and len(_tmps(arch)) == 1
    made.discard()
    a.stop()


def test_every_full_segment_not_due_is_copied_ahead_and_each_move_takes_its_copy(
        dirs, monkeypatch):
    # archive_after=2: both full hot segments are copied ahead, oldest first, one a look; the
    # newer one from the roll that filled it, not from the move of the one before it, so that
    # its copy has until its own move (one and a half to two segments' fill).
    hot, arch = dirs
    a = _bus_with_archiver(hot, arch, "lz4", after=2)
    reads = []
    real_read_all = archive_mod._read_all

    def counted(path, allow_foreign):
        if path.endswith(".bus"):
            reads.append(os.path.abspath(path))
        return real_read_all(path, allow_foreign)
    monkeypatch.setattr(archive_mod, "_read_all", counted)
    try:
        with RollingBusWriter(hot) as w:
            i = _write_until(w, hot, 0, 2, past_half=False)     # 0 and 1 full, not due
            assert a.candidates() == []
            assert _look(a) == [] and len(_tmps(arch)) == 1     # segment 0's copy
            assert _look(a) == [] and len(_tmps(arch)) == 2     # then segment 1's
            assert sorted(a._copied) == [0, 1]
            assert _look(a) == [] and len(_tmps(arch)) == 2     # nothing more to copy
            i = _write_until(w, hot, i, 2, past_half=True)      # 0 due
            assert _look(a) == [0] and sorted(a._copied) == [1]
            i = _write_until(w, hot, i, 3, past_half=True)      # 1 due, 2 full: copied next
            assert _look(a) == [1]
            assert _look(a) == [] and sorted(a._copied) == [2]
            assert reads == []          # every move took its copy over
            assert set(list_archived(arch)) == {0, 1}
    finally:
        a.stop()
    assert _tmps(arch) == []
    with RollingBusReader(hot) as r:
        got = [struct.unpack_from("<q", rec.data)[0] for rec in r.records(0)]
    assert got == list(range(i))
