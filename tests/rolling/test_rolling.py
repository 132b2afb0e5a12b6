"""The rolling bus (docs/files-and-rolling.md, "Rolling bus"): segments, positions, bus.meta
guards, retention, gaps, identity, the CLI, and the Java original on single segments."""
import json
import os
import pathlib
import shutil
import struct
import subprocess
import threading
import time
import uuid

import numpy
import pytest

from mappedbus_py import (BusGapError, BusMismatchError, BusReplacedError, MappedBusReader,
                          MappedBusWriter, PriceUpdate, RollingBusReader, RollingBusWriter)
from mappedbus_py.tools import cli
from mappedbus_py import rolling
from mappedbus_py.formats.busmeta import BusMeta, write_meta
from mappedbus_py.formats.layout import META_FILE, segment_name

from support.java_original import ORIGINAL_JAR

SEG = 4096
RS = 12
PER = (SEG - 8) // (8 + RS)          # 204 PriceUpdates per segment
ORIGINAL = pathlib.Path(ORIGINAL_JAR)


@pytest.fixture
def bus_dir():
    base = pathlib.Path("/dev/shm") if os.path.isdir("/dev/shm") else pathlib.Path("/tmp")
    path = base / f"mbroll-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    yield str(path)
    shutil.rmtree(path, ignore_errors=True)


def write_n(path, n, start=0, **kw):
    with RollingBusWriter(path, SEG, RS, **kw) as w:
        for i in range(start, start + n):
            assert w.write(PriceUpdate(source=i, price=2 * i, quantity=3))
        return w.bus_id


def read_all(r):
    m, out = PriceUpdate(), []
    while r.read_into(m):
        out.append(m.source)
    return out


def test_records_cross_segments_in_order_with_global_positions(bus_dir):
    write_n(bus_dir, 3 * PER + 10)
    assert rolling.list_segments(bus_dir)[:4] == [0, 1, 2, 3]
    with RollingBusReader(bus_dir) as r:
        recs = list(r.records(0.05))
    assert [PriceUpdate.from_bytes(x.payload).source for x in recs] == list(range(3 * PER + 10))
    # the first record of segment 1 is at position 1 * SEG + 8
    assert recs[PER].position == SEG + 8 and recs[PER - 1].position == 8 + (PER - 1) * 20
    with RollingBusReader(bus_dir, SEG, RS, start=2 * SEG + 8 + 5 * 20) as r:
        assert read_all(r)[0] == 2 * PER + 5
        assert r.position == 3 * SEG + 8 + 10 * 20 and r.segment == 3


def test_each_segment_is_a_plain_mappedbus_file(bus_dir):
    write_n(bus_dir, PER + 3)
    # segment 0, read alone by the single-file reader with (path, segment_size, record_size)
    seg0 = os.path.join(bus_dir, segment_name(0))
    with MappedBusReader(seg0, SEG, RS) as r:
        m, got = PriceUpdate(), []
        while True:
            try:
                if not r.read_into(m):
                    break
            except EOFError:
                break
            got.append(m.source)
    assert got == list(range(PER))
    assert os.path.getsize(seg0) == 4096 and oct(os.stat(bus_dir).st_mode & 0o777) == "0o700"


def test_start_end_reads_only_new_records_and_seek_moves_across_segments(bus_dir):
    write_n(bus_dir, PER + 5)
    with RollingBusReader(bus_dir, start="end") as r:
        assert not r.next()
        write_n(bus_dir, 2, start=1000)
        assert read_all(r) == [1000, 1001]
        r.seek(8)
        assert read_all(r)[:2] == [0, 1] and r.segment == 1
        r.seek_end()
        assert not r.next()


def test_reader_waiting_at_a_segment_end_follows_into_the_next(bus_dir):
    write_n(bus_dir, PER)            # segment 0 exactly full
    with RollingBusReader(bus_dir) as r:
        assert len(read_all(r)) == PER
        t = threading.Timer(0.2, write_n, (bus_dir, 1, 5000))
        t.start()
        rec = r.read(timeout=10)
        t.join()
    assert rec is not None and PriceUpdate.from_bytes(rec.payload).source == 5000
    assert rec.position == SEG + 8


def test_write_batch_splits_rows_across_segments(bus_dir):
    rows = numpy.zeros(PER + 50, dtype=PriceUpdate.numpy_dtype())
    rows["source"] = numpy.arange(len(rows))
    with RollingBusWriter(bus_dir, SEG, RS) as w:
        assert w.write_batch(rows[:30]) == 30
        assert w.write_batch(rows[30:]) == len(rows) - 30
    with RollingBusReader(bus_dir) as r:
        out = numpy.zeros(len(rows) + 10, dtype=PriceUpdate.numpy_dtype())
        meta = numpy.zeros(len(out), dtype="<i4")
        assert r.read_batch(out, meta, timeout=1.0) == len(rows)
    assert list(out["source"][:len(rows)]) == list(range(len(rows)))


def test_other_sizes_are_refused_before_anything_is_written(bus_dir):
    write_n(bus_dir, 3)
    def files():
        # every file, the time index directory's too
        return {os.path.relpath(os.path.join(d, n), bus_dir): open(os.path.join(d, n), "rb").read()
                for d, _, names in os.walk(bus_dir) for n in names}
    before = files()
    with pytest.raises(BusMismatchError, match="record_size 12, not 16"):
        RollingBusWriter(bus_dir, SEG, 16).open()
    with pytest.raises(BusMismatchError, match="segment_size 4096, not 8192"):
        RollingBusWriter(bus_dir, 8192, RS).open()
    with pytest.raises(BusMismatchError):
        RollingBusReader(bus_dir, 8192, RS).open()
    assert files() == before


def test_other_retention_is_refused_naming_both(bus_dir):
    write_n(bus_dir, 1, retain_segments=3)
    with pytest.raises(ValueError, match="retain_segments=3.*retain_segments=5"):
        RollingBusWriter(bus_dir, SEG, RS, retain_segments=5).open()
    write_n(bus_dir, 1)          # default retention: takes the stored one


def test_reader_never_creates_a_bus(bus_dir):
    with pytest.raises(FileNotFoundError):
        RollingBusReader(bus_dir).open()
    assert not os.path.exists(bus_dir)


def test_retention_by_count_keeps_n_complete_segments_besides_the_current_and_the_spare(bus_dir):
    write_n(bus_dir, 10 * PER, retain_segments=3)
    segs = rolling.list_segments(bus_dir)
    # The writer filled 9 (the current), 10 is its spare: 6, 7 and 8 are the history kept.
    assert segs == [6, 7, 8, 9, 10], segs
    with RollingBusReader(bus_dir, on_gap="skip", start=8) as r:
        got = read_all(r)
    assert got[0] == segs[0] * PER and got[-1] == 10 * PER - 1
    assert r.lost == segs[0] * PER


def test_retention_by_bytes(bus_dir):
    write_n(bus_dir, 10 * PER, retain_bytes=4 * SEG)
    segs = rolling.list_segments(bus_dir)
    assert segs == [5, 6, 7, 8, 9, 10], segs     # 4 * SEG of history, the current, the spare


def test_retention_by_age_removes_segments_full_for_longer_than_the_age(bus_dir):
    write_n(bus_dir, 3 * PER + 10, retain_age=0.5)
    assert rolling.list_segments(bus_dir)[0] == 0     # nothing old enough yet
    time.sleep(0.7)
    write_n(bus_dir, PER)        # creates a segment: retention runs
    segs = rolling.list_segments(bus_dir)
    assert segs[0] >= 3, segs    # 0..2 were full more than 0.5 s ago


def test_start_before_the_oldest_retained_is_a_gap_with_the_exact_range(bus_dir):
    write_n(bus_dir, 6 * PER, retain_segments=2)
    oldest = rolling.list_segments(bus_dir)[0]
    with pytest.raises(BusGapError) as e:
        RollingBusReader(bus_dir, start=SEG + 8 + 3 * 20).open()
    assert (e.value.lost_from, e.value.lost_to) == (SEG + 8 + 3 * 20, oldest * SEG + 8)
    assert e.value.lost == (PER - 3) + (oldest - 2) * PER
    with RollingBusReader(bus_dir) as r:      # start=None: the oldest retained, no error
        assert read_all(r)[0] == oldest * PER and r.lost == 0


@pytest.mark.parametrize("on_gap", ["raise", "skip"])
def test_slow_reader_behind_retention_gets_the_lost_range(bus_dir, on_gap):
    write_n(bus_dir, 10, retain_segments=2)
    r = RollingBusReader(bus_dir, on_gap=on_gap).open()
    assert r.next() and r.segment == 0
    write_n(bus_dir, 6 * PER, start=10)     # segments 1.. are removed while it reads 0
    oldest = rolling.list_segments(bus_dir)[0]
    assert oldest >= 2
    read = 1
    try:
        while r.next():
            read += 1
    except BusGapError as e:
        assert on_gap == "raise" and read == PER    # all of segment 0 (still mapped)
        assert (e.lost_from, e.lost_to) == (SEG + 8, oldest * SEG + 8)
        assert e.lost == (oldest - 1) * PER
    else:
        assert on_gap == "skip" and r.lost == (oldest - 1) * PER
        assert read == 10 + 6 * PER - r.lost
    r.close()


def test_recreated_bus_has_a_new_id_and_a_waiting_reader_notices(bus_dir):
    first = write_n(bus_dir, PER)     # the reader will wait at the end of segment 0
    r = RollingBusReader(bus_dir).open()
    assert r.bus_id == first and len(read_all(r)) == PER
    shutil.rmtree(bus_dir)
    second = write_n(bus_dir, 1)
    assert second != first
    with pytest.raises(BusReplacedError, match=first):
        r.wait(5.0)
    r.close()


def test_recreated_bus_is_noticed_by_a_reader_waiting_inside_a_segment(bus_dir):
    write_n(bus_dir, 3)
    r = RollingBusReader(bus_dir).open()
    assert len(read_all(r)) == 3
    shutil.rmtree(bus_dir)
    write_n(bus_dir, 1)
    with pytest.raises(BusReplacedError):
        r.wait(5.0)
    r.close()


def test_a_bus_removed_between_the_identity_check_and_the_listing_is_replaced(bus_dir,
                                                                             monkeypatch):
    # CI caught a Python reader here (tests/reliability/test_rolling_crash.py, a Java process
    # recreating the bus): bus.meta matched, then the directory went before the listing of its
    # segments, which raised FileNotFoundError out of wait(). The removal is made to fall
    # exactly there: when the reader looks for its segment.
    from mappedbus_py.rolling import reader as reader_module
    write_n(bus_dir, 3)
    r = RollingBusReader(bus_dir).open()
    assert len(read_all(r)) == 3
    real = reader_module.segment_path

    def removed_first(path, index):
        if os.path.isdir(bus_dir):
            shutil.rmtree(bus_dir)
        return real(path, index)

    monkeypatch.setattr(reader_module, "segment_path", removed_first)
    with pytest.raises(BusReplacedError, match="its directory is gone"):
        r.wait(5.0)
    r.close()


def test_a_group_writable_directory_is_refused(bus_dir):
    write_n(bus_dir, 1)
    os.chmod(bus_dir, 0o770)
    from mappedbus_py import UnsafeBusFileError
    with pytest.raises(UnsafeBusFileError, match="writable by group"):
        RollingBusReader(bus_dir).open()
    RollingBusReader(bus_dir, allow_foreign=True).open().close()


def test_a_segment_removed_while_a_creator_made_it_again_is_not_linked_below_newer_ones(bus_dir):
    # A slow creator of segment 1 (its file takes a while to make) while the others filled 1,
    # made 2 and retention removed 1: linking it now would put an empty segment below 2, where
    # the creator's records would come after records readers have read past.
    write_n(bus_dir, 2 * PER + 10)
    os.unlink(rolling.segment_path(bus_dir, 1))
    assert not rolling.create_segment(bus_dir, 1, SEG)
    assert rolling.list_segments(bus_dir) == [0, 2]
    assert not [n for n in os.listdir(bus_dir) if n.startswith(".tmp-")]
    assert rolling.create_segment(bus_dir, 3, SEG)      # the next one is made as ever


def test_stale_temporary_files_are_removed_by_the_next_segment_creator(bus_dir):
    write_n(bus_dir, 1)
    stale = os.path.join(bus_dir, ".tmp-" + segment_name(7) + "-1-abcd")
    fresh = os.path.join(bus_dir, ".tmp-" + segment_name(8) + "-1-abcd")
    for p in (stale, fresh):
        open(p, "w").close()
    os.utime(stale, (time.time() - 120,) * 2)
    write_n(bus_dir, PER)
    assert not os.path.exists(stale) and os.path.exists(fresh)


def test_cli_stat_and_dump_show_segments_and_the_lost_range(bus_dir, capsys):
    write_n(bus_dir, 5 * PER + 7, retain_segments=3)
    oldest = rolling.list_segments(bus_dir)[0]
    assert cli.main(["stat", bus_dir]) == 0
    text = capsys.readouterr().out
    assert f"positions 8 to {oldest * SEG + 8} ({oldest * PER} record slots)" in text
    assert "segment_size 4096   record_size 12" in text and "segments 3" in text
    assert cli.main(["stat", bus_dir, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [s["index"] for s in d["segments"]] == rolling.list_segments(bus_dir)
    assert d["segments"][0]["first_position"] == oldest * SEG + 8
    assert sum(s["records"]["committed"] for s in d["segments"]) == \
        5 * PER + 7 - oldest * PER
    assert cli.main(["dump", bus_dir, "-l", "PriceUpdate", "--json", "--max", "2"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert rows[0]["position"] == oldest * SEG + 8 and rows[0]["payload"]["source"] == oldest * PER
    assert cli.main(["stat", bus_dir, "-r", "16"]) == 2


# -- the Java original on single segments ----------------------------------------------------

JAVA_READER = """
import io.mappedbus.MappedBusReader;
public class SegReader {
    public static void main(String[] a) throws Exception {
        MappedBusReader r = new MappedBusReader(a[0], Long.parseLong(a[1]), Integer.parseInt(a[2]));
        r.open();
        byte[] buf = new byte[Integer.parseInt(a[2])];
        int n = 0;
        try {
            while (r.next()) {
                int len = r.readBuffer(buf, 0);
                java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(buf).order(java.nio.ByteOrder.LITTLE_ENDIAN);
                System.out.println(b.getInt(0));
                n++;
            }
        } catch (java.io.EOFException e) { System.out.println("EOF"); }
        System.out.println("N " + n);
    }
}
"""

JAVA_WRITER = """
import io.mappedbus.MappedBusWriter;
public class SegWriter {
    public static void main(String[] a) throws Exception {
        MappedBusWriter w = new MappedBusWriter(a[0], Long.parseLong(a[1]), Integer.parseInt(a[2]));
        w.open();
        byte[] buf = new byte[8];
        java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(buf).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < Integer.parseInt(a[3]); i++) { b.putInt(0, 7); b.putInt(4, i); w.write(buf, 0, 8); }
        w.close();
    }
}
"""


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    if not ORIGINAL.exists() or not shutil.which("javac"):
        pytest.skip(f"the Java original ({ORIGINAL}) or a JDK is absent")
    d = tmp_path_factory.mktemp("orig")
    for name, src in (("SegReader", JAVA_READER), ("SegWriter", JAVA_WRITER)):
        (d / f"{name}.java").write_text(src)
    subprocess.run(["javac", "--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED", "-cp",
                    str(ORIGINAL), "-d", str(d), str(d / "SegReader.java"),
                    str(d / "SegWriter.java")], check=True)
    return lambda *args: subprocess.run(
        ["java", "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED", "-cp",
         f"{ORIGINAL}:{d}", *map(str, args)], check=True, capture_output=True, text=True,
        timeout=120).stdout


@pytest.mark.original
def test_the_java_original_reads_a_segment_written_by_the_project(bus_dir, original):
    rows = numpy.zeros(PER + 3, dtype="<i4")
    rows[:] = numpy.arange(len(rows))
    with RollingBusWriter(bus_dir, SEG, RS) as w:
        for i in range(len(rows)):
            w.write(struct.pack("<i", i))
    out = original("SegReader", os.path.join(bus_dir, segment_name(1)), SEG, RS).split()
    assert out == [str(i) for i in range(PER, PER + 3)] + ["N", "3"]
    out = original("SegReader", os.path.join(bus_dir, segment_name(0)), SEG, RS).split()
    assert out[:PER] == [str(i) for i in range(PER)] and out[PER:] == ["N", str(PER)]


@pytest.mark.original
def test_a_segment_written_by_the_java_original_is_read_by_the_rolling_reader(bus_dir, original):
    os.mkdir(bus_dir, 0o700)
    seg = os.path.join(bus_dir, segment_name(0))
    original("SegWriter", seg, SEG, RS, 50)
    write_meta(os.path.join(bus_dir, META_FILE),
               BusMeta.create("rolling", RS, segment_size=SEG), exclusive=True)
    os.chmod(seg, 0o600)
    with RollingBusReader(bus_dir) as r:
        got = [struct.unpack_from("<ii", rec.data) for rec in r.records(0.1)]
    assert got == [(7, i) for i in range(50)]
    # and the project's writer continues that bus in the segment the original wrote
    with RollingBusWriter(bus_dir, SEG, RS) as w:
        w.write(struct.pack("<ii", 8, 0))
        assert w.segment == 0
