"""End-to-end latency Python -> bus -> Spark -> bus -> Python, micro-batch and Real-time Mode side by side.

    python perf/spark_latency.py                       # 1 k, 10 k, 100 k msgs/s, 5 s each
    python perf/spark_latency.py --rates 1000,10000 --seconds 10

For each trigger (micro-batch, back to back: the ``mappedbus`` sink; Real-time Mode: ``realtime_passthrough``,
the source's real-time reader and ``BusRealTimeSink``) one pass-through query copies bus A to bus B, and
one Spark session (``local[2]``) runs both in turn. A paced writer process offers each rate for
``--seconds`` (at least ``--min-records`` records), each record stamped with ``time.monotonic_ns()``
(CLOCK_MONOTONIC, Java's ``System.nanoTime()`` on Linux); a reader process waits on bus B with the bus's
own blocking wait and takes ``now - stamp`` for every record: p50/p99/p99.9/max per rate. Real-time
Mode also runs ``--rt-extra-rates`` to find the throughput at which its p99 crosses ``--p99-target-ms``.
Writes ``perf/results/spark_latency.json`` and ``.md`` (``--out``).

The real-time batch (``--rt-batch``, default 10 minutes) is longer than the run, so no batch boundary
falls inside it: each boundary (checkpoint, next batch's tasks) holds records back for about
0.1-0.3 s; ``--rt-batch "5 seconds"`` shows that cost in the tail.
"""
import argparse
import json
import multiprocessing as mp
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from array import array

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from mappedbus_py import MappedBusReader, MappedBusWriter, Message, int32, int64  # noqa: E402
from mappedbus_py.formats.files import remove_bus  # noqa: E402


class Stamped(Message, type_id=12):
    """A record of phase ``phase`` (-1: warm-up), number ``seq``, sent at ``ts`` (monotonic ns)."""
    phase = int32()
    seq = int32()
    ts = int64()


LAYOUT = "phase:int32,seq:int32,ts:int64"
RECORD = 16
WARMUP = -1


def writer(path, size, phase, n, rate, out):
    """Writes n records at ``rate`` per second (sleeping while ahead, spinning the last 50 us);
    reports the achieved rate."""
    msg = Stamped()
    msg.phase = phase
    with MappedBusWriter(path, size, RECORD) as w:
        start = time.perf_counter()
        for i in range(n):
            due = start + i / rate
            while True:
                ahead = due - time.perf_counter()
                if ahead <= 0:
                    break
                if ahead > 0.00005:
                    time.sleep(ahead - 0.00005)
            msg.seq = i
            msg.ts = time.monotonic_ns()
            while not w.write(msg):
                pass
        took = time.perf_counter() - start
    out.put(n / took if took > 0 else float("inf"))


def reader(path, size, expected, timeout, out):
    """Reads bus B until every phase's ``expected[phase]`` records came or ``timeout`` passes; sends,
    per phase, the latencies (ms, an array) and the number of duplicates."""
    msg = Stamped()
    lat = {p: array("d") for p in expected}
    seen = {p: bytearray(n) for p, n in expected.items()}
    dup = {p: 0 for p in expected}
    left = sum(expected.values())
    deadline = time.monotonic() + timeout
    with MappedBusReader(path, size, RECORD) as r:
        while left and time.monotonic() < deadline:
            if not r.wait(0.2):
                continue
            r.read_message(msg)
            now = time.monotonic_ns()
            p = msg.phase
            if p not in seen or msg.seq >= len(seen[p]):
                continue
            if seen[p][msg.seq]:
                dup[p] += 1
                continue
            seen[p][msg.seq] = 1
            lat[p].append((now - msg.ts) / 1e6)
            left -= 1
    out.put({p: (lat[p].tobytes(), dup[p]) for p in expected})


def pct(sorted_values, q):
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(round(q * (len(sorted_values) - 1))))]


def run_mode(spark, mode, phases, args, ctx, work):
    """One query (micro-batch or real-time) over fresh buses; returns one result per phase."""
    from mappedbus_py.spark import realtime_passthrough
    tag = f"spark-latency-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    a = os.path.join(args.dir, tag + "-a")
    b = os.path.join(args.dir, tag + "-b")
    total = args.warmup + sum(n for _, _, n in phases)
    size = 8 + (total + 64) * (8 + RECORD)
    for p in (a, b):
        MappedBusWriter(p, size, RECORD).open().close()
    checkpoint = os.path.join(work, mode + "-checkpoint")
    query = None
    try:
        if mode == "real-time":
            query = realtime_passthrough(spark, a, b, LAYOUT, batch=args.rt_batch, checkpoint=checkpoint,
                                         src_options={"fileSize": size}, fileSize=size, typeId=Stamped.type_id)
        else:
            query = (spark.readStream.format("mappedbus").option("path", a).option("fileSize", size)
                     .option("layout", LAYOUT).load().drop("position", "meta")
                     .writeStream.format("mappedbus").outputMode("append").option("path", b)
                     .option("fileSize", size).option("layout", LAYOUT).option("typeId", Stamped.type_id)
                     .option("checkpointLocation", checkpoint).start())
        expected = {WARMUP: args.warmup}
        expected.update({i: n for i, (_, _, n) in enumerate(phases)})
        lat_q, rate_q = ctx.Queue(), ctx.Queue()
        rd = ctx.Process(target=reader, args=(b, size, expected, args.timeout, lat_q))
        rd.start()
        # Warm-up (not counted): the first rows compile the query's code; JIT the paths.
        plan = [(WARMUP, args.warmup_rate, args.warmup)] + [(i, rate, n) for i, (rate, _, n) in enumerate(phases)]
        achieved = {}
        for phase, rate, n in plan:
            w = ctx.Process(target=writer, args=(a, size, phase, n, rate, rate_q))
            w.start()
            w.join()
            achieved[phase] = rate_q.get(timeout=30)
            print(f"  {mode}: phase {phase} offered {rate:.0f}/s achieved {achieved[phase]:.0f}/s", flush=True)
            time.sleep(args.gap)
        got = lat_q.get(timeout=args.timeout + 60)
        rd.join()
        if query.exception() is not None:
            raise RuntimeError(f"{mode} query failed: {query.exception()}")
        results = []
        for i, (rate, extra, n) in enumerate(phases):
            raw, dup = got[i]
            lat = array("d")
            lat.frombytes(raw)
            s = sorted(lat)
            results.append({
                "mode": mode, "offered_per_s": rate, "achieved_per_s": round(achieved[i]), "sent": n,
                "received": len(s), "duplicates": dup, "extra_rate": extra,
                "p50_ms": pct(s, 0.5), "p99_ms": pct(s, 0.99), "p99_9_ms": pct(s, 0.999),
                "max_ms": s[-1] if s else None,
            })
            r = results[-1]
            print(f"  {mode} {rate:>7.0f}/s: {r['received']}/{n} p50 {r['p50_ms']} p99 {r['p99_ms']} "
                  f"p99.9 {r['p99_9_ms']} max {r['max_ms']} ms", flush=True)
        return results
    finally:
        if query is not None:
            query.stop()
        for p in (a, b):
            remove_bus(p)


def fmt(v):
    return "-" if v is None else (f"{v:.2f}" if v < 100 else f"{v:.0f}")


def markdown(report):
    lines = [f"# Spark end-to-end latency (Python -> bus -> Spark -> bus -> Python)", "",
             f"{report['machine']}; {report['spark']}; `local[2]`; pass-through query; real-time batch "
             f"`{report['rt_batch']}`; {report['seconds']} s per rate (at least {report['min_records']} records); "
             f"latency = reader's `monotonic_ns()` - writer's stamp.", "",
             "| trigger | offered msgs/s | achieved | received | p50 ms | p99 ms | p99.9 ms | max ms |",
             "|---|---|---|---|---|---|---|---|"]
    for r in report["results"]:
        lines.append(f"| {r['mode']} | {r['offered_per_s']:,} | {r['achieved_per_s']:,} | "
                     f"{r['received']}/{r['sent']} | {fmt(r['p50_ms'])} | {fmt(r['p99_ms'])} | "
                     f"{fmt(r['p99_9_ms'])} | {fmt(r['max_ms'])} |")
    c = report["realtime_p99_crossing"]
    lines += ["", f"Real-time p99 <= {report['p99_target_ms']} ms up to {c['last_under'] or 'none of the rates'} "
                  f"msgs/s; first rate above: {c['first_over'] or 'none tested'} msgs/s.",
              f"Targets at 10 k msgs/s (real-time p50 <= 2 ms, p99 <= 10 ms): {report['targets']}."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="1000,10000,100000")
    ap.add_argument("--rt-extra-rates", default="20000,50000",
                    help="more rates for real-time only, to find where its p99 crosses the target")
    ap.add_argument("--seconds", type=float, default=5.0, help="offered load duration per rate")
    ap.add_argument("--min-records", type=int, default=10000)
    ap.add_argument("--warmup", type=int, default=5000)
    ap.add_argument("--warmup-rate", type=float, default=2000)
    ap.add_argument("--gap", type=float, default=1.0, help="pause between rates (s)")
    ap.add_argument("--rt-batch", default="10 minutes")
    ap.add_argument("--p99-target-ms", type=float, default=10.0)
    ap.add_argument("--modes", default="micro-batch,real-time")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir())
    ap.add_argument("--out", default=os.path.join(ROOT, "perf", "results"))
    args = ap.parse_args(argv)

    def phase_list(rates, extra):
        return [(r, extra, max(args.min_records, int(r * args.seconds))) for r in rates]

    rates = [float(x) for x in args.rates.split(",") if x]
    extra = [float(x) for x in args.rt_extra_rates.split(",") if x]
    ctx = mp.get_context("spawn")
    work = tempfile.mkdtemp(prefix="spark-latency-", dir=args.dir)
    from mappedbus_py.spark import session
    spark = session("spark_latency", "local[2]", spark_sql_shuffle_partitions=1)
    spark.sparkContext.setLogLevel("OFF")  # a stopped real-time task logs its kill as an error
    results = []
    try:
        for mode in args.modes.split(","):
            ph = phase_list(rates, False)
            if mode == "real-time":
                ph = sorted(ph + phase_list(extra, True))
            print(f"{mode}: {len(ph)} rates", flush=True)
            results += run_mode(spark, mode, ph, args, ctx, work)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)

    rt = sorted((r for r in results if r["mode"] == "real-time"), key=lambda r: r["offered_per_s"])
    under = [r["offered_per_s"] for r in rt if r["p99_ms"] is not None and r["p99_ms"] <= args.p99_target_ms
             and r["received"] == r["sent"]]
    over = [r["offered_per_s"] for r in rt if r["offered_per_s"] not in under]
    at10k = next((r for r in rt if r["offered_per_s"] == 10000), None)
    targets = "not measured" if at10k is None else (
        f"p50 {fmt(at10k['p50_ms'])} ms ({'met' if at10k['p50_ms'] <= 2 else 'MISSED'}), "
        f"p99 {fmt(at10k['p99_ms'])} ms ({'met' if at10k['p99_ms'] <= 10 else 'MISSED'})")
    import pyspark
    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load average "
                   f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end",
        "spark": f"pyspark {pyspark.__version__}", "rt_batch": args.rt_batch, "seconds": args.seconds,
        "min_records": args.min_records, "p99_target_ms": args.p99_target_ms,
        "results": [{k: v for k, v in r.items() if k != "extra_rate"} for r in
                    sorted(results, key=lambda r: (r["mode"], r["offered_per_s"]))],
        "realtime_p99_crossing": {"last_under": max((u for u in under if not over or u < min(over)), default=None),
                                  "first_over": min(over, default=None)},
        "targets": targets,
    }
    for r in report["results"]:
        for k in ("offered_per_s",):
            r[k] = int(r[k])
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "spark_latency.json"), "w") as f:
        json.dump(report, f, indent=1)
    md = markdown(report)
    with open(os.path.join(args.out, "spark_latency.md"), "w") as f:
        f.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
