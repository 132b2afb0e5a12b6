"""The journal (issue 37), in one run:

    python3 perf/bench_journal.py            # 3,000,000 records a run
    python3 perf/bench_journal.py --quick    # 600,000

1. **The archiver keeps up**: one Python writer process writes PriceUpdate records (12 bytes)
   as fast as it can into a hot bus in /dev/shm (1 MiB segments) with ``archive=`` a directory
   on disk, ``archive_after=2``, for zstd and lz4; a second process looks at the hot directory
   every 2 ms and reports the most segments with records it held (the target: archive_after + 1
   with the current one, at rolls too, since the oldest full one moves once the current one is
   half full; a spare made ahead has none),
   the share of samples at each count, and the most hot files at all. Also the
   writer's rate, and the time from the last write until the archive holds every full segment.
2. **Compressed size**: the archived segments' bytes against their segments' (the PriceUpdate
   stream: 10 sources, prices in a random walk, quantities 1..1000), for zstd and lz4.
3. **Reading from the archive against memory**: one reader reading every record
   (``read_into``) of a bus whose segments are all hot, and of the same records archived
   (none, lz4, zstd): records/s, decompression included.
4. **sync="interval" (10 ms) against "none"**: a writer's rate on a bus in a disk directory.
5. **The time index's cost**: a writer's rate with ``time_index=False`` and ``True`` (/dev/shm).

Rates 4. and 5. are the best of interleaved rounds (the machine is shared: the best is the
least disturbed). Reads (3.) are the median of ``READ_ROUNDS`` interleaved rounds: a ratio of
two bests would set a lucky read from memory against a typical one from the archive, or the
other way round.

6. **With Java writers and readers** (``perf/bench_journal_java.py``'s figures, run here unless
   ``--no-java`` or no ``java``): both archivers against a Java writer at full speed (1 MiB and
   16 MiB segments), Java reading the archive, Java's sync and time-index costs.
7. **Spark reading from the archive against memory** (unless ``--no-spark``): a batch read of
   the buses of 3. (``format("mappedbus")``, ``layout=PriceUpdate``, ``local[2]``) summing two
   fields of every record, the median of ``READ_ROUNDS`` interleaved rounds after a warm-up each.

The machine is shared: figures are of the minute they were taken. Results: perf/results/
journal-<date>.md and .json.
"""
import argparse
import datetime
import json
import mmap
import multiprocessing as mp
import os
import random
import shutil
import statistics
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, machine, write_dated_results  # noqa: E402

from mappedbus_py import PriceUpdate, RollingBusReader, RollingBusWriter  # noqa: E402
from mappedbus_py.formats.archive import list_archived  # noqa: E402
from mappedbus_py.formats.layout import FIRST_RECORD_OFFSET, segment_index  # noqa: E402
from mappedbus_py.rolling.directory import segment_path  # noqa: E402

SEG = 1024 * 1024
RS = 12
AFTER = 2
#: Interleaved rounds of the reads (3.); each figure is the median of its rounds.
READ_ROUNDS = 5


def _fill(w, n, seed=1):
    rnd = random.Random(seed)
    m = PriceUpdate()
    prices = [1000 + 10 * s for s in range(10)]
    t0 = time.perf_counter()
    for i in range(n):
        s = i % 10
        prices[s] += rnd.randint(-3, 3)
        m.source, m.price, m.quantity = s, prices[s], rnd.randint(1, 1000)
        w.write(m)
    return time.perf_counter() - t0


def _watch(hot, stop, out):
    """Every 2 ms: the hot segments with records (a limit past the first record's offset) and
    the hot segment files, the most of each, and how many samples saw each count. Cheap, so as
    not to take the core the archiver runs on: a listing of names a sample, and each
    segment's first page mapped once, its limit one load (about 4 % of a core here; opening
    each file at each sample took 7 %)."""
    most_live = most_files = 0
    counts = {}
    pages = {}      # segment index -> its first page, mapped while the segment is listed
    try:
        while not stop.is_set():
            try:
                names = os.listdir(hot)
            except FileNotFoundError:
                names = []
            segs = {i for i in map(segment_index, names) if i is not None}
            for k in set(pages) - segs:
                pages.pop(k).close()
            live = 0
            for k in segs:
                m = pages.get(k)
                if m is None:
                    try:
                        fd = os.open(segment_path(hot, k), os.O_RDONLY | os.O_NOFOLLOW)
                    except FileNotFoundError:
                        continue
                    try:
                        m = pages[k] = mmap.mmap(fd, mmap.PAGESIZE, prot=mmap.PROT_READ)
                    except ValueError:      # not a page long yet (being made)
                        continue
                    finally:
                        os.close(fd)
                if struct.unpack_from("<q", m, 0)[0] > FIRST_RECORD_OFFSET:
                    live += 1
            most_live, most_files = max(most_live, live), max(most_files, len(segs))
            counts[live] = counts.get(live, 0) + 1
            time.sleep(0.002)
    finally:
        for m in pages.values():
            m.close()
    out.put((most_live, most_files, counts))


def _writer_run(hot, arch, n, compress, q):
    w = RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=AFTER,
                         compress=compress, time_index=True).open()
    took = _fill(w, n)
    t_end = time.perf_counter()
    ok = w.archiver.wait_idle(120)
    caught_up = time.perf_counter() - t_end
    w.close()
    q.put((n / took, caught_up, ok))


def keep_up(n, compress, disk):
    hot = f"/dev/shm/mbjournal-bench-{os.getpid()}-{compress}"
    arch = os.path.join(disk, f"archive-{compress}")
    shutil.rmtree(hot, ignore_errors=True)
    RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=AFTER,
                     compress=compress, time_index=True).open().close()
    ctx = mp.get_context("spawn")
    stop, wq, rq = ctx.Event(), ctx.Queue(), ctx.Queue()
    watcher = ctx.Process(target=_watch, args=(hot, stop, wq))
    watcher.start()
    time.sleep(0.5)
    writer = ctx.Process(target=_writer_run, args=(hot, arch, n, compress, rq))
    writer.start()
    rate, caught_up, ok = rq.get(timeout=900)
    writer.join()
    stop.set()
    most_live, most_files, counts = wq.get(timeout=60)
    watcher.join()
    archived = list_archived(arch)
    raw = len(archived) * SEG
    stored = sum(os.path.getsize(os.path.join(arch, name)) for name in archived.values())
    return hot, arch, {"writer_msgs_per_s": rate, "archive_caught_up_s": caught_up,
                       "caught_up": ok, "most_hot_segments_with_records": most_live,
                       "most_hot_segment_files": most_files, "target": AFTER + 1,
                       "samples_by_hot_segments": {str(k): v for k, v in sorted(counts.items())},
                       "segments_archived": len(archived),
                       "compressed_ratio": raw / stored if stored else None,
                       "stored_bytes": stored, "segment_bytes": raw}


def read_rate(path):
    m = PriceUpdate()
    n = 0
    with RollingBusReader(path) as r:
        t0 = time.perf_counter()
        while r.read_into(m):
            n += 1
        took = time.perf_counter() - t0
    return n, n / took


def writer_rate(path, n, **kw):
    shutil.rmtree(path, ignore_errors=True)
    with RollingBusWriter(path, SEG, RS, **kw) as w:
        took = _fill(w, n)
    shutil.rmtree(path, ignore_errors=True)
    return n / took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--report", metavar="JSON", help="write the .md of a run's .json again")
    ap.add_argument("--no-java", action="store_true",
                    help="leave out 6. (Java writers and readers: about a minute and a half)")
    ap.add_argument("--no-spark", action="store_true",
                    help="leave out 7. (Spark reading the archive: about a minute)")
    a = ap.parse_args()
    if a.report:
        with open(a.report) as f:
            res = json.load(f)
        started = datetime.datetime.strptime(os.path.basename(a.report)[8:23], "%Y-%m-%d-%H%M")
        started = started.replace(tzinfo=datetime.timezone.utc)
        with open(a.report[:-5] + ".md", "w") as f:
            f.write(report(res, started))
        return
    n = 600_000 if a.quick else 3_000_000
    started = datetime.datetime.now(datetime.timezone.utc)
    load0 = os.getloadavg()[0]
    disk = tempfile.mkdtemp(prefix="mbjournal-bench-", dir=os.path.join(ROOT, "build")
                            if os.path.isdir(os.path.join(ROOT, "build")) else None)
    res = {"records": n, "segment_size": SEG, "record_size": RS, "archive_after": AFTER}
    hots = []
    try:
        for compress in ("lz4", "zstd"):
            hot, arch, r = keep_up(n, compress, disk)
            hots.append(hot)
            res[f"keep_up_{compress}"] = r
            print(compress, r, flush=True)
        # 3. reading: the same records all hot, and archived (none, lz4, zstd)
        mem = f"/dev/shm/mbjournal-bench-{os.getpid()}-mem"
        shutil.rmtree(mem, ignore_errors=True)
        with RollingBusWriter(mem, SEG, RS) as w:
            _fill(w, n)
        hots.append(mem)
        none_hot = f"/dev/shm/mbjournal-bench-{os.getpid()}-none"
        shutil.rmtree(none_hot, ignore_errors=True)
        with RollingBusWriter(none_hot, SEG, RS, archive=os.path.join(disk, "archive-none"),
                              archive_after=0) as w:
            _fill(w, n)
            w.archiver.wait_idle(120)
        hots.append(none_hot)
        paths = {"memory": mem, "archive_none": none_hot, "archive_lz4": hots[0],
                 "archive_zstd": hots[1]}
        rounds = {name: [] for name in paths}
        for _ in range(READ_ROUNDS):    # interleaved rounds; each figure the median of its own
            for name, p in paths.items():
                rounds[name].append(read_rate(p)[1])
        reads = {name: statistics.median(v) for name, v in rounds.items()}
        res["read_msgs_per_s"] = reads
        res["read_rounds_msgs_per_s"] = rounds
        print("read", reads, flush=True)
        # 4. sync policies on a disk directory; 5. the time index
        d = os.path.join(disk, "syncbus")
        nones, ivs = [], []
        for _ in range(2):          # interleaved rounds, the best of each
            nones.append(writer_rate(d, n))
            ivs.append(writer_rate(d, n, sync="interval", sync_interval=0.01))
        res["sync_msgs_per_s"] = {"none": max(nones), "interval_10ms": max(ivs)}
        print("sync", res["sync_msgs_per_s"], flush=True)
        shm = f"/dev/shm/mbjournal-bench-{os.getpid()}-tix"
        offs, ons = [], []
        for _ in range(3):          # interleaved rounds, the best of each
            offs.append(writer_rate(shm, n // 2, time_index=False))
            ons.append(writer_rate(shm, n // 2, time_index=True))
        res["time_index_msgs_per_s"] = {"off": max(offs), "on": max(ons)}
        print("time index", res["time_index_msgs_per_s"], flush=True)
        if not a.no_spark and _has_java():
            res["spark_read_rounds_msgs_per_s"] = spark_reads(paths, n)
            res["spark_read_msgs_per_s"] = {k: statistics.median(v) for k, v in
                                            res["spark_read_rounds_msgs_per_s"].items()}
            print("spark read", res["spark_read_msgs_per_s"], flush=True)
        if not a.no_java and _has_java():
            import bench_journal_java       # 6. (it imports this module's setup)
            res["java"] = bench_journal_java.measure(a.quick)
    finally:
        for h in hots:
            shutil.rmtree(h, ignore_errors=True)
        shutil.rmtree(disk, ignore_errors=True)
    res["machine"] = machine()
    res["load_average_start"], res["load_average_end"] = load0, os.getloadavg()[0]
    write_dated_results("journal", started, res, report(res, started))


def spark_reads(paths, n):
    """7.: ``{name: [records/s a round]}``: a Spark batch read summing two fields of every record
    of each bus of ``paths``, in READ_ROUNDS interleaved rounds after one warm-up read each."""
    from pyspark.sql import functions as F
    from mappedbus_py.spark import session
    spark = session("bench_journal", "local[2]", spark_sql_shuffle_partitions=2,
                    spark_driver_memory="1g")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        def read(path):
            df = spark.read.format("mappedbus").option("path", path).option("layout", "PriceUpdate").load()
            t0 = time.perf_counter()
            row = df.agg(F.count("*").alias("n"), F.sum("price"), F.sum("quantity")).first()
            took = time.perf_counter() - t0
            if row["n"] != n:
                raise RuntimeError(f"Spark read {row['n']} records of {path}, not {n}")
            return n / took
        for p in paths.values():
            read(p)                 # warm-up: the JIT, Spark's code generation
        rounds = {name: [] for name in paths}
        for _ in range(READ_ROUNDS):
            for name, p in paths.items():
                rounds[name].append(read(p))
        return rounds
    finally:
        spark.stop()


def _has_java():
    from mappedbus_py import jvm
    try:
        jvm.java_executable()
    except jvm.JavaNotFoundError:
        print("no java: 6. left out", flush=True)
        return False
    return True


def _f(x):
    return f"{x:,.0f}"


def report(res, started):
    m = res["machine"]
    lines = [f"# The journal (issue 37), {started:%Y-%m-%d %H:%M:%S %z}", "",
             f"Machine: {m.get('machine_cpu', '?')}, {m.get('machine_cores', '?')} cores, Linux "
             f"{m.get('machine_kernel', '?')}, {m.get('machine_python', '?')}. Load average "
             f"{res['load_average_start']:.2f} at start, {res['load_average_end']:.2f} at end "
             f"(a shared machine). {res['records']:,} PriceUpdate records (12 bytes) a run, "
             f"1 MiB segments, archive_after={res['archive_after']}, archive on ext4.", "",
             "| archiver keeps up | writer msgs/s | most hot segments with records (target "
             "archive_after+1) | most hot files | archive caught up after the last write | "
             "compressed ratio |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for c in ("lz4", "zstd"):
        r = res[f"keep_up_{c}"]
        ratio = f"{r['compressed_ratio']:.1f}x" if r["compressed_ratio"] else "-"
        lines.append(f"| {c} | {_f(r['writer_msgs_per_s'])} | "
                     f"{r['most_hot_segments_with_records']} | {r['most_hot_segment_files']} | "
                     f"{r['archive_caught_up_s'] * 1000:.0f} ms | {ratio} |")
    lines += ["", "Share of the watcher's 2 ms samples by hot segments with records (the target, "
              "archive_after+1, holds at rolls too while the archiver keeps up: the oldest full "
              "segment moves once the current one is half full):", ""]
    for c in ("lz4", "zstd"):
        counts = {int(k): v for k, v in res[f"keep_up_{c}"].get(
            "samples_by_hot_segments", {}).items()}
        busy = {k: v for k, v in counts.items() if k > 0}
        total = sum(busy.values()) or 1
        t = res["archive_after"] + 1
        lines.append(f"- {c}: <= {t}: {sum(v for k, v in busy.items() if k <= t) / total:.0%}, "
                     f"{t + 1}: {busy.get(t + 1, 0) / total:.0%}, more: "
                     f"{sum(v for k, v in busy.items() if k > t + 1) / total:.0%}")
    rd = res["read_msgs_per_s"]
    rounds = res.get("read_rounds_msgs_per_s", {})
    lines += ["", f"| reading every record (read_into), median of {READ_ROUNDS} interleaved rounds "
              "| records/s | against memory | rounds, M records/s |", "| --- | ---: | ---: | --- |"]
    for k in ("memory", "archive_none", "archive_lz4", "archive_zstd"):
        each = ", ".join(f"{x / 1e6:.1f}" for x in rounds.get(k, ()))
        lines.append(f"| {k.replace('_', ' ')} | {_f(rd[k])} | {rd[k] / rd['memory']:.2f} | {each} |")
    s, t = res["sync_msgs_per_s"], res["time_index_msgs_per_s"]
    lines += ["", "| writer (one process) | msgs/s |", "| --- | ---: |",
              f"| disk directory, sync=\"none\" | {_f(s['none'])} |",
              f"| disk directory, sync=\"interval\", 10 ms | {_f(s['interval_10ms'])} |",
              f"| /dev/shm, time_index=False | {_f(t['off'])} |",
              f"| /dev/shm, time_index=True | {_f(t['on'])} |", ""]
    if "spark_read_msgs_per_s" in res:
        sp, sr = res["spark_read_msgs_per_s"], res["spark_read_rounds_msgs_per_s"]
        lines += [f"| Spark batch read (local[2], sum of two fields of every record), median of "
                  f"{READ_ROUNDS} interleaved rounds | records/s | against memory | rounds, M records/s |",
                  "| --- | ---: | ---: | --- |"]
        for k in ("memory", "archive_none", "archive_lz4", "archive_zstd"):
            each = ", ".join(f"{x / 1e6:.2f}" for x in sr[k])
            lines.append(f"| {k.replace('_', ' ')} | {_f(sp[k])} | {sp[k] / sp['memory']:.2f} | {each} |")
        lines.append("")
    if "java" in res:
        import bench_journal_java
        java = bench_journal_java.report(res["java"], started).splitlines()
        lines += ["## " + java[0].lstrip("# ")] + java[1:]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
