"""Java work-group members read on from a rolling bus's archive (issue 37; docs/groups.md, "Java
members"; docs/journal.md): a Java member (GroupArchiveChild, in its own JVM) and a Python member
of the same group read every record once across both tiers while a Python writer, in its own
process, fills segments that its archiver moves (as they were, zstd, LZ4): acked, byte-identical,
some released and taken again there. A framed bus's multi-slot messages in archived segments are
taken whole, with their topics, while segments move. Segments the archive's retention removed
before the group was done are one BusGapException in Java naming what Python's BusGapError names."""
import hashlib
import os
import random
import struct
import subprocess
import sys
import threading

import pytest

from mappedbus_py import RollingBusWriter, jvm
from mappedbus_py.errors import BusGapError
from mappedbus_py.formats.archive import list_archived
from mappedbus_py.formats.busmeta import read_meta
from mappedbus_py.groups import GroupReader
from mappedbus_py.rolling.archive import (check_archive, move_segment, prepare_archive,
                                          settle_meta)
from mappedbus_py.rolling.directory import list_segments
from tests.support import procs

pytestmark = pytest.mark.java

TESTS_JAR = (jvm.pathlib.Path(os.environ["MAPPEDBUS_PY_JARS"]) if os.environ.get("MAPPEDBUS_PY_JARS")
             else jvm.BUILD) / "mappedbuspy-tests.jar"
CHILD = "io.mappedbuspy.GroupArchiveChild"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEG = 16 * 1024
RS = 24
PER_SEG = (SEG - 8) // (RS + 8)
FIRST = 8
LEASE_MS = 60_000                    # far longer than any test: nothing comes back by the lease


@pytest.fixture(scope="module")
def java():
    procs.java_or_skip()
    if not TESTS_JAR.is_file():
        pytest.skip(f"{TESTS_JAR} is missing: run `bash interop/build.sh`")
    lib = jvm.BUILD / "libmappedbuswake.so"
    if not lib.is_file():
        pytest.skip(f"{lib} is missing: run `bash interop/build_native.sh`")


class JavaMember:
    """A Java member in its own JVM; its lines, split, gathered by a thread."""

    def __init__(self, bus, group):
        cmd = jvm.java_command(CHILD, "consume", bus, group, LEASE_MS, classpath=[TESTS_JAR],
                               jvm_args=("-Xmx256m", "-XX:+UseSerialGC"))
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        first = self.proc.stdout.readline().split()
        assert first[:1] == ["member"], (first, "" if first else self.proc.stderr.read())
        self.lines = []
        self.thread = threading.Thread(target=self._gather, daemon=True)
        self.thread.start()

    def _gather(self):
        for line in self.proc.stdout:
            self.lines.append(line.split())

    def of(self, word):
        return [line for line in list(self.lines) if line[0] == word]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.stdin.write("stop\n")
            self.proc.stdin.flush()
        assert self.proc.wait(60) == 0, (self.lines[-3:], self.proc.stderr.read())
        self.thread.join(10)
        assert not self.of("error") and not self.of("lost"), self.lines

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def _record(i):
    return struct.pack("<q", i) + random.Random(i).randbytes(RS - 8)


def _sha(b):
    return hashlib.sha256(b).hexdigest()


def _wait(done, seconds=30.0):
    for _ in range(int(seconds / 0.005)):
        if done():
            return True
        threading.Event().wait(0.005)
    return False


def _python_consume(member, acked, stop):
    while not stop.is_set():
        try:
            rec = member.read(0.02)
        except BusGapError as e:                # not expected here: the test fails on it
            acked.append(("gap", e.lost_from, e.lost_to))
            continue
        if rec is not None and member.ack(rec):
            acked.append((rec.position, len(rec.payload), _sha(rec.payload), rec.deliveries,
                          rec.topic))
            stop.wait(0.002)            # some work: the Java member takes most


def _java_acked(jm):
    return [(int(p), int(n), sha, int(d), None if t == "-" else t)
            for _, p, n, sha, d, t in jm.of("acked")]


WRITER = """
import struct, random, sys, time
sys.path.insert(0, {root!r})
from mappedbus_py import RollingBusWriter
with RollingBusWriter({hot!r}) as w:            # the bus's archive settings, from bus.meta
    for i in range({start}, {stop}):
        w.write(struct.pack("<q", i) + random.Random(i).randbytes({rs} - 8))
        if i % 300 == 0:
            time.sleep(0.01)                    # segments fill and move while the members read
    assert w.archiver.wait_idle(20)
"""


@pytest.mark.parametrize("compress,after", [(None, 0), ("zstd", 1), ("lz4", 0)])
def test_java_and_python_members_read_every_record_once_across_both_tiers(tmp_path, java,
                                                                          compress, after):
    hot, arch = str(tmp_path / "bus"), str(tmp_path / "archive")
    first, n = PER_SEG * 4, PER_SEG * 10 + 5
    with RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=after,
                          compress=compress) as w:
        for i in range(first):
            w.write(_record(i))
        assert w.archiver.wait_idle(10)
    assert 0 in list_archived(arch) and 0 not in list_segments(hot)
    py = GroupReader(hot, "g", lease=LEASE_MS // 1000)  # the group starts at the archive's oldest
    jm = JavaMember(hot, "g")
    writer = subprocess.Popen([sys.executable, "-c", WRITER.format(
        root=ROOT, hot=hot, start=first, stop=n, rs=RS)])
    acked, stop = [], threading.Event()
    t = threading.Thread(target=_python_consume, args=(py, acked, stop))
    t.start()
    try:
        assert _wait(lambda: len(acked) + len(jm.of("acked")) >= n), \
            (len(acked), len(jm.of("acked")), jm.lines[-3:])
        assert writer.wait(60) == 0
    finally:
        stop.set()
        t.join(30)
        writer.kill()
        jm.stop()
        py.close()
    both = acked + _java_acked(jm)
    assert sorted(sha for _, _, sha, _, _ in both) == sorted(_sha(_record(i)) for i in range(n))
    assert len({p for p, *_ in both}) == n                        # each once
    released = {int(p) for _, p in jm.of("released")}
    assert released and all(d == (2 if p in released else 1) for p, _, _, d, _ in both)
    java_segments = {p // SEG for p, *_ in _java_acked(jm)}
    archived = set(list_archived(arch))
    assert {0, 1, 2, 3} & java_segments           # archived before it joined
    assert archived & java_segments - {0, 1, 2, 3}  # moved while it read
    assert max(archived) >= 8 - after             # every full segment but `after` moved


def _framed_message(i):
    rng = random.Random(i)
    n = rng.choice([0, 5, 300, 1000, 7000, 20_000]) if i % 4 else rng.randrange(100, 4000)
    return rng.randbytes(n)


def _topic(i):
    return None if i % 3 == 0 else "jobs" if i % 3 == 1 else "other"


def test_framed_messages_in_archived_segments_are_taken_whole_while_segments_move(tmp_path,
                                                                                     java):
    # The archivers' check that a segment is settled does not read frames yet (it reads a
    # continuation slot's bytes as a status word): the segments are moved here by the
    # archiver's own step, move_segment, one by one while the members read.
    hot, arch = str(tmp_path / "bus"), str(tmp_path / "archive")
    count = 160
    with RollingBusWriter(hot, 1 << 16, 248, frames=True) as w:
        for i in range(count):
            w.write(_framed_message(i), topic=_topic(i))
    meta = read_meta(os.path.join(hot, "bus.meta"))
    cfg = settle_meta(hot, meta, check_archive(arch, 0, None, "zstd", None, None, None,
                                               0, 0, None))
    prepare_archive(hot, read_meta(os.path.join(hot, "bus.meta")), cfg)
    segments = list_segments(hot)
    assert len(segments) >= 8
    for k in segments[:3]:
        move_segment(hot, cfg, k, 1 << 16)
    py = GroupReader(hot, "g", lease=LEASE_MS // 1000)
    jm = JavaMember(hot, "g")
    acked, stop = [], threading.Event()
    t = threading.Thread(target=_python_consume, args=(py, acked, stop))
    try:
        assert _wait(lambda: len(jm.of("acked")) >= 5), jm.lines[-3:]     # from the archive
        t.start()
        for k in segments[3:-1]:
            move_segment(hot, cfg, k, 1 << 16)
            threading.Event().wait(0.05)
        assert _wait(lambda: len(acked) + len(jm.of("acked")) >= count), \
            (len(acked), len(jm.of("acked")), jm.lines[-3:])
    finally:
        stop.set()
        if t.is_alive():
            t.join(30)
        jm.stop()
        py.close()
    both = acked + _java_acked(jm)
    expected = sorted((len(m), _sha(m), _topic(i) or "")
                      for i, m in enumerate(map(_framed_message, range(count))))
    assert sorted((n, sha, t or "") for _, n, sha, _, t in both) == expected   # once, whole
    assert len({p for p, *_ in both}) == count
    assert sorted(list_archived(arch)) == segments[:-1]
    java_acked = _java_acked(jm)
    assert any(n > 248 and p // (1 << 16) in segments[:3] for p, n, *_ in java_acked)


def test_a_java_member_gets_the_gap_python_gets_for_segments_gone_from_both_tiers(tmp_path,
                                                                                     java):
    hot, arch = str(tmp_path / "bus"), str(tmp_path / "archive")
    n = PER_SEG * 6 + 3
    with RollingBusWriter(hot, SEG, RS, archive=arch, archive_after=0, compress="lz4",
                          archive_retain_segments=2) as w:
        w.write(_record(0))
        GroupReader(hot, "java", lease=LEASE_MS // 1000).close()     # both start at record 0
        GroupReader(hot, "python", lease=LEASE_MS // 1000).close()
        for i in range(1, n):
            w.write(_record(i))
        assert w.archiver.wait_idle(10)
    assert sorted(list_archived(arch)) == [4, 5]   # 0..3 removed by the archive's retention
    with GroupReader(hot, "python", lease=LEASE_MS // 1000) as py, pytest.raises(BusGapError) as gap:
        py.read(0)
    jm = JavaMember(hot, "java")
    try:
        assert _wait(lambda: len(jm.of("acked")) >= n - 4 * PER_SEG), jm.lines[-3:]
    finally:
        jm.stop()
    e = gap.value
    assert (e.lost_from, e.lost_to, e.lost) == (FIRST, 4 * SEG + FIRST, 4 * PER_SEG)
    assert [[int(x) for x in line[1:]] for line in jm.of("gap")] == \
        [[e.lost_from, e.lost_to, e.lost]]
    assert "archive's retention" in str(e)
    got = sorted(_java_acked(jm))
    assert [sha for _, _, sha, _, _ in got] == [_sha(_record(i)) for i in range(4 * PER_SEG, n)]
