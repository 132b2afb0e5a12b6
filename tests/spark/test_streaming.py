"""Streaming reads: records written while the query runs, uncommitted slots rolled back after
timeoutMs, restarts from a checkpoint, admission control, starting positions."""
import glob
import json
import os
import time

import pytest

from mappedbus_py import MappedBusReader, MappedBusWriter, PriceUpdate

from .helpers import hung_slot, status_at

pytestmark = pytest.mark.spark

FILE_SIZE = 200_000


def stream(spark, path, **options):
    r = (spark.readStream.format("mappedbus").option("path", path).option("layout", "PriceUpdate")
         .option("fileSize", FILE_SIZE))
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def write_prices(path, prices, source=1):
    with MappedBusWriter(path, FILE_SIZE, 12) as w:
        for i in prices:
            assert w.write(PriceUpdate(source, i, 2 * i))


def wait_rows(spark, table, n, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        rows = spark.sql(f"select * from {table}").collect()
        if len(rows) >= n:
            return rows
        time.sleep(0.1)
    raise AssertionError(f"{table} has {len(rows)} rows after {timeout}s, expected {n}")


def test_picks_up_records_written_while_running(spark, bus_path):
    write_prices(bus_path, range(10))
    q = (stream(spark, bus_path).writeStream.format("memory").queryName("live")
         .trigger(processingTime="50 milliseconds").start())
    try:
        wait_rows(spark, "live", 10)
        for k in range(1, 4):
            write_prices(bus_path, range(k * 10, k * 10 + 10))
            wait_rows(spark, "live", (k + 1) * 10)
        rows = wait_rows(spark, "live", 40)
    finally:
        q.stop()
    assert sorted(r.price for r in rows) == list(range(40))
    assert len({r.position for r in rows}) == 40
    assert sum(1 for p in q.recentProgress if p["numInputRows"] > 0) >= 4


def test_rolls_back_uncommitted_after_timeout(spark, bus_path):
    write_prices(bus_path, range(5))
    hole = hung_slot(bus_path, FILE_SIZE, 12)
    write_prices(bus_path, range(5, 10))
    started = time.time()
    q = (stream(spark, bus_path, timeoutMs=1000).writeStream.format("memory").queryName("holes")
         .trigger(processingTime="50 milliseconds").start())
    try:
        first = wait_rows(spark, "holes", 5)
        # Until the timeout, the stream stops at the uncommitted slot: only the first five.
        if time.time() - started < 0.9:
            assert len(first) == 5
        rows = wait_rows(spark, "holes", 10)
    finally:
        q.stop()
    assert sorted(r.price for r in rows) == list(range(10))
    assert hole not in {r.position for r in rows}
    assert status_at(bus_path, hole) == 2  # rolled back by the stream's reader (CAS 0 -> 2)


def run_available_now(spark, path, out, checkpoint, **options):
    q = (stream(spark, path, **options).writeStream.format("parquet").option("path", out)
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    return [p["numInputRows"] for p in q.recentProgress if p["numInputRows"] > 0]


def test_restart_from_checkpoint_no_loss_no_duplicates(spark, bus_path, tmp_path):
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    write_prices(bus_path, range(100))
    assert run_available_now(spark, bus_path, out, ckpt, maxRecordsPerTrigger=40) == [40, 40, 20]
    offsets = json.loads(open(os.path.join(ckpt, "offsets", "2")).read().splitlines()[-1])
    with MappedBusReader(bus_path, FILE_SIZE, 12) as r:
        assert offsets == {"position": 8 + 100 * 20, "busId": r.bus_id}
    write_prices(bus_path, range(100, 150))
    # Forget that the last batch was committed: the restart re-plans it from the offset log.
    os.unlink(os.path.join(ckpt, "commits", "2"))
    for crc in glob.glob(os.path.join(ckpt, "commits", ".2.crc")):
        os.unlink(crc)
    run_available_now(spark, bus_path, out, ckpt, maxRecordsPerTrigger=40)
    rows = spark.read.parquet(out).collect()
    assert sorted(r.price for r in rows) == list(range(150))
    assert len({r.position for r in rows}) == 150


def test_starting_position_latest(spark, bus_path):
    write_prices(bus_path, range(20))
    q = (stream(spark, bus_path, startingPosition="latest").writeStream.format("memory")
         .queryName("latest").trigger(processingTime="50 milliseconds").start())
    try:
        deadline = time.time() + 30
        while not q.recentProgress and time.time() < deadline:
            time.sleep(0.05)
        write_prices(bus_path, range(100, 110))
        rows = wait_rows(spark, "latest", 10)
        time.sleep(0.3)
        rows = spark.sql("select * from latest").collect()
    finally:
        q.stop()
    assert sorted(r.price for r in rows) == list(range(100, 110))
