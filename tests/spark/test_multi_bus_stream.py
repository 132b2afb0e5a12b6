"""Several buses in one stream (a list, or a pattern matched again at every trigger), as Kafka's
subscribe/subscribePattern: each bus's offset by path in the checkpoint, the ``bus`` column,
buses that appear later, a bus recreated among several, maxRecordsPerTrigger shared out."""
import functools
import os
import shutil
import struct
import time

import pytest

from mappedbus_py import MappedBusReader, MappedBusWriter, RollingBusWriter

from . import helpers
from .helpers import last_offset, source_metrics

pytestmark = pytest.mark.spark

LAYOUT = "id:int64,value:int32"
RS = 12
SLOT = 8 + RS
SIZE = 100_000
SEG = 8 + 10 * SLOT            # ten records a segment: a few records roll



def write_ids(path, ids):
    with MappedBusWriter(path, SIZE, RS) as w:
        for i in ids:
            assert w.write(struct.pack("<qi", i, 0))
        return w.bus_id


def write_rolling(path, ids):
    with RollingBusWriter(path, SEG, RS) as w:
        for i in ids:
            assert w.write(struct.pack("<qi", i, 0))
        return w.bus_id


def recreate(path, ids):
    for p in (path, path + ".meta"):
        if os.path.exists(p):
            os.unlink(p)
    return write_ids(path, ids)


stream = functools.partial(helpers.stream, layout=LAYOUT)
run_available_now = functools.partial(helpers.run_available_now, layout=LAYOUT)
metrics = source_metrics


def wait_rows(spark, table, n, q, timeout=90):
    deadline = time.time() + timeout
    rows = []
    while time.time() < deadline:
        if q.exception() is not None:
            raise AssertionError(f"query failed: {q.exception()}")
        rows = spark.sql(f"select * from {table}").collect()
        if len(rows) >= n:
            return rows
        time.sleep(0.1)
    raise AssertionError(f"{table} has {len(rows)} rows after {timeout}s, expected {n}")


@pytest.fixture
def three(bus_root):
    """Two single-file buses and a rolling one, with ids 0-39, 1000-1029 and 2000-2024."""
    a, b, r = (os.path.join(bus_root, n) for n in ("a", "b", "roll"))
    write_ids(a, range(0, 40))
    write_ids(b, range(1000, 1030))
    write_rolling(r, range(2000, 2025))
    return a, b, r


def by_bus(rows):
    out = {}
    for row in rows:
        out.setdefault(row.bus, []).append(row.id)
    return {k: sorted(v) for k, v in out.items()}


def test_three_buses_two_files_and_a_rolling_one_stream_every_record_once_with_its_bus(spark, three):
    a, b, r = three
    q = (stream(spark, f"{a},{b},{r}").writeStream.format("memory").queryName("multistream")
         .trigger(processingTime="100 milliseconds").start())
    try:
        wait_rows(spark, "multistream", 95, q)
        # Records written while it runs, to each bus (the rolling one into new segments).
        write_ids(a, range(40, 50))
        write_ids(b, range(1030, 1035))
        write_rolling(r, range(2025, 2040))
        rows = wait_rows(spark, "multistream", 125, q)
        time.sleep(0.5)   # a duplicate would come with a later batch
        rows = spark.sql("select * from multistream").collect()
        progress = metrics(q)
    finally:
        q.stop()
    assert by_bus(rows) == {a: list(range(50)), b: list(range(1000, 1035)), r: list(range(2000, 2040))}
    assert len({(row.bus, row.position) for row in rows}) == 125
    # Metrics sum over the buses: all read, nothing behind.
    assert progress[-1]["recordsBehindLimit"] == 0 and progress[-1]["buses"] == 3


def test_restart_from_checkpoint_reads_only_the_new_records_of_every_bus(spark, three, tmp_path):
    a, b, r = three
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ck")
    q = run_available_now(spark, f"{a},{b},{r}", out, ckpt, maxRecordsPerTrigger=30)
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"] > 0]
    # 95 records, 30 a trigger shared out (10 each, what one leaves to the others).
    assert sizes == [30, 30, 30, 5]
    with MappedBusReader(a, SIZE, RS) as x:
        a_id = x.bus_id
    offsets = last_offset(ckpt)["buses"]
    assert offsets[a] == {"position": 8 + 40 * SLOT, "busId": a_id}
    assert offsets[b]["position"] == 8 + 30 * SLOT and offsets[r]["position"] == 2 * SEG + 8 + 5 * SLOT
    write_ids(a, range(40, 45))
    write_ids(b, range(1030, 1031))
    write_rolling(r, range(2025, 2032))
    q = run_available_now(spark, f"{a},{b},{r}", out, ckpt, maxRecordsPerTrigger=30)
    assert sum(p["numInputRows"] for p in q.recentProgress) == 13
    rows = spark.read.parquet(out).collect()
    assert by_bus(rows) == {a: list(range(45)), b: list(range(1000, 1031)), r: list(range(2000, 2032))}


def test_a_pattern_picks_up_a_bus_created_later_from_its_earliest_record(spark, bus_root):
    a = os.path.join(bus_root, "prices-a")
    write_ids(a, range(10))
    q = (stream(spark, os.path.join(bus_root, "prices-*"), startingPosition="latest")
         .writeStream.format("memory").queryName("pattern").trigger(processingTime="100 milliseconds").start())
    try:
        deadline = time.time() + 60
        while not q.recentProgress and time.time() < deadline:
            time.sleep(0.05)
        write_ids(a, range(10, 13))
        c = os.path.join(bus_root, "prices-c")
        write_ids(c, range(500, 520))          # before the query sees it: read from its first record
        rows = wait_rows(spark, "pattern", 23, q)
        time.sleep(0.5)
        rows = spark.sql("select * from pattern").collect()
        last = metrics(q)[-1]
    finally:
        q.stop()
    assert by_bus(rows) == {a: [10, 11, 12], c: list(range(500, 520))}
    assert last["buses"] == 2


def test_a_recreated_bus_among_several_fails_naming_it_or_goes_on_with_fail_on_data_loss_false(
        spark, three, tmp_path):
    a, b, r = three
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ck")
    path = f"{a},{b},{r}"
    run_available_now(spark, path, out, ckpt)
    old = last_offset(ckpt)["buses"][b]["busId"]
    write_ids(a, range(40, 42))
    new = recreate(b, range(5000, 5003))
    with pytest.raises(Exception) as failed:
        run_available_now(spark, path, out, ckpt)
    msg = str(failed.value)
    assert f"bus {b} was replaced" in msg and f"position {8 + 30 * SLOT} of bus {old}" in msg
    assert f"now holds bus {new}" in msg and "failOnDataLoss=false" in msg
    q = run_available_now(spark, path, out, ckpt, failOnDataLoss="false")
    rows = spark.read.parquet(out).collect()
    assert by_bus(rows) == {a: list(range(42)), b: list(range(1000, 1030)) + [5000, 5001, 5002],
                            r: list(range(2000, 2025))}
    assert max(m["replacedBuses"] for m in metrics(q)) == 1


def test_a_removed_bus_among_several_fails_naming_it_or_is_dropped_with_fail_on_data_loss_false(
        spark, three, tmp_path):
    a, b, r = three
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ck")
    pattern = os.path.join(os.path.dirname(a), "*")
    run_available_now(spark, pattern, out, ckpt)
    shutil.rmtree(r)
    write_ids(a, range(40, 41))
    with pytest.raises(Exception) as failed:
        run_available_now(spark, pattern, out, ckpt)
    msg = str(failed.value)
    assert f"bus {r} of stream path" in msg and f"position {2 * SEG + 8 + 5 * SLOT}" in msg
    assert "failOnDataLoss=false" in msg
    q = run_available_now(spark, pattern, out, ckpt, failOnDataLoss="false")
    assert max(m["removedBuses"] for m in metrics(q)) == 1
    assert sorted(last_offset(ckpt)["buses"]) == [a, b]
    assert by_bus(spark.read.parquet(out).collect())[a] == list(range(41))


def test_real_time_mode_refuses_several_buses_naming_the_path_option(spark, three, tmp_path):
    from mappedbus_py.spark import realtime_passthrough
    a, b, _ = three
    q = realtime_passthrough(spark, f"{a},{b}", str(tmp_path / "out"), LAYOUT, columns=["id", "value"],
                             batch="10 seconds", checkpoint=tmp_path / "ck", fileSize=SIZE)
    try:
        with pytest.raises(Exception, match="Real-time Mode reads one bus, but option 'path'"):
            q.awaitTermination(120)
    finally:
        q.stop()
