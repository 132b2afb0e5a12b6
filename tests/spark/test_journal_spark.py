"""The Spark connector on a journaled rolling bus (issue 37, docs/spark.md "The journal"): batch
and streaming reads cross from the archive into the hot directory transparently, and option
startingTime starts them by the bus's time index."""
import datetime
import os
import pathlib
import shutil
import time
import uuid

import pytest

from mappedbus_py import PriceUpdate, RollingBusReader, RollingBusWriter

from .helpers import bus_reader, run_available_now

pytestmark = pytest.mark.spark

RS = 12
SLOT = 8 + RS
PER = 10                       # records per segment
SEG = 8 + PER * SLOT


@pytest.fixture
def journal(tmp_path):
    """(hot directory in /dev/shm or /tmp, archive directory on disk)."""
    base = pathlib.Path("/dev/shm") if os.path.isdir("/dev/shm") else pathlib.Path("/tmp")
    hot = base / f"mbsparkjournal-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    yield str(hot), str(tmp_path / "archive")
    shutil.rmtree(hot, ignore_errors=True)


def write(hot, archive, prices, compress="zstd", pause_at=()):
    """PriceUpdates ``prices`` through a writer with an archive tier; the archiver drained at the end.
    Before each price in ``pause_at`` the writer sleeps 3 ms and notes the time: {price: t_ns}."""
    marks = {}
    with RollingBusWriter(hot, SEG, RS, archive=archive, archive_after=1, compress=compress,
                          time_index=True) as w:
        for i in prices:
            if i in pause_at:
                time.sleep(0.003)
                marks[i] = time.time_ns()
            assert w.write(PriceUpdate(1, i, 2 * i))
        assert w.archiver.wait_idle(30)
    return marks


@pytest.mark.parametrize("compress", ["zstd", "lz4", None])
def test_batch_read_crosses_from_the_archive_into_the_hot_directory(spark, journal, compress):
    hot, archive = journal
    write(hot, archive, range(95), compress=compress)
    assert not os.path.exists(os.path.join(hot, "00000000000000000000.bus")), "segment 0 moved"
    assert len([n for n in os.listdir(archive) if ".bus" in n]) >= 5
    rows = bus_reader(spark, hot, layout="PriceUpdate").orderBy("position").collect()
    assert [r.price for r in rows] == list(range(95))
    assert bus_reader(spark, hot, layout="PriceUpdate").count() == 95


def test_stream_reads_every_record_once_across_the_tier_boundary(spark, journal, tmp_path):
    hot, archive = journal
    write(hot, archive, range(40))
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    run_available_now(spark, hot, out, ckpt, layout="PriceUpdate", maxRecordsPerTrigger=7)
    write(hot, archive, range(40, 83))          # more segments move between the two runs
    run_available_now(spark, hot, out, ckpt, layout="PriceUpdate", maxRecordsPerTrigger=7)
    got = sorted(r.price for r in spark.read.parquet(out).collect())
    assert got == list(range(83))


def test_starting_time_starts_at_the_first_record_since_then(spark, journal, tmp_path):
    hot, archive = journal
    marks = write(hot, archive, range(80), pause_at=(0, 23, 57))
    for price, t_ns in marks.items():
        # Python's seek_time is the reference; the connector starts at the same record.
        with RollingBusReader(hot) as r:
            start = r.seek_time(t_ns / 1e9)
        iso = datetime.datetime.fromtimestamp(t_ns // 1000 / 1e6, datetime.timezone.utc).isoformat()
        for value in (iso, f"{t_ns // 1000 / 1e6:.6f}"):
            rows = bus_reader(spark, hot, layout="PriceUpdate", startingTime=value).orderBy("position").collect()
            assert rows[0].position == start, value
            assert [r.price for r in rows] == list(range(rows[0].price, 80))
            assert rows[0].price <= price     # every record written after the time is there
        out, ckpt = str(tmp_path / f"out{price}"), str(tmp_path / f"ckpt{price}")
        run_available_now(spark, hot, out, ckpt, layout="PriceUpdate", startingTime=iso)
        got = sorted(r.price for r in spark.read.parquet(out).collect())
        assert got[0] <= price and got == list(range(got[0], 80))


def test_starting_time_errors_are_clear(spark, journal, tmp_path):
    hot, archive = journal
    write(hot, archive, range(5))
    with pytest.raises(Exception, match="startingTime.*ISO-8601"):
        bus_reader(spark, hot, layout="PriceUpdate", startingTime="yesterday").collect()
    with pytest.raises(Exception, match="startingTime.*startingPosition|both say where"):
        bus_reader(spark, hot, layout="PriceUpdate", startingTime="0",
                   startingPosition="8").collect()
