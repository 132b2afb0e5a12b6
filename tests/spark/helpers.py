"""Helpers shared by the Spark tests (a module of this test package, so that no second module named
``conftest`` shadows the top-level tests' one)."""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORE_JAR = ROOT / "build" / "jvm" / "mappedbuspy.jar"
TOOLS_JAR = ROOT / "build" / "jvm" / "mappedbuspy-tools.jar"
# BusTool's class path: the library and the tools.
TOOLS_CP = os.pathsep.join([str(CORE_JAR), str(TOOLS_JAR)])


def read_all(path, file_size, record_size, timeout_ms=2000, wait=0.0):
    """Every committed record of a bus, through the Python reader, as (position, meta, payload);
    stops when none comes within ``wait`` seconds."""
    from mappedbus_py import MappedBusReader
    out = []
    with MappedBusReader(path, file_size, record_size, timeout=timeout_ms / 1000) as r:
        while True:
            rec = r.read(wait)
            if rec is None:
                return out
            out.append((rec.position, rec.meta, bytes(rec.payload)))


def bus_tool(*args, check=True):
    """Runs the Java BusTool; returns its stdout."""
    res = subprocess.run(["java", "-cp", TOOLS_CP, "io.mappedbuspy.tools.BusTool", *map(str, args)],
                         capture_output=True, text=True, timeout=60)
    if check and res.returncode != 0:
        raise AssertionError(f"BusTool {args} failed: {res.stderr}")
    return res.stdout


def hung_slot(path, file_size, record_size):
    """Leaves one allocated, never committed slot (a crashed writer); returns its offset."""
    p = subprocess.Popen(["java", "-cp", TOOLS_CP, "io.mappedbuspy.tools.BusTool",
                          "allocate-and-hang", path, str(file_size), str(record_size)],
                         stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("allocated "), line
        return int(line.split()[1])
    finally:
        p.kill()
        p.wait()


def status_at(path, pos):
    with open(path, "rb") as f:
        f.seek(pos)
        return int.from_bytes(f.read(4), "little")


def bus_reader(spark, path, **options):
    r = spark.read.format("mappedbus").option("path", path)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _ensure_core_jar():
    if not (CORE_JAR.exists() and TOOLS_JAR.exists()):
        subprocess.run(["bash", str(ROOT / "interop" / "build.sh")], check=True, stdout=subprocess.DEVNULL)


_ensure_core_jar()


def stream(spark, path, layout, **options):
    """A streaming read of the bus(es) at ``path`` decoded with ``layout``."""
    r = spark.readStream.format("mappedbus").option("path", path).option("layout", layout)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def run_available_now(spark, path, out, ckpt, layout, **options):
    """Runs a stream of ``path`` into Parquet at ``out`` with Trigger.AvailableNow; the query."""
    q = (stream(spark, path, layout, **options).writeStream.format("parquet").option("path", out)
         .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
    assert q.awaitTermination(180)
    return q


def last_offset(ckpt):
    """The source offset of the newest batch in a checkpoint, as JSON."""
    d = os.path.join(ckpt, "offsets")
    n = max(int(f) for f in os.listdir(d) if f.isdigit())
    return json.loads(open(os.path.join(d, str(n))).read().splitlines()[-1])


def source_metrics(q):
    """Each progress report's source metrics (numbers), oldest first."""
    return [{k: int(v) for k, v in p["sources"][0].get("metrics", {}).items()} for p in q.recentProgress]


def strike_and_drain(child_args, grown, rng, rounds=10):
    """Runs the streaming child (``eos_child.py`` with ``child_args``, mode "run" in them) ``rounds``
    times, each time stopping (SIGTERM: ``query.stop()``) or killing (SIGKILL) it at a random point
    just after or a little later than ``grown()`` (a measure of the output) changed, then runs it once
    in mode "drain" to the end. Returns the kinds of strike, in order."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    kinds = []
    for round_ in range(rounds):
        p = subprocess.Popen([sys.executable, *child_args], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, env=env)
        try:
            assert p.stdout.readline().strip() == "started", f"round {round_}: the child did not start"
            # Strike while batches are being written: just after the output grows (records on the
            # bus, the batch not yet committed in the checkpoint), or a little later.
            start, deadline = grown(), time.time() + 120
            while grown() == start:
                assert time.time() < deadline, f"round {round_}: the output did not grow in 120 s"
                time.sleep(0.002)
            time.sleep(rng.choice([rng.uniform(0, 0.05), rng.uniform(0, 1.5)]))
            kind = rng.choice(["stop", "kill"])
            kinds.append(kind)
            p.send_signal(signal.SIGTERM if kind == "stop" else signal.SIGKILL)
            p.wait(60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    drain = [a if a != "run" else "drain" for a in child_args]
    subprocess.run([sys.executable, *drain], check=True, timeout=300, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=env)
    return kinds
