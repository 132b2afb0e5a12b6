"""Waking parked readers (issue 22): the sporadic probe and the busy path.

    python3 perf/bench_wake.py            # full: 3 rounds, 500 messages at 1 kHz and 150 at 50 Hz a pair
    python3 perf/bench_wake.py --quick    # a smoke run of about 20 s (1 round, few messages)
    python3 perf/run.py --only wake       # the same as a group of the suite (its mode's counts)
    python3 perf/bench_wake.py --spin-sweep   # spin_park's spin, 0 to 50 us (wake_spin.*, ~4 min)

The sporadic probe: one writer process sends one 16-byte message now and then (int64 sequence
number, int64 send time read from CLOCK_MONOTONIC just before the send: time.monotonic_ns,
System.nanoTime), sleeping between messages (time.sleep, Thread.sleep) 1 ms ("1 kHz") or 20 ms
("50 Hz"); one reader process waits for each with its library's own wait and stores receive time
(the same clock, read as the wait returns) - send time. The pairs:

  py_py        Python -> Python, reader.read(timeout) (the default idle strategy, spin_park)
  py_py_async  Python -> Python, await reader.read_async(timeout) under asyncio.run
  java_java    Java -> Java, MappedBusReader.waitNext with IdleStrategy.SPIN_PARK
  py_java      Python -> Java, waitNext
  java_py      Java -> Python, read(timeout)
  zmq          pyzmq PUSH -> PULL over ipc://, blocking recv (a peer)
  pipe         the floor: a FIFO between two Python processes, blocking os.read (the kernel's own
               wake-up of a sleeping reader, nothing of the bus)
  pipe_async   asyncio's floor: the same FIFO, the reader an asyncio loop (asyncio.run) waiting
               with loop.add_reader on the read end, then os.read (read_async's own shape: look,
               else register, await the callback's future, unregister, read): what one kernel
               wake-up costs through asyncio, nothing of the bus. py_py_async is compared with it
               (as information) besides the blocking pipe (its targets)

Every pair runs at both rates in ONE run, interleaved: k rounds, each running every pair once at
each rate (the pairs' order rotates from round to round), each time in fresh processes on a fresh
/dev/shm bus, so the machine's drift from minute to minute falls on all pairs alike. The first
10% of each run's messages are not counted (process start, JIT, first faults). Percentiles are
of all counted messages of all rounds together.

Reader CPU is the reader process's CPU time over the wall time from its receipt of the first
counted message to the last, in % of one core: utime + stime of every thread of the process
(Python: time.process_time_ns, which counts the reader's wake-up relay thread where it has
one, and pyzmq's I/O thread too; Java: the on-CPU nanoseconds of every thread of the JVM from
/proc/self/task/*/schedstat, so the JIT compilers, GC and other JVM background threads count;
/proc/PID/stat's ticks, 10 ms, are too coarse for 1 % of half a second). Nothing is subtracted.
The pipe floor's CPU is the price of one kernel wake-up a message in a Python loop: on this VM a
wake-up costs about 27 us of CPU (2.7 % of a core at 1 kHz), so a CPU target reads beside it.

The busy path: 1 Python writer -> 1 Python reader at full speed (perf/bench_bus.py's processes)
and the round trip over two buses (perf/bench_latency.py's ping-pong), the readers waiting with
the library's blocking wait() under idle="spin_park" (the default) and idle="busy_spin", in the
order A B B A in every round (their median of 2k runs each; round trips pooled).

Targets (issue 22), each a ratio within this one run: for every bus pair at both rates, p50 <= 2
x the pipe floor's p50, p99 <= 3 x its p99, reader CPU <= 1 % of a core (shown beside the
floor's); at 50 Hz a p50 at least 5 x lower than pyzmq's; on the busy path spin_park within 3 %
of busy_spin in messages/s and in round-trip p50. Beside them, as information (no target): await
read_async() against asyncio's own floor (pipe_async), p50, p99 and reader CPU.

Figures (wake.json, wake.md; run.py puts them in latest.json too): wake_PAIR_RATE_{p50,p90,p99,
max,mean}_ns, _cpu_pct, _messages, _rate_hz; wake_PAIR_RATE_p50_vs_pipe, _p99_vs_pipe;
wake_PAIR_50hz_zmq_p50_vs (pyzmq's p50 / the pair's); wake_busy_{spin_park,busy_spin}_msgs_per_s,
_rtt_p50_ns, _rtt_p99_ns; wake_busy_msgs_ratio and wake_busy_rtt_p50_ratio (spin_park /
busy_spin); wake_py_py_async_RATE_{p50,p99,cpu}_vs_pipe_async (the pair / asyncio's floor) and
wake_py_py_async_RATE_cpu_vs_pipe (/ the blocking pipe's CPU).

The spin sweep (--spin-sweep; wake_spin.json, wake_spin.md): spin_park's spin (the reader's
``spin=``, DEFAULT_SPIN in mappedbus_py/_core/_reader.pyx) at each of SWEEP_SPINS, in one run: the busy
path (1 -> 1 msgs/s and round-trip p50/p99, both ping-pong readers with that spin; busy_spin
beside them, the reference) and Python -> Python read(timeout) at 1 kHz and 50 Hz (p50/p99,
reader CPU; the pipe floor beside them). k rounds; each runs the probes (every spin and the pipe
once at each rate, the order rotating from round to round), then the busy path's runs in the
order busy_spin, spins ascending, then descending, busy_spin (each spin twice a round, at mirrored
places). Figures wake_spin_TAG_... (TAG: 0us, 2us, ..., busy_spin, pipe): _msgs_per_s (median),
_msgs_ratio, _rtt_p50_ns, _rtt_p99_ns, _rtt_p50_ratio (to busy_spin), _RATE_p50_ns, _p99_ns,
_cpu_pct; wake_spin_choice_s: the least CPU at 1 kHz among the spins within 3 % of busy_spin on
the busy path (msgs/s not 3 % below, round-trip p50 not 3 % above).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import common  # noqa: E402
from common import ShmFiles, bus_file_size, create_bus, py_worker, reader_then_writers  # noqa: E402

PROBE_SIZE = 16                      # int64 sequence number, int64 send time
WAKE_PROBE = "io.mappedbuspy.perf.WakeProbe"
# A small JVM: the probe allocates nothing while it runs; the serial GC has no threads of its own.
JVM_ARGS = ("-Xms64m", "-Xmx64m", "-XX:+UseSerialGC")
RATES = {"1khz": 1_000_000, "50hz": 20_000_000}       # ns slept between messages
RATE_LABELS = {"1khz": "1 kHz (1 ms sleep)", "50hz": "50 Hz (20 ms sleep)"}
PAIRS = {
    # name: (label, writer, reader); a side is py, py_async (reader), java, zmq or pipe
    "py_py": ("Python -> Python, read(timeout)", "py", "py"),
    "py_py_async": ("Python -> Python, await read_async()", "py", "py_async"),
    "java_java": ("Java -> Java, waitNext", "java", "java"),
    "py_java": ("Python -> Java, waitNext", "py", "java"),
    "java_py": ("Java -> Python, read(timeout)", "java", "py"),
    "zmq": ("pyzmq PUSH -> PULL, ipc://, blocking recv", "zmq", "zmq"),
    "pipe": ("floor: pipe, blocking os.read", "pipe", "pipe"),
    "pipe_async": ("asyncio floor: pipe, loop.add_reader + os.read", "pipe", "pipe_async"),
}
BUS_PAIRS = ("py_py", "py_py_async", "java_java", "py_java", "java_py")
# Floors a pair is also compared with (as information) besides the blocking pipe.
OWN_FLOOR = {"py_py_async": "pipe_async"}
IDLES = ("spin_park", "busy_spin")
MODES = {
    "quick": dict(k=1, n={"1khz": 100, "50hz": 20}, busy_n=1_000_000, rtt_n=20_000,
                  rtt_warmup=2_000),
    "full": dict(k=3, n={"1khz": 500, "50hz": 150}, busy_n=5_000_000, rtt_n=200_000,
                 rtt_warmup=20_000),
}
TARGET_P50, TARGET_P99, TARGET_CPU, TARGET_ZMQ, TARGET_BUSY = 2.0, 3.0, 1.0, 5.0, 0.03
# The spin sweep (--spin-sweep): spin_park's spin (seconds) and its counts.
SWEEP_SPINS = (0.0, 2e-6, 5e-6, 10e-6, 20e-6, 50e-6)
SWEEP_MODES = {
    "quick": dict(k=1, n={"1khz": 100, "50hz": 20}, busy_n=1_000_000, rtt_n=20_000,
                  rtt_warmup=2_000),
    "full": dict(k=5, n={"1khz": 500, "50hz": 100}, busy_n=5_000_000, rtt_n=200_000,
                 rtt_warmup=20_000),
}


# -- what can run here ---------------------------------------------------------------------

def java_missing():
    """None when the Java pairs can run, else why not."""
    from mappedbus_py import jvm
    try:
        jvm.java_executable()
        try:
            jvm.build_jars()
        except (jvm.JavaNotFoundError, OSError, RuntimeError):
            pass                     # no javac: a jar built earlier still serves
        jvm.jar_path(build=False)
    except jvm.JavaNotFoundError as e:
        return f"no JDK ({e}): the Java pairs are skipped"
    return None


def zmq_missing():
    import importlib.util
    if importlib.util.find_spec("zmq") is None:
        return "the Python package 'zmq' (pyzmq, the perf extra) is not installed: skipped"
    return None


def why_not(pair):
    _, w, r = PAIRS[pair]
    if "java" in (w, r):
        return java_missing()
    if w == "zmq":
        return zmq_missing()
    return None


# -- one run -------------------------------------------------------------------------------

def _java(*args):
    from mappedbus_py import jvm
    return jvm.java_command(WAKE_PROBE, *args, jvm_args=JVM_ARGS)


def probe(pair, rate, n, warmup, spin=None):
    """One run of ``pair`` at ``rate`` in fresh processes: the reader's JSON plus ``lat``, the
    counted messages' latencies (ns). ``spin``: a Python bus reader's spin (seconds; the
    library's default when None)."""
    sflag = [] if spin is None else [f"spin={spin!r}"]
    _, writer, reader = PAIRS[pair]
    interval = RATES[rate]
    with ShmFiles(f"wake-{pair}-{rate}") as shm, tempfile.TemporaryDirectory() as tmp:
        lat_file = os.path.join(tmp, "lat.bin")
        if writer == "zmq":
            chan = f"ipc://{tmp}/sock"
            rcmd = py_worker("probe-reader", "zmq", chan, n, warmup, lat_file)
            wcmd = py_worker("probe-writer", "zmq", chan, n, interval)
        elif writer == "pipe":
            chan = os.path.join(tmp, "fifo")
            os.mkfifo(chan, 0o600)
            rcmd = py_worker("probe-reader", reader, chan, n, warmup, lat_file)
            wcmd = py_worker("probe-writer", "pipe", chan, n, interval)
        else:
            chan = shm("bus")
            size = bus_file_size(n, PROBE_SIZE, slack=16)
            create_bus(chan, size, PROBE_SIZE)
            if reader == "java":
                rcmd = _java("reader", chan, size, n, warmup, lat_file)
            else:
                kind = "bus_async" if reader == "py_async" else "bus"
                rcmd = py_worker("probe-reader", kind, chan, n, warmup, lat_file, *sflag)
            wcmd = (_java("writer", chan, size, n, interval) if writer == "java"
                    else py_worker("probe-writer", "bus", chan, n, interval))
        res = reader_then_writers(rcmd, [wcmd], timeout=300)
        res["lat"] = np.fromfile(lat_file, dtype="<i8")[warmup:]
        return res


def busy(kind, idle, cfg, spin=None):
    """One busy-path run: 'rate' (bench_bus's 1 -> 1, msgs/s) or 'rtt' (bench_latency's
    ping-pong, the round trips in ns), the Python readers waiting under ``idle`` (with ``spin``
    seconds of spin, the library's default when None)."""
    if kind == "rate":
        import bench_bus
        n = cfg["busy_n"]
        return bench_bus.one_to_one("py", "py", n, n // 10, "message", "prefault", idle=idle,
                                    spin=spin)
    import bench_latency
    return bench_latency.ping_pong("py", "py", cfg["rtt_n"], cfg["rtt_warmup"], idle=idle,
                                   spin=spin)


# -- the rounds ----------------------------------------------------------------------------

def benchmarks(cfg):
    """(name, function) for run.py: each probe pair (with its floor) and the busy path."""
    return [(f"wake_{p}", lambda p=p: interleaved(cfg, [f"wake_{p}"])())
            for p in (*PAIRS, "busy")]


def _cfg(cfg):
    # run.py's modes name one of ours (cfg["wake"]); called directly, cfg is one of MODES.
    return MODES[cfg["wake"]] if "wake" in cfg else cfg


def interleaved(cfg, names):
    """One function running the named benchmarks (wake_PAIR, wake_busy) in k rounds: each round
    runs every chosen pair once at each rate, then the busy path A B B A. The pipe floor runs
    whenever a pair does, asyncio's floor whenever py_py_async does: the ratios need them from
    the same rounds."""
    cfg = _cfg(cfg)
    chosen = [p for p in PAIRS if f"wake_{p}" in names]
    if chosen and "pipe" not in chosen:
        chosen.append("pipe")
    for p, fl in OWN_FLOOR.items():
        if p in chosen and fl not in chosen:
            chosen.append(fl)
    with_busy = "wake_busy" in names

    def run():
        k = max(1, cfg["k"])
        skipped = {}
        for p in chosen:
            why = why_not(p)
            if why:
                skipped[p] = why
                print(f" {p} skipped: {why}", end="", file=sys.stderr, flush=True)
        pairs = [p for p in chosen if p not in skipped]
        runs = {(p, r): [] for p in pairs for r in RATES}
        rates = {i: [] for i in IDLES}
        rtts = {i: [] for i in IDLES}
        for i in range(k):
            if k > 1:
                print(f" round {i + 1}/{k}", end="", file=sys.stderr, flush=True)
            order = pairs[i % len(pairs):] + pairs[:i % len(pairs)] if pairs else []
            for rate in RATES:
                n = cfg["n"][rate]
                for p in order:
                    runs[(p, rate)].append(probe(p, rate, n, max(2, n // 10)))
            if with_busy:
                for idle in (IDLES[0], IDLES[1], IDLES[1], IDLES[0]):
                    rates[idle].append(busy("rate", idle, cfg)["msgs_per_s"])
                for idle in (IDLES[0], IDLES[1], IDLES[1], IDLES[0]):
                    rtts[idle].append(busy("rtt", idle, cfg))
        figs, raw = {}, {"wake_config": {k_: v for k_, v in cfg.items()}}
        if skipped:
            raw["wake_skipped"] = skipped
        for (p, rate), rs in runs.items():
            f, r = _probe_figures(p, rate, rs)
            figs.update(f)
            raw[f"wake_{p}_{rate}"] = r
        if with_busy:
            for idle in IDLES:
                rtt = np.concatenate(rtts[idle])
                figs[f"wake_busy_{idle}_msgs_per_s"] = float(statistics.median(rates[idle]))
                figs[f"wake_busy_{idle}_rtt_p50_ns"] = _pct(rtt, 50)
                figs[f"wake_busy_{idle}_rtt_p99_ns"] = _pct(rtt, 99)
                raw[f"wake_busy_{idle}"] = {
                    "msgs_per_s_runs": rates[idle], "messages": cfg["busy_n"],
                    "rtt_p50_ns_runs": [_pct(x, 50) for x in rtts[idle]],
                    "round_trips": int(len(rtt))}
        figs.update(derived(figs))
        return figs, raw
    return run


def _pct(a, p):
    s = np.sort(a)
    return float(s[min(len(s) - 1, int(len(s) * p / 100))])


def _probe_figures(pair, rate, rs):
    lat = np.concatenate([r["lat"] for r in rs])
    pre = f"wake_{pair}_{rate}_"
    cpu = sum(r["cpu_ns"] for r in rs)
    wall = sum(r["wall_ns"] for r in rs)
    f = {pre + "p50_ns": _pct(lat, 50), pre + "p90_ns": _pct(lat, 90),
         pre + "p99_ns": _pct(lat, 99), pre + "max_ns": float(lat.max()),
         pre + "mean_ns": float(lat.mean()), pre + "cpu_pct": 100.0 * cpu / wall,
         pre + "messages": int(len(lat)),
         # messages the reader counted per second of its window (the sleeps overshoot)
         pre + "rate_hz": statistics.median((len(r["lat"]) - 1) / (r["wall_ns"] / 1e9) for r in rs)}
    raw = {"round_p50_ns": [_pct(r["lat"], 50) for r in rs],
           "round_p99_ns": [_pct(r["lat"], 99) for r in rs],
           "round_cpu_pct": [100.0 * r["cpu_ns"] / r["wall_ns"] for r in rs]}
    native = [r["wake_native"] for r in rs if "wake_native" in r]
    if native:
        raw["java_wake_library_loaded"] = all(native)
        if not all(native):
            print(f" WARNING {pair}: the JVM reader had no wake library (it polled at its park "
                  f"bound)", end="", file=sys.stderr)
    return f, raw


def derived(f):
    """The ratios the targets read, from the figures of this run."""
    d = {}
    for p in BUS_PAIRS:
        for rate in RATES:
            pre, floor = f"wake_{p}_{rate}_", f"wake_pipe_{rate}_"
            for q in ("p50", "p99"):
                if pre + f"{q}_ns" in f and floor + f"{q}_ns" in f:
                    d[pre + f"{q}_vs_pipe"] = f[pre + f"{q}_ns"] / f[floor + f"{q}_ns"]
        for rate in RATES:
            pre, floor = f"wake_{p}_{rate}_", f"wake_{OWN_FLOOR.get(p)}_{rate}_"
            if p not in OWN_FLOOR or floor + "p50_ns" not in f or pre + "p50_ns" not in f:
                continue
            for q in ("p50_ns", "p99_ns", "cpu_pct"):
                d[pre + f"{q.split('_')[0]}_vs_{OWN_FLOOR[p]}"] = f[pre + q] / f[floor + q]
            if f"wake_pipe_{rate}_cpu_pct" in f:
                d[pre + "cpu_vs_pipe"] = f[pre + "cpu_pct"] / f[f"wake_pipe_{rate}_cpu_pct"]
        if f"wake_{p}_50hz_p50_ns" in f and "wake_zmq_50hz_p50_ns" in f:
            d[f"wake_{p}_50hz_zmq_p50_vs"] = f["wake_zmq_50hz_p50_ns"] / f[f"wake_{p}_50hz_p50_ns"]
    if "wake_busy_spin_park_msgs_per_s" in f:
        d["wake_busy_msgs_ratio"] = \
            f["wake_busy_spin_park_msgs_per_s"] / f["wake_busy_busy_spin_msgs_per_s"]
        d["wake_busy_rtt_p50_ratio"] = \
            f["wake_busy_spin_park_rtt_p50_ns"] / f["wake_busy_busy_spin_rtt_p50_ns"]
    return d


# -- targets and the table -----------------------------------------------------------------

def _us(ns):
    return f"{ns / 1e3:,.1f}"


def target_cells(f, p, rate):
    """{target: (measured text, met)} for one bus pair at one rate (those computable)."""
    pre, floor = f"wake_{p}_{rate}_", f"wake_pipe_{rate}_"
    out = {}
    if pre + "p50_vs_pipe" in f:
        out["p50"] = (f"{_us(f[pre + 'p50_ns'])} / {_us(f[floor + 'p50_ns'])} us = "
                      f"{f[pre + 'p50_vs_pipe']:.2f} x", f[pre + "p50_vs_pipe"] <= TARGET_P50)
    if pre + "p99_vs_pipe" in f:
        out["p99"] = (f"{_us(f[pre + 'p99_ns'])} / {_us(f[floor + 'p99_ns'])} us = "
                      f"{f[pre + 'p99_vs_pipe']:.2f} x", f[pre + "p99_vs_pipe"] <= TARGET_P99)
    if pre + "cpu_pct" in f:
        beside = f" (pipe {f[floor + 'cpu_pct']:.2f} %)" if floor + "cpu_pct" in f else ""
        out["cpu"] = (f"{f[pre + 'cpu_pct']:.2f} %{beside}", f[pre + "cpu_pct"] <= TARGET_CPU)
    if rate == "50hz" and f"wake_{p}_50hz_zmq_p50_vs" in f:
        out["zmq"] = (f"{_us(f['wake_zmq_50hz_p50_ns'])} / {_us(f[pre + 'p50_ns'])} us = "
                      f"{f[f'wake_{p}_50hz_zmq_p50_vs']:.1f} x",
                      f[f"wake_{p}_50hz_zmq_p50_vs"] >= TARGET_ZMQ)
    return out


def floor_cells(f, p, rate):
    """{p50, p99, cpu: text} of pair ``p`` against its own floor (OWN_FLOOR: asyncio's for
    read_async) at ``rate``: information beside the targets, never met or missed."""
    fl = OWN_FLOOR.get(p)
    pre, floor = f"wake_{p}_{rate}_", f"wake_{fl}_{rate}_"
    if fl is None or pre + f"p50_vs_{fl}" not in f:
        return {}
    return {"p50": f"{_us(f[pre + 'p50_ns'])} / {_us(f[floor + 'p50_ns'])} us = "
                   f"{f[pre + f'p50_vs_{fl}']:.2f} x",
            "p99": f"{_us(f[pre + 'p99_ns'])} / {_us(f[floor + 'p99_ns'])} us = "
                   f"{f[pre + f'p99_vs_{fl}']:.2f} x",
            "cpu": f"{f[pre + 'cpu_pct']:.2f} / {f[floor + 'cpu_pct']:.2f} % = "
                   f"{f[pre + f'cpu_vs_{fl}']:.2f} x"}


FLOOR_NAMES = {"p50": "p50 / floor's p50", "p99": "p99 / floor's p99",
               "cpu": "reader CPU / floor's"}


def information(f):
    """(row, measured) for wake.json: each pair against its own floor (no target)."""
    rows = []
    for p in OWN_FLOOR:
        for rate in RATES:
            for key, text in floor_cells(f, p, rate).items():
                rows.append((f"wake: {PAIRS[p][0]} at {RATE_LABELS[rate]}: {FLOOR_NAMES[key]} "
                             f"({PAIRS[OWN_FLOOR[p]][0]})", text))
    return rows


TARGET_NAMES = {"p50": f"p50 <= {TARGET_P50:g} x pipe floor's p50",
                "p99": f"p99 <= {TARGET_P99:g} x pipe floor's p99",
                "cpu": f"reader CPU <= {TARGET_CPU:g} % of a core",
                "zmq": f"p50 >= {TARGET_ZMQ:g} x lower than pyzmq's"}


def busy_cells(f):
    out = {}
    if "wake_busy_msgs_ratio" in f:
        r = f["wake_busy_msgs_ratio"]
        out["msgs"] = (f"{f['wake_busy_spin_park_msgs_per_s'] / 1e6:.2f} M / "
                       f"{f['wake_busy_busy_spin_msgs_per_s'] / 1e6:.2f} M msgs/s = {r:.3f}",
                       abs(r - 1) <= TARGET_BUSY)
        r = f["wake_busy_rtt_p50_ratio"]
        out["rtt"] = (f"{f['wake_busy_spin_park_rtt_p50_ns']:,.0f} / "
                      f"{f['wake_busy_busy_spin_rtt_p50_ns']:,.0f} ns = {r:.3f}",
                      abs(r - 1) <= TARGET_BUSY)
    return out


def targets(f):
    """(target, measured, met) rows for the figures present (run.py's target table)."""
    rows = []
    for p in BUS_PAIRS:
        for rate in RATES:
            for key, (text, met) in target_cells(f, p, rate).items():
                rows.append((f"wake: {PAIRS[p][0]} at {RATE_LABELS[rate]}: {TARGET_NAMES[key]}",
                             text, met))
    b = busy_cells(f)
    if b:
        rows.append((f"wake busy path: 1 -> 1 msgs/s, spin_park within {TARGET_BUSY:.0%} of "
                     "busy_spin", *b["msgs"]))
        rows.append((f"wake busy path: round-trip p50, spin_park within {TARGET_BUSY:.0%} of "
                     "busy_spin", *b["rtt"]))
    return rows


def markdown(f, raw, with_targets=True):
    out = []
    cfg = raw.get("wake_config", {})
    pairs = [p for p in PAIRS if any(f"wake_{p}_{r}_p50_ns" in f for r in RATES)]
    if pairs:
        out.append("### Waking parked readers: the sporadic probe (perf/bench_wake.py)\n")
        out.append(f"One writer process sends a 16-byte message carrying its CLOCK_MONOTONIC send "
                   f"time, sleeping 1 ms or 20 ms between messages; one reader process waits "
                   f"with its library's own wait; latency = receive time - send time. "
                   f"{cfg.get('k')} round{'s' if cfg.get('k') != 1 else ''}, each running "
                   f"every pair once at each rate in fresh processes "
                   f"({cfg.get('n', {}).get('1khz')} messages at 1 kHz, "
                   f"{cfg.get('n', {}).get('50hz')} at 50 Hz, the first 10% of each run not "
                   f"counted); percentiles of all counted messages. Reader CPU: the reader "
                   f"process's utime + stime, every thread (the JVM's background threads and "
                   f"asyncio's and pyzmq's helper threads included, nothing subtracted), over the "
                   f"wall time it was receiving, in % of one core.\n")
        out.append("| pair | rate | messages (per s) | p50 us | p99 us | max us | reader CPU % "
                   "| p50 / pipe | p99 / pipe |")
        out.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for p in pairs:
            for rate in RATES:
                pre = f"wake_{p}_{rate}_"
                if pre + "p50_ns" not in f:
                    continue
                r50 = f.get(pre + "p50_vs_pipe")
                r99 = f.get(pre + "p99_vs_pipe")
                out.append(f"| {PAIRS[p][0]} | {RATE_LABELS[rate]} | {f[pre + 'messages']:,} "
                           f"({f[pre + 'rate_hz']:,.0f}) | {_us(f[pre + 'p50_ns'])} | "
                           f"{_us(f[pre + 'p99_ns'])} | {_us(f[pre + 'max_ns'])} | "
                           f"{f[pre + 'cpu_pct']:.2f} | "
                           + (f"{r50:.2f} x" if r50 is not None else "") + " | "
                           + (f"{r99:.2f} x" if r99 is not None else "") + " |")
        out.append("")
        rounds = [f"{PAIRS[p][0]} at {rate}: " + " / ".join(_us(v) for v in
                  raw[f"wake_{p}_{rate}"]["round_p50_ns"])
                  for p in pairs for rate in RATES if f"wake_{p}_{rate}" in raw]
        if rounds and cfg.get("k", 1) > 1:
            out.append("p50 of each round (us): " + "; ".join(rounds) + ".\n")
        for p, why in raw.get("wake_skipped", {}).items():
            out.append(f"- {PAIRS[p][0]}: {why}")
        if raw.get("wake_skipped"):
            out.append("")
        for p, fl in OWN_FLOOR.items():
            if not any(floor_cells(f, p, r) for r in RATES):
                continue
            out.append(f"#### {PAIRS[p][0]} against asyncio's own floor (information, no "
                       f"target)\n")
            out.append(f"asyncio's floor is the row \"{PAIRS[fl][0]}\" above (an asyncio loop "
                       f"woken by the kernel once a message, nothing of the bus); beside it, the "
                       f"same pair against the blocking pipe (the targets' floor).\n")
            out.append("| rate | p50 / asyncio floor | p99 / asyncio floor | reader CPU / "
                       "asyncio floor | p50 / pipe | p99 / pipe | reader CPU / pipe |")
            out.append("| --- | --- | --- | --- | ---: | ---: | ---: |")
            for rate in RATES:
                c = floor_cells(f, p, rate)
                if not c:
                    continue
                pre = f"wake_{p}_{rate}_"
                cpu = f.get(pre + "cpu_vs_pipe")
                out.append(f"| {RATE_LABELS[rate]} | {c['p50']} | {c['p99']} | {c['cpu']} | "
                           f"{f[pre + 'p50_vs_pipe']:.2f} x | {f[pre + 'p99_vs_pipe']:.2f} x | "
                           + (f"{cpu:.2f} x" if cpu is not None else "") + " |")
            out.append("")
    if "wake_busy_msgs_ratio" in f:
        out.append("### Waking parked readers: the busy path\n")
        out.append(f"1 Python writer -> 1 Python reader at full speed ({cfg.get('busy_n', 0):,} "
                   f"messages a run, perf/bench_bus.py's processes) and the round trip over two "
                   f"buses ({cfg.get('rtt_n', 0):,} a run, perf/bench_latency.py's ping-pong), "
                   f"the readers waiting with the library's wait() under each idle strategy, "
                   f"A B B A in every round (median of the runs; round trips pooled).\n")
        out.append("| reader idle strategy | 1 -> 1 msgs/s | round trip p50 ns | p99 ns |")
        out.append("| --- | ---: | ---: | ---: |")
        for idle in IDLES:
            out.append(f"| {idle} | {f[f'wake_busy_{idle}_msgs_per_s'] / 1e6:,.2f} M | "
                       f"{f[f'wake_busy_{idle}_rtt_p50_ns']:,.0f} | "
                       f"{f[f'wake_busy_{idle}_rtt_p99_ns']:,.0f} |")
        out.append(f"| spin_park / busy_spin | {f['wake_busy_msgs_ratio']:.3f} | "
                   f"{f['wake_busy_rtt_p50_ratio']:.3f} | |")
        runs = [f"{idle}: " + " / ".join(f"{v / 1e6:.2f}" for v in raw[f"wake_busy_{idle}"]
                                        ["msgs_per_s_runs"]) for idle in IDLES]
        out.append("\nmsgs/s of each run, M (A B B A per round): " + "; ".join(runs) + ".\n")
    if with_targets:
        rows = [p for p in BUS_PAIRS if any(target_cells(f, p, r) for r in RATES)]
        if rows:
            out.append("### Targets of issue 22 (ratios within this run)\n")
            out.append("| pair | rate | " + " | ".join(TARGET_NAMES.values()) + " |")
            out.append("| --- | --- |" + " --- |" * len(TARGET_NAMES))
            for p in rows:
                for rate in RATES:
                    cells = target_cells(f, p, rate)
                    out.append(f"| {PAIRS[p][0]} | {RATE_LABELS[rate]} | " + " | ".join(
                        (f"{cells[k][0]}: {'met' if cells[k][1] else '**missed**'}"
                         if k in cells else "") for k in TARGET_NAMES) + " |")
                for rate in RATES:
                    # Information, no target: the same columns against the pair's own floor.
                    cells = floor_cells(f, p, rate)
                    if cells:
                        out.append(f"| {PAIRS[p][0]} vs asyncio's floor, pipe_async "
                                   f"(information, no target) | {RATE_LABELS[rate]} | " +
                                   " | ".join(cells.get(k, "") for k in TARGET_NAMES) + " |")
            out.append("")
        b = busy_cells(f)
        if b:
            out.append(f"| busy path: spin_park within {TARGET_BUSY:.0%} of busy_spin | measured "
                       f"(spin_park / busy_spin) | met |")
            out.append("| --- | --- | :---: |")
            for lab, key in (("1 -> 1 messages/s", "msgs"), ("round-trip p50", "rtt")):
                out.append(f"| {lab} | {b[key][0]} | {'met' if b[key][1] else '**missed**'} |")
            out.append("")
    return "\n".join(out) + "\n"


def write_results(out_dir, figures, raw):
    """wake.json (the machine, the wake figures, the target rows and the per-round raw data) and
    wake.md; from run.py, ``figures`` and ``raw`` hold the whole suite's: only ours are kept."""
    os.makedirs(out_dir, exist_ok=True)
    figures = {k: v for k, v in figures.items()
               if k.startswith(("wake_", "machine_")) or k in ("mode", "date")}
    raw = {k: v for k, v in raw.items() if k.startswith("wake_")}
    doc = dict(figures)
    doc["targets"] = [{"target": t, "measured": m, "met": bool(ok)} for t, m, ok in targets(figures)]
    doc["information"] = [{"row": t, "measured": m} for t, m in information(figures)]
    doc["raw"] = raw
    with open(os.path.join(out_dir, "wake.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    head = (f"# Waking parked readers (issue 22), {figures.get('date')}\n\n"
            f"Machine: {figures.get('machine_cpu')}, {figures.get('machine_cores')} cores, "
            f"{figures.get('machine_ram_gb')} GB RAM, Linux {figures.get('machine_kernel')}, "
            f"{figures.get('machine_python')}, {figures.get('machine_java')}. Load average "
            f"{figures.get('machine_load_avg_start')} at start, "
            f"{figures.get('machine_load_avg_end')} at end (the machine is shared). "
            f"`{figures.get('mode')}` mode" + (f", {figures['wake_seconds']} s" if
                                                 "wake_seconds" in figures else "") + ".\n\n")
    with open(os.path.join(out_dir, "wake.md"), "w") as f:
        f.write(head + markdown(figures, raw))


# -- the spin sweep ------------------------------------------------------------------------

def spin_tag(spin):
    return "busy_spin" if spin is None else f"{spin * 1e6:g}us"


def spin_sweep(cfg):
    """The spin sweep's rounds (see the module docstring): (figures, raw)."""
    k = max(1, cfg["k"])
    spins = list(SWEEP_SPINS)
    probes = spins + ["pipe"]
    lat = {(s, r): [] for s in probes for r in RATES}
    rates = {s: [] for s in [None] + spins}
    rtts = {s: [] for s in [None] + spins}
    order_busy = [None] + spins + spins[::-1] + [None]
    for i in range(k):
        print(f" round {i + 1}/{k}", end="", file=sys.stderr, flush=True)
        order = probes[i % len(probes):] + probes[:i % len(probes)]
        for rate in RATES:
            n = cfg["n"][rate]
            for s in order:
                if s == "pipe":
                    lat[(s, rate)].append(probe("pipe", rate, n, max(2, n // 10)))
                else:
                    lat[(s, rate)].append(probe("py_py", rate, n, max(2, n // 10), spin=s))
        for s in order_busy:
            idle = "busy_spin" if s is None else "spin_park"
            rates[s].append(busy("rate", idle, cfg, spin=s)["msgs_per_s"])
        for s in order_busy:
            idle = "busy_spin" if s is None else "spin_park"
            rtts[s].append(busy("rtt", idle, cfg, spin=s))
    figs, raw = {}, {"wake_spin_config": dict(cfg, spins=spins)}
    for (s, rate), rs in lat.items():
        tag = "pipe" if s == "pipe" else spin_tag(s)
        f, r = _probe_figures("x", rate, rs)
        figs.update({f"wake_spin_{tag}_{rate}_{key[len(f'wake_x_{rate}_'):]}": v
                     for key, v in f.items()})
        raw[f"wake_spin_{tag}_{rate}"] = r
    ref_rate = statistics.median(rates[None])
    ref_rtt = _pct(np.concatenate(rtts[None]), 50)
    for s in [None] + spins:
        tag, rtt = spin_tag(s), np.concatenate(rtts[s])
        pre = f"wake_spin_{tag}_"
        figs[pre + "msgs_per_s"] = float(statistics.median(rates[s]))
        figs[pre + "rtt_p50_ns"] = _pct(rtt, 50)
        figs[pre + "rtt_p99_ns"] = _pct(rtt, 99)
        figs[pre + "msgs_ratio"] = figs[pre + "msgs_per_s"] / ref_rate
        figs[pre + "rtt_p50_ratio"] = figs[pre + "rtt_p50_ns"] / ref_rtt
        raw[pre + "busy"] = {"msgs_per_s_runs": rates[s],
                             "rtt_p50_ns_runs": [_pct(x, 50) for x in rtts[s]],
                             "round_trips": int(len(rtt))}
    ok = [s for s in spins if _spin_ok(figs, s)]
    if ok:
        figs["wake_spin_choice_s"] = min(ok, key=lambda s: (
            figs[f"wake_spin_{spin_tag(s)}_1khz_cpu_pct"], s))
    return figs, raw


def _spin_ok(f, s):
    pre = f"wake_spin_{spin_tag(s)}_"
    return f[pre + "msgs_ratio"] >= 1 - TARGET_BUSY and f[pre + "rtt_p50_ratio"] <= 1 + TARGET_BUSY


def sweep_markdown(f, raw):
    cfg = raw["wake_spin_config"]
    spins = cfg["spins"]
    out = ["### spin_park's spin: the sweep (perf/bench_wake.py --spin-sweep)\n",
           f"One run, {cfg['k']} round{'s' if cfg['k'] != 1 else ''}. Busy path: 1 Python writer "
           f"-> 1 Python reader at full speed ({cfg['busy_n']:,} messages a run, median of "
           f"{2 * cfg['k']} runs) and the Python ping-pong over two buses ({cfg['rtt_n']:,} "
           f"round trips a run, {2 * cfg['k']} runs pooled), the readers waiting with wait() "
           f"under spin_park with that spin, or under busy_spin (the reference; order "
           f"busy_spin, spins up, spins down, busy_spin in every round). Sporadic stream: "
           f"Python -> Python read(timeout), one 16-byte message every 1 ms "
           f"({cfg['n']['1khz']} a run) or 20 ms ({cfg['n']['50hz']} a run), the first 10% of "
           f"each run not counted; reader CPU in % of one core (every thread's utime + stime "
           f"over its receiving wall time). The pipe floor (blocking os.read) beside it.\n",
           "| reader | 1 -> 1 msgs/s | / busy_spin | round trip p50 ns | / busy_spin | p99 ns "
           "| 1 kHz p50 us | p99 us | CPU % | 50 Hz p50 us | p99 us | CPU % | busy path within "
           "3 % |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
           "| :---: |"]
    for s in [None] + spins + ["pipe"]:
        if s == "pipe":
            label, tag = "floor: pipe, blocking os.read", "pipe"
        else:
            tag = spin_tag(s)
            label = "busy_spin" if s is None else f"spin_park, spin {s * 1e6:g} us"
        pre = f"wake_spin_{tag}_"
        cells = []
        if pre + "msgs_per_s" in f:
            cells += [f"{f[pre + 'msgs_per_s'] / 1e6:.2f} M", f"{f[pre + 'msgs_ratio']:.3f}",
                      f"{f[pre + 'rtt_p50_ns']:,.0f}", f"{f[pre + 'rtt_p50_ratio']:.3f}",
                      f"{f[pre + 'rtt_p99_ns']:,.0f}"]
        else:
            cells += [""] * 5
        for rate in RATES:
            if pre + f"{rate}_p50_ns" in f:
                cells += [_us(f[pre + f"{rate}_p50_ns"]), _us(f[pre + f"{rate}_p99_ns"]),
                          f"{f[pre + f'{rate}_cpu_pct']:.2f}"]
            else:
                cells += [""] * 3
        cells.append("" if s in (None, "pipe") else ("yes" if _spin_ok(f, s) else "**no**"))
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    out.append("")
    runs = [f"{spin_tag(s)}: " + " / ".join(f"{v / 1e6:.2f}" for v in
                                             raw[f"wake_spin_{spin_tag(s)}_busy"]["msgs_per_s_runs"])
            for s in [None] + spins]
    out.append("msgs/s of each run, M (in the order run): " + "; ".join(runs) + ".\n")
    runs = [f"{spin_tag(s)}: " + " / ".join(f"{v:,.0f}" for v in
                                             raw[f"wake_spin_{spin_tag(s)}_busy"]["rtt_p50_ns_runs"])
            for s in [None] + spins]
    out.append("round-trip p50 of each run, ns: " + "; ".join(runs) + ".\n")
    if "wake_spin_choice_s" in f:
        c = f["wake_spin_choice_s"]
        out.append(f"The rule (the least reader CPU at 1 kHz among the spins whose busy path is "
                   f"within 3 % of busy_spin: msgs/s not 3 % below, round-trip p50 not 3 % "
                   f"above) picks **{c * 1e6:g} us** in this run.\n")
    else:
        out.append("No spin's busy path was within 3 % of busy_spin in this run.\n")
    return "\n".join(out)


def write_sweep(out_dir, figures, raw):
    os.makedirs(out_dir, exist_ok=True)
    doc = dict(figures)
    doc["raw"] = raw
    with open(os.path.join(out_dir, "wake_spin.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    head = (f"# spin_park's spin (issue 22), {figures.get('date')}\n\n"
            f"Machine: {figures.get('machine_cpu')}, {figures.get('machine_cores')} cores, "
            f"{figures.get('machine_ram_gb')} GB RAM, Linux {figures.get('machine_kernel')}, "
            f"{figures.get('machine_python')}. Load average "
            f"{figures.get('machine_load_avg_start')} at start, "
            f"{figures.get('machine_load_avg_end')} at end (the machine is shared). "
            f"`{figures.get('mode')}` mode, {figures.get('wake_spin_seconds')} s.\n\n")
    with open(os.path.join(out_dir, "wake_spin.md"), "w") as f:
        f.write(head + sweep_markdown(figures, raw))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", dest="mode", action="store_const", const="quick",
                   help="a smoke run of about 20 s")
    g.add_argument("--full", dest="mode", action="store_const", const="full",
                   help="the default: a few minutes")
    p.add_argument("--only", help="comma-separated: " + ", ".join(
        name for name, _ in benchmarks(MODES["quick"])))
    p.add_argument("--out", default=os.path.join(common.PERF, "results"))
    p.add_argument("--spin-sweep", action="store_true",
                   help="instead: spin_park's spin from 0 to 50 us (wake_spin.json, wake_spin.md)")
    a = p.parse_args(argv)
    mode = a.mode or "full"
    if a.spin_sweep:
        cfg = SWEEP_MODES[mode]
        figures = {"mode": mode, "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
                   **common.machine()}
        print(f"bench_wake --spin-sweep, {mode} mode, {cfg['k']} round(s); load average "
              f"{figures['machine_load_avg_start']}:", end="", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        figs, raw = spin_sweep(cfg)
        figures.update(figs)
        figures["machine_load_avg_end"] = round(os.getloadavg()[0], 2)
        figures["wake_spin_seconds"] = round(time.monotonic() - t0, 1)
        write_sweep(a.out, figures, raw)
        print(f"\ndone in {figures['wake_spin_seconds']} s: {a.out}/wake_spin.json, "
              f"wake_spin.md", file=sys.stderr)
        return 0
    cfg = MODES[mode]
    names = a.only.split(",") if a.only else [name for name, _ in benchmarks(cfg)]
    figures = {"mode": mode, "date": time.strftime("%Y-%m-%d %H:%M:%S %z"), **common.machine()}
    print(f"bench_wake, {mode} mode, {cfg['k']} round(s); load average "
          f"{figures['machine_load_avg_start']}:", end="", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    figs, raw = interleaved(cfg, names)()
    figures.update(figs)
    figures["machine_load_avg_end"] = round(os.getloadavg()[0], 2)
    figures["wake_seconds"] = round(time.monotonic() - t0, 1)
    write_results(a.out, figures, raw)
    print(f"\ndone in {figures['wake_seconds']} s: {a.out}/wake.json, wake.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
