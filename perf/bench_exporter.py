"""What a scrape of ``mappedbus exporter`` costs with 100 consumers on a large bus (issue 23: under
10 ms).

    python3 perf/bench_exporter.py              # both buses, 1000 scrapes each (about 2 min)
    python3 perf/bench_exporter.py --quick      # 100 scrapes each, a smaller bus (a smoke run)

Two scenarios, each in fresh files on /dev/shm, each with its own exporter process
(``python -m mappedbus_py exporter PATH --port 0``, as a user runs it):

  single    a single-file bus of 4,000,000 records of 32 bytes (160 MB of slots) written before
            the exporter starts, so its first count reads them all once
  rolling   a rolling bus of 64 MiB segments with 4,000,000 records written before (3 segments)

On each bus: 100 named consumers, 50 of them held by a live process (50 readers in one process,
each committed at another position) and 50 registered and then released (stopped), and a writer
process adding about 20,000 records per second for the whole run, so every scrape has new slots
to count. This process scrapes ``/metrics`` over HTTP every 20 ms and times each scrape from
request to the last byte (urllib, with the headers Prometheus sends: OpenMetrics preferred,
gzip accepted; the exporter answers in the text format, uncompressed, whatever is asked). Beside the round
trip, the exporter's own time to gather the figures (``mappedbus_exporter_collect_seconds``,
read from the same scrape) and the size of the answer. The first 10 scrapes are not counted.

Results: perf/results/exporter.json and exporter.md (or into --out).
"""
import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402

RECORD_SIZE = 32
CONSUMERS = 100
WARMUP = 10
IDLE_S = 5.0

HOLDER = r"""
import os, sys
from mappedbus_py import MappedBusReader, RollingBusReader
path, n, total = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
readers = []
for i in range(n):
    r = (RollingBusReader(path, consumer=f"live-{i:03d}") if os.path.isdir(path)
         else MappedBusReader(path, consumer=f"live-{i:03d}"))
    r.open()
    for _ in range(1 + i * (total // 200) // 1000):     # each at another position
        r.read(5)
    r.commit()
    readers.append(r)
for i in range(n):                                  # registered, then released: stopped
    r = (RollingBusReader(path, consumer=f"stopped-{i:03d}") if os.path.isdir(path)
         else MappedBusReader(path, consumer=f"stopped-{i:03d}"))
    with r:
        r.read(5)
        r.commit()
print("ready", flush=True)
sys.stdin.read()
"""

WRITER = r"""
import os, sys, time
import numpy as np
from mappedbus_py import MappedBusWriter, RollingBusWriter
path, rate = sys.argv[1], int(sys.argv[2])
w = RollingBusWriter(path) if os.path.isdir(path) else MappedBusWriter(path)
rows = np.zeros((rate // 100, 32), dtype=np.uint8)
print("ready", flush=True)
with w:
    while True:
        t = time.monotonic()
        w.write_batch(rows)
        time.sleep(max(0.0, 0.01 - (time.monotonic() - t)))
"""


def _fill(path, kind, n):
    import numpy as np

    from mappedbus_py import MappedBusWriter, RollingBusWriter
    slot = 8 + RECORD_SIZE
    if kind == "single":
        w = MappedBusWriter(path, 8 + (n + 2_000_000) * slot, RECORD_SIZE)
    else:
        w = RollingBusWriter(path, 64 << 20, RECORD_SIZE)
    rows = np.zeros((100_000, RECORD_SIZE), dtype=np.uint8)
    with w:
        for _ in range(n // len(rows)):
            w.write_batch(rows)


def _percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def _cpu_s(pid):
    """utime + stime of process ``pid`` (every thread), seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# What Prometheus 2.x sends: it asks for OpenMetrics first, and for gzip.
HEADERS = {"Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                     "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
           "Accept-Encoding": "gzip"}


def _scrape(url):
    t = time.perf_counter()
    with urllib.request.urlopen(urllib.request.Request(url, headers=HEADERS), timeout=10) as r:
        body = r.read()
        if r.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
    took = time.perf_counter() - t
    collect = None
    for line in body.decode().splitlines():
        if line.startswith("mappedbus_exporter_collect_seconds "):
            collect = float(line.split()[1])
    return took, collect, len(body)


def _in_process(path, n):
    """The two halves of a scrape timed in this process on the same bus: the collector's
    collect() (the bus, its consumers, the wake file) and prometheus_client's generate_latest
    (the text), the second including the first."""
    from prometheus_client import CollectorRegistry, generate_latest

    from mappedbus_py.tools.exporter import BusCollector
    from mappedbus_py import consumers
    col = BusCollector([path])
    reg = CollectorRegistry(auto_describe=False)
    reg.register(col)
    collect, text, cons = [], [], []
    for _ in range(n):
        t = time.perf_counter()
        consumers(path)
        cons.append(time.perf_counter() - t)
        t = time.perf_counter()
        col.collect()
        collect.append(time.perf_counter() - t)
        t = time.perf_counter()
        generate_latest(reg)
        text.append(time.perf_counter() - t)
        time.sleep(0.005)
    for c in col.counters.values():
        c.close()
    return {"inproc_consumers_p50_ms": round(statistics.median(cons) * 1e3, 3),
            "inproc_collect_p50_ms": round(statistics.median(collect) * 1e3, 3),
            "inproc_collect_p99_ms": round(_percentile(collect, 99) * 1e3, 3),
            "inproc_generate_latest_p50_ms": round(statistics.median(text) * 1e3, 3),
            "inproc_generate_latest_p99_ms": round(_percentile(text, 99) * 1e3, 3)}


def scenario(kind, n_records, scrapes, workdir):
    path = os.path.join(workdir, "bus.d" if kind == "rolling" else "bus")
    t = time.perf_counter()
    _fill(path, kind, n_records)
    fill_s = time.perf_counter() - t
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, path, str(CONSUMERS // 2),
                               str(n_records)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    assert holder.stdout.readline().strip() == "ready"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, path, "20000"],
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "ready"
    t = time.perf_counter()
    exporter = subprocess.Popen([sys.executable, "-m", "mappedbus_py", "exporter", path,
                                 "--port", "0"], stdout=subprocess.PIPE, text=True)
    url = exporter.stdout.readline().split()[-1]
    startup_s = time.perf_counter() - t
    try:
        rounds, collects, sizes = [], [], []
        first = _scrape(url)
        # The exporter's CPU when nobody scrapes (its background thread counting the writer's
        # new slots every second), then over the scrapes: the difference is what scrapes cost.
        idle_wall, cpu0 = time.monotonic(), _cpu_s(exporter.pid)
        time.sleep(IDLE_S)
        idle_rate = (_cpu_s(exporter.pid) - cpu0) / (time.monotonic() - idle_wall)
        busy_wall, cpu0 = time.monotonic(), _cpu_s(exporter.pid)
        for i in range(scrapes + WARMUP):
            took, collect, size = _scrape(url)
            if i >= WARMUP:
                rounds.append(took)
                collects.append(collect)
                sizes.append(size)
            time.sleep(0.02)
        busy_wall = time.monotonic() - busy_wall
        cpu = _cpu_s(exporter.pid) - cpu0 - idle_rate * busy_wall
        body = urllib.request.urlopen(url, timeout=10).read().decode()
        parts = _in_process(path, scrapes)
        consumers = sum(1 for ln in body.splitlines()
                        if ln.startswith("mappedbus_consumer_alive{"))
        committed = next(float(ln.split()[-1]) for ln in body.splitlines()
                         if ln.startswith("mappedbus_records_committed_total{"))
    finally:
        exporter.terminate()
        exporter.wait(30)
        writer.kill()
        writer.wait()
        holder.stdin.close()
        holder.wait(30)
    ms = 1e3
    return {
        "kind": kind, "records_before": n_records, "consumers": consumers,
        "fill_s": round(fill_s, 2), "startup_s": round(startup_s, 3),
        "first_scrape_ms": round(first[0] * ms, 3),
        "scrapes": len(rounds),
        "scrape_p50_ms": round(statistics.median(rounds) * ms, 3),
        "scrape_p90_ms": round(_percentile(rounds, 90) * ms, 3),
        "scrape_p99_ms": round(_percentile(rounds, 99) * ms, 3),
        "scrape_max_ms": round(max(rounds) * ms, 3),
        "cpu_per_scrape_ms": round(cpu / (scrapes + WARMUP) * ms, 3),
        "idle_cpu_pct": round(idle_rate * 100, 2),
        "collect_p50_ms": round(statistics.median(collects) * ms, 3),
        "collect_p99_ms": round(_percentile(collects, 99) * ms, 3),
        "answer_bytes": int(statistics.median(sizes)),
        **parts,
        "committed_at_end": int(committed),
    }


def markdown(res, env):
    out = [f"# The exporter's scrape (issue 23), {res['when']}", "",
           f"Machine: {env['machine_cpu']}, {env['machine_cores']} cores, "
           f"{env['machine_ram_gb']} GB RAM, Linux {env['machine_kernel']}, "
           f"{env['machine_python']}. Load average {env['machine_load_avg_start']} at start, "
           f"{res['load_end']} at end (the machine is shared). "
           f"`{res['mode']}` mode.", "",
           "`python3 perf/bench_exporter.py`: one exporter process per bus, 100 consumers on the "
           "bus (50 held by a live process, 50 stopped), a writer adding about 20,000 records/s "
           "all along; this process scrapes /metrics over HTTP every 20 ms with Prometheus's "
           "headers (OpenMetrics preferred, gzip accepted: the exporter answers in the text format, "
           "uncompressed, whatever is asked), the first 10 not counted. *Scrape*: request to last byte, as a scraper sees it. *Collect*: the "
           "exporter's own time to gather the figures (`mappedbus_exporter_collect_seconds`). "
           "*Start*: from starting the exporter to its listening line, which includes counting "
           "every slot already on the bus once. *CPU per scrape*: the exporter process's CPU "
           "time (utime + stime, every thread, from /proc) over the scrapes, less what it "
           "spends meanwhile without scrapes (measured for 5 s before: its background thread "
           "counting the writer's slots), divided by the scrapes: the cost of a scrape on an "
           "otherwise idle core, which the wall times above exceed by whatever else the "
           "machine runs.", "",
           "| bus | records before | consumers | start s | scrapes | CPU ms per scrape | "
           "scrape p50 ms | p90 ms | p99 ms | max ms | collect p50 ms | collect p99 ms | "
           "answer bytes (unzipped) |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
           "---: |"]
    for r in res["scenarios"]:
        out.append(f"| {r['kind']} | {r['records_before']:,} | {r['consumers']} | "
                   f"{r['startup_s']} | {r['scrapes']} | {r['cpu_per_scrape_ms']} | "
                   f"{r['scrape_p50_ms']} | "
                   f"{r['scrape_p90_ms']} | {r['scrape_p99_ms']} | {r['scrape_max_ms']} | "
                   f"{r['collect_p50_ms']} | {r['collect_p99_ms']} | {r['answer_bytes']:,} |")
    import prometheus_client
    version = getattr(prometheus_client, "__version__", None)
    if version is None:
        from importlib.metadata import version as _v
        version = _v("prometheus_client")
    out += ["", "The same bus timed in the benchmark's process (while the writer writes), to "
                "see where a scrape's time goes: `mappedbus_py.consumers(path)` (the registry, "
                "each holder's liveness, the lags), the collector's `collect()` (that, the new "
                "slots, the wake file, the metric families) and prometheus_client's "
                f"`generate_latest()` (collect plus the text; prometheus_client {version}).", "",
            "| bus | consumers() p50 ms | collect p50 ms | collect p99 ms | "
            "generate_latest p50 ms | p99 ms |",
            "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in res["scenarios"]:
        out.append(f"| {r['kind']} | {r.get('inproc_consumers_p50_ms', '')} | "
                   f"{r['inproc_collect_p50_ms']} | "
                   f"{r['inproc_collect_p99_ms']} | {r['inproc_generate_latest_p50_ms']} | "
                   f"{r['inproc_generate_latest_p99_ms']} |")
    out += ["", "Of some 560 samples a scrape carries, 500 are the five series of each of the 100 "
                "consumers (lag, position, alive, expired, last commit age); writing them as text "
                "is the larger part of a scrape (generate_latest less collect), reading the "
                "registry (consumers()) the next. The slots themselves cost little: a scrape "
                "reads only those written since the last one."]
    worst = max(r["scrape_p99_ms"] for r in res["scenarios"])
    median = max(r["scrape_p50_ms"] for r in res["scenarios"])
    cpu = max(r["cpu_per_scrape_ms"] for r in res["scenarios"])
    out += ["", f"Target (issue 23): a scrape under 10 ms with 100 consumers. CPU per scrape "
                f"{cpu} ms at worst ({'under' if cpu < 10 else 'OVER'} 10 ms); wall time p50 "
                f"{median} ms, p99 {worst} ms at worst ({'under' if worst < 10 else 'over'} "
                f"10 ms at p99) with the load average above on {env['machine_cores']} cores.",
            ""]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="100 scrapes, 400,000 records")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "results"))
    a = ap.parse_args()
    n_records, scrapes = (400_000, 100) if a.quick else (4_000_000, 1000)
    env = common.machine()
    res = {"mode": "quick" if a.quick else "full", "env": env, "scenarios": []}
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    for kind in ("single", "rolling"):
        workdir = tempfile.mkdtemp(prefix="mbexp-", dir=base)
        try:
            r = scenario(kind, n_records, scrapes, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        print(json.dumps(r), flush=True)
        res["scenarios"].append(r)
    res["when"] = time.strftime("%Y-%m-%d %H:%M:%S %z")
    res["load_end"] = round(os.getloadavg()[0], 2)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "exporter.json"), "w") as f:
        json.dump(res, f, indent=1)
    with open(os.path.join(a.out, "exporter.md"), "w") as f:
        f.write(markdown(res, env))
    print(markdown(res, env))


if __name__ == "__main__":
    main()
