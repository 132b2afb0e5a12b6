"""Slow writers and racing readers, across processes and languages.

- A writer frozen (SIGSTOP) between allocating and committing, past the readers' timeout,
  gets False from its commit when it resumes, and its record is never delivered; one resumed
  at once normally commits, and what it was told always matches what readers got.
- Several readers (Python and Java) timing out on the same stalled slots: each slot is
  rolled back exactly once, and all readers agree on what they delivered and lost.
"""
import os
import signal
import struct
import time

import psutil
import pytest

from mappedbus_py import MappedBusReader, MappedBusWriter
from reliability_helpers import (CHILD, LONG, have_java, jars, java, parse_reader,  # noqa: F401
                                 shm_dir, spawn)

RECORD = 8


def wait_stopped(pid, timeout=30):
    deadline = time.monotonic() + timeout
    while psutil.Process(pid).status() != psutil.STATUS_STOPPED:
        assert time.monotonic() < deadline, "the writer never stopped at its stall"
        time.sleep(0.005)


def status_at(bus, offset):
    with open(bus, "rb") as f:
        f.seek(offset)
        return struct.unpack("<i", f.read(4))[0]


def start_readers(d, bus, fsize, timeout_ms, idle_ms, python=2, use_java=False, tag="r"):
    readers = [spawn(CHILD + ["read", bus, fsize, RECORD, 10**9, "--timeout", timeout_ms,
                              "--idle-exit", idle_ms], d / f"{tag}{k}.out")
               for k in range(python)]
    if use_java:
        readers += [spawn(java("io.mappedbuspy.tools.BusTool", "read", bus, fsize, RECORD, 10**9,
                               "--timeout", timeout_ms, "--idle-exit", idle_ms),
                          d / f"{tag}{python + k}.out") for k in range(2)]
    return readers


def finish(d, readers, tag="r"):
    for r in readers:
        r.wait(timeout=120)       # a hung reader fails here
    return [parse_reader((d / f"{tag}{k}.out").read_text()) for k in range(len(readers))]


@pytest.mark.slow
def test_writer_stopped_past_the_timeout_gets_false_and_its_record_is_never_delivered(
        shm_dir, request):
    use_java = have_java()
    if use_java:
        request.getfixturevalue("jars")
    bus, fsize = str(shm_dir / "bus"), 1_000_000
    MappedBusWriter(bus, fsize, RECORD).open().close()
    readers = start_readers(shm_dir, bus, fsize, 200, 5000, use_java=use_java)
    env = dict(os.environ, MAPPEDBUS_TEST_STALL_EVERY="300")
    out = shm_dir / "writer.out"
    w = spawn(CHILD + ["stream", bus, fsize, RECORD, 2400, 1, "--progress", 100], out, env)
    late = {}
    seen = 0
    try:
        while w.poll() is None:
            lines = out.read_text().splitlines()
            stalls = [line.split() for line in lines if line.startswith("stalled")]
            if len(stalls) > seen:
                _, i, off = stalls[seen]
                i, off = int(i), int(off)
                wait_stopped(w.pid)
                if seen % 2 == 0:
                    # Past the timeout: wait until a reader has rolled the slot back.
                    deadline = time.monotonic() + 30
                    while status_at(bus, off) != 2:
                        assert time.monotonic() < deadline
                        time.sleep(0.01)
                    time.sleep(0.3)
                    late[i] = True
                else:
                    late[i] = False               # resumed at once
                os.kill(w.pid, signal.SIGCONT)
                seen += 1
            time.sleep(0.005)
    finally:
        if w.poll() is None:
            w.kill()
    assert w.returncode == 0
    told = {}
    for line in out.read_text().splitlines():
        if line.startswith("resumed"):
            _, i, _, _, ok = line.split()
            told[int(i)] = ok == "true"
    assert sorted(told) == sorted(late) == [299 + 300 * k for k in range(8)]
    for i, was_late in late.items():
        if was_late:
            assert told[i] is False, f"record {i} resumed after its rollback was told True"
    results = finish(shm_dir, readers)
    first = results[0][0]
    for recs, _ in results[1:]:
        assert recs == first
    got = [struct.unpack_from("<ii", p)[1] for _, _, p in first]
    assert got == [i for i in range(2400) if told.get(i, True)]
    lost = sum(1 for ok in told.values() if not ok)
    assert lost >= 4
    assert sum(c["rollbacks"] for _, c in results) == lost
    assert all(c["rolledBackSkipped"] == lost for _, c in results)


@pytest.mark.slow
@pytest.mark.java
def test_java_writer_stopped_past_the_timeout_gets_false(shm_dir, jars):
    bus, fsize = str(shm_dir / "bus"), 100_000
    MappedBusWriter(bus, fsize, RECORD).open().close()
    out = shm_dir / "slow.out"
    slow = spawn(java("io.mappedbuspy.tools.BusTool", "slow-write", bus, fsize, RECORD, 300), out)
    deadline = time.monotonic() + 60
    while "allocated" not in out.read_text():
        assert time.monotonic() < deadline and slow.poll() is None, out.read_text()
        time.sleep(0.01)
    slow.send_signal(signal.SIGSTOP)          # frozen before its commit, whatever its sleep
    with MappedBusWriter(bus, fsize, RECORD) as w:
        w.write(b"later")
    with MappedBusReader(bus, fsize, RECORD, timeout=0.15) as r:
        assert r.read(timeout=10).data == b"later"
        assert r.rollbacks == 1 and r.skipped == 1
    slow.send_signal(signal.SIGCONT)
    assert slow.wait(timeout=60) == 0
    assert out.read_text().split()[-2:] == ["committed", "false"]
    with MappedBusReader(bus, fsize, RECORD, read_only=True) as r:
        assert [x.data for x in r.records(timeout=0)] == [b"later"]


def stalled_bus(bus, fsize, rounds, stalls_per_round):
    """Committed records with uncommitted slots in between, as crashed writers leave them."""
    expected = []
    with MappedBusWriter(bus, fsize, RECORD) as w:
        for k in range(rounds):
            for j in range(stalls_per_round):
                w._allocate_only(b"dead")
            for j in range(5):
                w.write(struct.pack("<ii", k, j))
                expected.append(struct.pack("<ii", k, j))
    return expected


@pytest.mark.slow
def test_readers_racing_to_roll_back_the_same_slots_roll_each_back_once_and_agree(
        shm_dir, request):
    use_java = have_java()
    if use_java:
        request.getfixturevalue("jars")
    rounds = 20 if LONG else 3
    for n in range(rounds):
        bus, fsize = str(shm_dir / f"bus{n}"), 200_000
        expected = stalled_bus(bus, fsize, rounds=10, stalls_per_round=1 + n % 3)
        stalls = 10 * (1 + n % 3)
        readers = start_readers(shm_dir, bus, fsize, 100, 2000, python=4, use_java=use_java,
                                tag=f"race{n}-")
        results = finish(shm_dir, readers, tag=f"race{n}-")
        for recs, counters in results:
            assert [p for _, _, p in recs] == expected
            assert counters["rolledBackSkipped"] == stalls
        assert [r for r, _ in results[1:]] == [results[0][0]] * (len(results) - 1)
        assert sum(c["rollbacks"] for _, c in results) == stalls, "a slot rolled back twice"
        with open(bus, "rb") as f:
            data = f.read()
        assert sum(1 for k in range(8, 8 + 16 * (50 + stalls), 16)
                   if struct.unpack_from("<i", data, k)[0] == 2) == stalls
