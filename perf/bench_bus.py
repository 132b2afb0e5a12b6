"""Throughput of the bus: 1 writer -> 1 reader (Python's APIs, the Java port, the mixes, and the
Java original as a peer), N writers -> 1 reader, and payload sizes. Every run is a fresh writer
and reader process on a fresh /dev/shm file, timed in the reader from message WARMUP to the last.

Two ways to map the bus:
  prefault  the file is preallocated and each process maps every page before the timing
            (Python prefault=True; the Java sides read one byte per page), so no page fault falls
            inside the timing. The plain names (py_py_msgs_per_s, java_java_msgs_per_s,
            java_original_msgs_per_s, ...) are measured this way.
  default   what a user gets without options: a fresh file (the Python writer preallocates it
            with posix_fallocate at open, outside the timing; the Java port and the original grow
            it sparse), no prefault, so page faults (and for sparse files page allocation) fall
            inside the timing: the *_default_msgs_per_s figures. The Python writer maps the
            pages just ahead of its records 64 KiB at a time (MADV_POPULATE_WRITE) instead of
            one fault per page; readers take read faults, which map up to 16 pages already
            written (fault-around), unless they are at the writer's front of a sparse file.
            Each process's page faults per 1000 messages are reported beside the rates
            (STEM_MODE_writer_faults_per_kmsg, ..._reader_...).
All of them run in k interleaved rounds (``interleaved``): the machine's speed drifts by up to
2 x from minute to minute, so benchmarks run one after the other would compare minutes.
The pairs (STEM_prefault_msgs_per_s, STEM_default_msgs_per_s for the original, the Java port and
Python per message) all send default_n messages; the plain names send bus_n, prefaulted.
"""
import statistics
import sys
import time

import numpy as np

from bench_latency import floor_ping_pong

from common import (PRICE_UPDATE_SIZE, ShmFiles, bus_file_size, create_bus, java, java_original,
                    original_missing, py_worker, reader_then_writers, start, finish, summarize)

JAVA_READER = "io.mappedbuspy.perf.PerfReader"
JAVA_WRITER = "io.mappedbuspy.perf.PerfWriter"


def one_to_one(writer, reader, n, warmup, api="message", mode="prefault", faults=False,
               idle=None, spin=None):
    """One run; writer/reader are 'py', 'java' (the port) or 'orig' (the Java original, both
    sides); mode 'prefault' or 'default' (see the module docstring). The reader's JSON result,
    with ``faults`` also each process's minor page faults (reader_minflt, writer_minflt).
    ``idle`` (a Python reader, message API): the reader waits with the library's wait() under
    that idle strategy instead of polling (perf/bench_wake.py's busy path), ``spin`` (seconds)
    its spin before it parks (the library's default when None)."""
    prefault = mode == "prefault"
    with ShmFiles(f"{writer}-{reader}-{api}-{mode}") as shm:
        path = shm("bus")
        size = bus_file_size(n)
        # The Python writer would preallocate a fresh file at open: do it here, before the reader
        # opens it. The Java sides, by default, start from no file: their reader creates it (the
        # port reserves a tmpfs file's pages, the original grows it sparse), timed as create_ms.
        create_ms = -1.0
        if prefault or writer == "py" or reader == "py":
            t0 = time.perf_counter()
            create_bus(path, size, PRICE_UPDATE_SIZE)
            create_ms = (time.perf_counter() - t0) * 1e3
        flag = [] if prefault else ["noprefault"]
        if reader == "py":
            rcmd = py_worker("bus-reader", path, size, PRICE_UPDATE_SIZE, api, n, warmup, *flag,
                             *([f"idle={idle}"] if idle else []),
                             *([f"spin={spin!r}"] if spin is not None else []))
        elif reader == "orig":
            rcmd = java_original("reader", path, size, n, warmup, str(prefault).lower())
        else:
            rcmd = java(JAVA_READER, path, size, n, warmup,
                        *(["prefault"] if prefault else ["create"] if writer != "py" else []))
        if writer == "py":
            wcmd = py_worker("bus-writer", path, size, PRICE_UPDATE_SIZE, api, n, *flag)
        elif writer == "orig":
            wcmd = java_original("writer", path, size, n, str(prefault).lower())
        else:
            wcmd = java(JAVA_WRITER, path, size, n, *(["prefault"] if prefault else []))
        res = reader_then_writers(rcmd, [wcmd], faults=faults)
        if res is not None and create_ms >= 0:
            res["create_ms"] = create_ms
        return res


def floor(api, n):
    """The Python loops alone (bus calls replaced by a C no-op), ns per message, and the
    writer's loop on a bus nobody reads."""
    with ShmFiles(f"floor-{api}") as shm:
        path = shm("bus")
        size = bus_file_size(n)
        create_bus(path, size, PRICE_UPDATE_SIZE)
        return finish([start(py_worker("floor", api, n, path, size))])[0]


def many_to_one(writers, n, warmup):
    """N Python writers (message API), n messages in all -> one Python reader."""
    with ShmFiles(f"w{writers}") as shm:
        path = shm("bus")
        size = bus_file_size(n)
        create_bus(path, size, PRICE_UPDATE_SIZE)
        per = [n // writers + (1 if i < n % writers else 0) for i in range(writers)]
        wcmds = [py_worker("bus-writer", path, size, PRICE_UPDATE_SIZE, "message", k, i + 1)
                 for i, k in enumerate(per)]
        rcmd = py_worker("bus-reader", path, size, PRICE_UPDATE_SIZE, "message", n, warmup)
        return reader_then_writers(rcmd, wcmds)


def payload(record_size, n, warmup):
    """1 -> 1 Python bytes API with record_size-byte payloads."""
    with ShmFiles(f"p{record_size}") as shm:
        path = shm("bus")
        size = bus_file_size(n, record_size, slack=16)
        create_bus(path, size, record_size)
        rcmd = py_worker("bus-reader", path, size, record_size, "bytes", n, warmup)
        wcmd = py_worker("bus-writer", path, size, record_size, "bytes", n)
        return reader_then_writers(rcmd, [wcmd])


ONE_TO_ONE = {
    # figure name: (writer, reader, api)
    "py_py_msgs_per_s": ("py", "py", "message"),
    "py_py_fields_msgs_per_s": ("py", "py", "fields"),
    "py_py_bytes_msgs_per_s": ("py", "py", "bytes"),
    "py_py_batch_msgs_per_s": ("py", "py", "batch"),
    "java_java_msgs_per_s": ("java", "java", "message"),
    "java_py_msgs_per_s": ("java", "py", "message"),
    "py_java_msgs_per_s": ("py", "java", "message"),
    # The Python side with its numpy batch API, the Java side per message as above.
    "java_py_batch_msgs_per_s": ("java", "py", "batch"),
    "py_java_batch_msgs_per_s": ("py", "java", "batch"),
}
WRITERS = (2, 4, 8)
PAYLOADS = (8, 64, 512, 4096, 32768)


# figure stem: (writer, reader, api); each gives STEM_prefault_msgs_per_s (also the plain name
# for the original) and STEM_default_msgs_per_s, the side-by-side pairs.
PAIRED = {
    "java_original": ("orig", "orig", "message"),
    "java_java": ("java", "java", "message"),
    "py_py": ("py", "py", "message"),
}


class Bench:
    """One benchmark: ``one()`` is a single run (fresh processes and files), ``combine(runs)``
    turns its k runs into (figures, raw)."""

    def __init__(self, name, one, combine):
        self.name, self.one, self.combine = name, one, combine


def _rate(name, n):
    def combine(runs):
        s = summarize(runs)
        figs = {name: s["median"], name.replace("msgs_per_s", "ns_per_msg"): 1e9 / s["median"],
                name.replace("msgs_per_s", "best_msgs_per_s"): s["best"]}
        return figs, {name: {**s, "messages": n}}
    return combine


def _paired(stem, mode, n):
    name = f"{stem}_msgs_per_s" if mode == "plain" else f"{stem}_{mode}_msgs_per_s"

    def combine(runs):
        s = summarize(runs)
        figs = {name: float(s["median"]),
                name.replace("msgs_per_s", "ns_per_msg"): 1e9 / s["median"]}
        # Page faults per 1000 messages and process (ru_minflt), start-up included: a count
        # the machine's load does not change, unlike the rates (one fault per 4 KiB page is
        # 4.9 per 1000 20-byte records; fault-around maps up to 16 pages a fault, 0.3 per
        # 1000; pages populated by madvise count as faults too).
        for role in ("writer", "reader"):
            got = [x[f"{role}_minflt"] for x in runs if f"{role}_minflt" in x]
            if got:
                figs[name.replace("msgs_per_s", f"{role}_faults_per_kmsg")] = \
                    statistics.median(got) * 1000 / n
        # How long making the fresh file took (not timed in the rate): the port and Python reserve
        # its pages then, the original leaves them to the writer's faults.
        made = [x["create_ms"] for x in runs if x.get("create_ms", -1) >= 0]
        if made and mode == "default":
            figs[name.replace("msgs_per_s", "create_ms")] = statistics.median(made)
        return figs, {name: {**s, "messages": n}}
    return combine


def _skipped(name, why):
    def combine(runs):
        print(f" {name} skipped: {why}", end="", file=sys.stderr)
        return {}, {f"{name}_msgs_per_s": {"skipped": why}}
    return combine


def _benches(cfg):
    out = []
    missing = original_missing()
    # The original first and the Python side last within each mode, prefault runs before the
    # default ones; the prefault Python and Java port figures come from ONE_TO_ONE below.
    # The pairs all send default_n messages (80 M in --full, as the original's own perf test);
    # the plain java_original_msgs_per_s is a prefault run with bus_n, like py_py_msgs_per_s.
    out.append(Bench("java_original",
                     lambda: one_to_one("orig", "orig", cfg["bus_n"], cfg["bus_n"] // 10,
                                        faults=True),
                     _paired("java_original", "plain", cfg["bus_n"])))
    for mode in ("prefault", "default"):
        n = cfg["default_n"]
        for stem, (w, r, api) in PAIRED.items():
            out.append(Bench(f"{stem}_{mode}",
                             lambda w=w, r=r, api=api, mode=mode, n=n:
                             one_to_one(w, r, n, n // 10, api, mode, faults=True),
                             _paired(stem, mode, n)))
    if missing:
        # Only the original's own runs: the port's and Python's pairs are measured without it.
        for b in out:
            if b.name.startswith("java_original"):
                b.one, b.combine = (lambda: None), _skipped(b.name, missing)

    def floor_combine(runs):
        figs, raw = {}, {}
        for api, stem in (("message", "py_floor"), ("fields", "py_fields_floor")):
            w = summarize([x[api] for x in runs], "writer_ns_per_msg")
            r = summarize([x[api] for x in runs], "reader_ns_per_msg")
            ns = max(w["median"], r["median"])   # the slower loop sets the pace
            alone = summarize([x[api] for x in runs], "writer_alone_ns_per_msg")
            figs.update({f"{stem}_writer_ns_per_msg": w["median"],
                         f"{stem}_reader_ns_per_msg": r["median"],
                         f"{stem}_ns_per_msg": ns, f"{stem}_msgs_per_s": 1e9 / ns,
                         f"{stem.replace('floor', 'writer_alone')}_ns_per_msg": alone["median"]})
            raw[stem] = {"writer": w, "reader": r, "writer_alone": alone,
                         "messages": cfg["bus_n"]}
        return figs, raw
    out.append(Bench("py_floor", lambda: {api: floor(api, cfg["bus_n"]) for api in ("message", "fields")},
                     floor_combine))
    for name, (w, r, api) in ONE_TO_ONE.items():
        n = cfg["bus_n"] * (4 if api == "batch" else 1)   # batch runs are short: more messages
        out.append(Bench(name, lambda w=w, r=r, api=api, n=n: one_to_one(w, r, n, n // 10, api),
                         _rate(name, n)))

    def writers_combine(runs):
        figs, raw = {}, {}
        for k in WRITERS:
            s = summarize([x[k] for x in runs])
            figs[f"py_{k}w_1r_msgs_per_s"] = s["median"]
            raw[f"py_{k}w_1r_msgs_per_s"] = {**s, "messages": cfg["bus_n"]}
        return figs, raw
    out.append(Bench("n_writers",
                     lambda: {k: many_to_one(k, cfg["bus_n"], cfg["bus_n"] // 10) for k in WRITERS},
                     writers_combine))

    def payload_n(size):
        return max(1000, min(cfg["bus_n"], cfg["payload_bytes"] // size))

    def payloads_combine(runs):
        figs, raw = {}, {}
        for size in PAYLOADS:
            s = summarize([x[size] for x in runs])
            figs[f"payload_{size}_msgs_per_s"] = s["median"]
            figs[f"payload_{size}_mb_per_s"] = s["median"] * size / 1e6
            raw[f"payload_{size}"] = {**s, "messages": payload_n(size), "payload_bytes": size}
        return figs, raw
    out.append(Bench("payload_sizes",
                     lambda: {size: payload(size, payload_n(size), payload_n(size) // 10)
                              for size in PAYLOADS},
                     payloads_combine))
    return out


def benchmarks(cfg):
    """(name, function returning (figures, raw)) for each benchmark run alone; run.py runs the
    selected ones through ``interleaved``."""
    return [(b.name, lambda b=b: interleaved(cfg, [b.name])()) for b in _benches(cfg)]


def interleaved(cfg, names):
    """One function running the named benchmarks in k rounds, each round running every one of
    them once, so that figures compared with each other (the original, the Java port and Python,
    a loop and its floor) are measured in the same minutes: this shared VM's speed changes
    from minute to minute by up to 2 x, for every program alike. Each pair's per-round
    ratios go to the raw file (round_ratios)."""
    chosen = [b for b in _benches(cfg) if b.name in names]

    def run():
        k = max(1, cfg["k"])
        runs = {b.name: [] for b in chosen}
        lines = {b.name: [] for b in chosen}
        for i in range(k):
            if k > 1 and len(chosen) > 1:
                print(f" round {i + 1}/{k}", end="", file=sys.stderr, flush=True)
            for b in chosen:
                lines[b.name].append(line_rtt(cfg))
                runs[b.name].append(b.one())
        figs, raw = {}, {}
        for b in chosen:
            f, r = b.combine(runs[b.name])
            figs.update(f)
            raw.update(r)
        raw["round_ratios"] = _round_ratios(runs)
        raw["line_rtt_p50_ns"] = lines
        figs["bus_line_rtt_p50_ns"] = statistics.median(x for v in lines.values() for x in v)
        return figs, raw
    return run


def line_rtt(cfg):
    """The machine's cache-line round trip (p50 ns, the latency group's C floor) just before a
    run: a pair's rate follows it (one 4 KiB page of 20-byte records moves 64 lines from the
    writer's core to the reader's), and on this VM it moves between about 130 and 490 ns from
    one minute to the next."""
    n = max(1000, cfg["rtt_n"] // 10)
    return float(np.median(floor_ping_pong(n, 1000)))


def _round_ratios(runs):
    """Port / original and Python / original within each round, for the paired modes run, and
    the Python bus's ns over its floor."""
    out = {}
    for mode in ("prefault", "default"):
        base = runs.get(f"java_original_{mode}")
        for stem in ("java_java", "py_py"):
            other = runs.get(f"{stem}_{mode}")
            if base and other and all(base) and all(other):
                out[f"{stem}_{mode}_vs_java_original_{mode}"] = [
                    o["msgs_per_s"] / b["msgs_per_s"] for o, b in zip(other, base)]
    # What the bus adds over its loop's floor, round by round (the floor's pace is its slower
    # loop): the CPU's speed moves both alike within a round.
    floors = runs.get("py_floor")
    for name, api, key in (("py_py_msgs_per_s", "message", "py_bus_overhead_ns_per_msg"),
                           ("py_py_fields_msgs_per_s", "fields", "py_fields_bus_overhead_ns_per_msg")):
        if floors and runs.get(name):
            out[key] = [1e9 / x["msgs_per_s"] - max(f[api]["writer_ns_per_msg"],
                                                     f[api]["reader_ns_per_msg"])
                        for x, f in zip(runs[name], floors)]
    return out
