"""How fast a tmpfs gives fresh memory, as a rolling writer makes a segment, right after memory
was freed and once it has sat free for a while (issue 24: the 2 MiB-page runs of bench_rolling).

    python3 perf/fresh_memory.py                       # 1024 MiB in /dev/shm, then a 6 s pause
    python3 perf/fresh_memory.py --dir /mnt/huge       # a tmpfs of 2 MiB pages (huge=always)

Each step makes a file of --mib MiB as a segment's maker does (posix_fallocate, then every page
mapped with MADV_POPULATE_WRITE, which zeroes it), then unmaps and unlinks it: three times back
to back, then after --pause seconds twice again. Wall ms and GB/s a step. On a virtual machine
whose kernel reports free memory to its host (``page_reporting`` on the kernel command line, a
virtio balloon), memory that sat free for a couple of seconds is given back to the host, and
zeroing it again waits for the host to map it: the step after the pause shows that. Results:
perf/results/fresh-memory.md (appended, one section a run).
"""
import argparse
import mmap
import os
import time

from segment_memory import MADV_POPULATE_WRITE

HERE = os.path.dirname(os.path.abspath(__file__))


def make(directory, size):
    """One segment's worth of fresh memory, made and dropped: wall ms to make it."""
    path = os.path.join(directory, f"mbperf-fresh-{os.getpid()}")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        t = time.perf_counter()
        os.posix_fallocate(fd, 0, size)
        m = mmap.mmap(fd, size)
        m.madvise(MADV_POPULATE_WRITE)
        ms = (time.perf_counter() - t) * 1e3
        m.close()
    finally:
        os.close(fd)
        os.unlink(path)
    return ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--pause", type=float, default=6.0)
    args = ap.parse_args()
    size = args.mib << 20
    steps = [("first", make(args.dir, size))]
    steps += [("again at once", make(args.dir, size)) for _ in range(2)]
    time.sleep(args.pause)
    steps.append((f"after {args.pause:g} s free", make(args.dir, size)))
    steps.append(("again at once", make(args.dir, size)))
    with open("/proc/cmdline") as f:
        reporting = [w for w in f.read().split() if w.startswith("page_reporting")]
    lines = [f"## {time.strftime('%Y-%m-%d %H:%M:%S %z')}: {args.mib} MiB in {args.dir}", "",
             f"Kernel command line: {' '.join(reporting) or 'no page_reporting option'}.", "",
             "| step | ms | GB/s |", "| --- | ---: | ---: |"]
    lines += [f"| {name} | {ms:.0f} | {size / ms / 1e6:.2f} |" for name, ms in steps]
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(HERE, "results", "fresh-memory.md"), "a") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
