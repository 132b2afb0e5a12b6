"""The bus sink is exactly-once: a streaming query stopped or killed at any point and restarted from
its checkpoint leaves every input record on the output bus once."""
import collections
import os
import random
import signal
import struct
import subprocess
import sys
import time

import pytest

from mappedbus_py import MappedBusWriter

from .helpers import bus_reader, read_all

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


def wait_for_growth(path, timeout):
    start = limit_of(path)
    deadline = time.time() + timeout
    while limit_of(path) == start:
        assert time.time() < deadline, f"{path} did not grow in {timeout} s"
        time.sleep(0.002)


def output_ids(path, file_size):
    return [struct.unpack_from("<q", payload)[0] for _, _, payload in read_all(path, file_size, RECORD)]


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
        q.awaitTermination(120)
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
        (spark.readStream.format("mappedbus").option("path", src).option("layout", LAYOUT)
         .option("maxRecordsPerTrigger", 200).load().select("id", "value")
         .writeStream.format("mappedbus").option("path", dst).option("fileSize", size)
         .option("layout", LAYOUT).option("exactlyOnce", "false").option("checkpointLocation", ckpt)
         .trigger(availableNow=True).start().awaitTermination(120))
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
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    kinds = []
    for round_ in range(10):
        p = subprocess.Popen([sys.executable, CHILD, src, dst, str(size), ckpt, "run"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        try:
            assert p.stdout.readline().strip() == "started", f"round {round_}: the child did not start"
            # Strike while batches are being written: just after the output grows (records on the bus,
            # the batch not yet committed in the checkpoint), or a little later.
            wait_for_growth(dst, 120)
            time.sleep(rng.choice([rng.uniform(0, 0.05), rng.uniform(0, 1.5)]))
            kind = rng.choice(["stop", "kill"])
            kinds.append(kind)
            p.send_signal(signal.SIGTERM if kind == "stop" else signal.SIGKILL)
            p.wait(60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    subprocess.run([sys.executable, CHILD, src, dst, str(size), ckpt, "drain"], check=True, timeout=300,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    ids = output_ids(dst, size)
    dup = [i for i, c in collections.Counter(ids).items() if c > 1]
    assert not dup, f"{len(dup)} ids written twice after {kinds}: {dup[:10]}"
    assert sorted(ids) == list(range(n)), f"{n - len(set(ids))} ids missing after {kinds}"
