"""The archive tier written by a Java RollingBusWriter (issue 37, docs/journal.md "From Java";
the move in docs/design/journal.md): the Java archiver runs the same move, with the same states,
files and lock, as Python's, so a Java writer killed at each MoveState leaves a bus that a Python
reader reads whole and that the next writer (Python or Java) completes, and the other way round;
Java writers archive zstd and lz4 segments that Python and Java readers read."""
import os
import queue
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time

import pytest

from support import procs
from mappedbus_py import RollingBusReader, RollingBusWriter, jvm
from mappedbus_py.formats.archive import list_archived
from mappedbus_py.formats.layout import TIME_INDEX_DIR, TMP_PREFIX, slot_size
from mappedbus_py.rolling.archive import ARCHIVE_STALL_ENV, MoveState
from mappedbus_py.rolling.directory import list_segments

pytestmark = pytest.mark.java

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEG, REC = 4096, 8
PER = (SEG - 8) // slot_size(REC)           # records in one segment
JVM_ARGS = ("-Xmx64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


@pytest.fixture(scope="module")
def jar():
    return procs.java_or_skip()


@pytest.fixture
def dirs(tmp_path):
    hot = f"/dev/shm/mbjarch-{os.getpid()}-{time.monotonic_ns()}"
    yield hot, str(tmp_path / "archive")
    shutil.rmtree(hot, ignore_errors=True)


def java_writer(hot, arch, count, *opts, env=None):
    """A Java writer of records (1, i) through BusTool rolling-write, stdout and stderr merged
    (the archiver says where it stalled on stderr)."""
    cmd = jvm.java_command(procs.BUS_TOOL, "rolling-write", hot, SEG, REC, count, 1,
                           "--archive", arch, *map(str, opts), jvm_args=JVM_ARGS)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, **(env or {})))


def finish(p, timeout=120):
    out, _ = p.communicate(timeout=timeout)
    assert p.returncode == 0, f"{p.args}: exit {p.returncode}\n{out[-3000:]}"
    return out


def read_all(hot):
    with RollingBusReader(hot, timeout=0.05) as r:
        return [struct.unpack_from("<ii", rec.data)[1] for rec in r.records(0.3)]


def complete(hot, arch, by):
    """The next writer (`by`: python or java) completes the moves a killed archiver left."""
    if by == "python":
        with RollingBusWriter(hot) as w:
            assert w.archiver.wait_idle(60)
    else:
        finish(java_writer(hot, arch, 0, "--archive-wait"))


def check_complete(hot, arch, n):
    """Each segment in one tier, none twice, no temporary file; every record once, in order."""
    archived = list_archived(arch)          # raises if a segment is there twice
    hot_segs = list_segments(hot)
    assert not set(archived) & set(hot_segs)
    assert sorted(archived) + hot_segs == list(range(len(archived) + len(hot_segs)))
    for d in (arch, os.path.join(arch, TIME_INDEX_DIR)):
        assert not [x for x in os.listdir(d) if x.startswith(TMP_PREFIX)]
    assert read_all(hot) == list(range(n))


def test_java_move_states_are_pythons(jar):
    src = open(os.path.join(ROOT, "interop/src/main/java/io/mappedbuspy/MoveState.java")).read()
    assert re.findall(r"^    (MOVE_\w+)[,\n]", src, re.M) == [s.name for s in MoveState]


def stalled_writer(hot, arch, state, n, writer):
    """A writer (java or python) of n records that archives with archive_after=0 and stops
    forever once its archiver reaches `state`; killed there."""
    env = {ARCHIVE_STALL_ENV: state.name}
    if writer == "java":
        child = java_writer(hot, arch, n, "--archive-after", 0, "--compress", "zstd", "--hold",
                            env=env)
    else:
        code = (f"import struct, time\nfrom mappedbus_py import RollingBusWriter\n"
                f"w = RollingBusWriter({hot!r}, {SEG}, {REC}, archive={arch!r}, archive_after=0, "
                f"compress='zstd').open()\n"
                f"for i in range({n}):\n    w.write(struct.pack('<ii', 1, i))\n"
                f"import os\nos.write(1, b'WRITTEN\\n')\ntime.sleep(3600)\n")
        child = subprocess.Popen([sys.executable, "-c", code],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 env=dict(os.environ, PYTHONPATH=ROOT, **env))
    kill_when_stalled(child, state.name)


def kill_when_stalled(child, stall):
    """SIGKILLs a writer once it wrote everything and its archiver stalled at `stall`."""
    got = queue.Queue()         # its lines, read by a thread: a writer that never stalls fails, not hangs
    reader = threading.Thread(target=lambda: [got.put(x) for x in iter(child.stdout.readline, "")]
                              + [got.put("")], daemon=True)
    reader.start()
    try:
        lines = []
        deadline = time.monotonic() + 30
        # the words, not whole lines: the writer and its archiver (a thread, or a child process)
        # write to one pipe, and a line of one may land inside a line of the other
        while not all(word in "".join(lines) for word in ("WRITTEN", f"stalled {stall}\n")):
            try:
                line = got.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"not stalled at {stall} in 30 s: {lines}") from None
            assert line, f"the writer ended: {lines}"
            lines.append(line)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        reader.join(10)         # at the end of its output
        child.stdout.close()


# The next writer alternates: Python completes some of the Java archiver's states, Java others.
NEXT = {MoveState.MOVE_SETTLED: "python", MoveState.MOVE_INDEX: "java",
        MoveState.MOVE_COPIED: "java", MoveState.MOVE_RENAMED: "python",
        MoveState.MOVE_UNLINKED: "java"}


@pytest.mark.parametrize("state", list(MoveState), ids=lambda s: s.name)
def test_a_java_writer_killed_at_each_state_of_a_move(jar, dirs, state):
    hot, arch = dirs
    n = PER * 3 + 7
    stalled_writer(hot, arch, state, n, "java")
    archived = list_archived(arch)
    if state in (MoveState.MOVE_SETTLED, MoveState.MOVE_INDEX, MoveState.MOVE_COPIED):
        assert 0 not in archived and 0 in list_segments(hot)
    elif state is MoveState.MOVE_RENAMED:
        assert 0 in archived and 0 in list_segments(hot)        # both: the hot one is read
    else:
        assert 0 in archived and 0 not in list_segments(hot)
    if state is MoveState.MOVE_COPIED:
        assert [x for x in os.listdir(arch) if x.startswith(TMP_PREFIX)]
    # a Python reader reads everything in this state already, before any completion
    assert read_all(hot) == list(range(n))
    complete(hot, arch, NEXT[state])
    check_complete(hot, arch, n)


@pytest.mark.parametrize("state", [MoveState.MOVE_COPIED, MoveState.MOVE_RENAMED],
                         ids=lambda s: s.name)
def test_a_java_writer_completes_a_killed_python_archivers_move(jar, dirs, state):
    hot, arch = dirs
    n = PER * 3 + 7
    stalled_writer(hot, arch, state, n, "python")
    if state is MoveState.MOVE_RENAMED:
        assert 0 in list_archived(arch) and 0 in list_segments(hot)
    else:
        assert [x for x in os.listdir(arch) if x.startswith(TMP_PREFIX)]
    complete(hot, arch, "java")
    check_complete(hot, arch, n)
    assert len(list_archived(arch)) == 3          # archive_after=0: every full segment moved


@pytest.mark.parametrize("by", ["python", "java"])
def test_a_java_writer_killed_during_a_copy_ahead_leaves_only_a_temporary_file(jar, dirs, by):
    # archive_after=1: the oldest full hot segment, not due yet, is copied ahead into a temporary
    # file of the archive; the archiver stops forever once one is written (the hook only the copy
    # ahead honours), the writer writes on, and is killed.
    hot, arch = dirs
    n = PER * 3 + 7
    child = java_writer(hot, arch, n, "--archive-after", 1, "--compress", "zstd", "--hold",
                        env={ARCHIVE_STALL_ENV: "COPY_AHEAD"})
    kill_when_stalled(child, "COPY_AHEAD")
    tmps = [x for x in os.listdir(arch) if x.startswith(TMP_PREFIX)]
    assert len(tmps) == 1, tmps
    k = int(tmps[0][len(TMP_PREFIX):].split(".")[0])
    assert k in list_segments(hot) and k not in list_archived(arch)     # hot, named nowhere else
    assert read_all(hot) == list(range(n))
    complete(hot, arch, by)             # removes it, moves what is due
    check_complete(hot, arch, n)
    assert sorted(list_archived(arch)) == [0, 1]        # 2 full and the current one hot


@pytest.mark.parametrize("compress", ["zstd", "lz4"])
def test_a_java_writers_archive_is_read_by_python_and_java(jar, dirs, compress):
    hot, arch = dirs
    n = PER * 6 + 5
    finish(java_writer(hot, arch, n, "--archive-after", 1, "--compress", compress,
                       "--archive-wait", "--time-index"))
    names = sorted(x for x in os.listdir(arch) if x.endswith(".bus." + compress[:3]))
    # 7 segments: 6 full, of which archive_after=1 stays hot, and the current one
    assert len(names) == 5 and list_segments(hot) == [5, 6], (names, os.listdir(hot))
    assert sorted(os.listdir(os.path.join(arch, TIME_INDEX_DIR)))[0] == "00000000000000000000.time"
    assert read_all(hot) == list(range(n))
    out = finish(subprocess.Popen(jvm.java_command(
        procs.BUS_TOOL, "rolling-read", hot, SEG, REC, n, "--idle-exit", 2000, jvm_args=JVM_ARGS),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    lines = out.strip().splitlines()
    assert lines[-1] == f"END {n} lost=0 skipped=0"
    got = [int.from_bytes(bytes.fromhex(line.split()[2])[4:8], "little") for line in lines[:-1]]
    assert got == list(range(n))


def test_java_archive_settings_are_fixed_once_set(jar, dirs):
    hot, arch = dirs
    finish(java_writer(hot, arch, 1, "--archive-after", 2, "--compress", "lz4"))
    p = java_writer(hot, arch, 1, "--compress", "zstd")
    out, _ = p.communicate(timeout=60)
    assert p.returncode != 0 and "fixed once set" in out, out[-2000:]
    with pytest.raises(ValueError, match="fixed once set"):
        RollingBusWriter(hot, archive=arch, compress="zstd").open()


@pytest.mark.slow
@pytest.mark.parametrize("after", [0, 1])       # 1: kills during copies ahead too
def test_random_kills_of_a_java_writer_while_archiving(jar, dirs, after):
    hot, arch = dirs
    rnd = random.Random(3737 + after)
    finish(java_writer(hot, arch, 0, "--archive-after", after, "--compress", "lz4"))
    got = []
    start = time.monotonic()
    with RollingBusReader(hot, timeout=0.05) as reader:
        kills = 0
        # At least 10 kills whatever the time: a round is a JVM start (seconds when loaded), up to
        # 1.5 s of writing and the reads after it.
        while kills < 10 or time.monotonic() - start < (35 if after == 0 else 20):
            # Paced (2 ms every 32 records: about a segment every 16 ms), so the kills land in
            # every phase of many moves over thousands of segments, not millions of records.
            child = java_writer(hot, arch, 1 << 30, "--first", len(got), "--hold",
                                "--pause-every", 32)
            assert child.stdout.readline().strip() == "OPEN"
            time.sleep(rnd.uniform(0.05, 1.5))
            child.send_signal(signal.SIGKILL)
            child.wait()
            child.stdout.close()
            kills += 1
            while True:
                rec = reader.read(0.3)
                if rec is None:
                    break
                got.append(struct.unpack_from("<ii", rec.data)[1])
            assert got == list(range(len(got))), f"kill {kills}: out of order or duplicated"
    assert len(got) > PER * 3, (kills, len(got))
    assert list_archived(arch)
    complete(hot, arch, "java")
    check_complete(hot, arch, len(got))


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_java_sync_covers_the_consumers_registry_and_group_files(jar, tmp_path):
    """docs/journal.md "Durability": sync() fdatasyncs the registry and the group files too."""
    from mappedbus_py.groups import GroupReader
    hot = str(tmp_path / "hot")
    with RollingBusWriter(hot, SEG, REC) as w:
        w.write(struct.pack("<ii", 1, 0))
    with RollingBusReader(hot, consumer="c") as r:
        r.read(0.01)
    with GroupReader(hot, "g"):
        pass
    assert os.path.exists(os.path.join(hot, "bus.consumers"))
    log = str(tmp_path / "strace.log")
    cmd = ["strace", "-f", "-y", "-o", log, "-e", "trace=fdatasync"] + jvm.java_command(
        procs.BUS_TOOL, "rolling-write", hot, SEG, REC, 3, 1, "--sync-at-end", jvm_args=JVM_ARGS)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    calls = open(log).read()
    assert "bus.consumers>" in calls, calls[-3000:]
    assert re.search(r"groups/g\.group>", calls), calls[-3000:]
