"""Real-time Mode: the mappedbus source hands Spark each record as it commits, inside a long-running
batch, and BusRealTimeSink writes each row to the output bus as it comes (interop/src/spark/README.md)."""
import json
import struct
import threading
import time

import pytest

from mappedbus_py import MappedBusReader, MappedBusWriter
from mappedbus_py.spark import realtime_aggregate, realtime_passthrough

from .helpers import hung_slot

pytestmark = [pytest.mark.spark, pytest.mark.slow]

FILE_SIZE = 1 << 20
RECORD = 16
LAYOUT = "seq:int64,key:int64"
SLOT = 8 + RECORD


@pytest.fixture
def out_path(bus_path):
    p = bus_path + "-out"
    yield p
    import os
    for f in (p, p + ".meta"):
        if os.path.exists(f):
            os.unlink(f)


def write(path, rows, pause=0.0):
    with MappedBusWriter(path, FILE_SIZE, RECORD) as w:
        for seq, key in rows:
            assert w.write(struct.pack("<qq", seq, key))
            if pause:
                time.sleep(pause)


def read_until(path, n, record=RECORD, fmt="<qq", timeout=90.0, quiet=2.0):
    """Reads records from the output bus until ``n`` came (then ``quiet`` seconds more, to catch
    duplicates) or ``timeout`` passes."""
    got = []
    deadline = time.monotonic() + timeout
    with MappedBusReader(path, FILE_SIZE, record) as r:
        while time.monotonic() < deadline:
            rec = r.read(0.2)
            if rec is not None:
                got.append(struct.unpack_from(fmt, bytes(rec.payload)))
                if len(got) == n:
                    deadline = min(deadline, time.monotonic() + quiet)
    return got


def end_position(progress):
    end = progress["sources"][0]["endOffset"]
    return (json.loads(end) if isinstance(end, str) else end)["position"]


def wait_started(q, seconds=60):
    """Waits for the query's first batch to run its tasks (its status says it is processing)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if q.exception() is not None:
            raise AssertionError(f"query failed: {q.exception()}")
        if q.status["isTriggerActive"]:
            return
        time.sleep(0.1)
    raise AssertionError(f"query did not start: {q.status}")


def test_realtime_passthrough_delivers_every_record_once_while_the_batch_runs(spark, bus_path, out_path, tmp_path):
    write(bus_path, [(-1, 0)])  # the bus exists before the query (the writer sizes it)
    q = realtime_passthrough(spark, bus_path, out_path, LAYOUT, batch="10 minutes",
                             checkpoint=tmp_path / "ck", fileSize=FILE_SIZE)
    try:
        wait_started(q)
        n = 3000
        # Three waves with pauses: the reader must wait on the bus between them, not end the batch.
        t = threading.Thread(target=lambda: [write(bus_path, [(s, s % 7) for s in range(k, k + n // 3)], 0.0002)
                                             or time.sleep(0.5) for k in range(0, n, n // 3)])
        t.start()
        got = read_until(out_path, n + 1)
        t.join()
        assert q.exception() is None
        # Every record once, in bus order, and no batch has ended (no progress report yet): the records
        # came out of the running long batch, not at a batch end.
        assert [s for s, _ in got] == list(range(-1, n))
        assert all(k == s % 7 for s, k in got[1:])
        assert q.recentProgress == []
        assert q.isActive
    finally:
        q.stop()


def test_realtime_batch_end_offset_is_the_readers_position(spark, bus_path, out_path, tmp_path):
    write(bus_path, [(0, 0)])
    before = spark.conf.get("spark.sql.streaming.realTimeMode.minBatchDuration")
    spark.conf.set("spark.sql.streaming.realTimeMode.minBatchDuration", "1000")
    try:
        q = realtime_passthrough(spark, bus_path, out_path, LAYOUT, batch="2 seconds",
                                 checkpoint=tmp_path / "ck", fileSize=FILE_SIZE)
    finally:
        spark.conf.set("spark.sql.streaming.realTimeMode.minBatchDuration", before)
    try:
        wait_started(q)
        write(bus_path, [(s, 0) for s in range(1, 10)])
        assert len(read_until(out_path, 10, quiet=0)) == 10
        deadline = time.monotonic() + 60
        # The first batch that ends after all ten records were read ends past the tenth slot.
        while time.monotonic() < deadline:
            ends = [end_position(p) for p in q.recentProgress]
            if ends and ends[-1] == 8 + 10 * SLOT:
                break
            time.sleep(0.2)
        assert ends and ends[-1] == 8 + 10 * SLOT, q.recentProgress
        assert sum(p["numInputRows"] for p in q.recentProgress) == 10
    finally:
        q.stop()
    # Restarted from its checkpoint, the query goes on after the records it committed.
    q = realtime_passthrough(spark, bus_path, out_path, LAYOUT, batch="10 minutes",
                             checkpoint=tmp_path / "ck")
    try:
        wait_started(q)
        write(bus_path, [(s, 0) for s in range(10, 15)])
        got = read_until(out_path, 15)
        assert sorted(s for s, _ in got) == list(range(15))
    finally:
        q.stop()


def test_realtime_reader_passes_a_hung_slot_after_one_timeout_across_short_batches(
        spark, bus_path, out_path, tmp_path):
    write(bus_path, [(0, 0)])
    hung_slot(bus_path, FILE_SIZE, RECORD)
    write(bus_path, [(1, 0), (2, 0)])
    # Batches (1 s) shorter than the timeout (3 s): a clock restarted with every batch would never
    # reach the timeout; the stream's readers keep theirs (the task's reader is handed from batch to
    # batch, the driver's lives as long as the query), so the records behind the hole come.
    before = spark.conf.get("spark.sql.streaming.realTimeMode.minBatchDuration")
    spark.conf.set("spark.sql.streaming.realTimeMode.minBatchDuration", "500")
    try:
        q = realtime_passthrough(spark, bus_path, out_path, LAYOUT, batch="1 second",
                                 checkpoint=tmp_path / "ck", fileSize=FILE_SIZE,
                                 src_options={"timeoutMs": 3000})
    finally:
        spark.conf.set("spark.sql.streaming.realTimeMode.minBatchDuration", before)
    try:
        got = read_until(out_path, 3, timeout=60, quiet=0)
        assert [s for s, _ in got] == [0, 1, 2]
    finally:
        q.stop()


def test_realtime_aggregate_emits_each_groups_update_as_records_come(spark, bus_path, out_path, tmp_path):
    write(bus_path, [(0, 0)])
    q = realtime_aggregate(spark, bus_path, out_path, ["key"], ["count(*) AS n", "sum(seq) AS total"],
                           LAYOUT, "key:int64,n:int64,total:int64", batch="10 minutes",
                           checkpoint=tmp_path / "ck", fileSize=FILE_SIZE)
    try:
        wait_started(q)
        write(bus_path, [(s, s % 3) for s in range(1, 30)], 0.002)
        got = read_until(out_path, 30, record=24, fmt="<qqq")
        assert q.exception() is None
        # One update per input record (streamline aggregation), the last one of each key is its total.
        assert len(got) == 30
        final = {k: (n, total) for k, n, total in got}
        assert final == {k: (sum(1 for s in range(30) if s % 3 == k), sum(s for s in range(30) if s % 3 == k))
                         for k in range(3)}
        assert q.recentProgress == []
    finally:
        q.stop()


def test_sample_real_time_reports_the_latency_of_every_record():
    import os
    import subprocess
    import sys
    from .helpers import ROOT
    res = subprocess.run([sys.executable, str(ROOT / "samples" / "spark_pipeline.py"), "--real-time",
                          "--messages", "400", "--writers", "2", "--rate", "400"],
                         capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(res.stdout.splitlines()[-1])
    # One result per input record (the aggregate is updated record by record), VWAPs right.
    assert report["mode"] == "real-time" and report["vwap_ok"]
    assert report["results"] == 800
    assert 0 < report["latency_ms"]["p50"] <= report["latency_ms"]["p99.9"] <= report["latency_ms"]["max"]


def test_realtime_passthrough_follows_a_rolling_bus_across_segments(spark, out_path, tmp_path):
    import shutil
    import uuid
    from mappedbus_py import RollingBusWriter
    src = f"/dev/shm/mbtest-rt-rolling-{uuid.uuid4().hex[:8]}"
    seg = 8 + 10 * SLOT  # ten records a segment: 200 records roll through 20 segments
    try:
        with RollingBusWriter(src, seg, RECORD) as w:
            w.write(struct.pack("<qq", 0, 0))
        q = realtime_passthrough(spark, src, out_path, LAYOUT, batch="10 minutes",
                                 checkpoint=tmp_path / "ck", fileSize=FILE_SIZE)
        try:
            wait_started(q)
            with RollingBusWriter(src, seg, RECORD) as w:
                for s in range(1, 200):
                    w.write(struct.pack("<qq", s, 0))
                    time.sleep(0.001)
            got = read_until(out_path, 200)
            assert [s for s, _ in got] == list(range(200))
            assert q.recentProgress == []
        finally:
            q.stop()
    finally:
        shutil.rmtree(src, ignore_errors=True)
