"""A streaming query as a named consumer of its bus (interop/src/spark/README.md, option ``consumer``;
docs/files-and-rolling.md, "Consumers: the registry file"): it shows in ``mappedbus_py.consumers(path)``
at the end of its last committed batch, held by the driver JVM while it runs, and a rolling bus created
with ``max_consumer_lag`` keeps the segments a stopped query still needs. Writers are other processes."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from mappedbus_py import MappedBusReader, consumers

from . import helpers
from .helpers import last_offset

pytestmark = pytest.mark.spark

RS = 12
SLOT = 8 + RS
PER = 10                       # records per segment of a rolling bus
SEG = 8 + PER * SLOT           # 208 bytes: tiny segments, so a few records roll
FILE_SIZE = 100_000

WRITER = r"""
import json, sys
from mappedbus_py import MappedBusWriter, PriceUpdate, RollingBusWriter
path, kind, lo, hi, seg, rs, size, kw = sys.argv[1:9]
kw = json.loads(kw)
w = (RollingBusWriter(path, int(seg), int(rs), **kw) if kind == "rolling"
     else MappedBusWriter(path, int(size), int(rs)))
with w:
    for i in range(int(lo), int(hi)):
        assert w.write(PriceUpdate(1, i, 2 * i))
"""


def write(path, kind, lo, hi, **kw):
    """Writes prices ``lo..hi-1`` to the bus in another process (created by it if new, with ``kw``)."""
    subprocess.run([sys.executable, "-c", WRITER, path, kind, str(lo), str(hi), str(SEG), str(RS),
                    str(FILE_SIZE), json.dumps(kw)], check=True, timeout=120)


def end(kind, n):
    """The position after the n-th record of a bus that lost nothing (a rolling bus's is global: a
    segment's end is the next one's first record)."""
    if kind == "single":
        return 8 + n * SLOT
    return (n // PER) * SEG + 8 + (n % PER) * SLOT


@pytest.fixture(params=["single", "rolling"])
def bus(request):
    """(path, kind): a fresh single-file bus path or rolling bus directory in /dev/shm."""
    base = pathlib.Path("/dev/shm") if os.path.isdir("/dev/shm") else pathlib.Path("/tmp")
    path = base / f"mbsparkcons-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    yield str(path), request.param
    shutil.rmtree(path, ignore_errors=True)
    for p in base.glob(path.name + "*"):
        if p.is_file():
            p.unlink()


def stream(spark, path, **options):
    return helpers.stream(spark, path, "PriceUpdate", **options)


def the_consumer(path, name=None):
    """The bus's only consumer (or the one named)."""
    cs = consumers(path)
    if name is not None:
        cs = [c for c in cs if c.name == name]
    assert len(cs) == 1, cs
    return cs[0]


def wait_for(what, cond, seconds=60, q=None):
    deadline = time.monotonic() + seconds
    while not cond():
        if q is not None and q.exception() is not None:
            raise AssertionError(f"query failed: {q.exception()}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def driver_pid(spark):
    return spark._jvm.java.lang.ProcessHandle.current().pid()


def rows(spark, out):
    """The prices the query wrote (none before its first batch)."""
    from pyspark.errors import AnalysisException
    try:
        return sorted(r.price for r in spark.read.parquet(out).collect())
    except AnalysisException:  # no file yet
        return []


def start(spark, path, out, ckpt, **options):
    return (stream(spark, path, **options).writeStream.format("parquet").option("path", out)
            .option("checkpointLocation", ckpt).trigger(processingTime="100 milliseconds").start())


def test_running_query_is_a_live_consumer_at_the_end_of_its_last_committed_batch(spark, bus, tmp_path):
    path, kind = bus
    write(path, kind, 0, 20)
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "orders-ck")
    q = start(spark, path, out, ckpt)
    try:
        wait_for("20 rows", lambda: len(rows(spark, out)) == 20, q=q)
        # Committed when Spark starts the next trigger from the batch's end (it ran and was committed).
        wait_for("the consumer at the batch end", lambda: [c.position for c in consumers(path)] == [end(kind, 20)],
                 q=q)
        c = the_consumer(path)
        assert last_offset(ckpt)["position"] == end(kind, 20)
        assert os.path.exists(os.path.join(ckpt, "commits", max(os.listdir(os.path.join(ckpt, "offsets")),
                                                                 key=lambda f: int(f) if f.isdigit() else -1)))
        # The default name: stable for the checkpoint, readable in `mappedbus consumers`.
        assert c.name.startswith("spark-orders-ck-") and len(c.name.encode()) <= 64
        assert c.alive and c.pid == driver_pid(spark) and c.lag == 0 and not c.expired
        # Records the query reads move it on, batch by batch.
        write(path, kind, 20, 25)
        wait_for("25 rows", lambda: len(rows(spark, out)) == 25, q=q)
        wait_for("the consumer at 25", lambda: the_consumer(path).position == end(kind, 25), q=q)
        assert the_consumer(path).lag == 0
    finally:
        q.stop()
    # Stopped: released (the driver holds it no more), its position kept; the lag grows with the bus.
    c = the_consumer(path)
    assert not c.alive and c.position == end(kind, 25)
    write(path, kind, 25, 32)
    c = the_consumer(path)
    assert (c.position, c.lag, c.alive) == (end(kind, 25), 7, False)
    # Restarted from its checkpoint: the same name, held again, and it catches up.
    q = start(spark, path, out, ckpt)
    try:
        wait_for("32 rows", lambda: len(rows(spark, out)) == 32, q=q)
        wait_for("the consumer at 32", lambda: the_consumer(path).position == end(kind, 32), q=q)
        again = the_consumer(path)
        assert again.name == c.name and again.alive and again.lag == 0
    finally:
        q.stop()
    assert rows(spark, out) == list(range(32))
    assert not the_consumer(path).alive


def test_consumer_option_names_it_and_a_name_held_elsewhere_fails_the_query(spark, bus_path, tmp_path):
    write(bus_path, "single", 0, 5)
    out = str(tmp_path / "out")
    helpers.run_available_now(spark, bus_path, out, str(tmp_path / "ck1"), "PriceUpdate", consumer="billing")
    c = the_consumer(bus_path)
    assert (c.name, c.position, c.lag, c.alive) == ("billing", end("single", 5), 0, False)
    # A Python reader holds the name: the query is refused, naming the holder and the option.
    with MappedBusReader(bus_path, consumer="billing"):
        with pytest.raises(Exception, match=rf"consumer 'billing' of .* is held by pid {os.getpid()}.*option consumer"):
            helpers.run_available_now(spark, bus_path, out, str(tmp_path / "ck2"), "PriceUpdate", consumer="billing")
    with pytest.raises(Exception, match="option 'consumer' is 1 to 64 bytes"):
        helpers.run_available_now(spark, bus_path, out, str(tmp_path / "ck3"), "PriceUpdate", consumer="x" * 65)


def test_a_query_without_a_checkpoint_of_its_own_leaves_no_consumer_behind(spark, bus_path, tmp_path):
    write(bus_path, "single", 0, 5)
    q = stream(spark, bus_path).writeStream.format("memory").queryName("cons_tmp").start()
    try:
        wait_for("5 rows", lambda: spark.sql("select * from cons_tmp").count() == 5, q=q)
        wait_for("the consumer", lambda: [c.position for c in consumers(bus_path)] == [end("single", 5)], q=q)
        c = the_consumer(bus_path)
        assert c.name.startswith("spark-temporary-") and c.alive
    finally:
        q.stop()
    # Spark's temporary checkpoint goes with the query, and so does the consumer no restart can resume.
    assert consumers(bus_path) == []
    # registerConsumer=false: not a consumer at all.
    helpers.run_available_now(spark, bus_path, str(tmp_path / "out"), str(tmp_path / "ck"), "PriceUpdate",
                              registerConsumer="false")
    assert consumers(bus_path) == []


def test_a_stream_of_several_buses_is_a_consumer_of_each(spark, bus_root, tmp_path):
    a, b = os.path.join(bus_root, "a"), os.path.join(bus_root, "b")
    write(a, "single", 0, 3)
    write(b, "single", 100, 107)
    helpers.run_available_now(spark, f"{a},{b}", str(tmp_path / "out"), str(tmp_path / "ck"), "PriceUpdate",
                              consumer="both")
    assert [(c.name, c.position, c.lag) for c in consumers(a)] == [("both", end("single", 3), 0)]
    assert [(c.name, c.position, c.lag) for c in consumers(b)] == [("both", end("single", 7), 0)]
    # A pattern never takes a registry (PATH.consumers) for a bus.
    helpers.run_available_now(spark, os.path.join(bus_root, "*"), str(tmp_path / "out2"), str(tmp_path / "ck2"),
                              "PriceUpdate", consumer="all")
    assert {"a.consumers", "b.consumers"} <= set(os.listdir(bus_root))
    assert [c.name for c in consumers(a)] == [c.name for c in consumers(b)] == ["both", "all"]
    assert spark.read.parquet(str(tmp_path / "out2")).count() == 10


@pytest.mark.slow
@pytest.mark.parametrize("case", ["held", "no max_consumer_lag", "past max_consumer_lag"])
def test_query_stopped_while_writers_roll_resumes_without_a_gap_within_max_consumer_lag(spark, case, tmp_path):
    """retain_segments=1 keeps one segment behind the writer's; a stopped query's consumer holds
    more, up to max_consumer_lag=8 segments. Without it, or past it, the restart meets the gap."""
    path = str(pathlib.Path("/dev/shm" if os.path.isdir("/dev/shm") else "/tmp")
               / f"mbsparkcons-{os.getpid()}-{uuid.uuid4().hex[:12]}")
    try:
        lag = 0 if case == "no max_consumer_lag" else 8
        write(path, "rolling", 0, 15, retain_segments=1, max_consumer_lag=lag)
        out, ckpt = str(tmp_path / "out"), str(tmp_path / "ck")
        helpers.run_available_now(spark, path, out, ckpt, "PriceUpdate")
        assert rows(spark, out) == list(range(15))
        assert the_consumer(path).position == end("rolling", 15)
        # Stopped, while writers (other processes) roll on: 45 more records are 4 segments on (within
        # the bound), 115 more are 11 (past it: the consumer is expired and holds nothing).
        n = 130 if case == "past max_consumer_lag" else 60
        for lo in range(15, n, 15):
            write(path, "rolling", lo, min(lo + 15, n))
        c = the_consumer(path)
        segments = sorted(int(f.split(".")[0]) for f in os.listdir(path) if f.endswith(".bus"))
        if case == "held":
            assert (c.position, c.lag, c.expired, c.alive) == (end("rolling", 15), 45, False, False)
            assert segments[0] == 1  # the segment the query needs, and every one after it
            q = helpers.run_available_now(spark, path, out, ckpt, "PriceUpdate")
            assert rows(spark, out) == list(range(n))  # every record, none twice
            assert max(int(p["sources"][0]["metrics"]["lostSlots"]) for p in q.recentProgress) == 0
            c = the_consumer(path)
            assert (c.position, c.lag, c.expired) == (end("rolling", n), 0, False)
        else:
            assert segments[0] > 1  # retention removed what the query had not read
            assert c.expired == (case == "past max_consumer_lag")
            with pytest.raises(Exception, match=r"positions \[\d+, \d+\) \(\d+ record slots\) were removed by "
                                                r"retention"):
                helpers.run_available_now(spark, path, out, ckpt, "PriceUpdate")
            assert rows(spark, out) == list(range(15))
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
def test_realtime_query_commits_each_long_batch_end(spark, bus_path, tmp_path):
    from mappedbus_py.spark import realtime_passthrough
    write(bus_path, "single", 0, 1)
    out = bus_path + "-out"
    before = spark.conf.get("spark.sql.streaming.realTimeMode.minBatchDuration")
    spark.conf.set("spark.sql.streaming.realTimeMode.minBatchDuration", "1000")
    try:
        q = realtime_passthrough(spark, bus_path, out, "PriceUpdate", batch="2 seconds",
                                 checkpoint=tmp_path / "ck", fileSize=FILE_SIZE, src_options={"consumer": "rt"})
    finally:
        spark.conf.set("spark.sql.streaming.realTimeMode.minBatchDuration", before)
    try:
        write(bus_path, "single", 1, 10)
        wait_for("the consumer at a batch end past the records",
                 lambda: [(c.position, c.alive) for c in consumers(bus_path)] == [(end("single", 10), True)], q=q)
        assert the_consumer(bus_path).pid == driver_pid(spark)
    finally:
        q.stop()
    c = the_consumer(bus_path)
    assert (c.name, c.position, c.lag, c.alive) == ("rt", end("single", 10), 0, False)
