"""The bus sink is exactly-once into a rolling bus too: a streaming query stopped or killed at any point
and restarted from its checkpoint leaves every input record on the output segments once, whatever
segments a task's rows were spread over."""
import collections
import os
import random
import time

import pytest

from mappedbus_py import RollingBusReader

from .helpers import strike_and_drain
from .test_exactly_once import CHILD, LAYOUT, write_ids

pytestmark = pytest.mark.spark

SLOT = 8 + 12
ENTRY = 72           # a commit log entry
INTENT, SEALED = 1, 2


def segment_size(per):
    return 8 + per * SLOT


def rolling_ids(path):
    """The ids on a rolling bus in bus order, through the Python reader. A slot reserved by a process
    killed before it logged the reservation is never committed: the reader rolls it back after its
    timeout, so the reads wait a little longer than that before deciding the bus has ended."""
    out = []
    with RollingBusReader(path, timeout=0.5) as r:
        while (rec := r.read(1.5)) is not None:
            out.append(int.from_bytes(rec.payload[:8], "little", signed=True))
    return out


def log_kinds(path):
    with open(os.path.join(path, "bus.commits"), "rb") as f:
        data = f.read()
    return [int.from_bytes(data[i + 4:i + 8], "little") for i in range(0, len(data) - ENTRY + 1, ENTRY)]


def extent(path):
    """The newest segment and its limit: grows as anything is written."""
    segs = sorted(int(n[:-4]) for n in os.listdir(path) if n.endswith(".bus")) if os.path.isdir(path) else []
    if not segs:
        return (-1, 0)
    with open(os.path.join(path, f"{segs[-1]:020d}.bus"), "rb") as f:
        return (segs[-1], int.from_bytes(f.read(8), "little"))


def run_available_now(spark, src, dst, ckpt, seg, per_trigger, partitions, exactly_once="true"):
    q = (spark.readStream.format("mappedbus").option("path", src).option("layout", LAYOUT)
         .option("maxRecordsPerTrigger", per_trigger).option("numPartitions", partitions).load()
         .select("id", "value")
         .writeStream.format("mappedbus").option("path", dst).option("segmentSize", seg)
         .option("layout", LAYOUT).option("exactlyOnce", exactly_once).option("checkpointLocation", ckpt)
         .trigger(availableNow=True).start())
    # A query still running would leave the reads that follow short, as if records were lost.
    assert q.awaitTermination(120), "the query did not end within 120 s"


def forget_batch(ckpt, batch):
    """Drops the checkpoint's commit of a batch: the restart runs it again (a driver killed after the
    sink wrote the batch and before Spark recorded it)."""
    for name in os.listdir(os.path.join(ckpt, "commits")):
        if name.lstrip(".").startswith(str(batch)):
            os.unlink(os.path.join(ckpt, "commits", name))


def test_replayed_micro_batch_into_a_rolling_bus_writes_nothing_twice(spark, tmp_path):
    src, dst, ckpt = str(tmp_path / "in"), str(tmp_path / "out"), str(tmp_path / "ckpt")
    write_ids(src, 200_000, range(500))
    seg = segment_size(50)
    run_available_now(spark, src, dst, ckpt, seg, 200, 2)
    forget_batch(ckpt, 2)
    run_available_now(spark, src, dst, ckpt, seg, 200, 2)
    ids = rolling_ids(dst)
    assert sorted(ids) == list(range(500)), f"{len(ids) - len(set(ids))} ids written twice"
    assert extent(dst)[0] >= 9, "the rows did not roll over segments"


def test_at_least_once_on_request_duplicates_a_replay_into_a_rolling_bus(spark, tmp_path):
    """exactlyOnce=false: the old behaviour, and evidence that the replay above really re-ran a batch."""
    src, dst, ckpt = str(tmp_path / "in"), str(tmp_path / "out"), str(tmp_path / "ckpt")
    write_ids(src, 200_000, range(500))
    seg = segment_size(50)
    run_available_now(spark, src, dst, ckpt, seg, 200, 2, exactly_once="false")
    forget_batch(ckpt, 2)
    run_available_now(spark, src, dst, ckpt, seg, 200, 2, exactly_once="false")
    ids = rolling_ids(dst)
    assert len(ids) == 600 and set(ids) == set(range(500))
    assert not os.path.exists(os.path.join(dst, "bus.commits"))


def test_a_task_whose_rows_span_segments_commits_them_all_once(spark, tmp_path):
    """One partition of 130 rows into segments of 50 slots: each task takes three or four ranges,
    sealed together; its replay adds nothing."""
    src, dst, ckpt = str(tmp_path / "in"), str(tmp_path / "out"), str(tmp_path / "ckpt")
    write_ids(src, 200_000, range(260))
    seg = segment_size(50)
    run_available_now(spark, src, dst, ckpt, seg, 130, 1)
    forget_batch(ckpt, 1)
    run_available_now(spark, src, dst, ckpt, seg, 130, 1)
    # One partition keeps input order, and each task's ranges follow one another.
    assert rolling_ids(dst) == list(range(260))
    kinds = log_kinds(dst)
    assert kinds.count(SEALED) == 2, kinds
    assert kinds.count(INTENT) >= 6, kinds


@pytest.mark.slow
def test_stopped_and_killed_query_into_a_rolling_bus_restarted_five_times_writes_each_record_once(tmp_path):
    # Five rounds (each a Spark start: ~35 s on CI), the single-file test ten: the sink's protocol
    # is the same; what the rolling bus adds (ranges across segment ends) every round exercises.
    n = 300_000
    size = 8 + n * SLOT + 4096
    seg = segment_size(1000)     # a task of 1500 rows takes two or three segments; ~300 segments in all
    src, dst, ckpt = str(tmp_path / "in"), str(tmp_path / "out"), str(tmp_path / "ckpt")
    write_ids(src, size, range(n))
    seed = int(os.environ.get("EOS_SEED", time.time()))
    rng = random.Random(seed)
    kinds = strike_and_drain([CHILD, src, dst, str(size), ckpt, "run", str(seg)], lambda: extent(dst), rng,
                             rounds=5)
    ids = rolling_ids(dst)
    dup = [i for i, c in collections.Counter(ids).items() if c > 1]
    assert not dup, f"{len(dup)} ids written twice after {kinds} (EOS_SEED={seed}): {dup[:10]}"
    assert sorted(ids) == list(range(n)), f"{n - len(set(ids))} ids missing after {kinds} (EOS_SEED={seed})"
    assert extent(dst)[0] >= 100, "the rows did not roll over segments"
