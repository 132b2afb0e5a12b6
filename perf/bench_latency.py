"""Round-trip latency: a ping-pong over two buses (ping, pong) between two processes, each
busy-spinning. The initiator times every round trip (write ping -> echo read back) after a
warm-up and stores them as int64 ns; percentiles and a log-binned histogram come from those."""
import os
import tempfile

import numpy as np

from common import ShmFiles, bus_file_size, create_bus, finish, java, py_worker, start, wait_ready

PINGPONG = "io.mappedbuspy.perf.PingPong"
PERCENTILES = (50, 90, 99, 99.9)


def ping_pong(initiator, echo, n, warmup):
    """initiator/echo are 'py' or 'java'; returns the n round-trip times in ns."""
    total = n + warmup
    with ShmFiles(f"rtt-{initiator}-{echo}") as shm, tempfile.TemporaryDirectory() as tmp:
        ping, pong = shm("ping"), shm("pong")
        size = bus_file_size(total, slack=16)
        create_bus(ping, size, 12)
        create_bus(pong, size, 12)
        rtt_file = os.path.join(tmp, "rtt.bin")
        ecmd = (py_worker("ping-echo", ping, pong, size, total) if echo == "py"
                else java(PINGPONG, "echo", ping, pong, size, total))
        icmd = (py_worker("ping-init", ping, pong, size, n, warmup, rtt_file) if initiator == "py"
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
    "rtt_": ("py", "py"),
    "py_java_rtt_": ("py", "java"),
    "java_py_rtt_": ("java", "py"),
    "java_java_rtt_": ("java", "java"),
}


def benchmarks(cfg):
    out = []
    for prefix, (a, b) in PAIRS.items():
        def f(prefix=prefix, a=a, b=b):
            rtt = ping_pong(a, b, cfg["rtt_n"], cfg["rtt_warmup"])
            figs, raw = stats(rtt, prefix)
            figs[f"{prefix}round_trips"] = len(rtt)
            return figs, {prefix + "hist": raw}
        out.append((f"latency_{a}_{b}", f))
    return out
