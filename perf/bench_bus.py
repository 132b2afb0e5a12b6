"""Throughput of the bus: 1 writer -> 1 reader (Python's three APIs, Java and the mixes),
N writers -> 1 reader, and payload sizes. Every run is a fresh writer and reader process on
a fresh /dev/shm file, timed in the reader from message WARMUP to the last."""
from common import (PRICE_UPDATE_SIZE, ShmFiles, bus_file_size, create_bus, java, py_worker,
                    reader_then_writers, summarize)

JAVA_READER = "io.mappedbuspy.perf.PerfReader"
JAVA_WRITER = "io.mappedbuspy.perf.PerfWriter"


def one_to_one(writer, reader, n, warmup, api="message"):
    """One run; writer/reader are 'py' or 'java'. The reader's JSON result."""
    with ShmFiles(f"{writer}-{reader}-{api}") as shm:
        path = shm("bus")
        size = bus_file_size(n)
        create_bus(path, size, PRICE_UPDATE_SIZE)
        if reader == "py":
            rcmd = py_worker("bus-reader", path, size, PRICE_UPDATE_SIZE, api, n, warmup)
        else:
            rcmd = java(JAVA_READER, path, size, n, warmup)
        if writer == "py":
            wcmd = py_worker("bus-writer", path, size, PRICE_UPDATE_SIZE, api, n)
        else:
            wcmd = java(JAVA_WRITER, path, size, n)
        return reader_then_writers(rcmd, [wcmd])


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


def benchmarks(cfg):
    """(name, function returning (figures, raw)) for run.py."""
    out = []
    for name, (w, r, api) in ONE_TO_ONE.items():
        n = cfg["bus_n"] * (4 if api == "batch" else 1)   # batch runs are short: more messages

        def f(name=name, w=w, r=r, api=api, n=n):
            runs = [one_to_one(w, r, n, n // 10, api) for _ in range(cfg["k"])]
            s = summarize(runs)
            return {name: s["median"], name.replace("msgs_per_s", "ns_per_msg"): 1e9 / s["median"],
                    name.replace("msgs_per_s", "best_msgs_per_s"): s["best"]}, \
                {name: {**s, "messages": n}}
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
