"""await read_async() against asyncio's own floor, in one run (issue 33).

    python3 perf/bench_asyncio.py             # 3 rounds of 500 messages at 1 kHz a variant
    python3 perf/bench_asyncio.py --quick     # 1 round of 200
    python3 perf/bench_asyncio.py --rate 50hz --json out.json

perf/bench_wake.py's sporadic probe (one writer process sends a 16-byte message carrying its
send time every 1 ms; one reader process waits for each and stores receive - send time), three
variants, each in fresh processes on a fresh /dev/shm bus, interleaved over k rounds (the order
rotating) so the machine's drift falls on all alike:

  pipe_async   asyncio's floor: a FIFO read by an asyncio loop with loop.add_reader (read_async's
               shape: look, register, await the callback, unregister, read): one kernel wake-up
               a message through asyncio, nothing of the bus
  ring         Python -> Python, await reader.read_async(): reader.fileno() an io_uring whose
               FUTEX_WAIT the writer's wake completes (one wake-up a message)
  thread       the same with MAPPEDBUS_PY_WAKEFD=thread: the fallback where io_uring is missing,
               a relay thread woken by the writer writes an eventfd (two wake-ups a message)

Reader CPU is the reader process's (every thread) over the wall time of the counted messages, in
% of one core. Targets (issue 33), for ``ring``: p50 <= 1.5 x the floor's p50 and CPU within 1.5
percentage points of the floor's. The first 10 % of each run's messages are not counted.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import bench_wake  # noqa: E402

VARIANTS = {
    # name: (label, bench_wake pair, MAPPEDBUS_PY_WAKEFD)
    "pipe_async": ("asyncio floor: pipe, loop.add_reader + os.read", "pipe_async", None),
    "ring": ("bus, read_async(), fileno() an io_uring", "py_py_async", "ring"),
    "thread": ("bus, read_async(), fileno() a relay thread's eventfd", "py_py_async", "thread"),
}
TARGET_P50, TARGET_CPU_PTS = 1.5, 1.5
KIND_ENV = "MAPPEDBUS_PY_WAKEFD"


def run_variant(name, rate, n):
    _, pair, kind = VARIANTS[name]
    saved = os.environ.get(KIND_ENV)
    if kind is not None:
        os.environ[KIND_ENV] = kind         # the reader process inherits it
    try:
        return bench_wake.probe(pair, rate, n, n // 10)
    finally:
        if saved is None:
            os.environ.pop(KIND_ENV, None)
        else:
            os.environ[KIND_ENV] = saved


def ring_available():
    """Whether this kernel gives a reader's fileno() the io_uring kind (else both bus variants
    run the relay thread)."""
    import tempfile
    from mappedbus_py._core._wake import WakeFile
    from mappedbus_py._core._wakefd import WakeFd, WakeFdKind
    with tempfile.TemporaryDirectory() as tmp:
        w = WakeFile(os.path.join(tmp, "probe.wake"))
        try:
            fd = WakeFd(w, 1_000_000, 1_000_000, WakeFdKind.RING)
            kind = fd.kind
            fd.close()
        finally:
            w.close()
    return kind is WakeFdKind.RING


def figures(results):
    out = {}
    for name, rs in results.items():
        lat = np.concatenate([r["lat"] for r in rs])
        out[name] = {"p50_us": float(np.percentile(lat, 50)) / 1e3,
                     "p99_us": float(np.percentile(lat, 99)) / 1e3,
                     "cpu_pct": 100.0 * sum(r["cpu_ns"] for r in rs) / sum(r["wall_ns"] for r in rs),
                     "messages": int(len(lat))}
    return out


def table(f, rate):
    floor = f["pipe_async"]
    lines = [f"rate {rate}; reader CPU in % of one core, every thread", "",
             "| variant | p50 | p99 | CPU | p50 / floor | CPU - floor |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, v in f.items():
        lines.append(f"| {VARIANTS[name][0]} | {v['p50_us']:.1f} us | {v['p99_us']:.1f} us | "
                     f"{v['cpu_pct']:.2f} % | {v['p50_us'] / floor['p50_us']:.2f} x | "
                     f"{v['cpu_pct'] - floor['cpu_pct']:+.2f} pts |")
    ring = f["ring"]
    p50_ok = ring["p50_us"] <= TARGET_P50 * floor["p50_us"]
    cpu_ok = ring["cpu_pct"] - floor["cpu_pct"] <= TARGET_CPU_PTS
    lines += ["", f"target p50 <= {TARGET_P50:g} x floor: {'met' if p50_ok else 'MISSED'}; "
                  f"CPU within {TARGET_CPU_PTS:g} pts of floor: {'met' if cpu_ok else 'MISSED'}"]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 round of 200 messages")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--n", type=int, default=None, help="messages a run")
    ap.add_argument("--rate", choices=sorted(bench_wake.RATES), default="1khz")
    ap.add_argument("--only", nargs="+", choices=sorted(VARIANTS), default=list(VARIANTS))
    ap.add_argument("--json", help="write the figures here too")
    a = ap.parse_args(argv)
    k = a.rounds or (1 if a.quick else 3)
    n = a.n or (200 if a.quick else 500)
    names = ["pipe_async"] + [v for v in a.only if v != "pipe_async"]
    results = {name: [] for name in names}
    for i in range(k):
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order:
            print(f"round {i + 1}/{k}: {name}", file=sys.stderr, flush=True)
            results[name].append(run_variant(name, a.rate, n))
    f = figures(results)
    if not ring_available():
        print("WARNING: no io_uring FUTEX_WAIT here: the 'ring' row ran the relay thread")
    print(table(f, a.rate))
    if a.json:
        with open(a.json, "w") as out:
            json.dump({"rate": a.rate, "rounds": k, "messages": n, "figures": f}, out, indent=1)


if __name__ == "__main__":
    main()
