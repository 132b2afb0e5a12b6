"""Crashed writers: Python and Java writer processes killed with SIGKILL at random moments,
some of them frozen between allocating a record and committing it (the stall hook of
tests/support/bus_child.py and StreamWriter), while other writers go on and three readers (two
Python, one Java) read live. Every record whose commit succeeded reaches every reader exactly
once, in one order all share; each dead writer's slot is rolled back after the timeout and
counted as lost; no reader hangs. CI: one run of 30 kills; MAPPEDBUS_LONG=1: 5 runs of 100."""
import json
import os
import random
import re
import signal
import struct
import subprocess
import sys
import time
from collections import defaultdict

import pytest

from mappedbus_py import MappedBusWriter
from mappedbus_py.tools.slots import scan
from reliability_helpers import (CHILD, have_java, jars, java, long_variant, parse_reader, shm_dir,
                                 spawn)  # noqa: F401 (fixtures)

RECORD = 8
PER_WRITER = 30_000           # a writer's most records; it is usually killed long before
TIMEOUT_MS = 250              # the readers' rollback timeout
IDLE_EXIT_MS = 6000           # readers stop after this long without a record


def writer_log(path):
    """What a writer's output proves: the stalled indices, the last committed index reported
    and whether it finished."""
    stalls, last, finished = set(), -1, None
    with open(path) as f:
        for line in f:
            parts = line.split()
            if parts[:1] == ["stalled"]:
                stalls.add(int(parts[1]))
            elif parts[:1] == ["committed"]:
                last = max(last, int(parts[1]))
            elif parts[:1] == ["wrote"]:
                finished = int(parts[1])
    return stalls, last, finished


def run_campaign(d, kills, rng, use_java):
    procs = []
    try:
        return _run_campaign(d, kills, rng, use_java, procs)
    finally:
        for p in procs:          # on failure: leave no child behind
            if p.poll() is None:
                p.kill()
                p.wait()


def _run_campaign(d, kills, rng, use_java, procs):
    bus = str(d / "bus")
    fsize = 8 + (RECORD + 8) * PER_WRITER * (kills + 8)
    MappedBusWriter(bus, fsize, RECORD).open().close()
    readers = [spawn(CHILD + ["read", bus, fsize, RECORD, 10**9, "--timeout", TIMEOUT_MS,
                              "--idle-exit", IDLE_EXIT_MS], d / f"reader{k}.out")
               for k in range(2)]
    if use_java:
        readers.append(spawn(java("io.mappedbuspy.tools.BusTool", "read", bus, fsize, RECORD,
                                  10**9, "--timeout", TIMEOUT_MS, "--idle-exit", IDLE_EXIT_MS),
                             d / "reader2.out"))
    procs.extend(readers)
    writers = {}        # wid -> (process, out path, is_java, kill deadline)
    killed, stall_kills, wid = 0, 0, 0
    t_end = time.monotonic() + 60 + kills * 2
    while killed < kills:
        assert time.monotonic() < t_end, "the kill loop made no progress"
        while sum(1 for w in writers.values() if w[0].poll() is None) < 3:
            wid += 1
            is_java = use_java and rng.random() < 0.3
            env = dict(os.environ)
            if rng.random() < 0.4:          # this one freezes between allocate and commit
                env["MAPPEDBUS_TEST_STALL_EVERY"] = str(rng.randint(20, 3000))
            count = rng.randint(2000, PER_WRITER)
            out = d / f"writer{wid}.out"
            if is_java:
                cmd = java("io.mappedbuspy.reliability.StreamWriter", bus, fsize, RECORD, count,
                           wid, 50, 2)
                life = rng.uniform(0.3, 1.5)
            else:
                cmd = CHILD + ["stream", bus, fsize, RECORD, count, wid, "--progress", 50,
                               "--pause-ms", 2]
                life = rng.uniform(0.05, 0.8)
            writers[wid] = (spawn(cmd, out, env), out, is_java, time.monotonic() + life)
            procs.append(writers[wid][0])
        time.sleep(0.01)
        for w, (p, out, is_java, deadline) in writers.items():
            if p.poll() is not None:
                continue
            stalled = "stalled" in out.read_text()
            if stalled or time.monotonic() >= deadline:
                p.send_signal(signal.SIGKILL)
                p.wait()
                killed += 1
                stall_kills += stalled
    # The writers still alive finish, but one frozen at a stall never would: kill it at
    # once (readers idle out after IDLE_EXIT_MS, so no long silence before the last writer).
    # Then one last writer whose records must all arrive after every dead slot before it.
    deadline = time.monotonic() + 120
    while any(p.poll() is None for p, _, _, _ in writers.values()):
        assert time.monotonic() < deadline, "a writer neither finished nor stalled"
        for w, (p, out, _, _) in writers.items():
            if p.poll() is None and "stalled" in out.read_text():
                p.send_signal(signal.SIGKILL)
                p.wait()
                killed += 1
                stall_kills += 1
        time.sleep(0.01)
    wid += 1
    tail = subprocess.run(CHILD + ["stream", bus, str(fsize), str(RECORD), "1000", str(wid)],
                          capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items()
                               if k != "MAPPEDBUS_TEST_STALL_EVERY"})
    assert tail.returncode == 0 and tail.stdout.splitlines()[-1] == "wrote 1000 committed 1000"
    (d / f"writer{wid}.out").write_text(tail.stdout)
    results = []
    for r in readers:
        # A reader that hangs fails here: it must end IDLE_EXIT_MS after the last record.
        r.wait(timeout=120)
    for k in range(len(readers)):
        results.append(parse_reader((d / f"reader{k}.out").read_text()))
    return bus, fsize, killed, stall_kills, wid, results


def check(d, bus, fsize, last_wid, results):
    """The promises, from the readers' outputs, the writers' logs and the file itself."""
    first, _ = results[0]
    for recs, _ in results[1:]:
        assert recs == first, "readers disagree on the records or their order"
    positions = [pos for pos, _, _ in first]
    assert positions == sorted(set(positions))
    delivered = defaultdict(list)
    for _, meta, payload in first:
        assert meta == 8
        w, i = struct.unpack_from("<ii", payload)
        delivered[w].append(i)
    for w in range(1, last_wid + 1):
        stalls, last_reported, finished = writer_log(d / f"writer{w}.out")
        got = delivered.get(w, [])
        top = got[-1] if got else -1
        # Exactly once, in the writer's order, nothing missing but its stalled records
        # (and the one it was killed on, which is past `top`).
        assert got == [i for i in range(top + 1) if i not in stalls], f"writer {w}"
        assert top >= last_reported, f"writer {w}: committed {last_reported} never delivered"
        if finished is not None:
            assert top == finished - 1 or (finished - 1) in stalls
    assert delivered[last_wid] == list(range(1000))
    statuses = defaultdict(int)
    for slot in scan(bus, RECORD, fsize):
        statuses[slot.status] += 1
    assert statuses[0] == 0, "a dead writer's slot was never rolled back"
    assert statuses[1] == len(first)
    lost = statuses[2]
    assert sum(c["rollbacks"] for _, c in results) == lost, "a slot rolled back twice or never"
    for _, c in results:
        assert c["rolledBackSkipped"] == lost    # loss is counted by every reader
    stat = subprocess.run([sys.executable, "-m", "mappedbus_py", "stat", bus, "-r", str(RECORD),
                           "-f", str(fsize), "--json"], capture_output=True, text=True,
                          timeout=60)
    assert json.loads(stat.stdout)["records"]["rolled_back"] == lost
    return lost


def campaign(shm_dir, request, runs, kills):
    use_java = have_java()
    if use_java:
        request.getfixturevalue("jars")
    seed = int.from_bytes(os.urandom(4), "little")
    rng = random.Random(seed)
    totals = defaultdict(int)
    for run in range(runs):
        d = shm_dir / f"run{run}"
        d.mkdir()
        bus, fsize, killed, stall_kills, last_wid, results = run_campaign(d, kills, rng, use_java)
        lost = check(d, bus, fsize, last_wid, results)
        totals["kills"] += killed
        totals["kills between allocate and commit"] += stall_kills
        totals["records checked"] += sum(len(r) for r, _ in results)
        totals["lost slots rolled back"] += lost
        os.unlink(bus)
    print(f"crash campaign seed {seed}, java={use_java}: {dict(totals)}")
    assert totals["kills"] >= runs * kills and totals["kills between allocate and commit"] > 0


@pytest.mark.slow
def test_random_sigkills_of_python_and_java_writers_lose_no_committed_record(shm_dir, request):
    campaign(shm_dir, request, runs=1, kills=30)


@pytest.mark.slow
@long_variant
def test_many_runs_of_a_hundred_sigkills_lose_no_committed_record(shm_dir, request):
    campaign(shm_dir, request, runs=int(os.environ.get("MAPPEDBUS_CRASH_RUNS", "5")), kills=100)
