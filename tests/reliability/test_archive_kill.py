"""The archive tier under SIGKILL (docs/design/journal.md, "The move"): a writer killed at each
state of a move, and at random moments while it writes and archives, leaves a bus whose every
record is read once and in order across both tiers, with no segment lost or in the archive twice,
once the next writer has completed the moves."""
import os
import queue
import random
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time

import pytest

from mappedbus_py import RollingBusReader, RollingBusWriter
from mappedbus_py.formats.archive import list_archived
from mappedbus_py.formats.layout import TIME_INDEX_DIR, TMP_PREFIX
from mappedbus_py.rolling.archive import ARCHIVE_STALL_ENV, COPY_AHEAD_STALL, MoveState
from mappedbus_py.rolling.directory import list_segments

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEG = 16 * 1024
RS = 24
PER_SEG = (SEG - 8) // (RS + 8)

CHILD = """
import os, struct, sys, time
sys.path.insert(0, {root!r})
from mappedbus_py import RollingBusWriter
w = RollingBusWriter({hot!r}, {seg}, {rs}, archive={arch!r}, archive_after={after},
                     compress={compress!r}).open()
print("OPEN", flush=True)
i = {start}
end = {end}
pace = {pace}
while end < 0 or i < end:
    w.write(struct.pack("<q", i))
    i += 1
    if pace and i % pace == 0:
        time.sleep(0.002)
os.write(1, b"WRITTEN\\n")      # one write: the archiver's lines share the pipe
while True:
    time.sleep(1)
"""


@pytest.fixture
def dirs(tmp_path):
    hot = f"/dev/shm/mbarchkill-{os.getpid()}-{time.monotonic_ns()}"
    yield hot, str(tmp_path / "archive")
    shutil.rmtree(hot, ignore_errors=True)


def _child(hot, arch, start, end, compress="zstd", env=None, pace=0, after=0):
    """A writer of records start.. (to end, or until killed when end is -1); with `pace`, a
    2 ms pause after every `pace` records."""
    code = CHILD.format(root=ROOT, hot=hot, arch=arch, seg=SEG, rs=RS, start=start, end=end,
                        compress=compress, pace=pace, after=after)
    # stderr too: the archiver process (a child of the writer) says where it stalled there
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONPATH=ROOT, **(env or {})))


class _Output:
    """A child's output, read by a thread (a child that never says what is awaited fails the
    test in 30 s instead of blocking a readline)."""

    def __init__(self, child):
        self._got = queue.Queue()
        self.text = ""
        threading.Thread(target=lambda: [self._got.put(x) for x in
                                         iter(child.stdout.readline, "")] + [self._got.put("")],
                         daemon=True).start()

    def wait_for(self, *words):
        # the words, not whole lines: the writer and its archiver process write to one pipe,
        # and a line of one may land inside a line of the other
        deadline = time.monotonic() + 30
        while not all(w in self.text for w in words):
            try:
                line = self._got.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"not {words} in 30 s: {self.text!r}") from None
            assert line, f"the writer ended: {self.text!r}"
            self.text += line


def _check_complete(hot, arch, n):
    """The next writer completes the moves; then every record once, in order, each segment in
    one tier, no temporary file left in the archive."""
    with RollingBusWriter(hot, archive=arch) as w:
        assert w.archiver.wait_idle(300)     # thousands of small segments after 100 kills
    archived = list_archived(arch)          # raises if a segment is there twice
    hot_segs = list_segments(hot)
    assert not set(archived) & set(hot_segs)
    assert sorted(archived) + hot_segs == list(range(len(archived) + len(hot_segs)))
    for d in (arch, os.path.join(arch, TIME_INDEX_DIR)):
        assert not [x for x in os.listdir(d) if x.startswith(TMP_PREFIX)]
    got = []
    with RollingBusReader(hot, timeout=0.05) as r:
        while True:
            rec = r.read(0.3)
            if rec is None:
                break
            got.append(struct.unpack_from("<q", rec.data)[0])
    assert got == list(range(n)), (len(got), n)


@pytest.mark.parametrize("state", list(MoveState), ids=lambda s: s.name)
def test_a_kill_at_each_state_of_a_move_is_completed(dirs, state):
    hot, arch = dirs
    n = PER_SEG * 3 + 7
    child = _child(hot, arch, 0, n, env={ARCHIVE_STALL_ENV: state.name})
    try:
        out = _Output(child)
        out.wait_for("WRITTEN", f"stalled {state.name}\n")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    archived = list_archived(arch)
    if state in (MoveState.MOVE_SETTLED, MoveState.MOVE_INDEX, MoveState.MOVE_COPIED):
        assert 0 not in archived and 0 in list_segments(hot)
    elif state is MoveState.MOVE_RENAMED:
        assert 0 in archived and 0 in list_segments(hot)        # both: the hot one is read
    else:
        assert 0 in archived and 0 not in list_segments(hot)
    if state is MoveState.MOVE_COPIED:
        assert [x for x in os.listdir(arch) if x.startswith(TMP_PREFIX)]
    # readers read everything in this state already, before any completion
    with RollingBusReader(hot, timeout=0.05) as r:
        got = [struct.unpack_from("<q", rec.data)[0] for rec in r.records(0.3)]
    assert got == list(range(n))
    _check_complete(hot, arch, n)


def test_a_kill_during_a_copy_ahead_leaves_a_temporary_file_the_next_archiver_removes(dirs):
    # archive_after=1: the oldest full segment is copied ahead while the current one is below
    # half, and the archiver stops right after writing that copy (of 0, or of a later one
    # when the writer ran ahead of it); the writer goes on, then both are killed
    hot, arch = dirs
    n = PER_SEG * 3 + 7
    child = _child(hot, arch, 0, n, after=1, env={ARCHIVE_STALL_ENV: COPY_AHEAD_STALL})
    try:
        out = _Output(child)
        out.wait_for("WRITTEN", f"stalled {COPY_AHEAD_STALL}\n")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    # of the segment copied ahead, only a temporary file: it is hot and named nowhere else
    tmps = [x for x in os.listdir(arch) if x.startswith(TMP_PREFIX)]
    assert len(tmps) == 1, tmps
    k = int(tmps[0][len(TMP_PREFIX):][:20])
    assert tmps[0].startswith(f"{TMP_PREFIX}{k:020d}.bus.zst-"), tmps
    assert k in list_segments(hot) and k not in list_archived(arch)
    assert sorted(list_archived(arch)) == list(range(k))
    with RollingBusReader(hot, timeout=0.05) as r:
        got = [struct.unpack_from("<q", rec.data)[0] for rec in r.records(0.3)]
    assert got == list(range(n))
    _check_complete(hot, arch, n)


def _campaign(dirs, kills, seed, after=0):
    hot, arch = dirs
    rnd = random.Random(seed)
    RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=after,
                     compress="lz4").open().close()
    reader = RollingBusReader(hot, timeout=0.05).open()
    got = []
    try:
        for k in range(kills):
            # Paced at about a segment every 16 ms: the kills land in every phase of many moves,
            # and the campaign's thousands of segments (not millions of records) bound its time.
            child = _child(hot, arch, len(got), -1, compress="lz4", pace=PER_SEG // 8,
                           after=after)
            assert child.stdout.readline().strip() == "OPEN"
            # writing, and archiving meanwhile (open() returns once its archiver process runs)
            time.sleep(rnd.uniform(0.05, 1.2))
            child.send_signal(signal.SIGKILL)
            child.wait()
            while True:
                rec = reader.read(0.3)
                if rec is None:
                    break
                got.append(struct.unpack_from("<q", rec.data)[0])
            assert got == list(range(len(got))), f"kill {k}: out of order or duplicated"
    finally:
        reader.close()
    assert len(got) > PER_SEG * 3, "the writers did not get far enough to archive"
    assert list_archived(arch)
    _check_complete(hot, arch, len(got))


def test_random_kills_while_archiving_fast(dirs):
    _campaign(dirs, 10, seed=37)


@pytest.mark.slow
def test_random_kills_while_archiving_and_copying_ahead_20(dirs):
    # archive_after=1: kills land in copies ahead too
    _campaign(dirs, 20, seed=3701, after=1)


@pytest.mark.slow
def test_random_kills_while_archiving_100(dirs):
    _campaign(dirs, 100, seed=3737)
