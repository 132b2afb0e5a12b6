"""A/B of two builds of the Java side reading a rolling bus's archive: a Java reader (BusTool
rolling-bench-read, pass 3 of a JVM timed) reads the same PriceUpdate records from memory and from
a compressed archive, with jars A and B, in interleaved rounds; each build's archive/memory ratio
is taken round by round (both reads of a round run back to back), then its median.

    git worktree add /tmp/before <commit> && (cd /tmp/before && bash interop/build.sh)
    .venv/bin/python perf/ab_java_archive_read.py --a /tmp/before/build/jvm --b build/jvm

The archive is written once, by the Python archiver of this checkout (the format both builds
read). Prints the rates and ratios; nothing is written to perf/results (a development tool: what
a change to the Java readers gained, measured side by side).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from mappedbus_py import RollingBusWriter, jvm  # noqa: E402

TOOL = "io.mappedbuspy.tools.BusTool"
SEG, RS = 1 << 20, 12


def _rate(jars, *args):
    env = dict(os.environ, MAPPEDBUS_PY_JARS=os.path.abspath(jars))
    out = subprocess.run(jvm.java_command(TOOL, *map(str, args), jvm_args=("-Xmx256m",)),
                         capture_output=True, text=True, env=env, timeout=900)
    if out.returncode:
        raise RuntimeError(f"{args}: exit {out.returncode}\n{out.stderr[-2000:]}")
    for line in out.stdout.splitlines():
        parts = line.split()
        if parts and parts[0] in ("read", "wrote"):
            return int(parts[1]) / float(parts[2])
    raise RuntimeError(f"no rate in {out.stdout!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="directory of build A's jars (build/jvm of a checkout)")
    ap.add_argument("--b", required=True, help="directory of build B's jars")
    ap.add_argument("--compress", default="zstd", choices=("zstd", "lz4", "none"))
    ap.add_argument("--records", type=int, default=3_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="mbus-ab-", dir=os.path.join(ROOT, "build")
                            if os.path.isdir(os.path.join(ROOT, "build")) else None)
    mem = f"/dev/shm/mbus-ab-mem-{os.getpid()}"
    hot = f"/dev/shm/mbus-ab-hot-{os.getpid()}"
    try:
        _rate(args.b, "rolling-bench-write", mem, SEG, args.records)
        with RollingBusWriter(hot, SEG, RS, archive=os.path.join(work, "archive"), archive_after=0,
                              compress=None if args.compress == "none" else args.compress) as w:
            _rate(args.b, "rolling-bench-write", hot, SEG, args.records)
            w.archiver.wait_idle(120)
        rates = {(build, where): [] for build in "ab" for where in ("memory", "archive")}
        for _ in range(args.rounds):
            for build in "ab":
                jars = getattr(args, build)
                for where, path in (("memory", mem), ("archive", hot)):
                    rates[build, where].append(_rate(jars, "rolling-bench-read", path, SEG,
                                                     args.records, "--passes", 3))
        print(f"{os.uname().nodename}: {os.cpu_count()} CPUs, {args.records:,} records, "
              f"1 MiB segments, archive {args.compress}, {args.rounds} interleaved rounds")
        for build in "ab":
            ratios = [x / m for x, m in zip(rates[build, "archive"], rates[build, "memory"])]
            print(f"build {build.upper()} ({getattr(args, build)}): memory "
                  f"{statistics.median(rates[build, 'memory']) / 1e6:.1f} M/s, archive "
                  f"{statistics.median(rates[build, 'archive']) / 1e6:.1f} M/s; archive/memory "
                  f"by round {[round(r, 2) for r in ratios]}, median {statistics.median(ratios):.2f}")
    finally:
        shutil.rmtree(mem, ignore_errors=True)
        shutil.rmtree(hot, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
