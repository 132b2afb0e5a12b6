"""What a rolling segment's fresh memory costs, step by step (issue 24): the work a single
file preallocated before a run does not do inside it.

    python3 perf/segment_memory.py                 # 64 MiB, 7 repetitions, in /dev/shm

Each repetition makes a segment as the rolling writers do (posix_fallocate, then its maker maps
every page with MADV_POPULATE_WRITE, which zeroes them), maps it as another writer process does
(MADV_POPULATE_READ, and for comparison MADV_POPULATE_WRITE), as a reader does (a read-only
mapping, one load a page: the kernel maps 16 pages a fault), unmaps each mapping and unlinks the
file (which frees its pages). Each step's CPU time (this thread's, user + system) in ms; the
medians are reported. bench_rolling.py runs this in the same run and turns it into each pair's
share of the machine (``share``).
"""
import argparse
import mmap
import os
import statistics
import time

MADV_POPULATE_READ = 22     # Linux 5.14
MADV_POPULATE_WRITE = 23
PAGE = 4096
STEPS = ["fallocate", "maker_populate_write", "other_populate_read", "other_populate_write",
         "reader_loads", "unmap", "unlink"]


def _cpu_ms(fn):
    t = time.thread_time_ns()
    fn()
    return (time.thread_time_ns() - t) / 1e6


def measure(size=64 << 20, reps=7, directory="/dev/shm"):
    """Medians over `reps` fresh segments: {step: CPU ms}."""
    samples = {s: [] for s in STEPS}
    path = os.path.join(directory, f"mbperf-segment-{os.getpid()}")
    for _ in range(reps):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            samples["fallocate"].append(_cpu_ms(lambda: os.posix_fallocate(fd, 0, size)))
            maker = mmap.mmap(fd, size)
            samples["maker_populate_write"].append(
                _cpu_ms(lambda: maker.madvise(MADV_POPULATE_WRITE)))
            other = mmap.mmap(fd, size)
            samples["other_populate_read"].append(
                _cpu_ms(lambda: other.madvise(MADV_POPULATE_READ)))
            other2 = mmap.mmap(fd, size)
            samples["other_populate_write"].append(
                _cpu_ms(lambda: other2.madvise(MADV_POPULATE_WRITE)))
            reader = mmap.mmap(fd, size, prot=mmap.PROT_READ)
            view = memoryview(reader)
            samples["reader_loads"].append(_cpu_ms(lambda: sum(view[p] for p in range(0, size, PAGE))))
            view.release()
            samples["unmap"].append(_cpu_ms(other.close))   # one populated mapping
            for m in (maker, other2, reader):
                m.close()
        finally:
            os.close(fd)
        samples["unlink"].append(_cpu_ms(lambda: os.unlink(path)))
    return {s: round(statistics.median(v), 2) for s, v in samples.items()}


def per_segment(cost, writers, others="other_populate_read"):
    """CPU ms one segment costs a bus of `writers` writer processes and one reader: made once,
    mapped by its maker and the other writers (Java: ``other_populate_read``; Python's writers
    map their pages 64 KiB at a time as they write, with POPULATE_WRITE: ``other_populate_write``),
    read by the reader, unmapped by each, unlinked."""
    return (cost["fallocate"] + cost["maker_populate_write"]
            + (writers - 1) * cost[others] + cost["reader_loads"]
            + (writers + 1) * cost["unmap"] + cost["unlink"])


def share(cost, writers, others, records_per_s, slot, segment_size, cores):
    """The share of the machine's cores a rolling bus's fresh memory takes at a record rate."""
    segments_per_s = records_per_s * slot / segment_size
    return segments_per_s * per_segment(cost, writers, others) / 1e3 / cores


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=64)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    cost = measure(args.size_mib << 20, args.reps)
    print(f"one {args.size_mib} MiB segment, CPU ms (medians of {args.reps}):")
    for step in STEPS:
        print(f"  {step:22} {cost[step]:7.2f}")
    for w in (1, 4):
        print(f"  {w} writer(s) + 1 reader: {per_segment(cost, w):.1f} ms a segment (Java), "
              f"{per_segment(cost, w, 'other_populate_write'):.1f} (Python)")


if __name__ == "__main__":
    main()
