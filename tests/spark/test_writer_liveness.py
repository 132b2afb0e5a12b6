"""A crashed writer costs the Spark source far less than the readers' timeout, a paused one loses
it nothing (issue 33; tests/test_writer_liveness.py for the Python readers).

A Python writer (a child process) reserves one large ``write_batch`` and is SIGSTOPped as soon as
the batch is reserved, with slots not committed yet; then it is SIGKILLed, or resumed. Spark reads
with the readers' default 2 s timeout. The streaming source's planning reader (a bus reader,
which asks the writers file) meets the uncommitted slots; so does a batch read with
``uncommitted=wait`` (the default, ``stop``, ends the batch at the first one without waiting).
Times are bounded loosely, against the same read of the bus once settled; perf/ measures them.
"""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy
import pytest

from mappedbus_py import MappedBusReader, MappedBusWriter

from .helpers import bus_reader, status_at

pytestmark = pytest.mark.spark

RECORD = 8
ROWS = 2_000_000          # one write_batch: tens of ms, long enough to stop it in the middle
SIZE = 8 + (ROWS + 16) * (8 + RECORD)
MARK = 7_777_777          # written by another writer after the dead batch
LAYOUT = "v:int64"

# A child writing ROWS int64 rows (0, 1, 2, ...) with one write_batch, after one record (-1)
# written alone. Prints what write_batch returned.
BATCH_WRITER = textwrap.dedent("""
    import sys, numpy
    from mappedbus_py import MappedBusWriter
    w = MappedBusWriter(sys.argv[1]).open()
    w.write(numpy.int64(-1).tobytes())
    print("ready", flush=True)
    sys.stdin.readline()
    print("committed", w.write_batch(numpy.arange(int(sys.argv[2]), dtype="<i8"), meta=8),
          flush=True)
    w.close()
""")


def _stopped_mid_batch(path):
    """(child, seen): a child SIGSTOPped in its write_batch of ROWS rows with slots reserved and
    not all committed, rows 0 .. seen-1 of the batch committed."""
    for _ in range(5):
        MappedBusWriter(path, SIZE, RECORD).open().close()
        child = subprocess.Popen([sys.executable, "-c", BATCH_WRITER, path, str(ROWS)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        with MappedBusReader(path) as reader:
            assert child.stdout.readline().strip() == "ready"
            assert reader.read(5) is not None                  # the record written alone
            before = reader.limit
            child.stdin.write("go\n")
            child.stdin.flush()
            deadline = time.monotonic() + 10
            while reader.limit == before:
                assert time.monotonic() < deadline, "the batch never started"
            os.kill(child.pid, signal.SIGSTOP)
            time.sleep(0.05)                  # the signal is taken; commits before it are seen
            seen = 0
            while (rec := reader.read(0)) is not None:
                assert numpy.frombuffer(rec.payload, "<i8")[0] == seen
                seen += 1
            if reader.position < reader.limit:
                return child, seen
        os.kill(child.pid, signal.SIGCONT)    # it finished before it stopped: again
        child.communicate(timeout=30)
        for p in (path, path + ".meta", path + ".wake", path + ".writers"):
            if os.path.exists(p):
                os.unlink(p)
    pytest.skip("could not stop the writer in the middle of its batch in 5 tries")


def _end(child):
    if child.poll() is None:
        os.kill(child.pid, signal.SIGCONT)
        child.kill()
    child.wait()


def _summary(df):
    """(rows, distinct values, min, max, values in [0, ROWS)) of column v: with the count of
    distinct values this says exactly which int64 rows there are."""
    r = df.selectExpr("count(*)", "count(distinct v)", "min(v)", "max(v)",
                      f"count_if(v >= 0 and v < {ROWS})").collect()[0]
    return tuple(r)


def _expected(seen, mark):
    n = seen + 1 + (1 if mark else 0)
    return (n, n, -1, MARK if mark else seen - 1, seen)


def _stream(spark, path, out, name, timeout_ms=None):
    """Starts a Trigger.AvailableNow query of the bus into parquet files at ``out``."""
    reader = spark.readStream.format("mappedbus").option("path", path).option("layout", LAYOUT)
    if timeout_ms is not None:
        reader = reader.option("timeoutMs", timeout_ms)
    return (reader.load().select("v")
            .writeStream.format("parquet").option("path", out)
            .option("checkpointLocation", out + ".ck").queryName(name)
            .trigger(availableNow=True).start())


def _timed_stream(spark, path, out, name, timeout_ms=None):
    start = time.monotonic()
    q = _stream(spark, path, out, name, timeout_ms)
    assert q.awaitTermination(120)
    return time.monotonic() - start, _summary(spark.read.parquet(out))


def _kill_and_write_after(path, child):
    # The other writer opens while the child lives (it takes another writers-file slot), and
    # writes the record that comes after the dead batch.
    with MappedBusWriter(path) as other:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert other.write(numpy.int64(MARK).tobytes())


def test_stream_passes_a_killed_writers_batch_without_the_timeout(spark, bus_path, tmp_path):
    child, seen = _stopped_mid_batch(bus_path)
    try:
        _kill_and_write_after(bus_path, child)
    finally:
        _end(child)
    # A batch read (uncommitted=stop, the default) ends at the dead batch's first uncommitted
    # slot, at once: the records committed before it, not the one written after.
    assert _summary(bus_reader(spark, bus_path, layout=LAYOUT)) == _expected(seen, mark=False)
    # Warm the query path up on a small bus, so that the two timed runs compare.
    with MappedBusWriter(bus_path + "-warm", 1 << 16, RECORD) as w:
        w.write(numpy.int64(1).tobytes())
    # A rollback timeout of 20 s: a source that waited it out would be 20 s slower, far past
    # what a loaded machine's scheduling adds to a query; one that asks the writers file is not.
    _timed_stream(spark, bus_path + "-warm", str(tmp_path / "warm"), "liveness_warm", 20000)
    took, got = _timed_stream(spark, bus_path, str(tmp_path / "dead"), "liveness_dead", 20000)
    assert got == _expected(seen, mark=True)
    hole = 8 + (1 + seen) * (8 + RECORD)                  # the batch's first uncommitted slot
    assert status_at(bus_path, hole) == 2                  # rolled back by the source's reader
    settled, again = _timed_stream(spark, bus_path, str(tmp_path / "settled"), "liveness_settled",
                                   20000)
    assert again == got
    assert took - settled < 10, (took, settled)           # the rollback timeout is 20 s


def test_stream_waits_for_a_stopped_writer_and_loses_nothing(spark, bus_path, tmp_path):
    child, seen = _stopped_mid_batch(bus_path)
    out = str(tmp_path / "stopped")
    q = None
    try:
        q = _stream(spark, bus_path, out, "liveness_stopped")
        assert not q.awaitTermination(5)       # 2.5 times the timeout: still waiting, alive
        os.kill(child.pid, signal.SIGCONT)
        assert q.awaitTermination(120)
        stdout, _ = child.communicate(timeout=60)
        assert stdout.split() == ["committed", str(ROWS)]
    finally:
        if q is not None and q.isActive:
            q.stop()
        _end(child)
    assert _summary(spark.read.parquet(out)) == _expected(ROWS, mark=False)
    with MappedBusReader(bus_path, read_only=True) as r:     # nothing was rolled back
        n = 0
        while r.read(0) is not None:
            n += 1
        assert n == ROWS + 1 and r.skipped == 0


def test_batch_read_passes_a_killed_writers_batch_without_the_timeout(spark, bus_path):
    child, seen = _stopped_mid_batch(bus_path)
    try:
        _kill_and_write_after(bus_path, child)
    finally:
        _end(child)
    # A rollback timeout of 20 s, as for the stream: a planning that waited it out would be 20 s
    # slower than the same read of the settled bus, far past what a loaded machine or the batch
    # path's first run (its JIT: ~1.5 s here) adds; one that asks the writers file is not.
    start = time.monotonic()
    got = _summary(bus_reader(spark, bus_path, layout=LAYOUT, uncommitted="wait", timeoutMs=20000))
    took = time.monotonic() - start
    assert got == _expected(seen, mark=True)
    with MappedBusReader(bus_path) as r:      # rolls the dead batch back: the bus settled
        while r.read(0.5) is not None:
            pass
    start = time.monotonic()
    assert _summary(bus_reader(spark, bus_path, layout=LAYOUT, uncommitted="wait",
                               timeoutMs=20000)) == got
    settled = time.monotonic() - start
    assert took - settled < 10, (took, settled)           # the rollback timeout is 20 s
