"""Writers SIGKILLed mid-message on a framed bus, while readers read: no partial message is
ever delivered, and every reader delivers the same messages in the same order (the dead
writers' messages dropped whole, at once, through the writers file)."""
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from mappedbus_py import MappedBusWriter, RollingBusWriter

from support import frames_child     # the end marker the readers stop at

CHILD = os.path.join(os.path.dirname(__file__), "..", "support", "frames_child.py")


def campaign(path, kills, maxsize, rolling=False, seed=0):
    rng = random.Random(seed)
    extra = ["rolling"] if rolling else []
    # The readers stop at the end marker written after the last kill (their 60 s idle timeout
    # is only a bound): not after a few idle seconds, which the next writer's start could
    # outlast on a loaded machine, one reader stopping before the other.
    readers = [subprocess.Popen([sys.executable, CHILD, "read", path, str(10**9), "60",
                                 *(extra or ["single"])], stdout=subprocess.PIPE, text=True)
               for _ in range(2)]
    killed = 0
    try:
        for k in range(kills):
            w = subprocess.Popen([sys.executable, CHILD, "loop", path, str(k), str(maxsize),
                                  *extra], stdout=subprocess.PIPE, text=True)
            try:
                assert w.stdout.readline().strip() == "ready"
                time.sleep(rng.uniform(0, 0.02))
            finally:
                w.send_signal(signal.SIGKILL)
                w.wait(30)
            killed += w.returncode == -signal.SIGKILL
        with (RollingBusWriter if rolling else MappedBusWriter)(path, frames=True) as w:
            assert w.write(frames_child.END)
        outs = [json.loads(r.communicate(timeout=300)[0]) for r in readers]
    finally:
        for r in readers:
            if r.poll() is None:
                r.kill()
    assert killed == kills
    return outs


def check(outs):
    first = outs[0]
    assert first["bad"] == []                      # nothing partial, nothing garbled
    assert None not in first["order"]
    assert len(first["order"]) > 0
    for out in outs[1:]:
        assert out["bad"] == [] and out["order"] == first["order"]     # all readers agree
    return first


def test_writers_killed_mid_message_five_times(bus_path):
    MappedBusWriter(bus_path, 256 << 20, 248, frames=True, preallocate=False).open().close()
    check(campaign(bus_path, 5, 1 << 20))


@pytest.mark.slow
def test_writers_killed_mid_message_a_hundred_times(bus_path):
    MappedBusWriter(bus_path, 3 << 30, 1016, frames=True, preallocate=False).open().close()
    out = check(campaign(bus_path, 100, 2 << 20, seed=1))
    assert out["rollbacks"] > 0              # some kills did land mid-message


@pytest.fixture
def rolling_dir(tmp_path_factory):
    import shutil
    base = "/dev/shm" if os.path.isdir("/dev/shm") else str(tmp_path_factory.getbasetemp())
    path = os.path.join(base, f"mbframes-{os.getpid()}-{random.randrange(1 << 40):x}.d")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
def test_rolling_writers_killed_mid_message(rolling_dir):
    path = rolling_dir
    RollingBusWriter(path, 16 << 20, 1016, frames=True).open().close()
    check(campaign(path, 20, 2 << 20, rolling=True, seed=2))
