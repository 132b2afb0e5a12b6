"""Resident memory of a Python writer and reader (message API, 1 -> 1) at two message counts.

Each process reports from /proc/self/status at its end: VmHWM (peak resident set), RssAnon
(private memory: heap, interpreter) and RssShmem (pages of the /dev/shm bus it mapped). The
bus is append-only, so the mapped pages are the file itself and grow with it; the private
memory is what must not grow with the number of messages."""
from common import (PRICE_UPDATE_SIZE, ShmFiles, bus_file_size, create_bus, finish, py_worker,
                    start, wait_ready)


def measure(n):
    with ShmFiles(f"mem{n}") as shm:
        path = shm("bus")
        size = bus_file_size(n)
        create_bus(path, size, PRICE_UPDATE_SIZE)
        r = start(py_worker("bus-reader", path, size, PRICE_UPDATE_SIZE, "message", n, n // 10, "mem"))
        try:
            wait_ready(r)
            w = start(py_worker("bus-writer", path, size, PRICE_UPDATE_SIZE, "message", n, 1, "mem"))
            wres, rres = finish([w, r])
        finally:
            if r.poll() is None:
                r.kill()
                r.wait()
        return {"writer": wres, "reader": rres, "bus_file_kb": size // 1024}


def benchmarks(cfg):
    def f():
        figs, raw = {}, {}
        small, large = cfg["mem_n"]
        res = {n: measure(n) for n in (small, large)}
        for tag, n in (("small", small), ("large", large)):
            r = res[n]
            for role in ("writer", "reader"):
                figs[f"mem_{role}_peak_rss_kb_{tag}"] = r[role]["VmHWM"]
                figs[f"mem_{role}_private_kb_{tag}"] = r[role]["RssAnon"]
                figs[f"mem_{role}_bus_pages_kb_{tag}"] = r[role]["RssShmem"]
            raw[f"mem_{tag}"] = {**r, "messages": n}
        for role in ("writer", "reader"):
            figs[f"mem_{role}_private_growth_kb"] = (res[large][role]["RssAnon"]
                                                     - res[small][role]["RssAnon"])
        figs["mem_small_messages"], figs["mem_large_messages"] = small, large
        return figs, raw
    return [("memory", f)]
