"""Corrupt files: a hypothesis campaign over random and mutated bus files against the Cython
reader, the CLI dump and the Java reader. Only the libraries' own exceptions may come out;
never a crash, a read outside the file, or a hang. MAPPEDBUS_FUZZ_EXAMPLES sets the number of
cases per worker (CI: 1000 x 2 workers)."""
import json
import os
import subprocess
import sys

import pytest

from reliability_helpers import HERE, have_java, jars, java, shm_dir  # noqa: F401 (fixtures)

EXAMPLES = int(os.environ.get("MAPPEDBUS_FUZZ_EXAMPLES", "1000"))
WORKERS = 2
SEED = int(os.environ.get("MAPPEDBUS_FUZZ_SEED", "0")) or int.from_bytes(os.urandom(4), "little")


@pytest.mark.slow
def test_random_and_mutated_bus_files_give_only_clean_errors(shm_dir, request):
    java_ok = have_java()
    if java_ok:
        request.getfixturevalue("jars")
    budget = max(300, EXAMPLES // 5)       # seconds: generous, a hang shows as a timeout
    procs = []
    for w in range(WORKERS):
        d = shm_dir / f"w{w}"
        d.mkdir()
        cmd = [sys.executable, str(HERE / "fuzz_worker.py"), str(d), str(EXAMPLES),
               str(SEED + w), "--java-every", "3"]
        procs.append((d, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True)))
    totals = {}
    for d, p in procs:
        out, _ = p.communicate(timeout=budget)
        # A negative status is a signal (a segfault or SIGBUS would show here).
        assert p.returncode == 0, f"fuzz worker (seed {SEED}) exited {p.returncode}:\n{out[-6000:]}"
        for k, v in json.loads(out.strip().splitlines()[-1]).items():
            totals[k] = totals.get(k, 0) + v
    print(f"fuzz seed {SEED}: {totals}")
    assert totals["cases"] == WORKERS * EXAMPLES
    # The campaign reaches both clean reads and each kind of refusal, not only one path.
    for outcome in ("reader ok", "reader CorruptBusError", "reader BusFullError", "dump exit 0"):
        assert totals.get(outcome, 0) > 0, totals
    if not java_ok:
        pytest.skip("no JDK: the Java reader part of the campaign did not run")
    for d, _ in procs:
        p = subprocess.run(java("io.mappedbuspy.reliability.FuzzReader", d / "java-cases.txt"),
                           capture_output=True, text=True, timeout=budget)
        assert p.returncode == 0, f"java fuzz (seed {SEED}):\n" + p.stdout[-6000:] + p.stderr[-2000:]
        last = p.stdout.strip().splitlines()[-1]
        n = int(last.split()[1])
        assert last == f"cases {n} failures 0" and n >= EXAMPLES // 3 - 1, last
        print(f"java fuzz {d.name}: {last}")
