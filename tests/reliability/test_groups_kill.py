"""Killed group members: four member processes share a bus being written while one of them,
chosen at random, is SIGKILLed at a random moment (reading, acking, joining) and restarted,
again and again. Every record is acked exactly once or dead-lettered, none is lost, no ack is
counted twice by the group (tests/groups/test_groups.py, check_exactly_once). Members are forked
from a prepared process (tests/support/group_child.py, "zygote"), so a restart takes a millisecond.
Quick variant: 20 kills; slow: 200."""
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "groups"))
from test_groups import CHILD, RECORD, check_exactly_once  # noqa: E402

from mappedbus_py import MappedBusWriter  # noqa: E402
import mappedbus_py  # noqa: E402

FILE_SIZE = 64 << 20


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def _run(tmp_path, kills, seed):
    rng = random.Random(seed)
    bus = str(tmp_path / "bus")
    log = tmp_path / "acks"
    MappedBusWriter(bus, FILE_SIZE, RECORD).open().close()
    written = [0]
    stop = threading.Event()

    def write():
        # about 40k records a second, in bursts, until told to stop
        with MappedBusWriter(bus, FILE_SIZE, RECORD) as w:
            while not stop.is_set():
                for _ in range(200):
                    w.write(b"%d" % written[0])
                    written[0] += 1
                time.sleep(0.005)

    zygote = subprocess.Popen(CHILD + [bus, "g", str(log), "zygote", json.dumps({"idle": 0.5})],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def spawn():
        zygote.stdin.write("\n")
        zygote.stdin.flush()
        return int(zygote.stdout.readline())

    members = [spawn() for _ in range(4)]
    writer = threading.Thread(target=write)
    writer.start()
    try:
        time.sleep(0.2)
        for _ in range(kills):
            time.sleep(rng.uniform(0, 0.1))
            i = rng.randrange(len(members))
            os.kill(members[i], signal.SIGKILL)
            members[i] = spawn()
        stop.set()
        writer.join()
        n = written[0]
        deadline = time.monotonic() + 60
        while mappedbus_py.groups(bus)[0].start < n and time.monotonic() < deadline:
            for i, pid in enumerate(members):
                if not _alive(pid):        # left idle while others' records came back
                    members[i] = spawn()
            time.sleep(0.05)
        while any(_alive(pid) for pid in members) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        writer.join()
        zygote.stdin.close()
        zygote.wait(10)
        for pid in members:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    acked, dead = check_exactly_once(bus, "g", n, log, kills=kills)
    return n, len(acked), len(dead)


def test_killed_members_lose_no_record_quick(tmp_path):
    n, acked, dead = _run(tmp_path, 20, seed=1)
    assert n > 1000 and acked + dead >= n - 20


@pytest.mark.slow
def test_killed_members_lose_no_record_200_kills(tmp_path):
    n, acked, dead = _run(tmp_path, 200, seed=2)
    assert n > 10000 and acked + dead >= n - 200
