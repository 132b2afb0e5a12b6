"""Runs the benchmark suite and writes perf/results/latest.{json,md} and the PNG plots.

    python3 perf/run.py --quick          # about 2-3 minutes on 2 cores
    python3 perf/run.py --full           # about 10-15 minutes
    python3 perf/run.py --smoke --out DIR   # seconds: every benchmark runs, tiny counts
    python3 perf/run.py --quick --only py_py_msgs_per_s,latency_py_py,peers
    python3 perf/run.py --only wake      # waking parked readers (also perf/bench_wake.py alone)

Every measurement starts fresh processes on fresh /dev/shm files (removed afterwards). Each
figure is the MEDIAN of k runs (k = 3 quick, 5 full, 1 smoke); best and all samples go to
latest_raw.json. The bus and latency groups run in k ROUNDS, each round running every selected
benchmark of the group once, so the figures a ratio compares come from the same minutes. Rates are timed in the receiving process from message WARMUP (10% of the
count) to the last. Peers get fewer messages than the bus when they are slow (the count is in
the raw file); every rate is per message, so the figures compare directly.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_bus  # noqa: E402
import bench_latency  # noqa: E402
import bench_memory  # noqa: E402
import bench_peers  # noqa: E402
import bench_wake  # noqa: E402
import common  # noqa: E402

MODES = {
    "smoke": dict(k=1, bus_n=100_000, default_n=100_000, payload_bytes=4 << 20, peer_n=2_000, py4j_n=200,
                  rtt_n=1_000, rtt_warmup=200, mem_n=(100_000, 200_000), wake="quick"),
    "quick": dict(k=3, bus_n=3_000_000, default_n=10_000_000, payload_bytes=256 << 20, peer_n=100_000, py4j_n=10_000,
                  rtt_n=200_000, rtt_warmup=20_000, mem_n=(1_000_000, 4_000_000), wake="quick"),
    "full": dict(k=5, bus_n=20_000_000, default_n=80_000_000, payload_bytes=2 << 30, peer_n=500_000, py4j_n=50_000,
                 rtt_n=1_000_000, rtt_warmup=100_000, mem_n=(1_000_000, 10_000_000), wake="full"),
}
# Latency first (its pairs interleaved, see bench_latency): right after the throughput runs free
# gigabytes of /dev/shm pages, the kernel's clean-up work competes with a ping-pong that needs both cores (p50 0.25 -> 0.85 us seen).
# The wake group (a sleeping reader's wake-up, bench_wake's own quick or full counts; it also
# writes wake.json and wake.md) right after it, for the same reason.
GROUPS = {"latency": bench_latency, "wake": bench_wake, "bus": bench_bus, "peers": bench_peers,
          "memory": bench_memory}

PEER_NAMES = ("mp_queue", "mp_pipe", "zmq_ipc", "faster_fifo", "iox2")


def derived(f):
    """Ratios from the figures measured in this run (only those that can be computed): the Java
    original (java_original_*) is measured beside the project, never a constant."""
    d = {}

    def ratio(name, a, b):
        if a in f and b in f and f[b]:
            d[name] = f[a] / f[b]
    if "py_py_ns_per_msg" in f and "py_floor_ns_per_msg" in f:
        d["py_bus_overhead_ns_per_msg"] = f["py_py_ns_per_msg"] - f["py_floor_ns_per_msg"]
    if "py_py_fields_ns_per_msg" in f and "py_fields_floor_ns_per_msg" in f:
        d["py_fields_bus_overhead_ns_per_msg"] = \
            f["py_py_fields_ns_per_msg"] - f["py_fields_floor_ns_per_msg"]
    ratio("ratio_py_py_vs_java_original", "py_py_msgs_per_s", "java_original_msgs_per_s")
    ratio("ratio_py_py_fields_vs_java_original", "py_py_fields_msgs_per_s",
          "java_original_msgs_per_s")
    ratio("ratio_py_floor_vs_java_original", "py_floor_msgs_per_s", "java_original_msgs_per_s")
    ratio("ratio_py_fields_floor_vs_java_original", "py_fields_floor_msgs_per_s",
          "java_original_msgs_per_s")
    ratio("ratio_java_java_vs_java_original", "java_java_msgs_per_s", "java_original_msgs_per_s")
    ratio("ratio_py_batch_vs_java_original", "py_py_batch_msgs_per_s", "java_original_msgs_per_s")
    for stem in ("java_java", "py_py"):
        for mode in ("default", "prefault"):
            ratio(f"ratio_{stem}_{mode}_vs_java_original_{mode}", f"{stem}_{mode}_msgs_per_s",
                  f"java_original_{mode}_msgs_per_s")
    ratio("ratio_java_py_vs_java_java", "java_py_msgs_per_s", "java_java_msgs_per_s")
    ratio("ratio_py_java_vs_java_java", "py_java_msgs_per_s", "java_java_msgs_per_s")
    ratio("ratio_java_py_batch_vs_java_java", "java_py_batch_msgs_per_s", "java_java_msgs_per_s")
    ratio("ratio_py_java_batch_vs_java_java", "py_java_batch_msgs_per_s", "java_java_msgs_per_s")
    for p in PEER_NAMES:
        ratio(f"ratio_py_py_vs_{p}", "py_py_msgs_per_s", f"{p}_msgs_per_s")
    ratio("ratio_py_java_vs_py4j", "py_java_msgs_per_s", "py4j_msgs_per_s")
    for stem in ("", "py_java_", "java_py_", "java_java_"):
        # What each pair adds to the machine's round trip measured in the same rounds.
        for pct in ("p50", "p99"):
            if f"{stem}rtt_{pct}_ns" in f and f"floor_rtt_{pct}_ns" in f:
                d[f"{stem}rtt_over_floor_{pct}_ns"] = \
                    f[f"{stem}rtt_{pct}_ns"] - f[f"floor_rtt_{pct}_ns"]
    return d


def targets(f):
    """(target, measured, met) rows for the figures present."""
    rows = []

    def t(label, key, want, fmt, low_is_good=False):
        if key in f:
            v = f[key]
            rows.append((label, fmt(v), v <= want if low_is_good else v >= want))
    x = (lambda v: f"{v:.2f} x")
    ns = (lambda v: f"{v:.0f} ns")
    t("Java port >= 1.0 x Java original, prefaulted", "ratio_java_java_prefault_vs_java_original_prefault",
      1, x)
    t("Java port >= 1.0 x Java original, by default", "ratio_java_java_default_vs_java_original_default",
      1, x)
    t("Python per message (message objects) >= 0.5 x Java original", "ratio_py_py_vs_java_original",
      0.5, x)
    t("Python per message (fields_writer) >= 0.5 x Java original",
      "ratio_py_py_fields_vs_java_original", 0.5, x)
    t("Python per message, by default >= 0.5 x Java original by default",
      "ratio_py_py_default_vs_java_original_default", 0.5, x)
    t("Python bus adds <= 30 ns/message over its loop's floor (message objects)",
      "py_bus_overhead_ns_per_msg", 30, ns, True)
    t("Python bus adds <= 30 ns/message over its loop's floor (fields_writer)",
      "py_fields_bus_overhead_ns_per_msg", 30, ns, True)
    t("Python numpy batch >= 3 x Java original", "ratio_py_batch_vs_java_original", 3, x)
    t("Java -> Python >= 0.9 x Java -> Java", "ratio_java_py_vs_java_java", 0.9, x)
    t("Python -> Java >= 0.9 x Java -> Java", "ratio_py_java_vs_java_java", 0.9, x)
    t("Java -> Python (numpy batch reader) >= 0.9 x Java -> Java",
      "ratio_java_py_batch_vs_java_java", 0.9, x)
    t("Python -> Java (numpy batch writer) >= 0.9 x Java -> Java",
      "ratio_py_java_batch_vs_java_java", 0.9, x)
    t("RTT Python-Python p50 <= 300 ns", "rtt_p50_ns", 300, ns, True)
    t("RTT Python-Python p99 <= 1 us", "rtt_p99_ns", 1000, ns, True)
    for p in PEER_NAMES:
        t(f"Python per-message >= 20 x {p}", f"ratio_py_py_vs_{p}", 20, x)
    t("Python -> Java >= 100 x Py4J", "ratio_py_java_vs_py4j", 100, x)
    rows += bench_wake.targets(f)
    return rows


def select(only, cfg, listing=False):
    chosen = []
    for gname, mod in GROUPS.items():
        picked = [(name, fn) for name, fn in mod.benchmarks(cfg)
                  if not only or name in only or gname in only]
        if picked and hasattr(mod, "interleaved") and not listing:
            # Run together, round by round, so they are measured in the same minutes.
            names = [name for name, _ in picked]
            label = "+".join(names) if len(names) <= 3 else f"{gname} ({len(names)} benchmarks)"
            chosen.append((label, mod.interleaved(cfg, names)))
        else:
            chosen.extend(picked)
    return chosen


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group()
    for m in MODES:
        g.add_argument(f"--{m}", dest="mode", action="store_const", const=m)
    p.add_argument("--only", help="comma-separated benchmark or group names "
                   f"(groups: {', '.join(GROUPS)}); results go to only.json instead of latest.json")
    p.add_argument("--out", default=os.path.join(common.PERF, "results"))
    p.add_argument("--list", action="store_true", help="list the benchmark names")
    p.add_argument("--render", action="store_true",
                   help="only rewrite latest.md and the plots from latest.json and latest_raw.json")
    a = p.parse_args(argv)
    if a.render:
        return render(a.out)
    mode = a.mode or "quick"
    cfg = MODES[mode]
    only = set(a.only.split(",")) if a.only else None
    chosen = select(only, cfg, listing=a.list)
    if a.list:
        print("\n".join(n for n, _ in chosen))
        return 0
    if not chosen:
        p.error(f"--only {a.only} matches no benchmark (see --list)")

    from mappedbus_py import jvm
    jvm.build_jars()
    os.makedirs(a.out, exist_ok=True)
    figures = {"mode": mode, "runs_per_figure": cfg["k"], "statistic": "median",
               "date": time.strftime("%Y-%m-%d %H:%M:%S %z"), **common.machine()}
    raw = {"config": {k: v for k, v in cfg.items()}}
    t_start = time.monotonic()
    print(f"mappedbus_py benchmarks, {mode} mode (median of {cfg['k']}), {len(chosen)} "
          f"benchmarks; load average {figures['machine_load_avg_start']}", file=sys.stderr)
    for i, (name, fn) in enumerate(chosen, 1):
        print(f"[{i}/{len(chosen)}] {name} ...", end="", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        figs, r = fn()
        figures.update(figs)
        raw.update(r)
        shown = ", ".join(f"{k}={fmt(v)}" for k, v in figs.items()
                          if k.endswith(("msgs_per_s", "p50_ns", "p99_ns", "growth_kb")))
        print(f" {time.monotonic() - t0:.1f} s  {shown}", file=sys.stderr, flush=True)
    figures.update(derived(figures))
    figures["machine_load_avg_end"] = round(os.getloadavg()[0], 2)
    figures["suite_seconds"] = round(time.monotonic() - t_start, 1)

    stem = "only" if only else "latest"
    with open(os.path.join(a.out, f"{stem}.json"), "w") as f:
        json.dump(figures, f, indent=1, sort_keys=False)
        f.write("\n")
    with open(os.path.join(a.out, f"{stem}_raw.json"), "w") as f:
        json.dump(raw, f)
    with open(os.path.join(a.out, f"{stem}.md"), "w") as f:
        f.write(markdown(figures, raw))
    if any(k.startswith("wake_") for k in figures):
        bench_wake.write_results(a.out, figures, raw)
    import report
    if not only:
        report.plots(figures, raw, a.out)
    print(f"done in {figures['suite_seconds']} s: {a.out}/{stem}.json, {stem}.md"
          + ("" if only else ", *.png"), file=sys.stderr)
    return 0


def render(out):
    import report
    with open(os.path.join(out, "latest.json")) as f:
        figures = json.load(f)
    with open(os.path.join(out, "latest_raw.json")) as f:
        raw = json.load(f)
    with open(os.path.join(out, "latest.md"), "w") as f:
        f.write(markdown(figures, raw))
    report.plots(figures, raw, out)
    return 0


def markdown(figures, raw):
    """latest.md: the report's tables, the wake group's (if it ran), every target."""
    import report
    text = report.markdown(figures, targets(figures), raw)
    if any(k.startswith("wake_") for k in figures):
        text += "\n" + bench_wake.markdown(figures, raw, with_targets=False)
    return text


def fmt(v):
    if isinstance(v, int) and not isinstance(v, bool) and v >= 1e3:
        v = float(v)
    if isinstance(v, float) and v >= 1e6:
        return f"{v / 1e6:.2f}M"
    if isinstance(v, float) and v >= 1e3:
        return f"{v / 1e3:.1f}k"
    return f"{v:.0f}" if isinstance(v, float) else str(v)


if __name__ == "__main__":
    sys.exit(main())
