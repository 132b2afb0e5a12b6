"""Sync policies (docs/journal.md, "Durability"): each policy and sync() make the system calls
the guide promises, seen with strace (marked slow); the arguments are checked at once."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from mappedbus_py import RollingBusWriter

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEG = 16 * 1024
RS = 24
PER_SEG = (SEG - 8) // (RS + 8)


def test_sync_arguments_are_checked():
    with pytest.raises(ValueError, match="sync must be one of"):
        RollingBusWriter("/dev/shm/x-never", SEG, RS, sync="always")
    with pytest.raises(ValueError, match="needs sync_interval"):
        RollingBusWriter("/dev/shm/x-never", SEG, RS, sync="interval")
    with pytest.raises(ValueError, match="applies to sync=\"interval\" only"):
        RollingBusWriter("/dev/shm/x-never", SEG, RS, sync="segment", sync_interval=1)
    assert not os.path.exists("/dev/shm/x-never")


def test_sync_on_a_closed_writer_raises(tmp_path):
    w = RollingBusWriter(str(tmp_path / "b"), SEG, RS)
    with pytest.raises(Exception, match="closed"):
        w.sync()


def _strace():
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed (apt-get install strace)")
    probe = subprocess.run(["strace", "-f", "-e", "trace=fsync", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"strace cannot trace here (ptrace refused?): {probe.stderr.decode()[:200]}")


CHILD = """
import struct, sys, time
sys.path.insert(0, {root!r})
from mappedbus_py import RollingBusWriter
kw = {kw!r}
w = RollingBusWriter({path!r}, **kw).open()
print("OPENED", flush=True)
for i in range({n}):
    w.write(struct.pack("<q", i))
    if {pause} and i % 100 == 0:
        time.sleep({pause})
print("WRITTEN", flush=True)
if {call_sync}:
    w.sync()
    print("SYNCED", flush=True)
w._journal._stop.set()          # no more background syncs: only what was asked is traced
"""


def _trace(tmp_path, kw, n, pause=0.0, call_sync=False):
    """The (call, path) pairs the writer made between its open and its last line."""
    _strace()
    path = str(tmp_path / "bus")
    RollingBusWriter(path, SEG, RS).open().close()     # the bus exists: its creation not traced
    log = str(tmp_path / "strace.log")
    code = CHILD.format(root=ROOT, kw=kw, path=path, n=n, pause=pause, call_sync=call_sync)
    subprocess.run(["strace", "-f", "-y", "-e", "trace=msync,fdatasync,fsync", "-o", log,
                    sys.executable, "-c", code], check=True, timeout=120, capture_output=True,
                   env=dict(os.environ, PYTHONPATH=ROOT))
    return path, _successful_calls(log)


def _successful_calls(log):
    """(call, path) of each msync/fdatasync/fsync that returned 0 in strace -f -y's ``log``. A
    call that overlapped another thread's is split in two lines, "<unfinished ...>" (with the
    path) and "<... resumed>" (with the result): joined by the thread's id."""
    calls, unfinished = [], {}
    for line in open(log):
        tid = line.split(None, 1)[0]
        m = re.search(r"\b(msync|fdatasync|fsync)\((\d+)<([^>]*)>", line)
        if m and "<unfinished ...>" in line:
            unfinished[tid] = (m.group(1), m.group(3))
        elif m and re.search(r"= 0$", line.rstrip()):
            calls.append((m.group(1), m.group(3)))
        elif "resumed>" in line and tid in unfinished:
            call = unfinished.pop(tid)
            if re.search(r"= 0$", line.rstrip()):
                calls.append(call)
    return calls


@pytest.mark.slow
def test_policy_none_makes_no_sync_calls(tmp_path):
    _, calls = _trace(tmp_path, {}, PER_SEG * 3)
    assert calls == []


@pytest.mark.slow
def test_sync_call_syncs_segments_indices_and_the_directory(tmp_path):
    path, calls = _trace(tmp_path, {"time_index": True}, PER_SEG * 2 + 5, call_sync=True)
    segs = {p for c, p in calls if c == "fdatasync" and p.endswith(".bus")}
    # every segment written (the two full ones by path, the current one)
    assert {os.path.join(path, f"{k:020d}.bus") for k in range(3)} <= segs
    assert any(c == "fdatasync" and p.endswith(".time") for c, p in calls)
    assert ("fsync", path) in calls


@pytest.mark.slow
def test_policy_segment_syncs_each_full_segment_at_its_roll(tmp_path):
    path, calls = _trace(tmp_path, {"sync": "segment", "time_index": True}, PER_SEG * 4 + 5)
    synced = [p for c, p in calls if c == "fdatasync" and p.endswith(".bus")]
    assert [os.path.join(path, f"{k:020d}.bus") for k in range(4)] == sorted(set(synced))[:4]
    assert os.path.join(path, f"{4:020d}.bus") not in synced     # the current one: not yet
    assert ("fsync", path) in calls
    assert sum(1 for c, p in calls if c == "fdatasync" and p.endswith(".time")) >= 4


@pytest.mark.slow
def test_policy_interval_syncs_in_the_background(tmp_path):
    path, calls = _trace(tmp_path, {"sync": "interval", "sync_interval": 0.01}, 3000,
                         pause=0.01)
    n = sum(1 for c, p in calls if c == "fdatasync" and p.endswith(".bus"))
    # about 0.3 s of writing at one sync per 10 ms (a loaded machine makes fewer)
    assert n >= 5, calls
