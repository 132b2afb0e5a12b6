"""The journal (issue 37; docs/journal.md): the archive tier (moves, readers across tiers, named
consumers and groups reading on from the archive, retention, bad archive files), replay from a
time (seek_time against the writer's own timestamps, at every millisecond boundary), and
mappedbus dump/stat on archived segments."""
import datetime
import json
import os
import shutil
import struct
import subprocess
import sys
import time

import pytest

from mappedbus_py import RollingBusReader, RollingBusWriter
from mappedbus_py.errors import BusMismatchError, CorruptBusError, UnsafeBusFileError
from mappedbus_py.formats.archive import ZstdSeekTable, list_archived, read_archived
from mappedbus_py.formats.layout import ARCHIVE_ZSTD_FRAME_BYTES, TIME_INDEX_DIR, time_index_name
from mappedbus_py.formats.timeindex import floor_ms
from mappedbus_py.rolling import archive as archive_mod
from mappedbus_py.rolling.directory import list_segments, segment_path

SEG = 16 * 1024
RS = 24
PER_SEG = (SEG - 8) // (RS + 8)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def dirs(tmp_path):
    hot = f"/dev/shm/mbjournal-{os.getpid()}-{time.monotonic_ns()}"
    yield hot, str(tmp_path / "archive")
    shutil.rmtree(hot, ignore_errors=True)


def _write(w, start, n):
    for i in range(start, start + n):
        w.write(struct.pack("<qq", i, time.time_ns()))


def _read_all(path, **kw):
    out = []
    with RollingBusReader(path, **kw) as r:
        for rec in r.records(0):
            out.append(struct.unpack_from("<q", rec.data)[0])
    return out


@pytest.mark.parametrize("compress", [None, "zstd", "lz4"])
def test_full_segments_move_and_readers_read_both_tiers(dirs, compress):
    hot, arch = dirs
    n = PER_SEG * 6 + 10
    with RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=1, compress=compress,
                          time_index=True) as w:
        _write(w, 0, n)
        assert w.archiver.wait_idle(10)
        hot_segs = list_segments(hot)
        archived = list_archived(arch)
        # the current segment, one full one kept hot (archive_after=1), maybe a spare
        assert len(hot_segs) <= 3 and min(hot_segs) >= 5
        assert sorted(archived) == list(range(min(hot_segs)))
        suffix = {None: ".bus", "zstd": ".bus.zst", "lz4": ".bus.lz4"}[compress]
        assert all(name.endswith(suffix) for name in archived.values())
        if compress == "zstd":      # zstd's seekable format: one frame of a 16 KiB segment
            assert all(len(ZstdSeekTable.read(open(os.path.join(arch, name), "rb").read(),
                                              SEG, name).frames) == 1
                       for name in archived.values())
        assert all(os.path.exists(os.path.join(arch, TIME_INDEX_DIR, time_index_name(k)))
                   for k in archived)
        assert _read_all(hot) == list(range(n))
        with RollingBusReader(hot, start=PER_SEG * 0 + SEG + 8) as r:     # in segment 1
            assert struct.unpack_from("<q", r.read(0).data)[0] == PER_SEG


def test_a_segment_archived_in_several_zstd_frames_reads_whole(dirs):
    # 1 MiB + 4 KiB: frames of ARCHIVE_ZSTD_FRAME_BYTES, the last of 4 KiB, and their seek table; readers
    # (the rolling reader, the tools' read_archived) and the zstd tool restore every record.
    hot, arch = dirs
    seg = (1 << 20) + 4096
    per = (seg - 8) // (RS + 8)
    n = per * 2 + 5
    with RollingBusWriter(hot, seg, RS, archive=arch, archive_after=0, compress="zstd") as w:
        _write(w, 0, n)
        assert w.archiver.wait_idle(20)
    archived = list_archived(arch)
    assert sorted(archived) == [0, 1]
    for k, name in archived.items():
        data = open(os.path.join(arch, name), "rb").read()
        table = ZstdSeekTable.read(data, seg, name)
        assert [f.dst_size for f in table.frames] == [ARCHIVE_ZSTD_FRAME_BYTES] * (
            (1 << 20) // ARCHIVE_ZSTD_FRAME_BYTES) + [4096]
        whole = read_archived(arch, k, name, seg)
        assert struct.unpack_from("<q", whole, 8 + 8)[0] == k * per
        if shutil.which("zstd"):
            out = subprocess.run(["zstd", "-d", "-c", os.path.join(arch, name)],
                                 capture_output=True, check=True).stdout
            assert out == whole
    assert _read_all(hot) == list(range(n))


def test_uncompressed_archive_keeps_the_exact_segment_bytes(dirs):
    hot, arch = dirs
    with RollingBusWriter(hot, SEG, RS) as w:
        _write(w, 0, PER_SEG * 3)
    before = open(os.path.join(hot, "00000000000000000000.bus"), "rb").read()
    with RollingBusWriter(hot, archive=arch, archive_after=0) as w:
        assert w.archiver.wait_idle(10)
    assert open(os.path.join(arch, "00000000000000000000.bus"), "rb").read() == before


def test_a_reader_crosses_the_tier_boundary_while_segments_move(dirs):
    hot, arch = dirs
    n = PER_SEG * 12
    code = (f"import struct,time,sys; sys.path.insert(0,{ROOT!r});"
            f"from mappedbus_py import RollingBusWriter as W\n"
            f"with W({hot!r},{SEG},{RS},archive={arch!r},archive_after=0,compress='lz4') as w:\n"
            f"    for i in range({n}):\n"
            f"        w.write(struct.pack('<qq',i,0))\n"
            f"        if i % 500 == 0: time.sleep(0.002)\n"
            f"    w.archiver.wait_idle(10)\n")
    RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=0, compress="lz4").open().close()
    child = subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=ROOT))
    got = []
    try:
        with RollingBusReader(hot) as r:
            while len(got) < n:
                rec = r.read(10)
                assert rec is not None, f"stopped after {len(got)}"
                got.append(struct.unpack_from("<q", rec.data)[0])
    finally:
        assert child.wait(60) == 0
    assert got == list(range(n))
    assert list_archived(arch)       # it did move segments meanwhile
    assert _read_all(hot) == list(range(n))     # and a reader from the start reads them all


def test_named_consumer_and_group_read_on_from_the_archive(dirs):
    hot, arch = dirs
    with RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=0) as w:
        _write(w, 0, 10)
        with RollingBusReader(hot, consumer="c") as r:
            for _ in range(5):
                r.read(0)
            r.commit()
        _write(w, 10, PER_SEG * 4)
        assert w.archiver.wait_idle(10)
        assert 0 in list_archived(arch) and 0 not in list_segments(hot)
    with RollingBusReader(hot, consumer="c") as r:
        assert struct.unpack_from("<q", r.read(0).data)[0] == 5
    with RollingBusReader(hot, group="g") as m:
        got = []
        while True:
            rec = m.read(0)
            if rec is None:
                break
            got.append(struct.unpack_from("<q", rec.data)[0])
            m.ack(rec)
    assert got == list(range(10 + PER_SEG * 4))


def test_archive_retention_and_settings_checks(dirs):
    hot, arch = dirs
    with RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=0, compress="zstd",
                          archive_retain_segments=2) as w:
        _write(w, 0, PER_SEG * 6)
        assert w.archiver.wait_idle(10)
        assert len(list_archived(arch)) == 2
    with pytest.raises(ValueError, match="fixed once set"):
        RollingBusWriter(hot, archive=arch, archive_after=3).open()
    with pytest.raises(ValueError, match="archived"):
        RollingBusWriter(hot, archive=arch, retain_segments=2)
    with pytest.raises(ValueError, match="compress"):
        RollingBusWriter(hot, archive=arch, compress="gzip")
    with pytest.raises(ValueError, match="give archive=DIR"):
        RollingBusWriter(hot, compress="zstd")
    other = hot + "-other"
    try:
        with pytest.raises(BusMismatchError, match="archive of bus"):
            RollingBusWriter(other, SEG, RS, archive=arch).open()
    finally:
        shutil.rmtree(other, ignore_errors=True)


def _one_archived(dirs, compress):
    hot, arch = dirs
    with RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=0, compress=compress,
                          time_index=True) as w:
        _write(w, 0, PER_SEG * 2 + 3)
        assert w.archiver.wait_idle(10)
    return hot, arch, os.path.join(arch, list_archived(arch)[0])


@pytest.mark.parametrize("compress", ["zstd", "lz4"])
def test_truncated_or_corrupt_archive_files_are_named(dirs, compress):
    hot, arch, p = _one_archived(dirs, compress)
    data = open(p, "rb").read()
    with open(p, "wb") as f:
        f.write(data[:len(data) // 2])
    with pytest.raises(CorruptBusError, match=os.path.basename(p)):
        _read_all(hot)
    with open(p, "wb") as f:
        f.write(b"not a frame at all" * 10)
    with pytest.raises(CorruptBusError, match=compress):
        _read_all(hot)


def test_uncompressed_archive_truncated_is_named(dirs):
    hot, arch, p = _one_archived(dirs, None)
    os.truncate(p, 100)
    with pytest.raises(Exception, match="truncated|shorter|smaller|size"):
        _read_all(hot)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a file of another user")
def test_foreign_or_linked_archive_files_are_refused(dirs):
    hot, arch, p = _one_archived(dirs, "zstd")
    os.chown(p, 65534, 65534)
    with pytest.raises(UnsafeBusFileError, match="owned by uid 65534"):
        _read_all(hot)
    assert _read_all(hot, allow_foreign=True)[:3] == [0, 1, 2]
    os.chown(p, 0, 0)
    os.rename(p, p + ".real")
    os.symlink(p + ".real", p)
    with pytest.raises(UnsafeBusFileError, match="symbolic link"):
        _read_all(hot)
    os.unlink(p)
    os.rename(p + ".real", p)
    ix = os.path.join(arch, TIME_INDEX_DIR, time_index_name(0))
    with open(ix, "r+b") as f:
        f.write(b"XXXXXXXX")
    with RollingBusReader(hot) as r, pytest.raises(CorruptBusError, match="magic"):
        r.seek_time(time.time() - 3600)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to run a process as another user")
def test_an_archive_file_made_by_another_user_is_refused(dirs):
    # an archive another user can reach (/dev/shm, not pytest's private tmp)
    hot, arch, p = _one_archived((dirs[0], dirs[0] + "-archive"), None)
    os.chmod(arch, 0o777)
    os.unlink(p)
    # another user (nobody) puts a segment of its own there
    subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c",
                    f"head -c {SEG} /dev/zero > {p}"], check=True)
    os.chmod(arch, 0o700)
    try:
        with pytest.raises(UnsafeBusFileError, match="owned by uid 65534"):
            _read_all(hot)
    finally:
        shutil.rmtree(arch)


def test_seek_time_against_the_writers_timestamps_at_every_boundary(dirs):
    hot, arch = dirs
    before, after = [], []
    with RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=1, compress="zstd",
                          time_index=True) as w:
        for i in range(PER_SEG * 5):
            before.append(time.time_ns())
            w.write(struct.pack("<qq", i, before[-1]))
            after.append(time.time_ns())
            if i % 40 == 0:
                time.sleep(0.0012)          # cross millisecond boundaries often
        assert w.archiver.wait_idle(10)
    assert list_archived(arch)
    n = len(before)
    probes = set()
    for i in range(0, n, 7):
        ms = floor_ms(before[i])
        probes |= {ms - 1000, ms, ms + 1000, before[i], ms + 999_000}
    with RollingBusReader(hot) as r:
        for t in sorted(probes):
            # microseconds: what a datetime holds exactly
            t = t // 1000 * 1000
            r.seek_time(datetime.datetime.fromtimestamp(t // 10**9).replace(
                microsecond=t % 10**9 // 1000))
            rec = r.read(0)
            first = n if rec is None else struct.unpack_from("<q", rec.data)[0]
            # every record whose write began at or after t is read
            due = next((i for i in range(n) if before[i] >= t), n)
            assert first <= due, (t, first, due)
            # none whose write ended before the start of t's millisecond
            if first < n:
                assert after[first] >= floor_ms(t), (t, first)
    with RollingBusReader(hot) as r:
        r.seek_time(before[0] / 1e9 - 10)
        assert struct.unpack_from("<q", r.read(0).data)[0] == 0
        r.seek_time(time.time() + 10)
        assert r.read(0) is None
        with pytest.raises(ValueError, match="datetime or Unix epoch"):
            r.seek_time("10:00")


def test_seek_time_reads_entries_a_stalled_writer_appended_after_its_segment_moved(
        dirs, monkeypatch):
    # Writer w writes its first record of segment 0, then stalls before appending its time
    # index entry (monkeypatched: as a preempted or stopped process would), while writer v
    # fills segment 0 and more, and the archiver moves segment 0 with the index as it was.
    # w's late append then makes a hot index of segment 0 again, holding only its entry: a
    # seek_time that took that file alone found no entry after w's and skipped the whole
    # segment (v's records written after t, in segment 0, were never read).
    import threading
    from mappedbus_py.rolling import writer as writer_mod
    hot, arch = dirs
    w = RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=0, time_index=True).open()
    v = RollingBusWriter(hot, SEG, RS, time_index=True).open()
    stalled, release = threading.Event(), threading.Event()
    note = writer_mod.RollingBusWriter._note_time

    def stalling_note(self, time_ns, offset):
        if self is w and not release.is_set():
            stalled.set()
            release.wait(30)
        return note(self, time_ns, offset)
    monkeypatch.setattr(writer_mod.RollingBusWriter, "_note_time", stalling_note)
    try:
        th = threading.Thread(target=lambda: w.write(struct.pack("<qq", -1, time.time_ns())))
        th.start()
        assert stalled.wait(10)
        time.sleep(0.003)
        t = time.time_ns()          # after w's record, before any of v's
        time.sleep(0.003)
        _write(v, 0, PER_SEG * 3)
        deadline = time.monotonic() + 20
        while 0 not in list_archived(arch):
            assert time.monotonic() < deadline, "segment 0 never moved"
            time.sleep(0.01)
        release.set()
        th.join(10)
        # the late append made segment 0's hot index again, beside the archived one
        assert os.path.exists(os.path.join(hot, TIME_INDEX_DIR, time_index_name(0)))
        assert 0 not in list_segments(hot)
        with RollingBusReader(hot) as r:
            r.seek_time(t / 1e9)
            first = r.read(0)
            assert first is not None and r.segment == 0
            assert struct.unpack_from("<q", first.data)[0] == 0     # v's first record
            r.seek_time(0)
            assert struct.unpack_from("<q", r.read(0).data)[0] == -1    # w's record
    finally:
        release.set()
        v.close()
        w.close()


def _stall_writer_entries(monkeypatch, writer, after=0):
    # Writer ``writer``'s time index appends after its first ``after`` stall until released
    # (as a preempted or stopped process's would): (stalled, release) Events.
    import threading
    from mappedbus_py.rolling import writer as writer_mod
    stalled, release = threading.Event(), threading.Event()
    note = writer_mod.RollingBusWriter._note_time
    seen = [0]

    def stalling_note(self, time_ns, offset):
        if self is writer and not release.is_set():
            seen[0] += 1
            if seen[0] > after:
                stalled.set()
                release.wait(30)
        return note(self, time_ns, offset)
    monkeypatch.setattr(writer_mod.RollingBusWriter, "_note_time", stalling_note)
    return stalled, release


def _wait_moved(hot, arch, k):
    # Until segment k's move is over: archived, and its hot segment and index unlinked.
    deadline = time.monotonic() + 20
    while k not in list_archived(arch) or k in list_segments(hot) or \
            os.path.exists(os.path.join(hot, TIME_INDEX_DIR, time_index_name(k))):
        assert time.monotonic() < deadline, f"segment {k} never moved"
        time.sleep(0.01)


def test_an_entry_appended_to_an_index_the_move_unlinked_is_appended_again(dirs, monkeypatch):
    # Writer w has segment 0's index open (its first record's entry), writes record r, and
    # stalls before r's entry; writer v fills segment 0 and the archiver moves it, unlinking
    # the hot index w holds open. w's append then went to the unlinked file and was lost, and
    # seek_time(t), t before r's write, started at v's first record after r: r was skipped.
    import threading
    hot, arch = dirs
    w = RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=0, time_index=True).open()
    v = RollingBusWriter(hot, SEG, RS, time_index=True).open()
    stalled, release = _stall_writer_entries(monkeypatch, w, after=1)
    try:
        w.write(struct.pack("<qq", -2, 0))      # its entry opens segment 0's index
        time.sleep(0.003)
        t = time.time_ns()
        th = threading.Thread(target=lambda: w.write(struct.pack("<qq", -1, 0)))
        th.start()
        assert stalled.wait(10)
        time.sleep(0.003)
        _write(v, 0, PER_SEG * 3)
        _wait_moved(hot, arch, 0)
        release.set()
        th.join(10)
        with RollingBusReader(hot) as r:
            r.seek_time(t / 1e9)
            assert r.segment == 0
            assert struct.unpack_from("<q", r.read(0).data)[0] == -1      # r, not v's first
    finally:
        release.set()
        v.close()
        w.close()
    # The next archiver merges the hot index the late append made into the archive's.
    assert os.path.exists(os.path.join(hot, TIME_INDEX_DIR, time_index_name(0)))
    with RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=0) as w2:
        assert w2.archiver.wait_idle(10)
    assert not os.path.exists(os.path.join(hot, TIME_INDEX_DIR, time_index_name(0)))
    with RollingBusReader(hot) as r:
        r.seek_time(t / 1e9)
        assert struct.unpack_from("<q", r.read(0).data)[0] == -1


def test_a_late_entry_of_a_segment_retention_removed_makes_no_index(dirs, monkeypatch):
    # Without an archive, the index a stalled writer holds open is unlinked by retention with
    # its segment: the late entry has nowhere to go, and no index is made for a segment that
    # is gone (the appending again by path is for a segment moved to the archive).
    import threading
    hot, _ = dirs
    w = RollingBusWriter(hot, SEG, RS, time_index=True, retain_segments=2).open()
    v = RollingBusWriter(hot, SEG, RS, time_index=True, retain_segments=2).open()
    stalled, release = _stall_writer_entries(monkeypatch, w, after=1)
    try:
        w.write(struct.pack("<qq", -2, 0))
        time.sleep(0.003)
        th = threading.Thread(target=lambda: w.write(struct.pack("<qq", -1, 0)))
        th.start()
        assert stalled.wait(10)
        time.sleep(0.003)
        _write(v, 0, PER_SEG * 5)
        assert 0 not in list_segments(hot)
        assert not os.path.exists(os.path.join(hot, TIME_INDEX_DIR, time_index_name(0)))
        release.set()
        th.join(10)
        assert not os.path.exists(os.path.join(hot, TIME_INDEX_DIR, time_index_name(0)))
    finally:
        release.set()
        v.close()
        w.close()


def test_dump_since_and_stat_read_archived_segments(dirs):
    hot, arch = dirs
    stamps = []
    with RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=0, compress="lz4",
                          time_index=True) as w:
        for i in range(PER_SEG * 3):
            stamps.append(time.time_ns())
            w.write(struct.pack("<qq", i, stamps[-1]))
            if i % 100 == 0:
                time.sleep(0.0015)
        assert w.archiver.wait_idle(10)
    env = dict(os.environ, PYTHONPATH=ROOT)
    cli = [sys.executable, "-m", "mappedbus_py.tools.cli"]
    st = json.loads(subprocess.run(cli + ["stat", hot, "--json"], env=env, check=True,
                                   capture_output=True, text=True).stdout)
    assert st["archive"]["segments"] >= 2
    assert st["records"]["committed"] == PER_SEG * 3
    assert [s["tier"] for s in st["segments"]][:2] == ["archive", "archive"]
    k = PER_SEG + 17            # in an archived segment
    since = f"{stamps[k] // 10**9}.{stamps[k] % 10**9:09d}"
    out = subprocess.run(cli + ["dump", hot, "--json", "--since", since, "--max", "1"], env=env,
                         check=True, capture_output=True, text=True).stdout
    row = json.loads(out.strip().splitlines()[-1])
    first = struct.unpack_from("<q", bytes.fromhex(row["payload"]))[0]
    assert first <= k and stamps[first + 1] >= floor_ms(stamps[k])


def test_time_index_is_kept_by_bus_meta_and_seek_time_needs_it(dirs):
    hot, _ = dirs
    with RollingBusWriter(hot, SEG, RS) as w:
        _write(w, 0, 3)
    assert not os.path.exists(os.path.join(hot, TIME_INDEX_DIR))      # no index: no cost
    with RollingBusReader(hot) as r, pytest.raises(ValueError, match="keeps no time index"):
        r.seek_time(time.time())
    time.sleep(0.002)            # t and t2 in a millisecond of their own
    with RollingBusWriter(hot, time_index=True) as w:
        t = time.time()
        _write(w, 3, 2)
    time.sleep(0.002)
    with RollingBusWriter(hot) as w:                  # a later writer appends too
        t2 = time.time()
        _write(w, 5, 2)
    with pytest.raises(ValueError, match="keeps a time index"):
        RollingBusWriter(hot, time_index=False).open()
    with RollingBusReader(hot) as r:
        r.seek_time(t)
        assert struct.unpack_from("<q", r.read(0).data)[0] == 3
        r.seek_time(t2)
        assert struct.unpack_from("<q", r.read(0).data)[0] == 5


@pytest.mark.original
def test_the_java_original_reads_an_uncompressed_archived_segment(dirs, tmp_path):
    # the SegReader of tests/rolling/test_rolling.py, on the archived file
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "rolling_tests", os.path.join(os.path.dirname(__file__), "test_rolling.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not mod.ORIGINAL.exists() or not shutil.which("javac"):
        pytest.skip(f"the Java original ({mod.ORIGINAL}) or a JDK is absent")
    d = tmp_path / "orig"
    d.mkdir()
    (d / "SegReader.java").write_text(mod.JAVA_READER)
    subprocess.run(["javac", "--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED", "-cp",
                    str(mod.ORIGINAL), "-d", str(d), str(d / "SegReader.java")], check=True)
    hot, arch = dirs
    with RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=0) as w:
        for i in range(PER_SEG + 5):
            w.write(struct.pack("<i", i))
        assert w.archiver.wait_idle(10)
    seg = os.path.join(arch, list_archived(arch)[0])
    out = subprocess.run(["java", "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED", "-cp",
                          f"{mod.ORIGINAL}:{d}", "SegReader", seg, str(SEG), str(RS)],
                         check=True, capture_output=True, text=True, timeout=120).stdout.split()
    assert out[:PER_SEG] == [str(i) for i in range(PER_SEG)] and out[-2:] == ["N", str(PER_SEG)]


def test_archive_age_moves_full_segments_kept_by_archive_after(dirs):
    hot, arch = dirs
    # An age of 1 s: segment 0 is made before the writer's open waits for its archiver process
    # (0.2-0.3 s), and until the writer's next look after a roll its mtime is that of its making.
    with RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=10, archive_age=1.0) as w:
        # The archiver ages a segment by its mtime, which only grows (made, then set at its
        # roll): none it sees is older than segment 0's now.
        born = os.stat(segment_path(hot, 0)).st_mtime_ns
        _write(w, 0, PER_SEG * 3 + 1)
        time.sleep(0.1)
        archived = list_archived(arch)
        # Within archive_after, not old enough yet: unless this process was held up past the
        # age (a loaded machine), when the archiver may rightly have moved them already.
        if time.time_ns() - born <= 1e9:
            assert not archived, archived
        deadline = time.monotonic() + 15
        while len(list_archived(arch)) < 3:
            assert time.monotonic() < deadline, list_archived(arch)
            w.archiver.wake()
            time.sleep(0.05)
    assert sorted(list_archived(arch)) == [0, 1, 2]
    assert _read_all(hot) == list(range(PER_SEG * 3 + 1))


_KILLED_READER = """
import struct, sys, time
from mappedbus_py import RollingBusReader
r = RollingBusReader(sys.argv[1]).open()
for _ in range(int(sys.argv[2])):
    struct.unpack_from("<q", r.read(0).data)
print("mid", flush=True)
time.sleep(60)
"""


def _shm_archived():
    return {n for n in os.listdir("/dev/shm") if n.startswith("mappedbus-archived-")}


@pytest.mark.parametrize("compress", ["zstd", "lz4"])
def test_a_reader_killed_inside_an_archived_segment_leaves_nothing(dirs, compress):
    # The decompressed segment (and the next, decompressed ahead) live in memory files the
    # kernel frees with the process: a SIGKILL leaves no file behind, in /dev/shm or anywhere.
    hot, arch = dirs
    n = PER_SEG * 4
    with RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=0, compress=compress) as w:
        _write(w, 0, n)
        assert w.archiver.wait_idle(10)
    assert {0, 1, 2} <= set(list_archived(arch))
    before = _shm_archived()
    p = subprocess.Popen([sys.executable, "-c", _KILLED_READER, hot, str(PER_SEG // 2)],
                         stdout=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=ROOT))
    try:
        assert p.stdout.readline() == b"mid\n"
        with open(f"/proc/{p.pid}/maps") as f:
            maps = f.read()
        # it is reading archived segment 0, mapped from a memory file (and 1 ahead)
        assert "memfd:mappedbus-archived-00000000000000000000" in maps, maps
    finally:
        p.kill()
        p.wait()
        p.stdout.close()
    # Other processes of the machine may make such files meanwhile: ours hold our bytes.
    ours = {read_archived(arch, k, name, SEG) for k, name in list_archived(arch).items()}
    left = []
    for name in _shm_archived() - before:
        try:
            with open(os.path.join("/dev/shm", name), "rb") as f:
                if f.read() in ours:
                    left.append(name)
        except FileNotFoundError:
            pass
    assert left == []


def test_a_writer_warns_once_when_its_archiver_falls_behind(dirs, monkeypatch):
    # The archiver stalls at its first move (the test hook): every roll leaves one more
    # segment due; past ARCHIVE_BEHIND_WARN of them the writer says so, once, and counts.
    from mappedbus_py.rolling.archive import ARCHIVE_BEHIND_WARN, ARCHIVE_STALL_ENV
    import signal
    import warnings
    hot, arch = dirs
    monkeypatch.setenv(ARCHIVE_STALL_ENV, "MOVE_SETTLED")
    w = RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=1).open()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for i in range(ARCHIVE_BEHIND_WARN + 6):       # a segment at a time
                _write(w, 0, PER_SEG)
                behind = [c for c in caught if "behind" in str(c.message)]
                # quiet up to ARCHIVE_BEHIND_WARN due, then one warning
                assert len(behind) == int(w.archiver.most_behind > ARCHIVE_BEHIND_WARN), i
        assert w.archiver.most_behind > ARCHIVE_BEHIND_WARN
        assert behind[0].category is RuntimeWarning and "segments behind" in str(behind[0].message)
        assert len(list_segments(hot)) > ARCHIVE_BEHIND_WARN + 2    # nothing moved
    finally:
        os.kill(w.archiver._proc.pid, signal.SIGKILL)
        w.close()


def test_a_descriptor_is_mapped_only_as_a_segment_read_as_it_is(tmp_path):
    # MappedBusReader(_fd=) / MappedFile(fd=) map an archived segment's memory file: never a
    # bus of its own, never created, grown or watched.
    from mappedbus_py._core._mapping import MappedFile
    from mappedbus_py._core._reader import MappedBusReader
    fd = os.memfd_create("t", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, SEG)
        with pytest.raises(ValueError, match="_segment"):
            MappedBusReader(str(tmp_path / "x"), SEG, RS, _fd=fd)
        for kw in (dict(create=True, segment=True), dict(read_only=True, segment=False)):
            with pytest.raises(ValueError, match="fd="):
                MappedFile(str(tmp_path / "x"), SEG, fd=fd, **kw)
        f = MappedFile(str(tmp_path / "x"), SEG, read_only=True, segment=True, fd=fd)
        assert f.from_fd and f.check_file(False) == 0     # no path to look at
        f.close()
    finally:
        os.close(fd)


@pytest.mark.filterwarnings("ignore:the archiver of")     # 30 segments of 16 KiB at once
@pytest.mark.parametrize("compress", ["none", "zstd"])
def test_a_reader_crossing_archived_segments_looks_each_one_up_without_listing_the_archive(
        dirs, compress, monkeypatch):
    # A replay of a long archive costs the same per segment: each archived segment (and the
    # one decompressed ahead) is found by its names, the archive listed only to place the
    # reader at its start, not once a segment (a listing a segment made a replay quadratic).
    hot, arch = dirs
    n = PER_SEG * 30 + 3
    with RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=0, compress=compress) as w:
        _write(w, 0, n)
        assert w.archiver.wait_idle(30)
    assert len(list_archived(arch)) == 30
    listed = []
    real = archive_mod.list_archived
    monkeypatch.setattr(archive_mod, "list_archived", lambda d: listed.append(d) or real(d))
    assert _read_all(hot) == list(range(n))
    assert 1 <= len(listed) <= 3, len(listed)     # at the open, not at each of 30 segments
