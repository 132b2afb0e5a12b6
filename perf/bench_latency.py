"""Round-trip latency: a ping-pong over two buses (ping, pong) between two processes, each
busy-spinning. The initiator times every round trip (write ping -> echo read back) after a
warm-up and stores them as int64 ns; percentiles and a log-binned histogram come from those.

The pairs run interleaved: k rounds, each running every selected pair once for rtt_n / k round
trips, and each pair's figures come from all its rounds together. On this shared 2-core VM the
cost of moving a cache line between the two cores changes from minute to minute (every pair,
Java - Java too, was measured about 3 x slower in the same minutes: p50 850-900 ns against
230-310 ns a minute later), so pairs run one after the other would compare minutes, not
languages. Each round's p50 is kept in the raw file (PREFIX round_p50_ns) to show that spread.

The floor pair (latency_floor, floor_rtt_*) is the machine's own round trip in the same rounds:
two cache lines bounced between two processes in C (perf/pingpong.pyx), nothing of the bus. A
bus round trip moves at least those two lines, so no bus pair can beat it; what a pair adds to
it is the bus's cost, the part that does not move with the minute."""
import os
import tempfile

import numpy as np

from common import ShmFiles, bus_file_size, create_bus, finish, java, py_worker, start, wait_ready

PINGPONG = "io.mappedbuspy.perf.PingPong"
PERCENTILES = (50, 90, 99, 99.9)


def ping_pong(initiator, echo, n, warmup, idle=None, spin=None):
    """initiator/echo are 'py' or 'java', or both 'c' (the floor); returns the n round-trip
    times in ns. ``idle``: the Python sides' readers wait with the library's wait() under that
    idle strategy instead of polling (perf/bench_wake.py's busy path), ``spin`` (seconds) their
    spin before they park (the library's default when None)."""
    total = n + warmup
    if initiator == "c":
        return floor_ping_pong(n, warmup)
    with ShmFiles(f"rtt-{initiator}-{echo}") as shm, tempfile.TemporaryDirectory() as tmp:
        ping, pong = shm("ping"), shm("pong")
        size = bus_file_size(total, slack=16)
        create_bus(ping, size, 12)
        create_bus(pong, size, 12)
        rtt_file = os.path.join(tmp, "rtt.bin")
        flag = ([f"idle={idle}"] if idle else []) + ([f"spin={spin!r}"] if spin is not None else [])
        ecmd = (py_worker("ping-echo", ping, pong, size, total, *flag) if echo == "py"
                else java(PINGPONG, "echo", ping, pong, size, total))
        icmd = (py_worker("ping-init", ping, pong, size, n, warmup, rtt_file, *flag)
                if initiator == "py"
                else java(PINGPONG, "initiate", ping, pong, size, n, warmup, rtt_file))
        e = start(ecmd)
        try:
            wait_ready(e)
            i = start(icmd)
            finish([i, e])
        finally:
            if e.poll() is None:
                e.kill()
                e.wait()
        return np.fromfile(rtt_file, dtype="<i8")


def floor_ping_pong(n, warmup):
    """The machine's floor: perf/pingpong.pyx bounces two cache lines of shared memory between
    this process and a forked one, in C."""
    global _pingpong
    if _pingpong is None:
        from workers import _perf_pyx
        _pingpong = _perf_pyx("pingpong")
    return _pingpong.round_trips(n, warmup)


_pingpong = None


def stats(rtt, prefix):
    s = np.sort(rtt)
    figs = {f"{prefix}p{str(p).replace('.', '_')}_ns": float(s[min(len(s) - 1, int(len(s) * p / 100))])
            for p in PERCENTILES}
    figs[f"{prefix}max_ns"] = float(s[-1])
    figs[f"{prefix}mean_ns"] = float(s.mean())
    edges = np.logspace(np.log10(max(1, s[0])), np.log10(s[-1] + 1), 80)
    counts, _ = np.histogram(s, bins=edges)
    return figs, {"round_trips": int(len(s)), "hist_edges_ns": edges.tolist(),
                  "hist_counts": counts.tolist()}


PAIRS = {
    # prefix: (initiator, echo); Python-Python gets the plain rtt_* names
    "floor_rtt_": ("c", "c"),
    "rtt_": ("py", "py"),
    "py_java_rtt_": ("py", "java"),
    "java_py_rtt_": ("java", "py"),
    "java_java_rtt_": ("java", "java"),
}


def name(a, b):
    return "latency_floor" if a == "c" else f"latency_{a}_{b}"


def benchmarks(cfg):
    """(name, function) for each pair, run alone (run.py runs the selected ones through
    ``interleaved``)."""
    return [(name(a, b), lambda a=a, b=b: interleaved(cfg, [name(a, b)])())
            for a, b in PAIRS.values()]


def interleaved(cfg, names):
    """One function running the named pairs in k interleaved rounds (see the docstring)."""
    chosen = [(prefix, a, b) for prefix, (a, b) in PAIRS.items() if name(a, b) in names]

    def run():
        k = max(1, cfg["k"])
        per = max(1, cfg["rtt_n"] // k)
        warm = max(1, cfg["rtt_warmup"] // k)
        rtts = {prefix: [] for prefix, _, _ in chosen}
        for _ in range(k):
            for prefix, a, b in chosen:
                rtts[prefix].append(ping_pong(a, b, per, warm))
        figs, raw = {}, {}
        for prefix, _, _ in chosen:
            rtt = np.concatenate(rtts[prefix])
            f, r = stats(rtt, prefix)
            f[f"{prefix}round_trips"] = len(rtt)
            r["round_p50_ns"] = [float(np.median(x)) for x in rtts[prefix]]
            figs.update(f)
            raw[prefix + "hist"] = r
        return figs, raw
    return run
