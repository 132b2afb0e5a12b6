"""Framed buses (issue 36) against their peers, in one run: large messages, small messages
framed vs fixed, a topic filter, and objects.

    python3 perf/bench_frames.py              # about two minutes on an idle 2-core machine
    python3 perf/bench_frames.py --quick      # fewer messages

Every figure is timed in the receiving process, from the first message after a 10 % warm-up
to the last, one writer process -> one reader process on fresh /dev/shm files, the median of
``--runs`` runs, run in interleaved rounds (each round runs every figure of a group once, so
the figures a ratio compares come from the same minutes); peers get the same payloads:

- 1 MiB messages (a numpy array's bytes, written as the array: no conversion to bytes),
  GB/s: the bus read three ways: ``read_view`` (a memoryview of the mapping, no copy: the
  receiving side of pyzmq's copy=False), ``read_into`` one buffer (a copy: the receiving side
  of Pipe's recv_bytes_into) and ``read()`` (a new bytes object each). The single file is
  made ``preallocate=True, prefault=True`` and opened with ``prefault=True``: its memory is
  paid before the run, and what that costs is measured and reported beside it (as a share of
  the run's time per MiB), as the rolling bus (64 MiB segments) reports what its fresh
  segments' memory costs (perf/segment_memory.py, as bench_rolling does). Peers:
  ``multiprocessing.Pipe`` (send_bytes / recv_bytes_into one buffer), pyzmq PUSH/PULL over
  ipc (send copy=False, recv copy=False), ``multiprocessing.Queue`` of the numpy array.
  Ceilings beside them: one process copying the array into one cached buffer, and into
  consecutive MiBs of prefaulted /dev/shm memory (copy_ceiling). The rolling bus once more on a
  tmpfs whose files take huge pages (``huge_tmpfs``: one already mounted, else, with
  ``--huge-mount`` as root, a private one this run mounts under build/ and unmounts).
  Every process runs with OPENBLAS/OMP/MKL threads at 1: numpy's BLAS threads otherwise spin
  beside the measured ones (10 % of the samples of a rolling run in ``perf record``).
- 12-byte messages, msgs/s: a framed bus against a fixed one (record_size 12), ``read()`` a
  message in Python on both, and the writer alone.
- a topic filter: a pre-written bus where one message in 100 is of topic "rare"; a reader
  with ``topics=["rare"]`` against one reading every message in Python and keeping
  ``rec.topic == "rare"``.
- ``write_object`` of a small dict, objects/s: the bus (``read_object``) against
  ``multiprocessing.Queue`` (put/get) and pyzmq ``send_pyobj``/``recv_pyobj``.
"""
import argparse
import json
import multiprocessing as mp
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

# Before numpy: its BLAS thread pool would otherwise spin beside the measured processes.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

from mappedbus_py import (MappedBusReader, MappedBusWriter, RollingBusReader,  # noqa: E402
                          RollingBusWriter)
from mappedbus_py.formats.files import remove_bus  # noqa: E402

MIB = 1 << 20
DICT = {"symbol": "ABC", "price": 101.25, "size": 300, "side": "buy", "ts": 1732780000123}
CTX = mp.get_context("fork")


def _shm(tag, where=None):
    d = where or ("/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir())
    return os.path.join(d, f"mbperf-frames-{os.getpid()}-{tag}-{time.monotonic_ns()}")


def huge_tmpfs(mount_one):
    """A writable tmpfs directory whose files take huge pages (mounted ``huge=always`` or
    ``huge=within_size``), and whether this run mounted it: one from /proc/mounts, else, with
    ``mount_one`` and root, a private one mounted under build/ (4 GiB, unmounted at the end);
    else None. /dev/shm is mounted ``huge=never`` on most systems."""
    with open("/proc/mounts") as f:
        for line in f:
            dev, where, kind, opts = line.split()[:4]
            if kind == "tmpfs" and any(o in opts.split(",") for o in
                                       ("huge=always", "huge=within_size")) \
                    and os.access(where, os.W_OK):
                return where, False
    if not mount_one or os.geteuid() != 0:
        return None, False
    where = os.path.join(ROOT, "build", f"hugetmpfs-{os.getpid()}")
    os.makedirs(where, exist_ok=True)
    import subprocess
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "huge=always,size=4g,mode=0700",
                        "tmpfs", where], capture_output=True, text=True)
    if r.returncode != 0:
        os.rmdir(where)
        print(f"no huge-page tmpfs: mount failed: {r.stderr.strip()}", flush=True)
        return None, False
    return where, True


def _cleanup(path):
    remove_bus(path)    # a rolling bus's directory, or a single file and every side file


def _timed(recv, n, warmup):
    for _ in range(warmup):
        recv()
    t = time.perf_counter()
    for _ in range(n - warmup):
        recv()
    return time.perf_counter() - t


def _pair(reader_fn, writer_fn, n, warmup):
    """Run reader_fn(n, warmup, ready) -> seconds and writer_fn(n) in two processes."""
    q, ready = CTX.SimpleQueue(), CTX.Event()

    def reader():
        q.put(reader_fn(n, warmup, ready))

    r = CTX.Process(target=reader)
    r.start()
    if not ready.wait(60):
        raise RuntimeError("reader never started")
    w = CTX.Process(target=writer_fn, args=(n,))
    w.start()
    dt = q.get()
    w.join(120)
    r.join(120)
    return dt


# -- the bus -----------------------------------------------------------------------------

def bus_big(n, warmup, rolling, how, where=None):
    """GB/s of 1 MiB messages; a single file is made and opened with prefault (single_cost
    measures what that costs), a rolling bus as it comes (segment_memory measures that), in
    /dev/shm or ``where`` (a tmpfs with huge pages)."""
    path = _shm("big", where)
    size = MIB
    rec = 4088                       # 4 KiB slots
    if rolling:
        RollingBusWriter(path, 64 * MIB, rec, frames=True).open().close()
    else:
        MappedBusWriter(path, (n + 4) * (size + 4096) + 8, rec, frames=True,
                        preallocate=True, prefault=True).open().close()
    payload = np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8)

    def writer(n):
        w = (RollingBusWriter(path, frames=True) if rolling else
             MappedBusWriter(path, frames=True, prefault=True)).open()
        for _ in range(n):
            w.write(payload)
        w.close()

    def reader(n, warmup, ready):
        r = (RollingBusReader(path) if rolling else
             MappedBusReader(path, prefault=True)).open()
        ready.set()
        if how == "read_into":
            buf = bytearray(size)
            def recv():
                r.read_into(buf, timeout=None)
        elif how == "read_view":
            read_view = r.read_view
            def recv():
                read_view(None)
        else:
            def recv():
                r.read(timeout=None)
        dt = _timed(recv, n, warmup)
        r.close()
        return dt

    try:
        dt = _pair(reader, writer, n, warmup)
    finally:
        _cleanup(path)
    return (n - warmup) * size / dt / 1e9


def single_cost(mib=256, reps=3):
    """CPU ms a MiB of a single-file bus made preallocate=True, prefault=True and opened by
    one writer and one reader with prefault=True costs (make, both opens, both closes,
    unlink): the memory bus_big's single file paid before its run. The median of reps."""
    vals = []
    for _ in range(reps):
        path = _shm("cost")
        t = time.process_time()
        MappedBusWriter(path, mib * MIB + 8, 4088, frames=True, preallocate=True,
                        prefault=True).open().close()
        w = MappedBusWriter(path, frames=True, prefault=True).open()
        r = MappedBusReader(path, prefault=True).open()
        r.close()
        w.close()
        _cleanup(path)
        vals.append((time.process_time() - t) * 1e3 / mib)
    return statistics.median(vals)


def copy_ceiling(n, warmup, fresh):
    """GB/s of one process copying a 1 MiB numpy array n times, timed after warmup copies:
    into one 1 MiB buffer (``fresh=False``: the copy stays in the caches, the fastest a
    message can be copied once on this machine), or into consecutive MiBs of a /dev/shm file
    whose pages are written once before the timing (``fresh=True``: what a single-file bus's
    writer does, its prefault paid before the run)."""
    import mmap
    payload = np.random.default_rng(0).integers(0, 256, MIB, dtype=np.uint8)
    if not fresh:
        dst = np.empty(MIB, dtype=np.uint8)
        return (n - warmup) * MIB / _timed(lambda: np.copyto(dst, payload), n, warmup) / 1e9
    path = _shm("copy")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.posix_fallocate(fd, 0, n * MIB)
        m = mmap.mmap(fd, n * MIB)
        dst = np.frombuffer(m, dtype=np.uint8)
        dst[::4096] = 0                         # every page written once: mapped, allocated
        at = iter(range(n))

        def copy():
            i = next(at)
            np.copyto(dst[i * MIB:(i + 1) * MIB], payload)
        gbs = (n - warmup) * MIB / _timed(copy, n, warmup) / 1e9
        del dst
        m.close()
        return gbs
    finally:
        os.close(fd)
        os.unlink(path)


def bus_small(n, warmup, framed, writer_only=False):
    path = _shm("small")
    msg = b"x" * 12
    if framed:
        MappedBusWriter(path, (n + 10_000) * 64 + 8, 56, frames=True).open().close()
    else:
        MappedBusWriter(path, (n + 10_000) * 20 + 8, 12).open().close()

    def writer(n):
        w = MappedBusWriter(path, frames=framed).open()
        write = w.write
        for _ in range(n):
            write(msg)
        w.close()

    try:
        if writer_only:
            w = MappedBusWriter(path, frames=framed).open()
            write = w.write
            for _ in range(warmup):
                write(msg)
            t = time.perf_counter()
            for _ in range(n - warmup):
                write(msg)
            dt = time.perf_counter() - t
            w.close()
            return (n - warmup) / dt

        def reader(n, warmup, ready):
            r = MappedBusReader(path).open()
            ready.set()
            read = r.read
            dt = _timed(lambda: read(None), n, warmup)
            r.close()
            return dt

        dt = _pair(reader, writer, n, warmup)
    finally:
        _cleanup(path)
    return (n - warmup) / dt


def bus_filter(n, filtered):
    path = _shm("filter")
    MappedBusWriter(path, (n + 100) * 64 + 8, 56, frames=True).open().close()
    try:
        with MappedBusWriter(path, frames=True) as w:
            for i in range(n):
                w.write(b"m%010d" % i, topic="rare" if i % 100 == 0 else "common")

        def run():
            t = time.perf_counter()
            if filtered:
                with MappedBusReader(path, topics=["rare"]) as r:
                    got = sum(1 for _ in r.records(timeout=0))
            else:
                with MappedBusReader(path) as r:
                    got = sum(1 for rec in r.records(timeout=0) if rec.topic == "rare")
            dt = time.perf_counter() - t
            assert got == (n + 99) // 100, got
            return dt

        run()                                   # warm: topics learned, pages mapped
        dt = statistics.median(run() for _ in range(3))
    finally:
        _cleanup(path)
    return n / dt


def bus_objects(n, warmup):
    path = _shm("objects")
    MappedBusWriter(path, (n + 1000) * 256 + 8, 248, frames=True).open().close()

    def writer(n):
        w = MappedBusWriter(path, frames=True).open()
        for _ in range(n):
            w.write_object(DICT)
        w.close()

    def reader(n, warmup, ready):
        r = MappedBusReader(path).open()
        ready.set()
        dt = _timed(lambda: r.read_object(None), n, warmup)
        r.close()
        return dt

    try:
        dt = _pair(reader, writer, n, warmup)
    finally:
        _cleanup(path)
    return (n - warmup) / dt


# -- peers -----------------------------------------------------------------------------

def pipe_big(n, warmup):
    a, b = CTX.Pipe(duplex=False)
    payload = np.random.default_rng(0).integers(0, 256, MIB, dtype=np.uint8)

    def writer(n):
        for _ in range(n):
            b.send_bytes(payload)

    def reader(n, warmup, ready):
        buf = bytearray(MIB)
        ready.set()
        return _timed(lambda: a.recv_bytes_into(buf), n, warmup)

    return (n - warmup) * MIB / _pair(reader, writer, n, warmup) / 1e9


def zmq_big(n, warmup):
    import zmq
    tmp = tempfile.mkdtemp(prefix="mbperf-zmq-")
    addr = f"ipc://{tmp}/sock"
    payload = np.random.default_rng(0).integers(0, 256, MIB, dtype=np.uint8)

    def writer(n):
        ctx = zmq.Context()
        s = ctx.socket(zmq.PUSH)
        s.set_hwm(16)
        s.connect(addr)
        for _ in range(n):
            s.send(payload, copy=False)
        s.close(linger=-1)
        ctx.term()

    def reader(n, warmup, ready):
        ctx = zmq.Context()
        s = ctx.socket(zmq.PULL)
        s.set_hwm(16)
        s.bind(addr)
        ready.set()

        def recv():
            f = s.recv(copy=False)
            memoryview(f.buffer)
        dt = _timed(recv, n, warmup)
        s.close(linger=0)
        ctx.term()
        return dt

    try:
        return (n - warmup) * MIB / _pair(reader, writer, n, warmup) / 1e9
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def queue_big(n, warmup):
    q = CTX.Queue(maxsize=16)
    payload = np.random.default_rng(0).integers(0, 256, MIB, dtype=np.uint8)

    def writer(n):
        for _ in range(n):
            q.put(payload)

    def reader(n, warmup, ready):
        ready.set()
        return _timed(q.get, n, warmup)

    return (n - warmup) * MIB / _pair(reader, writer, n, warmup) / 1e9


def queue_objects(n, warmup):
    q = CTX.Queue()

    def writer(n):
        for _ in range(n):
            q.put(DICT)

    def reader(n, warmup, ready):
        ready.set()
        return _timed(q.get, n, warmup)

    return (n - warmup) / _pair(reader, writer, n, warmup)


def zmq_objects(n, warmup):
    import zmq
    tmp = tempfile.mkdtemp(prefix="mbperf-zmq-")
    addr = f"ipc://{tmp}/sock"

    def writer(n):
        ctx = zmq.Context()
        s = ctx.socket(zmq.PUSH)
        s.set_hwm(0)
        s.connect(addr)
        for _ in range(n):
            s.send_pyobj(DICT)
        s.close(linger=-1)
        ctx.term()

    def reader(n, warmup, ready):
        ctx = zmq.Context()
        s = ctx.socket(zmq.PULL)
        s.set_hwm(0)
        s.bind(addr)
        ready.set()
        dt = _timed(s.recv_pyobj, n, warmup)
        s.close(linger=0)
        ctx.term()
        return dt

    try:
        return (n - warmup) / _pair(reader, writer, n, warmup)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -- the run -------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--huge-mount", action="store_true",
                    help="as root, mount a private tmpfs with huge pages for the rolling bus's "
                         "second figure when none is mounted (unmounted at the end)")
    args = ap.parse_args()
    huge, mounted = huge_tmpfs(args.huge_mount)
    if mounted:
        import atexit
        import subprocess
        atexit.register(lambda: (subprocess.run(["umount", huge]), os.rmdir(huge)))
    runs = args.runs or (1 if args.quick else 3)
    big = 300 if args.quick else 1500
    small = 300_000 if args.quick else 2_000_000
    objs = 50_000 if args.quick else 200_000
    filt = 200_000 if args.quick else 1_000_000

    figures = {}

    def group(*specs):
        # Interleaved rounds: each round runs every figure of the group once, so the figures
        # a ratio compares come from the same minutes on a machine whose speed drifts.
        vals = {name: [] for name, *_ in specs}
        for _ in range(runs):
            for name, fn, *a in specs:
                vals[name].append(fn(*a))
        for name, *_ in specs:
            figures[name] = round(statistics.median(vals[name]), 3 if "gbs" in name else 0)
            print(f"{name:<40} {figures[name]:>14,}", flush=True)

    group(("big_bus_single_read_view_gbs", bus_big, big, big // 10, False, "read_view"),
          ("big_bus_single_read_into_gbs", bus_big, big, big // 10, False, "read_into"),
          ("big_bus_single_read_gbs", bus_big, big, big // 10, False, "read"),
          ("big_bus_rolling_read_into_gbs", bus_big, big, big // 10, True, "read_into"),
          *([("big_bus_rolling_huge_read_into_gbs", bus_big, big, big // 10, True,
              "read_into", huge)] if huge else []),
          ("big_pipe_gbs", pipe_big, big, big // 10),
          ("big_zmq_ipc_gbs", zmq_big, big, big // 10),
          ("big_mp_queue_numpy_gbs", queue_big, max(big // 4, 50), max(big // 40, 5)),
          ("copy_1mib_cached_gbs", copy_ceiling, big, big // 10, False),
          ("copy_1mib_fresh_gbs", copy_ceiling, big, big // 10, True))
    group(("small_framed_msgs_per_s", bus_small, small, small // 10, True),
          ("small_fixed_msgs_per_s", bus_small, small, small // 10, False))
    group(("small_framed_writer_msgs_per_s", bus_small, small, small // 10, True, True),
          ("small_fixed_writer_msgs_per_s", bus_small, small, small // 10, False, True))
    group(("filter_one_in_100_msgs_per_s", bus_filter, filt, True),
          ("filter_in_python_msgs_per_s", bus_filter, filt, False))
    group(("objects_bus_per_s", bus_objects, objs, objs // 10),
          ("objects_mp_queue_per_s", queue_objects, objs, objs // 10),
          ("objects_zmq_pyobj_per_s", zmq_objects, objs, objs // 10))

    import segment_memory
    cost = segment_memory.measure(64 * MIB, reps=3)
    seg_ms = cost["fallocate"] + cost["maker_populate_write"] + cost["other_populate_read"] \
        + cost["unmap"] * 2 + cost["unlink"]
    f = figures
    ratios = {
        "single_view_vs_pipe": f["big_bus_single_read_view_gbs"] / f["big_pipe_gbs"],
        "single_view_vs_zmq": f["big_bus_single_read_view_gbs"] / f["big_zmq_ipc_gbs"],
        "single_into_vs_pipe": f["big_bus_single_read_into_gbs"] / f["big_pipe_gbs"],
        "single_into_vs_zmq": f["big_bus_single_read_into_gbs"] / f["big_zmq_ipc_gbs"],
        "rolling_vs_pipe": f["big_bus_rolling_read_into_gbs"] / f["big_pipe_gbs"],
        "rolling_vs_zmq": f["big_bus_rolling_read_into_gbs"] / f["big_zmq_ipc_gbs"],
        **({"rolling_huge_vs_pipe": f["big_bus_rolling_huge_read_into_gbs"] / f["big_pipe_gbs"],
            "rolling_huge_vs_zmq": f["big_bus_rolling_huge_read_into_gbs"] / f["big_zmq_ipc_gbs"]}
           if huge else {}),
        "small_framed_vs_fixed": f["small_framed_msgs_per_s"] / f["small_fixed_msgs_per_s"],
        "small_writer_framed_vs_fixed": (f["small_framed_writer_msgs_per_s"]
                                         / f["small_fixed_writer_msgs_per_s"]),
        "filter_vs_python": f["filter_one_in_100_msgs_per_s"] / f["filter_in_python_msgs_per_s"],
        "objects_vs_mp_queue": f["objects_bus_per_s"] / f["objects_mp_queue_per_s"],
        "objects_vs_zmq_pyobj": f["objects_bus_per_s"] / f["objects_zmq_pyobj_per_s"],
    }
    ratios = {k: round(v, 2) for k, v in ratios.items()}
    # One 64 MiB segment's fresh memory per 64 MiB written: its CPU ms, as a share of the
    # time the rolling pair takes to move those 64 MiB.
    seg_share = seg_ms / 1e3 / (64 * MIB / (f["big_bus_rolling_read_into_gbs"] * 1e9))
    # The single file's prefaulted memory, per MiB, as a share of the time the pair takes to
    # move a MiB at the read_view figure.
    single_ms = single_cost()
    single_share = single_ms / 1e3 / (MIB / (f["big_bus_single_read_view_gbs"] * 1e9))
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, " \
              f"Linux {platform.release()}, CPython {platform.python_version()}, " \
              f"load {os.getloadavg()[0]:.2f}"
    lines = [f"# bench_frames: {stamp}", "", f"`python3 perf/bench_frames.py"
             f"{' --quick' if args.quick else ''}` (median of {runs} interleaved round(s)); {machine}.", "",
             "| figure | value |", "|---|---|"]
    lines += [f"| {k} | {v:,} |" for k, v in figures.items()]
    lines += ["", "| ratio | value | target |", "|---|---|---|"]
    targets = {"single_view_vs_pipe": ">= 3", "single_view_vs_zmq": ">= 5",
               "single_into_vs_pipe": ">= 3", "single_into_vs_zmq": ">= 5",
               "rolling_vs_pipe": ">= 3",
               "rolling_vs_zmq": ">= 5", "rolling_huge_vs_pipe": ">= 3",
               "rolling_huge_vs_zmq": ">= 5", "small_framed_vs_fixed": ">= 0.9",
               "small_writer_framed_vs_fixed": "", "filter_vs_python": ">= 5",
               "objects_vs_mp_queue": "", "objects_vs_zmq_pyobj": ""}
    lines += [f"| {k} | {v} | {targets[k]} |" for k, v in ratios.items()]
    lines += ["", f"Rolling bus: a 64 MiB segment's fresh memory costs {seg_ms:.1f} ms of CPU "
                  f"(perf/segment_memory.py: fallocate, populate by its maker and by the other "
                  f"process, unmaps, unlink), {100 * seg_share:.0f} % of the time the pair "
                  f"takes to move 64 MiB at the rolling figure.",
              "", f"Single file: made preallocate=True, prefault=True and opened with "
                  f"prefault=True by the writer and the reader, a MiB of it costs "
                  f"{single_ms:.2f} ms of CPU before the run (make, both opens and closes, "
                  f"unlink), {100 * single_share:.0f} % of the time the pair takes to move a "
                  f"MiB at the read_view figure.",
              "", f"Ceilings, measured in the same rounds: one process copies a 1 MiB array "
                  f"into one buffer that stays in the caches at {f['copy_1mib_cached_gbs']:.2f} "
                  f"GB/s and into consecutive MiBs of prefaulted /dev/shm memory (the "
                  f"single-file writer's copy) at {f['copy_1mib_fresh_gbs']:.2f} GB/s. "
                  f"5 x pyzmq is {5 * f['big_zmq_ipc_gbs']:.2f} GB/s: "
                  + ("above" if 5 * f["big_zmq_ipc_gbs"] > f["copy_1mib_cached_gbs"] else "below")
                  + " the cached copy, the bound of any bus that copies each message once. "
                  f"The single-file bus (read_view) moves "
                  f"{100 * f['big_bus_single_read_view_gbs'] / f['copy_1mib_fresh_gbs']:.0f} % of "
                  f"its writer's copy rate.",
              "", (f"Rolling bus on a tmpfs with huge pages ({huge}, "
                   f"{'mounted by this run' if mounted else 'mounted before the run'}, "
                   f"huge=within_size or always: a segment's memory in 2 MiB pages): "
                   f"{f['big_bus_rolling_huge_read_into_gbs']:.2f} GB/s, against "
                   f"{f['big_bus_rolling_read_into_gbs']:.2f} on /dev/shm (4 KiB pages)."
                   if huge else "Rolling bus on a tmpfs with huge pages: not measured (none "
                   "mounted; --huge-mount mounts one, as root).")]
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(args.out, exist_ok=True)
    name = time.strftime("frames-%Y-%m-%d-%H%M", time.gmtime())
    with open(os.path.join(args.out, name + ".md"), "w") as fh:
        fh.write(text)
    with open(os.path.join(args.out, name + ".json"), "w") as fh:
        json.dump({"figures": figures, "ratios": ratios, "segment_memory_ms": cost,
                   "segment_ms": seg_ms, "single_file_ms_per_mib": single_ms, "machine": machine, "stamp": stamp, "runs": runs},
                  fh, indent=1)


if __name__ == "__main__":
    main()
