"""What a consumer's commit() costs (issue 23): a read_into loop with and without a commit
after every record, side by side in one run.

    python3 perf/bench_consumers.py            # 7 rounds of 2,000,000 records a loop
    python3 perf/bench_consumers.py --quick    # a smoke run (1 round, 200,000 records)

One process: a PriceUpdate bus on /dev/shm is filled once; then each round runs, in an order
that alternates from round to round, the plain loop (``while r.read_into(msg): n += 1``) and
the committing loop (``while r.read_into(msg): r.commit()``) over every record, with a seek
back to the first record between them. Both use one reader holding a consumer name, so only
the commit differs. Per loop: nanoseconds per record (wall time / records). Reported: the
median of the rounds for each loop, and the median of the rounds' differences (committing -
plain, each round's pair taken together so the machine's drift falls on both). Target: at
most 30 ns per record. The same for a rolling bus (16 MiB segments; its Python-level reader
pays more per record today, issue 24) as information.

Results: perf/results/consumers.md and .json.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import machine  # noqa: E402

from mappedbus_py import (MappedBusReader, MappedBusWriter, PriceUpdate,  # noqa: E402
                          RollingBusReader, RollingBusWriter)
from mappedbus_py.formats.files import remove_bus  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET_NS = 30


def fill(writer, n):
    msg = PriceUpdate(source=1, price=100, quantity=5)
    for i in range(n):
        msg.price = i
        writer.write(msg)


def plain(r, msg):
    n = 0
    t = time.perf_counter_ns()
    while r.read_into(msg):
        n += 1
    return (time.perf_counter_ns() - t) / n, n


def committing(r, msg):
    n = 0
    commit = r.commit
    t = time.perf_counter_ns()
    while r.read_into(msg):
        commit()
        n += 1
    return (time.perf_counter_ns() - t) / n, n


def rounds(r, first, k):
    msg = PriceUpdate()
    out = []
    for i in range(k):
        pair = {}
        order = (("plain", plain), ("commit", committing))
        for name, loop in (order if i % 2 == 0 else order[::-1]):
            r.seek(first)
            pair[name], n = loop(r, msg)
        pair["diff"] = pair["commit"] - pair["plain"]
        pair["records"] = n
        out.append(pair)
    return out


def summary(rs):
    return {k: round(statistics.median(p[k] for p in rs), 2) for k in ("plain", "commit", "diff")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n, k = (200_000, 1) if args.quick else (2_000_000, 7)
    base = "/dev/shm" if os.path.isdir("/dev/shm") else "/tmp"
    path = os.path.join(base, f"bench-consumers-{os.getpid()}")
    rpath = path + ".d"
    info = machine()
    started = time.strftime("%Y-%m-%d %H:%M:%S %z")
    try:
        with MappedBusWriter(path, 8 + n * 20 + 4096, 12) as w:
            fill(w, n)
        with MappedBusReader(path, consumer="bench") as r:
            single = rounds(r, 8, k)
        with RollingBusWriter(rpath, 16 << 20, 12) as w:
            fill(w, n)
        with RollingBusReader(rpath, consumer="bench") as r:
            rolling = rounds(r, 8, k)
    finally:
        remove_bus(path)
        remove_bus(rpath)
    info["load_avg_end"] = round(os.getloadavg()[0], 2)
    result = {"started": started, "mode": "quick" if args.quick else "full", "records": n,
              "rounds": k, "machine": info, "single": single, "rolling": rolling,
              "single_median": summary(single), "rolling_median": summary(rolling),
              "target_ns": TARGET_NS}
    s, ro = result["single_median"], result["rolling_median"]
    verdict = "met" if s["diff"] <= TARGET_NS else "NOT met"
    lines = [
        f"# commit() after every record (issue 23), {started}", "",
        f"Machine: {info['machine_cpu']}, {info['machine_cores']} cores, "
        f"{info['machine_ram_gb']} GB RAM, Linux {info['machine_kernel']}, "
        f"{info['machine_python']}. Load average {info['machine_load_avg_start']} at start, "
        f"{info['load_avg_end']} at end (the machine is shared). `{result['mode']}` mode: {k} "
        f"rounds of {n:,} PriceUpdate records a loop, one process, /dev/shm.", "",
        "ns per record, medians of the rounds; the difference is the median of each round's "
        "(committing - plain), the two loops of a round run back to back in alternating order.",
        "",
        "| bus | plain read_into loop | read_into + commit() | commit() costs |",
        "| --- | ---: | ---: | ---: |",
        f"| single file | {s['plain']:.1f} | {s['commit']:.1f} | {s['diff']:.1f} |",
        f"| rolling (information) | {ro['plain']:.1f} | {ro['commit']:.1f} | {ro['diff']:.1f} |",
        "",
        f"Target (single file): commit() at most {TARGET_NS} ns over the plain loop: **{verdict}**.",
        "",
        "Each round (single file, plain / commit ns): " + "; ".join(
            f"{p['plain']:.1f} / {p['commit']:.1f}" for p in single) + ".",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.quick:
        os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
        with open(os.path.join(HERE, "results", "consumers.json"), "w") as f:
            json.dump(result, f, indent=1)
        with open(os.path.join(HERE, "results", "consumers.md"), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
