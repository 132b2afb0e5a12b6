"""The archiver's pace (issue 37; formats/layout.py, "WHEN a segment moves"): the early move of
the oldest full segment once the current one is past ARCHIVER_EARLY_FILL_PERCENT, an archiver
keeping the hot directory at archive_after + 1 segments with records behind a writer in another
process that never wakes it, and reads of archived segments by tools and work-group members
leaving nothing in /dev/shm when they are killed (memory files)."""
import os
import shutil
import struct
import subprocess
import sys
import threading
import time

import pytest

from mappedbus_py import RollingBusReader, RollingBusWriter
from mappedbus_py.formats.archive import ArchiveConfig, archive_config, list_archived
from mappedbus_py.formats.layout import (ARCHIVER_EARLY_FILL_PERCENT, FIRST_RECORD_OFFSET,
                                         META_FILE)
from mappedbus_py.rolling.archive import Archiver
from mappedbus_py.rolling.directory import list_segments, read_bus_meta, segment_limit

SEG = 16 * 1024
RS = 24
PER_SEG = (SEG - 8) // (RS + 8)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def dirs(tmp_path):
    hot = f"/dev/shm/mbpace-{os.getpid()}-{time.monotonic_ns()}"
    yield hot, str(tmp_path / "archive")
    shutil.rmtree(hot, ignore_errors=True)


def _past_half(hot, k):
    return segment_limit(hot, k) * 100 > SEG * ARCHIVER_EARLY_FILL_PERCENT


@pytest.mark.parametrize("frames", [False, True])
def test_the_oldest_full_segment_is_due_once_the_current_one_is_past_half(dirs, frames):
    hot, arch = dirs
    # A bus without an archive (nothing moves); archivers of each archive_after look at it.
    with RollingBusWriter(hot, SEG, RS, frames=frames) as w:
        archivers = {after: Archiver(hot, w.meta, ArchiveConfig(arch, after=after))
                     for after in (0, 1, 2, 3)}
        i = 0
        while 3 not in list_segments(hot) or segment_limit(hot, 3) <= FIRST_RECORD_OFFSET:
            w.write(struct.pack("<qq", i, 0))
            i += 1
        # segment 3 is current (a spare 4 may be made ahead): 0, 1, 2 full
        below = {after: a.candidates() for after, a in archivers.items()}
        while not _past_half(hot, 3):
            below = {after: a.candidates() for after, a in archivers.items()}
            w.write(struct.pack("<qq", i, 0))
            i += 1
        above = {after: a.candidates() for after, a in archivers.items()}
    assert below == {0: [0, 1, 2], 1: [0, 1], 2: [0], 3: []}
    # past half: the oldest of the archive_after full ones is due too; archive_after=0 as before
    assert above == {0: [0, 1, 2], 1: [0, 1, 2], 2: [0, 1], 3: [0]}


_PACED_WRITER = """
import struct, sys, time
from mappedbus_py import RollingBusWriter
hot, n = sys.argv[1], int(sys.argv[2])
with RollingBusWriter(hot) as w:    # its own archiver finds the lock taken: it moves nothing
    print("ready", flush=True)
    for i in range(n):
        w.write(struct.pack("<qq", i, 0))
        if i % 4 == 0:
            time.sleep(0.001)      # about 0.15 s a segment
"""


def _watch(hot, stop, most):
    # The most hot segments with records at once (as perf/bench_journal.py counts them).
    while not stop.is_set():
        live = 0
        for k in list_segments(hot):
            if (segment_limit(hot, k) or 0) > FIRST_RECORD_OFFSET:
                live += 1
        most[0] = max(most[0], live)
        time.sleep(0.0005)


@pytest.fixture
def shm_dirs(dirs):
    # the archive in memory too: the archiver's pace is tested, not the disk's fsyncs
    hot, _ = dirs
    yield hot, hot + "-archive"
    shutil.rmtree(hot + "-archive", ignore_errors=True)


def test_an_archiver_keeps_up_behind_a_writer_in_another_process_that_never_wakes_it(shm_dirs):
    hot, arch = shm_dirs
    after = 2
    RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=after).open().close()
    meta = read_bus_meta(hot)
    a = Archiver(hot, meta, archive_config(meta, os.path.join(hot, META_FILE)))
    a.start()
    stop, most = threading.Event(), [0]
    watcher = threading.Thread(target=_watch, args=(hot, stop, most))
    n = PER_SEG * 6 + 100
    try:
        deadline = time.monotonic() + 30
        while not a._holding:               # the lock is ours before the writer starts
            assert time.monotonic() < deadline and a.error is None, a.error
            time.sleep(0.01)
        watcher.start()
        child = subprocess.Popen([sys.executable, "-c", _PACED_WRITER, hot, str(n)],
                                 stdout=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=ROOT))
        try:
            assert child.stdout.readline() == b"ready\n"
        finally:
            assert child.wait(120) == 0
            child.stdout.close()
    finally:
        stop.set()
        if watcher.is_alive():
            watcher.join()
        a.stop()
    assert a.error is None
    # 0..5 full, 6 current (below half): all but the archive_after full ones moved, and
    # never more than archive_after + 1 segments with records hot at once, not even at a roll
    assert sorted(list_archived(arch)) == list(range(6 - after))
    assert most[0] <= after + 1, most
    with RollingBusReader(hot) as r:
        got = [struct.unpack_from("<q", rec.data)[0] for rec in r.records(0)]
    assert got == list(range(n))


def _shm_archived():
    return {n for n in os.listdir("/dev/shm") if n.startswith("mappedbus-archived-")}


_TOOL = """
import sys, time
from mappedbus_py.rolling.directory import read_bus_meta
from mappedbus_py.tools.views_rolling import segment_file, tier_of
hot = sys.argv[1]
with segment_file(hot, 0, tier_of(read_bus_meta(hot, allow_foreign=True), hot)) as seg:
    print(seg.tier, seg.fd, flush=True)
    time.sleep(60)
"""

_MEMBER = """
import struct, sys, time
from mappedbus_py import RollingBusReader
m = RollingBusReader(sys.argv[1], group="g")
for _ in range(int(sys.argv[2])):
    m.ack(m.read(0))
print("mid", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("who", ["tool", "member"])
def test_a_tool_or_group_member_killed_with_an_archived_segment_open_leaves_nothing(dirs, who):
    # A compressed archived segment read by the mappedbus tools or a work-group member is
    # decompressed into an anonymous memory file: a SIGKILL leaves no file in /dev/shm.
    hot, arch = dirs
    with RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=0, compress="zstd") as w:
        for i in range(PER_SEG * 3):
            w.write(struct.pack("<qq", i, 0))
        assert w.archiver.wait_idle(10)
    assert {0, 1} <= set(list_archived(arch)) and 0 not in list_segments(hot)
    before = _shm_archived()
    script, args = (_TOOL, []) if who == "tool" else (_MEMBER, [str(PER_SEG // 2)])
    p = subprocess.Popen([sys.executable, "-c", script, hot, *args], stdout=subprocess.PIPE,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    try:
        line = p.stdout.readline().decode()
        if who == "tool":
            tier, fd = line.split()
            assert tier == "archive", line
            held = os.readlink(f"/proc/{p.pid}/fd/{fd}")
        else:
            assert line == "mid\n", line
            with open(f"/proc/{p.pid}/maps") as f:
                held = f.read()
        assert "memfd:mappedbus-archived-00000000000000000000" in held, held
        assert _shm_archived() - before == set()
    finally:
        p.kill()
        p.wait()
        p.stdout.close()
    assert _shm_archived() - before == set()
