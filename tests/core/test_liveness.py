"""Liveness kept by the kernel (_liveness.h): OFD locks on a slot's byte, seen by other
descriptors, dropped when the holder dies (a zombie included), and not kept by a forked child."""
import os
import signal
import subprocess
import sys
import time

import pytest

from mappedbus_py._core._liveness import Hold, LiveFile, Liveness

HOLD_AND_WAIT = """
import os, sys, time
from mappedbus_py._core._liveness import LiveFile, Hold
f = LiveFile(os.open(sys.argv[1], os.O_RDWR | os.O_CLOEXEC))
assert f.hold(int(sys.argv[2])) == Hold.TAKEN
print("held", flush=True)
time.sleep(60)
"""


def _open(path):
    return LiveFile(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))


def _holder(path, byte):
    p = subprocess.Popen([sys.executable, "-c", HOLD_AND_WAIT, str(path), str(byte)],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_a_byte_held_by_one_description_is_alive_to_another_and_busy(tmp_path):
    path = tmp_path / "side"
    with _open(path) as a, _open(path) as b:
        assert b.probe(64) == Liveness.DEAD
        assert a.hold(64) == Hold.TAKEN
        assert a.hold(64) == Hold.TAKEN            # again, through its own description
        assert b.probe(64) == Liveness.ALIVE
        assert b.probe(65) == Liveness.DEAD        # one byte, not a range
        assert b.hold(64) == Hold.BUSY
        assert a.probe(64) == Liveness.DEAD        # its own lock does not conflict with itself
        assert a.release(64)
        assert b.probe(64) == Liveness.DEAD
        assert b.hold(64) == Hold.TAKEN


def test_closing_releases_and_a_closed_file_answers_unknown(tmp_path):
    path = tmp_path / "side"
    a, b = _open(path), _open(path)
    assert a.hold(0) == Hold.TAKEN
    a.close()
    assert b.probe(0) == Liveness.DEAD
    assert a.probe(0) == Liveness.UNKNOWN and a.hold(0) == Hold.UNKNOWN
    b.close()
    with pytest.raises(ValueError, match="open descriptor"):
        LiveFile(-1)


def test_a_killed_holder_is_dead_while_still_a_zombie(tmp_path):
    path = tmp_path / "side"
    path.write_bytes(b"")
    p = _holder(path, 128)
    with _open(path) as probe:
        assert probe.probe(128) == Liveness.ALIVE
        os.kill(p.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while probe.probe(128) != Liveness.DEAD:
            assert time.monotonic() < deadline, "the lock outlived its holder"
            time.sleep(0.001)
        # not reaped yet: a zombie, which kill(pid, 0) calls alive
        with open(f"/proc/{p.pid}/stat") as f:
            assert f.read().rsplit(")", 1)[1].split()[0] == "Z"
        assert probe.probe(128) == Liveness.DEAD
    p.wait()


def test_a_stopped_holder_is_alive(tmp_path):
    path = tmp_path / "side"
    path.write_bytes(b"")
    p = _holder(path, 8)
    try:
        os.kill(p.pid, signal.SIGSTOP)
        with _open(path) as probe:
            assert probe.probe(8) == Liveness.ALIVE
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()


def test_a_forked_child_does_not_keep_a_dead_parents_lock(tmp_path):
    path = tmp_path / "side"
    path.write_bytes(b"")
    # the parent (a subprocess) holds byte 16, forks a child that sleeps, then is killed
    # the child says its pid once it runs: after the fork handlers, which closed its copy
    code = HOLD_AND_WAIT.replace('print("held", flush=True)',
                                 'pid = os.fork()\nif pid == 0:\n    print(os.getpid(), flush=True)\n'
                                 '    time.sleep(60)\n    os._exit(0)\n')
    p = subprocess.Popen([sys.executable, "-c", code, str(path), "16"], stdout=subprocess.PIPE, text=True)
    child = int(p.stdout.readline())
    try:
        with _open(path) as probe:
            assert probe.probe(16) == Liveness.ALIVE
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
            assert probe.probe(16) == Liveness.DEAD   # the child closed its copy at fork
    finally:
        os.kill(child, signal.SIGKILL)


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/unshare"), reason="needs root and unshare")
def test_a_holder_in_another_pid_namespace_is_seen_alive_then_dead(tmp_path):
    path = tmp_path / "side"
    path.write_bytes(b"")
    p = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", sys.executable, "-c", HOLD_AND_WAIT,
                          str(path), "256"], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert p.stdout.readline().strip() == "held"
        with _open(path) as probe:
            assert probe.probe(256) == Liveness.ALIVE
            assert probe.hold(256) == Hold.BUSY
            os.kill(p.pid, signal.SIGKILL)   # --kill-child: pid 1 of the namespace dies with it
            p.wait()
            deadline = time.monotonic() + 5
            while probe.probe(256) != Liveness.DEAD:
                assert time.monotonic() < deadline
                time.sleep(0.001)
            assert probe.hold(256) == Hold.TAKEN
    finally:
        if p.poll() is None:
            p.kill()
