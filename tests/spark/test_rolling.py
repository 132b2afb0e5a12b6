"""The Spark source and sink on rolling buses (docs/files-and-rolling.md, "Rolling bus"), and data
loss under a checkpoint: a retention gap, a bus deleted and recreated, failOnDataLoss and the
lostSlots metric; writes without a known file size refused."""
import functools
import json
import mmap
import os
import pathlib
import shutil
import struct
import time
import uuid

import pytest

from mappedbus_py import (BusGapError, MappedBusWriter, PriceUpdate,
                          RollingBusReader, RollingBusWriter)

from . import helpers
from .helpers import last_offset, read_all, source_metrics

pytestmark = pytest.mark.spark

RS = 12
SLOT = 8 + RS
PER = 10                       # records per segment
SEG = 8 + PER * SLOT           # 208 bytes: tiny segments, so a few records roll
FILE_SIZE = 100_000


@pytest.fixture
def bus_dir():
    base = pathlib.Path("/dev/shm") if os.path.isdir("/dev/shm") else pathlib.Path("/tmp")
    path = base / f"mbsparkroll-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    yield str(path)
    shutil.rmtree(path, ignore_errors=True)


def pos(i):
    """The global position of the i-th record of a bus that lost nothing."""
    return (i // PER) * SEG + 8 + (i % PER) * SLOT


def write_rolling(path, prices, **kw):
    with RollingBusWriter(path, SEG, RS, **kw) as w:
        for i in prices:
            assert w.write(PriceUpdate(1, i, 2 * i))
        return w.bus_id


def python_view(path):
    """(position, price) of every record, through the Python rolling reader."""
    out = []
    with RollingBusReader(path) as r:
        while (rec := r.read(0)) is not None:
            out.append((rec.position, int.from_bytes(rec.payload[4:8], "little", signed=True)))
    return out


stream = functools.partial(helpers.stream, layout="PriceUpdate")
run_available_now = functools.partial(helpers.run_available_now, layout="PriceUpdate")


def test_batch_read_spans_segments_with_global_positions_one_segment_per_partition(spark, bus_dir):
    write_rolling(bus_dir, range(35))
    assert sorted(os.listdir(bus_dir))[:4] == [f"{k:020d}.bus" for k in range(4)]
    # No recordSize: it comes from bus.meta, as the segment size does.
    df = (spark.read.format("mappedbus").option("path", bus_dir).option("layout", "PriceUpdate")
          .option("recordsPerPartition", 4).load())
    rows = sorted((r.position, r.price) for r in df.collect())
    assert rows == [(pos(i), i) for i in range(35)] == python_view(bus_dir)
    # Partitions never span segments, even where 4-record partitions would cross a segment end.
    spans = (df.selectExpr("spark_partition_id() as p", f"cast(position / {SEG} as int) as seg")
             .groupBy("p").agg({"seg": "collect_set"}).collect())
    assert len(spans) == 3 * 3 + 2 and all(len(s[1]) == 1 for s in spans)  # 4+4+2 per full segment
    assert df.count() == 35


def test_explicit_record_size_that_differs_from_bus_meta_is_an_error_naming_both(spark, bus_dir):
    write_rolling(bus_dir, range(3))
    with pytest.raises(Exception, match="option recordSize 16 differs from recordSize 12 of rolling bus"):
        spark.read.format("mappedbus").option("path", bus_dir).option("recordSize", 16).load().collect()


def test_available_now_stream_reads_every_segment_in_bounded_batches(spark, bus_dir, tmp_path):
    bus_id = write_rolling(bus_dir, range(35))
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ck")
    q = run_available_now(spark, bus_dir, out, ckpt, maxRecordsPerTrigger=8)
    assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [8, 8, 8, 8, 3]
    rows = sorted((r.position, r.price) for r in spark.read.parquet(out).collect())
    assert rows == [(pos(i), i) for i in range(35)]
    # The checkpoint names the bus: a global position and its id.
    assert last_offset(ckpt) == {"position": pos(35), "busId": bus_id}


def test_stream_follows_a_python_writer_as_it_rolls(spark, bus_dir):
    write_rolling(bus_dir, range(5))
    q = (stream(spark, bus_dir).writeStream.format("memory").queryName("rolling_live")
         .trigger(processingTime="50 milliseconds").start())
    try:
        with RollingBusWriter(bus_dir, SEG, RS) as w:
            for k in range(1, 5):
                for i in range(k * 12 - 7, k * 12 + 5):
                    assert w.write(PriceUpdate(1, i, 2 * i))
                n = k * 12 + 5
                deadline = time.time() + 60
                while spark.sql("select * from rolling_live").count() < n:
                    assert time.time() < deadline, f"stream did not reach {n} rows"
                    time.sleep(0.1)
        rows = sorted((r.position, r.price) for r in spark.sql("select * from rolling_live").collect())
        metrics = source_metrics(q)
    finally:
        q.stop()
    assert rows == [(pos(i), i) for i in range(53)]
    assert metrics and metrics[-1]["lostSlots"] == 0
    assert "recordsBehindLimit" in metrics[-1]


def test_retention_gap_under_a_stopped_query_fails_naming_the_range_or_is_counted(spark, bus_dir, tmp_path):
    write_rolling(bus_dir, range(15), retain_segments=1)
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ck")
    run_available_now(spark, bus_dir, out, ckpt)
    assert last_offset(ckpt)["position"] == pos(15)
    # While the query is stopped, the writer rolls on and retention removes the unread segment 1.
    write_rolling(bus_dir, range(15, 60))
    with pytest.raises(BusGapError) as gap:
        RollingBusReader(bus_dir, start=pos(15)).open()
    lost_from, lost_to, lost = gap.value.lost_from, gap.value.lost_to, gap.value.lost
    assert lost_from == pos(15) and lost > 0
    with pytest.raises(Exception) as failed:
        run_available_now(spark, bus_dir, out, ckpt)
    assert f"positions [{lost_from}, {lost_to}) ({lost} record slots) were removed by retention" \
        in str(failed.value)
    assert bus_dir in str(failed.value)
    q = run_available_now(spark, bus_dir, out, ckpt, failOnDataLoss="false")
    rows = sorted((r.position, r.price) for r in spark.read.parquet(out).collect())
    first_kept = (lost_to - 8) // SEG * PER
    assert rows == [(pos(i), i) for i in list(range(15)) + list(range(first_kept, 60))]
    assert 15 + lost == first_kept
    assert max(m["lostSlots"] for m in source_metrics(q)) == lost
    assert source_metrics(q)[-1]["recordsBehindLimit"] == 0


def recreate_single(path, prices):
    for p in (path, path + ".meta"):
        if os.path.exists(p):
            os.unlink(p)
    with MappedBusWriter(path, FILE_SIZE, RS) as w:
        for i in prices:
            assert w.write(PriceUpdate(2, i, 0))
        return w.bus_id


def test_single_file_bus_recreated_under_a_checkpoint_fails_naming_both_ids(spark, bus_path, tmp_path):
    # The reported bug: the restarted query went on at its old position in the new bus and silently
    # skipped the new bus's first 1000 records.
    old = recreate_single(bus_path, range(1000))
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ck")
    run_available_now(spark, bus_path, out, ckpt)
    assert last_offset(ckpt) == {"position": 8 + 1000 * SLOT, "busId": old}
    with MappedBusWriter(bus_path, FILE_SIZE, RS) as w:
        for i in range(1000, 2000):
            w.write(PriceUpdate(2, i, 0))
    new = recreate_single(bus_path, range(10_000, 12_000))
    assert new and new != old
    with pytest.raises(Exception) as failed:
        run_available_now(spark, bus_path, out, ckpt)
    msg = str(failed.value)
    assert f"position {8 + 1000 * SLOT} of bus {old}" in msg and f"now holds bus {new}" in msg
    assert bus_path in msg and "failOnDataLoss=false" in msg
    q = run_available_now(spark, bus_path, out, ckpt, failOnDataLoss="false")
    prices = sorted(r.price for r in spark.read.parquet(out).collect())
    assert prices == list(range(1000)) + list(range(10_000, 12_000))
    assert max(m["replacedBuses"] for m in source_metrics(q)) == 1
    assert last_offset(ckpt) == {"position": 8 + 2000 * SLOT, "busId": new}


def test_old_checkpoint_offsets_without_an_id_still_restart(spark, bus_path, tmp_path):
    recreate_single(bus_path, range(10))
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ck")
    run_available_now(spark, bus_path, out, ckpt)
    # Rewrite the offset log as the connector wrote it before ids: {"position": N}.
    f = os.path.join(ckpt, "offsets", "0")
    lines = open(f).read().splitlines()
    lines[-1] = json.dumps({"position": 8 + 10 * SLOT})
    open(f, "w").write("\n".join(lines) + "\n")
    for crc in pathlib.Path(ckpt, "offsets").glob(".*.crc"):
        crc.unlink()
    with MappedBusWriter(bus_path, FILE_SIZE, RS) as w:
        for i in range(10, 15):
            w.write(PriceUpdate(2, i, 0))
    run_available_now(spark, bus_path, out, ckpt)
    assert sorted(r.price for r in spark.read.parquet(out).collect()) == list(range(15))


def test_write_appends_to_a_rolling_bus_new_or_existing(spark, bus_dir):
    df = spark.createDataFrame([(1, i, 2 * i) for i in range(35)], "source int, price int, quantity int")
    (df.coalesce(1).write.format("mappedbus").mode("append").option("path", bus_dir)
     .option("segmentSize", SEG).option("layout", "PriceUpdate").save())
    assert sorted(p for _, p in python_view(bus_dir)) == list(range(35))
    assert len([n for n in os.listdir(bus_dir) if n.endswith(".bus")]) >= 4
    # An existing bus: sizes from its bus.meta.
    more = spark.createDataFrame([(1, i, 0) for i in range(35, 40)], "source int, price int, quantity int")
    more.write.format("mappedbus").mode("append").option("path", bus_dir).option("layout", "PriceUpdate").save()
    view = python_view(bus_dir)
    assert sorted(p for _, p in view) == list(range(40))
    assert [p for p, _ in view] == [pos(i) for i in range(40)]
    with pytest.raises(Exception, match=f"option segmentSize 416 differs from segmentSize {SEG}"):
        more.write.format("mappedbus").mode("append").option("path", bus_dir).option("segmentSize", 2 * SEG) \
            .option("layout", "PriceUpdate").save()


def test_write_without_file_size_to_a_file_without_metadata_is_refused(spark, bus_path):
    # A file made by something that writes no metadata (the Java original): its length is a whole
    # number of pages, not its logical size, so a writer guessing from it would use another end.
    with MappedBusWriter(bus_path, 5000, RS) as w:
        w.write(PriceUpdate(1, 1, 1))
    os.unlink(bus_path + ".meta")
    before = open(bus_path, "rb").read()
    df = spark.createDataFrame([(1, 2, 3)], "source int, price int, quantity int")
    with pytest.raises(Exception, match="has no metadata .* give option 'fileSize'"):
        df.write.format("mappedbus").mode("append").option("path", bus_path).option("layout", "PriceUpdate").save()
    assert open(bus_path, "rb").read() == before
    # With the metadata of a bus this project made, the size comes from there.
    other = bus_path + "-m"
    try:
        with MappedBusWriter(other, 5000, RS):
            pass
        df.write.format("mappedbus").mode("append").option("path", other).option("layout", "PriceUpdate").save()
        assert [m for _, m, _ in read_all(other, 5000, RS)] == [0]
    finally:
        for p in (other, other + ".meta"):
            if os.path.exists(p):
                os.unlink(p)


def test_available_now_passes_a_hung_run_on_a_rolling_bus_within_one_timeout(spark, bus_dir):
    write_rolling(bus_dir, range(3))
    # A crashed writer's batch: four slots allocated in segment 0 and never committed.
    seg0 = os.path.join(bus_dir, f"{0:020d}.bus")
    with open(seg0, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        limit = struct.unpack_from("<q", m, 0)[0]
        struct.pack_into("<q", m, 0, limit + 4 * SLOT)
    write_rolling(bus_dir, range(3, 8))   # three fill segment 0, two roll into segment 1
    started = time.monotonic()
    q = (stream(spark, bus_dir, timeoutMs=1000).writeStream.format("memory")
         .queryName("rolling_hung").trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    elapsed = time.monotonic() - started
    rows = sorted((r.position, r.price) for r in spark.sql("select * from rolling_hung").collect())
    assert rows == [(pos(i), i) for i in range(3)] + [(pos(i + 4), i) for i in range(3, 8)]
    assert elapsed < 15, f"4 hung slots took {elapsed:.1f} s: one timeout each?"


def test_single_file_bus_replaced_under_a_running_query_fails_naming_both_ids(spark, bus_path):
    old = recreate_single(bus_path, range(10))
    q = (stream(spark, bus_path).writeStream.format("memory").queryName("replaced_live")
         .trigger(processingTime="50 milliseconds").start())
    try:
        deadline = time.time() + 60
        while spark.sql("select * from replaced_live").count() < 10:
            assert time.time() < deadline
            time.sleep(0.1)
        new = recreate_single(bus_path, range(100, 120))
        with pytest.raises(Exception) as failed:
            q.awaitTermination(60)
            raise AssertionError("the query did not fail")
    finally:
        q.stop()
    assert f"of bus {old}" in str(failed.value) and f"now holds bus {new}" in str(failed.value)
