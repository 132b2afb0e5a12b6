"""The bus sink is exactly-once: a streaming query stopped or killed at any point and restarted from
its checkpoint leaves every input record on the output bus once."""
import collections
import os
import random
import struct
import time

import pytest

from mappedbus_py import MappedBusWriter

from .helpers import read_all, strike_and_drain

pytestmark = pytest.mark.spark

RECORD = 12  # id:int64, value:int32
LAYOUT = "id:int64,value:int32"
CHILD = os.path.join(os.path.dirname(__file__), "eos_child.py")


def write_ids(path, file_size, ids):
    with MappedBusWriter(path, file_size, RECORD) as w:
        for i in ids:
            assert w.write(struct.pack("<qi", i, i % 97))


def limit_of(path):
    try:
        with open(path, "rb") as f:
            return int.from_bytes(f.read(8), "little")
    except FileNotFoundError:
        return 0


def output_ids(path, file_size):
    """The ids on the output bus in bus order. A range allocated by a task stopped or killed before it
    logged the allocation is never committed (a crashed writer's slots): the reader rolls it back
    after its timeout, so the read waits a little longer than that before deciding the bus has ended."""
    return [struct.unpack_from("<q", payload)[0]
            for _, _, payload in read_all(path, file_size, RECORD, timeout_ms=500, wait=1.5)]


def test_replayed_micro_batch_writes_nothing_twice(spark, tmp_path):
    """A restart re-runs the last batch whose commit the checkpoint lacks: without the sink's commit
    log its rows would be appended again."""
    src, dst, ckpt = str(tmp_path / "in"), str(tmp_path / "out"), str(tmp_path / "ckpt")
    size = 200_000
    write_ids(src, size, range(500))

    def run():
        q = (spark.readStream.format("mappedbus").option("path", src).option("layout", LAYOUT)
             .option("maxRecordsPerTrigger", 200).load().select("id", "value")
             .writeStream.format("mappedbus").option("path", dst).option("fileSize", size)
             .option("layout", LAYOUT).option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
        assert q.awaitTermination(120), "the query did not end within 120 s"
    run()
    for name in os.listdir(os.path.join(ckpt, "commits")):
        if name.lstrip(".").startswith("2"):
            os.unlink(os.path.join(ckpt, "commits", name))
    run()
    ids = output_ids(dst, size)
    assert sorted(ids) == list(range(500))
    assert os.path.exists(dst + ".commits")


def test_at_least_once_on_request_duplicates_a_replay(spark, tmp_path):
    """exactlyOnce=false: the old behaviour, and evidence that the replay above really re-ran a batch."""
    src, dst, ckpt = str(tmp_path / "in"), str(tmp_path / "out"), str(tmp_path / "ckpt")
    size = 200_000
    write_ids(src, size, range(300))

    def run():
        q = (spark.readStream.format("mappedbus").option("path", src).option("layout", LAYOUT)
             .option("maxRecordsPerTrigger", 200).load().select("id", "value")
             .writeStream.format("mappedbus").option("path", dst).option("fileSize", size)
             .option("layout", LAYOUT).option("exactlyOnce", "false").option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
        assert q.awaitTermination(120), "the query did not end within 120 s"
    run()
    for name in os.listdir(os.path.join(ckpt, "commits")):
        if name.lstrip(".").startswith("1"):
            os.unlink(os.path.join(ckpt, "commits", name))
    run()
    ids = output_ids(dst, size)
    assert len(ids) == 400 and set(ids) == set(range(300))
    assert not os.path.exists(dst + ".commits")


@pytest.mark.slow
def test_stopped_and_killed_query_restarted_ten_times_writes_each_record_once(tmp_path):
    n = 300_000
    size = 8 + n * 24 + 4096
    src, dst, ckpt = str(tmp_path / "in"), str(tmp_path / "out"), str(tmp_path / "ckpt")
    write_ids(src, size, range(n))
    rng = random.Random(int(os.environ.get("EOS_SEED", time.time())))
    kinds = strike_and_drain([CHILD, src, dst, str(size), ckpt, "run"], lambda: limit_of(dst), rng)
    ids = output_ids(dst, size)
    dup = [i for i, c in collections.Counter(ids).items() if c > 1]
    assert not dup, f"{len(dup)} ids written twice after {kinds}: {dup[:10]}"
    assert sorted(ids) == list(range(n)), f"{n - len(set(ids))} ids missing after {kinds}"
