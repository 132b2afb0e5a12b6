"""A rolling bus against a single file, side by side in one run (issue 24).

    python3 perf/bench_rolling.py            # 3 rounds, 5,000,000 records a run
    python3 perf/bench_rolling.py --quick    # a smoke run (1 round, 300,000 records)
    python3 perf/bench_rolling.py --dir D    # the buses in directory D (default /dev/shm)
    python3 perf/bench_rolling.py --pin      # the reader on one CPU, the writers on the others

Unpinned, the scheduler sometimes runs the reader and a writer on one CPU for a whole run: on a
2-CPU machine a run's rate is then bimodal (Python 1->1: about 7 or about 12 M msgs/s), and a
round's ratio is as much where the processes ran as which bus. --pin (taskset: the reader on
the first CPU this process may use, the writers on the rest) removes that spread; a rolling
bus's segment work (each process's helper thread) then runs on its own process's CPU, with no
idle CPU to take it. Its results go to perf/results/rolling-pinned.md and .json.

On a tmpfs of 2 MiB pages (``mount -t tmpfs -o huge=within_size,size=8g tmpfs D``, as root;
/dev/shm is mounted huge=never on most systems) a segment's fresh memory costs a twentieth of
what it costs in 4 KiB pages (perf/segment_memory.py: 64 MiB in about 4 ms of CPU for the
whole bus, against 70-90): its results go to perf/results/rolling-huge.md and .json.

Each run: one reader process and one or four writer processes on a fresh /dev/shm bus,
PriceUpdate records (12 bytes), the writers writing as fast as they can, the reader polling
(Python ``read_into``, Java ``next()`` + ``readMessage``); the figure is the reader's rate
(records / time from its record number ``warmup`` to its last). The same run on a single file
(sized for every record, preallocated before the run) and on a rolling bus of 64 MiB segments
(about 3.4 M records each), which makes its segments during the run. Python runs 5 M records
(about a second), timed from the tenth. Java runs 48 M (about a second and a half), timed from
the third; 48 M keeps the single file under 1 GiB, where the Java mapping is one window (a larger
one is slower for reasons of its own). Each Java process first writes and reads JIT_RECORDS
through a private bus of the run's kind (a rolling one of 1 MiB segments), then says it is
ready, and the writers start together: the run measures the bus, not the JVM compiling it. A
rolling JVM compiles about half as much again as a single-file one (-XX:+CITime: 0.5-0.65 s of
compiler CPU a process against 0.3-0.4), and in a run started cold that fell inside the timing,
five JVMs on two cores: Java 4->1 read 0.74 x the single file cold, 0.89-1.01 warm.
The pairs, Python (perf/workers.py) and Java (perf/java/RollingPerf.java, compiled here
against build/jvm/mappedbuspy.jar):

  py 1->1, py 4->1, java 1->1, java 4->1     each: single file and rolling

Every round runs every pair on both kinds of bus, the order rotating from round to round and
single/rolling alternating, so the machine's drift falls on both; reported: the median of the
rounds for each, and the median of the rounds' ratios rolling / single (each round's two runs
taken together). Target: rolling / single >= 0.95 in each pair.

The same run also measures what a segment's fresh memory costs (perf/segment_memory.py: made,
mapped by every writer process and the reader, unmapped, unlinked) and reports, for each pair,
that work at the single file's record rate as a share of the machine's cores: the CPU a rolling
bus needs beside the records, which a single file preallocated before the run does not.

Results: perf/results/rolling.md and .json.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (HEADER, PRICE_UPDATE_SIZE, ROOT, ShmFiles, bus_file_size,  # noqa: E402
                    create_bus, machine, py_worker, reader_then_writers)
import segment_memory  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SEGMENT = 64 << 20
TARGET = 0.95
# Each Java process first writes and reads this many records through a private bus of the run's
# kind (RollingPerf's warmUp), so the JIT has compiled what the run takes before it starts.
JIT_RECORDS = 4_000_000
DRIVER = os.path.join(HERE, "java", "RollingPerf.java")
BUILD = os.path.join(ROOT, "build", "perf-rolling")


def java_classpath():
    """Compile perf/java/RollingPerf.java against the project's jar (once, into build/)."""
    from mappedbus_py import jvm
    jar = str(jvm.jar_path())
    out = os.path.join(BUILD, "RollingPerf.class")
    if not os.path.exists(out) or os.path.getmtime(out) < max(os.path.getmtime(DRIVER),
                                                              os.path.getmtime(jar)):
        os.makedirs(BUILD, exist_ok=True)
        javac = os.path.join(os.path.dirname(jvm.java_executable()), "javac")
        subprocess.run([javac, "-d", BUILD, "-cp", jar, DRIVER], check=True,
                       capture_output=True, text=True)
    return [BUILD]


def java(*args):
    from mappedbus_py import jvm
    return jvm.java_command("RollingPerf", *map(str, args), classpath=java_classpath(),
                            jvm_args=["-Xms256m", "-Xmx256m"])


def cpus(pin):
    """The commands' prefixes: (reader's, writers') taskset, or none when not pinned."""
    if not pin:
        return [], []
    if shutil.which("taskset") is None:
        raise SystemExit("--pin needs taskset (util-linux)")
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2:
        raise SystemExit("--pin needs two CPUs")
    rest = ",".join(map(str, mine[1:]))
    return ["taskset", "-c", str(mine[0])], ["taskset", "-c", rest]


def run(lang, writers, kind, n, warmup, directory, pin=False):
    """One run: the reader's JSON result."""
    with ShmFiles(f"{lang}-{writers}-{kind}") as shm:
        path = shm("bus", directory)
        try:
            if kind == "rolling":
                from mappedbus_py import RollingBusWriter
                RollingBusWriter(path, SEGMENT, PRICE_UPDATE_SIZE).open().close()
                size = SEGMENT
            else:
                size = bus_file_size(n)
                create_bus(path, size, PRICE_UPDATE_SIZE)
            per = [n // writers + (1 if i < n % writers else 0) for i in range(writers)]
            if lang == "py":
                flag = [f"rolling={SEGMENT}"] if kind == "rolling" else []
                rcmd = py_worker("bus-reader", path, size, PRICE_UPDATE_SIZE, "message", n,
                                 warmup, *flag)
                wcmds = [py_worker("bus-writer", path, size, PRICE_UPDATE_SIZE, "message", k,
                                   i + 1, *flag) for i, k in enumerate(per)]
            else:
                rcmd = java("reader", kind, path, size, n, warmup, JIT_RECORDS)
                wcmds = [java("writer", kind, path, size, k, i + 1, JIT_RECORDS)
                         for i, k in enumerate(per)]
            rpin, wpin = cpus(pin)
            return reader_then_writers(rpin + rcmd, [wpin + c for c in wcmds],
                                       barrier=lang == "java")
        finally:
            shutil.rmtree(path, ignore_errors=True)


PAIRS = [("py", 1), ("py", 4), ("java", 1), ("java", 4)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--records", type=int)
    ap.add_argument("--only", choices=["py", "java"])
    ap.add_argument("--dir", default="/dev/shm", help="where the buses go (a tmpfs)")
    ap.add_argument("--pin", action="store_true", help="the reader on one CPU, the writers on the rest")
    args = ap.parse_args()
    huge = _huge_pages(args.dir)
    k = 1 if args.quick else 3
    k = args.rounds or k
    records = {"py": 300_000, "java": 300_000} if args.quick else \
        {"py": 5_000_000, "java": 48_000_000}
    if args.records:
        records = {lang: args.records for lang in records}
    warmups = {"py": 10, "java": 3}     # timed from records // this
    info = machine()
    started = time.strftime("%Y-%m-%d %H:%M:%S %z")
    t0 = time.monotonic()
    cost = segment_memory.measure(SEGMENT, reps=3 if args.quick else 7, directory=args.dir)
    pairs = [p for p in PAIRS if args.only in (None, p[0])]
    runs = {f"{lang} {w}->1": {"single": [], "rolling": []} for lang, w in pairs}
    for rnd in range(k):
        order = pairs[rnd % len(pairs):] + pairs[:rnd % len(pairs)]
        for lang, w in order:
            kinds = ("single", "rolling") if rnd % 2 == 0 else ("rolling", "single")
            for kind in kinds:
                n = records[lang]
                res = run(lang, w, kind, n, n // warmups[lang], args.dir, args.pin)
                runs[f"{lang} {w}->1"][kind].append(res["msgs_per_s"])
                print(f"round {rnd + 1} {lang} {w}->1 {kind}: {res['msgs_per_s'] / 1e6:.2f} M/s",
                      flush=True)
    info["load_avg_end"] = round(os.getloadavg()[0], 2)
    table = []
    for (lang, w), (name, r) in zip(pairs, runs.items()):
        ratios = [b / a for a, b in zip(r["single"], r["rolling"])]
        others = "other_populate_read" if lang == "java" else "other_populate_write"
        memory_share = segment_memory.share(cost, w, others, statistics.median(r["single"]),
                                            HEADER + PRICE_UPDATE_SIZE, SEGMENT, info["machine_cores"])
        table.append(dict(pair=name, single=statistics.median(r["single"]),
                          segment_ms=round(segment_memory.per_segment(cost, w, others), 1),
                          memory_share=round(memory_share, 3),
                          rolling=statistics.median(r["rolling"]),
                          ratio=statistics.median(ratios), ratios=ratios,
                          single_samples=r["single"], rolling_samples=r["rolling"]))
    result = {"started": started, "mode": "quick" if args.quick else "full", "records": records, "timed_from": {lang: n // warmups[lang] for lang, n in records.items()},
              "rounds": k, "segment_size": SEGMENT, "machine": info, "pairs": table,
              "segment_memory_ms": cost, "dir": args.dir, "huge_pages": huge, "pinned": args.pin,
              "seconds": round(time.monotonic() - t0, 1), "target": TARGET}
    lines = [
        f"# Rolling bus against a single file (issue 24), {started}", "",
        f"Machine: {info['machine_cpu']}, {info['machine_cores']} cores, "
        f"{info['machine_ram_gb']} GB RAM, Linux {info['machine_kernel']}, "
        f"{info['machine_python']}, {info['machine_java']}. Load average "
        f"{info['machine_load_avg_start']} at start, {info['load_avg_end']} at end (the machine "
        f"is shared). `{result['mode']}` mode: {k} rounds, PriceUpdate records a run: "
        + ", ".join(f"{lang} {n:,} (timed from record {n // warmups[lang]:,})"
                    for lang, n in records.items())
        + f"; rolling segments of {SEGMENT >> 20} MiB, in {args.dir} (tmpfs, "
        + ("2 MiB pages: huge=" + huge if huge else "4 KiB pages") + "), "
        + ("the reader on one CPU, the writers on the others (--pin)" if args.pin else "unpinned")
        + f", {result['seconds']} s. Each Java process warmed its JIT on {JIT_RECORDS:,} records "
        "of a private bus of the run's kind before the writers started.",
        "",
        "The reader's rate, M records/s: medians of the rounds; the ratio is the median of each "
        "round's rolling / single (the two runs of a round back to back).", "",
        "Fresh memory: the CPU ms one segment's memory costs the pair's processes (made, mapped, "
        "unmapped, unlinked; perf/segment_memory.py, this run), and that work at the single file's "
        "rate as a share of the machine's cores.", "",
        "| writers -> reader | single file | rolling | rolling / single | target "
        "| fresh memory a segment | its share of the cores |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for row in table:
        ok = "met" if row["ratio"] >= TARGET else "NOT met"
        lines.append(f"| {row['pair']} | {row['single'] / 1e6:.2f} | {row['rolling'] / 1e6:.2f} "
                     f"| {row['ratio']:.2f} | >= {TARGET}: {ok} | {row['segment_ms']:.1f} ms "
                     f"| {100 * row['memory_share']:.0f} % |")
    lines += ["", "One segment's steps, CPU ms (medians of the run): " + ", ".join(
        f"{step} {ms:.1f}" for step, ms in cost.items()) + "."]
    lines += ["", "Each round's ratio: " + "; ".join(
        f"{row['pair']}: " + " / ".join(f"{x:.2f}" for x in row["ratios"]) for row in table) + "."]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.quick and not args.only and not args.records:
        name = "rolling-huge" if huge else "rolling-pinned" if args.pin else "rolling"
        with open(os.path.join(HERE, "results", name + ".json"), "w") as f:
            json.dump(result, f, indent=1)
        with open(os.path.join(HERE, "results", name + ".md"), "w") as f:
            f.write(text)


def _huge_pages(directory):
    """The huge= option of the tmpfs holding ``directory`` when it gives the buses' files
    2 MiB pages (always, within_size; advise needs an madvise the writers do not make), else
    None."""
    best, opts = "", ""
    with open("/proc/self/mounts") as f:
        for line in f:
            dev, mnt, fstype, options = line.split()[:4]
            if fstype == "tmpfs" and (directory == mnt or directory.startswith(mnt.rstrip("/") + "/")) \
                    and len(mnt) > len(best):
                best, opts = mnt, options
    huge = dict(o.split("=", 1) for o in opts.split(",") if "=" in o).get("huge", "never")
    return huge if huge in ("always", "within_size") else None


if __name__ == "__main__":
    main()
