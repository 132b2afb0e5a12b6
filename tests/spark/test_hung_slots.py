"""A crashed writer's uncommitted slots cost the Spark source one timeout (docs/files-and-rolling.md):
Trigger.AvailableNow gets past them in one run, and a batch read with uncommitted=wait skips a run of
them within one timeout, not one timeout per slot."""
import mmap
import struct
import time

import pytest

from mappedbus_py import MappedBusWriter, PriceUpdate

from .helpers import bus_reader, status_at

pytestmark = pytest.mark.spark

FILE_SIZE = 200_000
SLOT = 8 + 12


def write_prices(path, prices):
    with MappedBusWriter(path, FILE_SIZE, 12) as w:
        for i in prices:
            assert w.write(PriceUpdate(1, i, 2 * i))


def crashed_batch(path, n):
    """Allocates n slots and never commits them, as a writer killed mid-batch leaves them."""
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        limit = struct.unpack_from("<q", m, 0)[0]
        struct.pack_into("<q", m, 0, limit + n * SLOT)
    return [limit + i * SLOT for i in range(n)]


def test_available_now_passes_a_hung_run_within_one_timeout(spark, bus_path, tmp_path):
    write_prices(bus_path, range(5))
    holes = crashed_batch(bus_path, 20)
    write_prices(bus_path, range(5, 10))
    started = time.monotonic()
    q = (spark.readStream.format("mappedbus").option("path", bus_path).option("layout", "PriceUpdate")
         .option("timeoutMs", 1000).load()
         .writeStream.format("memory").queryName("hung_available_now")
         .trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    elapsed = time.monotonic() - started
    rows = spark.sql("select * from hung_available_now").collect()
    # Before the fix the run ended at the first hole with 5 rows, whatever the number of runs.
    assert sorted(r.price for r in rows) == list(range(10))
    assert all(status_at(bus_path, h) == 2 for h in holes)  # rolled back by the source's reader
    assert elapsed < 15, f"20 hung slots took {elapsed:.1f} s: one timeout each?"


def test_batch_wait_skips_a_crashed_batch_within_one_timeout(spark, bus_path):
    write_prices(bus_path, range(3))
    crashed_batch(bus_path, 20)
    write_prices(bus_path, range(3, 6))
    started = time.monotonic()
    rows = bus_reader(spark, bus_path, layout="PriceUpdate", uncommitted="wait", timeoutMs=1000).collect()
    elapsed = time.monotonic() - started
    assert sorted(r.price for r in rows) == list(range(6))
    assert elapsed < 12, f"20 uncommitted slots took {elapsed:.1f} s: one timeout each (20 s)?"
