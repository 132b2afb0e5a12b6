"""The journal (issue 37) with Java writers and readers, in one run (perf/bench_journal.py is the
Python side's; this one shares its setup):

    python3 perf/bench_journal_java.py            # 3,000,000 records a run
    python3 perf/bench_journal_java.py --quick    # 600,000

1. **The archiver keeps up with a Java writer**: a Python process holds a writer opened with
   ``archive=`` (its archiver runs while it is open; it writes nothing), and a Java writer
   (BusTool rolling-bench-write) writes PriceUpdate records as fast as it can into the same hot
   bus in /dev/shm (1 MiB segments, ``archive_after=2``, the time index kept), for lz4 and zstd;
   a watcher process reports the most hot segments with records (target archive_after + 1) and
   the most hot files. The writer writes ``WARM_UP`` records to a scratch bus first (with a
   scratch archive in 1b: its JIT compiles the write path and the archiver's then, not on the
   archiver's core during the timed run). Also the Java writer's rate, and how long after its
   last write the archive held every full segment.
1b. **The Java archiver keeps up with a Java writer**: the same, with the writer's own archiver
   (a Java RollingBusWriter with setArchive: its daemon thread), for lz4 and zstd, and the
   writer's rate without an archive beside it (what the archiver costs the write path).
2. **Java reading from the archive against memory**: BusTool rolling-bench-read over the same
   records all hot, and archived (none, lz4, zstd): records/s, decompression included.
2b. **What opening an archived segment costs alone** (ArchiveOpenCost: the file read and
   decompressed into memory, no record read), for lz4 and zstd, beside what reading a segment
   takes from the archive and from memory: how much of the gap to memory is the codec's.
3. **Java writer, sync="interval" (10 ms) against "none"** on a disk directory, and **the time
   index's cost** (off, on) in /dev/shm.

1c. **Both archivers at a segment size for the rate**: 1. and 1b. again with 16 MiB segments
   (12 full segments a run), ``BIG_ROUNDS`` interleaved rounds, each row the worst of its
   rounds: a Java writer fills 1 MiB segments 100 to 300 times a second, and each move has
   costs per segment (a scan, a copy, files made, fsynced, renamed, unlinked) that a larger
   segment pays once for 16 MiB.

Reads (2.) are the median of ``READ_ROUNDS`` interleaved rounds, each a JVM of its own timing
its ``READ_PASSES``-th pass over the bus; rates
of 3. the best of interleaved rounds (a shared machine). Results:
perf/results/journal-java-<date>.md and .json; ``perf/bench_journal.py`` runs all of this too
(``measure``) and reports it beside the Python figures.
"""
import argparse
import datetime
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, machine, write_dated_results  # noqa: E402
from bench_journal import AFTER, READ_ROUNDS, RS, SEG, _f, _watch  # noqa: E402

from mappedbus_py import RollingBusWriter, jvm  # noqa: E402
from mappedbus_py.formats.archive import list_archived  # noqa: E402

TOOL = "io.mappedbuspy.tools.BusTool"
OPEN_COST = "io.mappedbuspy.perf.ArchiveOpenCost"
#: 1c's segment size: one a Java writer at full speed (5 to 10 M records/s, 20-byte slots) fills
#: in 0.1 to 0.2 s, against the 1 MiB of 1. and 1b. that it fills 100 to 300 times a second.
BIG_SEG = 16 << 20
#: Records the Java writer of 1. and 1b. writes first to a scratch bus (removed) so that the JIT
#: compiles its write path before the timed run, not on the archiver's core during it (a run
#: of 1c is 0.8 s: a cold JVM compiles for much of it). The archiver warms up on its own.
WARM_UP = 5_000_000
#: Passes of each Java read (2.), each by a new reader in the same JVM; the last is timed: the
#: JIT warmed as a long replay's is (a first pass of 0.1 s is mostly the JIT compiling).
READ_PASSES = 3
#: Rounds of 1c, interleaved; each row reports its worst round.
BIG_ROUNDS = 3


def java(*args):
    """Runs a BusTool command; its output lines."""
    out = subprocess.run(jvm.java_command(TOOL, *map(str, args), jvm_args=("-Xmx256m",)),
                         capture_output=True, text=True, timeout=900)
    if out.returncode:
        raise RuntimeError(f"{args}: exit {out.returncode}\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return out.stdout.splitlines()


def open_cost(archive):
    """ArchiveOpenCost over ``archive``: seconds a segment (pass READ_PASSES of a JVM)."""
    out = subprocess.run(jvm.java_command(OPEN_COST, archive, SEG, RS, READ_PASSES,
                                          jvm_args=("-Xmx256m",)),
                         capture_output=True, text=True, timeout=900)
    if out.returncode:
        raise RuntimeError(f"{OPEN_COST} {archive}: exit {out.returncode}\n{out.stderr[-2000:]}")
    _, n, secs = out.stdout.split()
    return float(secs) / int(n)


def rate(lines, word):
    """'wrote N seconds' / 'read N seconds' -> N / seconds."""
    for line in lines:
        parts = line.split()
        if parts and parts[0] == word:
            return int(parts[1]) / float(parts[2])
    raise RuntimeError(f"no {word!r} line in {lines}")


def _holder(hot, arch, compress, ready, stop, q, seg=SEG):
    # The archiver's host: a Python writer opened with archive=, writing nothing.
    w = RollingBusWriter(hot, seg, RS, archive=arch, archive_after=AFTER, compress=compress,
                         time_index=True).open()
    ready.set()
    stop.wait()
    t0 = time.perf_counter()
    ok = w.archiver.wait_idle(120)
    q.put((time.perf_counter() - t0, ok))
    w.close()


def keep_up(n, compress, disk, seg=SEG):
    hot = f"/dev/shm/mbjournal-jbench-{os.getpid()}-{compress}-{seg}"
    arch = os.path.join(disk, f"archive-{compress}-{seg}")
    shutil.rmtree(hot, ignore_errors=True)
    shutil.rmtree(arch, ignore_errors=True)     # an earlier round's
    ctx = mp.get_context("spawn")
    ready, stop, done, wq, hq = ctx.Event(), ctx.Event(), ctx.Event(), ctx.Queue(), ctx.Queue()
    holder = ctx.Process(target=_holder, args=(hot, arch, compress, ready, done, hq, seg))
    holder.start()
    assert ready.wait(60)
    watcher = ctx.Process(target=_watch, args=(hot, stop, wq))
    watcher.start()
    time.sleep(0.5)
    w_rate = rate(java("rolling-bench-write", hot, seg, n, "--warm-up", WARM_UP), "wrote")
    done.set()
    caught_up, ok = hq.get(timeout=300)
    holder.join()
    stop.set()
    most_live, most_files = wq.get(timeout=60)[:2]  # (most live, most files, samples by count)
    watcher.join()
    archived = list_archived(arch)
    raw = len(archived) * seg
    stored = sum(os.path.getsize(os.path.join(arch, name)) for name in archived.values())
    return hot, {"java_writer_msgs_per_s": w_rate, "archive_caught_up_s": caught_up,
                 "caught_up": ok, "most_hot_segments_with_records": most_live,
                 "most_hot_segment_files": most_files, "target": AFTER + 1,
                 "segments_archived": len(archived),
                 "compressed_ratio": raw / stored if stored else None}


def keep_up_java(n, compress, disk, seg=SEG):
    """1b: a Java writer archiving itself; a watcher as in 1."""
    hot = f"/dev/shm/mbjournal-jbench-{os.getpid()}-j{compress}-{seg}"
    arch = os.path.join(disk, f"archive-j{compress}-{seg}")
    shutil.rmtree(hot, ignore_errors=True)
    shutil.rmtree(arch, ignore_errors=True)     # an earlier round's
    ctx = mp.get_context("spawn")
    stop, wq = ctx.Event(), ctx.Queue()
    watcher = ctx.Process(target=_watch, args=(hot, stop, wq))
    watcher.start()
    time.sleep(0.5)
    lines = java("rolling-bench-write", hot, seg, n, "--time-index", "on", "--archive", arch,
                 "--archive-after", AFTER, "--compress", compress, "--warm-up", WARM_UP)
    stop.set()
    most_live, most_files = wq.get(timeout=60)[:2]  # (most live, most files, samples by count)
    watcher.join()
    archived_line = next(x for x in lines if x.startswith("archived "))
    caught_up = float(archived_line.split("caught_up_s=")[1].split()[0])
    archived = list_archived(arch)
    shutil.rmtree(hot, ignore_errors=True)
    return {"java_writer_msgs_per_s": rate(lines, "wrote"), "archive_caught_up_s": caught_up,
            "caught_up": archived_line.endswith("ok=true"),
            "most_hot_segments_with_records": most_live, "most_hot_segment_files": most_files,
            "target": AFTER + 1, "segments_archived": len(archived)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    started = datetime.datetime.now(datetime.timezone.utc)
    res = measure(a.quick)
    write_dated_results("journal-java", started, res, report(res, started))


def measure(quick=False):
    """Every figure of this bench (the module's 1. to 3.): its result dict. 1c runs
    ``BIG_ROUNDS`` rounds of each archiver and codec and keeps the most hot segments of any."""
    n = 600_000 if quick else 3_000_000
    n_big = (4 if quick else 12) * ((BIG_SEG - 8) // (RS + 8))    # 4 or 12 full segments
    load0 = os.getloadavg()[0]
    disk = tempfile.mkdtemp(prefix="mbjournal-jbench-", dir=os.path.join(ROOT, "build")
                            if os.path.isdir(os.path.join(ROOT, "build")) else None)
    res = {"records": n, "segment_size": SEG, "record_size": RS, "archive_after": AFTER,
           "big_records": n_big, "big_segment_size": BIG_SEG}
    hots = []
    try:
        for compress in ("lz4", "zstd"):
            hot, r = keep_up(n, compress, disk)
            hots.append(hot)
            res[f"keep_up_{compress}"] = r
            print(compress, r, flush=True)
        for compress in ("lz4", "zstd"):
            r = keep_up_java(n, compress, disk)
            res[f"java_archiver_{compress}"] = r
            print("java archiver", compress, r, flush=True)
        # 1c. the same two at a segment size for this rate: 16 MiB (about 15 rolls a second),
        # interleaved rounds; the worst round of each kept (the most hot segments), and its rate
        res["big_rounds"] = BIG_ROUNDS
        for _ in range(BIG_ROUNDS):
            for compress in ("lz4", "zstd"):
                h, r = keep_up(n_big, compress, disk, BIG_SEG)
                shutil.rmtree(h, ignore_errors=True)
                _keep_worst(res, f"big_keep_up_{compress}", r)
                print("16 MiB, python archiver", compress, r, flush=True)
                r = keep_up_java(n_big, compress, disk, BIG_SEG)
                _keep_worst(res, f"big_java_archiver_{compress}", r)
                print("16 MiB, java archiver", compress, r, flush=True)
        plain = f"/dev/shm/mbjournal-jbench-{os.getpid()}-plain"
        shutil.rmtree(plain, ignore_errors=True)
        res["java_writer_no_archive_msgs_per_s"] = rate(
            java("rolling-bench-write", plain, SEG, n, "--time-index", "on"), "wrote")
        shutil.rmtree(plain, ignore_errors=True)
        # 2. Java reading: all hot, and archived (none, lz4, zstd)
        mem = f"/dev/shm/mbjournal-jbench-{os.getpid()}-mem"
        shutil.rmtree(mem, ignore_errors=True)
        java("rolling-bench-write", mem, SEG, n)
        hots.append(mem)
        none_hot = f"/dev/shm/mbjournal-jbench-{os.getpid()}-none"
        shutil.rmtree(none_hot, ignore_errors=True)
        with RollingBusWriter(none_hot, SEG, RS, archive=os.path.join(disk, "archive-none"),
                              archive_after=0) as w:
            java("rolling-bench-write", none_hot, SEG, n)
            w.archiver.wait_idle(120)
        hots.append(none_hot)
        paths = {"memory": mem, "archive_none": none_hot, "archive_lz4": hots[0],
                 "archive_zstd": hots[1]}
        rounds = {name: [] for name in paths}
        for _ in range(READ_ROUNDS):    # interleaved rounds; each figure the median of its own
            for name, p in paths.items():
                rounds[name].append(rate(java("rolling-bench-read", p, SEG, n, "--passes",
                                              READ_PASSES), "read"))
        reads = {name: statistics.median(v) for name, v in rounds.items()}
        res["java_read_msgs_per_s"] = reads
        res["java_read_rounds_msgs_per_s"] = rounds
        print("read", reads, flush=True)
        # 2b. what opening each archived segment costs alone (reading and decompressing it)
        opens = {c: [] for c in ("lz4", "zstd")}
        for _ in range(READ_ROUNDS):
            for c in opens:
                opens[c].append(open_cost(os.path.join(disk, f"archive-{c}-{SEG}")))
        res["java_open_ms_per_segment"] = {c: statistics.median(v) * 1000 for c, v in opens.items()}
        print("open", res["java_open_ms_per_segment"], flush=True)
        # 3. sync policies on a disk directory; the time index in /dev/shm
        d = os.path.join(disk, "syncbus")
        shm = f"/dev/shm/mbjournal-jbench-{os.getpid()}-tix"
        runs = {"none": [], "interval_10ms": [], "time_index_off": [], "time_index_on": []}
        for _ in range(3):
            for name, (path, opts) in {
                    "none": (d, ()), "interval_10ms": (d, ("--sync", "interval", "--sync-interval-ms", 10)),
                    "time_index_off": (shm, ("--time-index", "off")),
                    "time_index_on": (shm, ("--time-index", "on"))}.items():
                shutil.rmtree(path, ignore_errors=True)
                runs[name].append(rate(java("rolling-bench-write", path, SEG, n, *opts), "wrote"))
                shutil.rmtree(path, ignore_errors=True)
        res["java_writer_msgs_per_s"] = {k: max(v) for k, v in runs.items()}
        print("writer", res["java_writer_msgs_per_s"], flush=True)
    finally:
        for h in hots:
            shutil.rmtree(h, ignore_errors=True)
        shutil.rmtree(disk, ignore_errors=True)
    res["machine"] = machine()
    res["load_average_start"], res["load_average_end"] = load0, os.getloadavg()[0]
    return res


def _keep_worst(res, key, r):
    # the round with the most hot segments with records (the later one on a tie)
    if key not in res or r["most_hot_segments_with_records"] >= \
            res[key]["most_hot_segments_with_records"]:
        res[key] = r


def report(res, started):
    m = res["machine"]
    lines = [f"# The journal with Java (issue 37), {started:%Y-%m-%d %H:%M:%S %z}", "",
             f"Machine: {m.get('machine_cpu', '?')}, {m.get('machine_cores', '?')} cores, Linux "
             f"{m.get('machine_kernel', '?')}. Load average {res['load_average_start']:.2f} at "
             f"start, {res['load_average_end']:.2f} at end (a shared machine). "
             f"{res['records']:,} PriceUpdate records (12 bytes) a run, 1 MiB segments, "
             f"archive_after={res['archive_after']}; the archiver of the first table is Python's (a Python writer holding the bus open), of the second the Java writer's own.", "",
             "| Python archiver, Java writer | Java writer msgs/s | most hot segments with records "
             "(target archive_after+1) | most hot files | archive caught up after the last write "
             "| compressed ratio |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for c in ("lz4", "zstd"):
        r = res[f"keep_up_{c}"]
        ratio = f"{r['compressed_ratio']:.1f}x" if r["compressed_ratio"] else "-"
        lines.append(f"| {c} | {_f(r['java_writer_msgs_per_s'])} | "
                     f"{r['most_hot_segments_with_records']} | {r['most_hot_segment_files']} | "
                     f"{r['archive_caught_up_s'] * 1000:.0f} ms | {ratio} |")
    lines += ["", "| Java archiver, Java writer | Java writer msgs/s | most hot segments with records "
              "(target archive_after+1) | most hot files | archive caught up after the last write |",
              "| --- | ---: | ---: | ---: | ---: |",
              f"| no archive | {_f(res['java_writer_no_archive_msgs_per_s'])} | - | - | - |"]
    for c in ("lz4", "zstd"):
        r = res[f"java_archiver_{c}"]
        lines.append(f"| {c} | {_f(r['java_writer_msgs_per_s'])} | "
                     f"{r['most_hot_segments_with_records']} | {r['most_hot_segment_files']} | "
                     f"{r['archive_caught_up_s'] * 1000:.0f} ms |")
    if "big_keep_up_lz4" in res:
        lines += ["", f"The same at 16 MiB segments ({res['big_records']:,} records a run, "
                  f"{res['big_records'] // ((res['big_segment_size'] - 8) // (RS + 8))} full "
                  f"segments; the worst of {res.get('big_rounds', 1)} interleaved rounds of "
                  f"each):", "",
                  "| 16 MiB segments, Java writer | archiver | Java writer msgs/s | most hot segments "
                  "with records (target archive_after+1) | most hot files | archive caught up "
                  "after the last write |", "| --- | --- | ---: | ---: | ---: | ---: |"]
        for c in ("lz4", "zstd"):
            for who, key in (("Python", f"big_keep_up_{c}"), ("Java", f"big_java_archiver_{c}")):
                r = res[key]
                lines.append(f"| {c} | {who} | {_f(r['java_writer_msgs_per_s'])} | "
                             f"{r['most_hot_segments_with_records']} | "
                             f"{r['most_hot_segment_files']} | "
                             f"{r['archive_caught_up_s'] * 1000:.0f} ms |")
    rd = res["java_read_msgs_per_s"]
    rounds = res.get("java_read_rounds_msgs_per_s", {})
    lines += ["", f"| Java reader, every record read (pass {READ_PASSES} of a JVM), median of {READ_ROUNDS} "
              "interleaved rounds | records/s "
              "| against memory | rounds, M records/s |", "| --- | ---: | ---: | --- |"]
    for k in ("memory", "archive_none", "archive_lz4", "archive_zstd"):
        each = ", ".join(f"{x / 1e6:.1f}" for x in rounds.get(k, ()))
        lines.append(f"| {k.replace('_', ' ')} | {_f(rd[k])} | {rd[k] / rd['memory']:.2f} | {each} |")
    if "java_open_ms_per_segment" in res:
        per_segment = (SEG - 8) // (RS + 8)
        lines += ["", f"| Java, a segment ({per_segment:,} records) | opening it alone (ArchiveOpenCost: "
                  "the file read and decompressed into memory; median of the rounds) | reading it "
                  "from the archive (from the medians above) | reading it from memory |",
                  "| --- | ---: | ---: | ---: |"]
        for c, ms in res["java_open_ms_per_segment"].items():
            lines.append(f"| {c} | {ms:.2f} ms | {per_segment / rd['archive_' + c] * 1000:.2f} ms "
                         f"| {per_segment / rd['memory'] * 1000:.2f} ms |")
    w = res["java_writer_msgs_per_s"]
    lines += ["", "| Java writer | msgs/s |", "| --- | ---: |",
              f"| disk directory, sync none | {_f(w['none'])} |",
              f"| disk directory, sync interval 10 ms | {_f(w['interval_10ms'])} |",
              f"| /dev/shm, no time index | {_f(w['time_index_off'])} |",
              f"| /dev/shm, time index | {_f(w['time_index_on'])} |", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
