"""What a crashed writer costs a waiting reader (issue 33): the time from a writer's SIGKILL to
its reader going on.

    python3 perf/bench_writer_crash.py            # 5 rounds of each size
    python3 perf/bench_writer_crash.py --quick    # 2 rounds

A writer process writes one record, then one ``write_batch`` of ROWS int64 rows; as soon as the
batch is reserved (the bus's limit jumps) it is SIGSTOPped, so its slots are reserved and partly
committed. A reader (this process, default 2 s timeout, ``read(timeout)`` as an application
waits) reads what was committed and waits on the first uncommitted slot. Then another writer
(opened before the kill, so it holds its own slot) is ready, the stopped writer is SIGKILLed, the
other writer writes a marker record, and the reader's time from the kill to the marker is
measured: it must pass the dead writer's uncommitted rows first.

  claims     the project's writer: it holds a slot in PATH.writers, the reader finds it dead
  no_claims  the same writer with ``liveness=False`` (what the Java original's writers are to
             readers): the reader waits its 2 s timeout

Figures: p50 and max over the rounds, in ms, per batch size. The issue's target is 50 ms for a
waiting reader; the unit tests (tests/core/test_writer_liveness.py) only bound it below 1 s.
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402

import numpy  # noqa: E402

from mappedbus_py import MappedBusReader, MappedBusWriter  # noqa: E402

RECORD = 8
MARKER = 7777777
CHILD = textwrap.dedent("""
    import sys, numpy
    from mappedbus_py import MappedBusWriter
    path, rows, liveness = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
    w = MappedBusWriter(path, liveness=liveness).open()
    w.write(numpy.int64(-1).tobytes())
    print("ready", flush=True)
    sys.stdin.readline()
    w.write_batch(numpy.arange(rows, dtype="<i8"), meta=8)
""")


def one(rows, claims):
    """Milliseconds from the SIGKILL to the marker, or None if the writer was not stopped mid-batch."""
    d = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    path = os.path.join(d, "bus")
    try:
        MappedBusWriter(path, 8 + (rows + 16) * (8 + RECORD), RECORD).open().close()
        child = subprocess.Popen([sys.executable, "-c", CHILD, path, str(rows), "1" if claims else "0"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=common.env())
        try:
            assert child.stdout.readline().strip() == "ready"
            r = MappedBusReader(path).open()
            assert r.read(5) is not None
            before = r.limit
            child.stdin.write("go\n")
            child.stdin.flush()
            while r.limit == before:
                pass
            os.kill(child.pid, signal.SIGSTOP)
            time.sleep(0.05)
            while r.read(0) is not None:
                pass
            if r.position >= r.limit:
                return None
            r.read(0.01)                           # the reader is waiting on the stalled slot
            other = MappedBusWriter(path).open()   # its own slot: takes nothing over
            os.kill(child.pid, signal.SIGKILL)
            t0 = time.monotonic_ns()
            child.wait()
            other.write(numpy.int64(MARKER).tobytes())
            while True:
                rec = r.read(10)
                if numpy.frombuffer(rec.payload[:8], "<i8")[0] == MARKER:
                    break
            ms = (time.monotonic_ns() - t0) / 1e6
            other.close()
            r.close()
            return ms
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    a = p.parse_args(argv)
    rounds = 2 if a.quick else 5
    print(f"load average {os.getloadavg()[0]:.2f}")
    for rows in (100_000, 1_000_000):
        for claims in (True, False):
            got = [ms for ms in (one(rows, claims) for _ in range(rounds)) if ms is not None]
            name = "claims" if claims else "no_claims"
            if got:
                print(f"rows={rows:>9,} {name:>9}: p50 {statistics.median(got):8.1f} ms, "
                      f"max {max(got):8.1f} ms ({len(got)} runs)")
            else:
                print(f"rows={rows:>9,} {name:>9}: never stopped mid-batch")


if __name__ == "__main__":
    main()
