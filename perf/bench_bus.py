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
The pairs (STEM_prefault_msgs_per_s, STEM_default_msgs_per_s for the original, the Java port and
Python per message) all send default_n messages; the plain names send bus_n, prefaulted.
"""
import statistics
import sys

from common import (PRICE_UPDATE_SIZE, ShmFiles, bus_file_size, create_bus, java, java_original,
                    original_missing, py_worker, reader_then_writers, start, finish, summarize)

JAVA_READER = "io.mappedbuspy.perf.PerfReader"
JAVA_WRITER = "io.mappedbuspy.perf.PerfWriter"


def one_to_one(writer, reader, n, warmup, api="message", mode="prefault", faults=False):
    """One run; writer/reader are 'py', 'java' (the port) or 'orig' (the Java original, both
    sides); mode 'prefault' or 'default' (see the module docstring). The reader's JSON result,
    with ``faults`` also each process's minor page faults (reader_minflt, writer_minflt)."""
    prefault = mode == "prefault"
    with ShmFiles(f"{writer}-{reader}-{api}-{mode}") as shm:
        path = shm("bus")
        size = bus_file_size(n)
        # The Python writer would preallocate a fresh file at open: do it here, before the reader
        # opens it. The Java sides, by default, start from no file (they grow it sparse).
        if prefault or writer == "py" or reader == "py":
            create_bus(path, size, PRICE_UPDATE_SIZE)
        flag = [] if prefault else ["noprefault"]
        if reader == "py":
            rcmd = py_worker("bus-reader", path, size, PRICE_UPDATE_SIZE, api, n, warmup, *flag)
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
        return reader_then_writers(rcmd, [wcmd], faults=faults)


def floor(api, n):
    """The Python loops alone (bus calls replaced by a C no-op), ns per message."""
    return finish([start(py_worker("floor", api, n))])[0]


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


def benchmarks(cfg):
    """(name, function returning (figures, raw)) for run.py."""
    out = []
    missing = original_missing()

    def paired(stem, w, r, api, mode, n):
        if "orig" in (w, r) and missing:
            print(f" skipped: {missing}", end="", file=sys.stderr)
            return {}, {f"{stem}_{mode}_msgs_per_s": {"skipped": missing}}
        runs = [one_to_one(w, r, n, n // 10, api, "prefault" if mode == "plain" else mode,
                           faults=True)
                for _ in range(cfg["k"])]
        s = summarize(runs)
        name = f"{stem}_msgs_per_s" if mode == "plain" else f"{stem}_{mode}_msgs_per_s"
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
        return figs, {name: {**s, "messages": n}}
    # The original first and the Python side last within each mode, prefault runs before the
    # default ones; the prefault Python and Java port figures come from ONE_TO_ONE below.
    # The pairs all send default_n messages (80 M in --full, as the original's own perf test);
    # the plain java_original_msgs_per_s is a prefault run with bus_n, like py_py_msgs_per_s.
    out.append(("java_original", lambda: paired("java_original", "orig", "orig", "message",
                                                "plain", cfg["bus_n"])))
    for mode, n in (("prefault", cfg["default_n"]), ("default", cfg["default_n"])):
        for stem, (w, r, api) in PAIRED.items():
            out.append((f"{stem}_{mode}",
                        lambda stem=stem, w=w, r=r, api=api, mode=mode, n=n:
                        paired(stem, w, r, api, mode, n)))

    def floors():
        figs, raw = {}, {}
        for api, stem in (("message", "py_floor"), ("fields", "py_fields_floor")):
            runs = [floor(api, cfg["bus_n"]) for _ in range(cfg["k"])]
            w = summarize(runs, "writer_ns_per_msg")
            r = summarize(runs, "reader_ns_per_msg")
            ns = max(w["median"], r["median"])   # the slower loop sets the pace
            figs.update({f"{stem}_writer_ns_per_msg": w["median"],
                         f"{stem}_reader_ns_per_msg": r["median"],
                         f"{stem}_ns_per_msg": ns, f"{stem}_msgs_per_s": 1e9 / ns})
            raw[stem] = {"writer": w, "reader": r, "messages": cfg["bus_n"]}
        return figs, raw
    out.append(("py_floor", floors))
    for name, (w, r, api) in ONE_TO_ONE.items():
        n = cfg["bus_n"] * (4 if api == "batch" else 1)   # batch runs are short: more messages

        def f(name=name, w=w, r=r, api=api, n=n):
            runs = [one_to_one(w, r, n, n // 10, api) for _ in range(cfg["k"])]
            s = summarize(runs)
            figs = {name: s["median"], name.replace("msgs_per_s", "ns_per_msg"): 1e9 / s["median"],
                    name.replace("msgs_per_s", "best_msgs_per_s"): s["best"]}
            return figs, {name: {**s, "messages": n}}
        out.append((name, f))

    def writers():
        figs, raw = {}, {}
        for k in WRITERS:
            n = cfg["bus_n"]
            runs = [many_to_one(k, n, n // 10) for _ in range(cfg["k"])]
            s = summarize(runs)
            figs[f"py_{k}w_1r_msgs_per_s"] = s["median"]
            raw[f"py_{k}w_1r_msgs_per_s"] = {**s, "messages": n}
        return figs, raw
    out.append(("n_writers", writers))

    def payloads():
        figs, raw = {}, {}
        for size in PAYLOADS:
            n = max(1000, min(cfg["bus_n"], cfg["payload_bytes"] // size))
            runs = [payload(size, n, n // 10) for _ in range(cfg["k"])]
            s = summarize(runs)
            figs[f"payload_{size}_msgs_per_s"] = s["median"]
            figs[f"payload_{size}_mb_per_s"] = s["median"] * size / 1e6
            raw[f"payload_{size}"] = {**s, "messages": n, "payload_bytes": size}
        return figs, raw
    out.append(("payload_sizes", payloads))
    return out
