"""Python and Java members share one work group of a framed bus (issue 36; docs/groups.md,
"Framed buses"; protocol: mappedbus_py/groups/_group_frames.h, run by both through one C header):
Python writers write messages of 0 bytes to several slots (and, on a rolling bus, messages that
meet a segment's end) with topics; a Python member and a Java member (GroupFramesChild, in its own
JVM) take them whole, each acked exactly once across both, byte-identical, with its topic; a Java
member SIGKILLed while it holds multi-slot messages loses them whole to the Python member at once
(its liveness lock, not the lease: the lease here is a minute), and a killed Python member's
message goes whole to a Java member."""
import hashlib
import os
import random
import signal
import struct
import subprocess
import sys
import threading

import pytest

import mappedbus_py
from mappedbus_py import MappedBusWriter, RollingBusWriter, jvm
from mappedbus_py.groups import GroupReader
from tests.support import procs

pytestmark = pytest.mark.java

TESTS_JAR = (jvm.pathlib.Path(os.environ["MAPPEDBUS_PY_JARS"]) if os.environ.get("MAPPEDBUS_PY_JARS")
             else jvm.BUILD) / "mappedbuspy-tests.jar"
CHILD = "io.mappedbuspy.GroupFramesChild"
RECORD = 248                         # slots of 256 bytes
SEGMENT = 1 << 18                    # a rolling bus's: messages of up to 200 KB meet its end often
LEASE_MS = 60_000                    # far longer than any test: redelivery here is liveness


@pytest.fixture(scope="module")
def java():
    procs.java_or_skip()
    if not TESTS_JAR.is_file():
        pytest.skip(f"{TESTS_JAR} is missing: run `bash interop/build.sh`")
    lib = jvm.BUILD / "libmappedbuswake.so"
    if not lib.is_file():
        pytest.skip(f"{lib} is missing: run `bash interop/build_native.sh`")


class JavaMember:
    """A Java member in its own JVM (GroupFramesChild); its lines, split, gathered by a thread
    once ``gather()`` is called."""

    def __init__(self, *args):
        cmd = jvm.java_command(CHILD, *map(str, args), classpath=[TESTS_JAR],
                               jvm_args=("-Xmx256m", "-XX:+UseSerialGC"))
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        first = self.proc.stdout.readline().split()
        assert first[:1] == ["member"], (first, "" if first else self.proc.stderr.read())
        self.lines = []
        self.thread = threading.Thread(target=self._gather, daemon=True)

    def gather(self):
        self.thread.start()

    def _gather(self):
        for line in self.proc.stdout:
            self.lines.append(line.split())

    def read_until(self, word):
        """Lines up to and including the first starting with ``word`` (read in this thread)."""
        out = []
        for line in self.proc.stdout:
            out.append(line.split())
            assert out[-1][0] != "error", out[-1]
            if out[-1][0] == word:
                return out
        raise AssertionError(f"no {word!r} line: {out} {self.proc.stderr.read()}")

    def acked(self):
        return [line for line in list(self.lines) if line[0] == "acked"]

    def stop(self):
        self.proc.stdin.write("stop\n")
        self.proc.stdin.flush()
        assert self.proc.wait(60) == 0, (self.lines[-3:], self.proc.stderr.read())
        self.thread.join(10)
        assert not [line for line in self.lines if line[0] in ("error", "lost")], self.lines

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


def _message(i, n):
    # message i of n bytes: its index first (when it fits), then bytes of a seeded generator
    body = random.Random(i).randbytes(n)
    return (struct.pack("<q", i) + body[8:]) if n >= 8 else body


def _sha(b):
    return hashlib.sha256(b).hexdigest()


def _topic(i):
    return None if i % 3 == 0 else "jobs" if i % 3 == 1 else "other"


def _sizes(count, seed):
    rng = random.Random(seed)
    sizes = [0, 1, 8, RECORD - 16, 256, 257, 3 * 256, 150_000, 150_000, 200_000]
    while len(sizes) < count:
        r = rng.random()
        sizes.append(rng.randrange(0, 64) if r < 0.4 else rng.randrange(64, 4 * 256)
                     if r < 0.75 else rng.randrange(4 * 256, 64 << 10) if r < 0.95
                     else rng.randrange(64 << 10, 200_000))
    rng.shuffle(sizes)
    return sizes


def _writer(bus, rolling):
    if rolling:
        return RollingBusWriter(bus, segment_size=SEGMENT, record_size=RECORD, frames=True)
    return MappedBusWriter(bus, file_size=32 << 20, record_size=RECORD, frames=True)


def _python_consume(member, acked, stop):
    while not stop.is_set():
        rec = member.read(0.02)
        if rec is not None and member.ack(rec):
            acked.append((rec.position, len(rec.payload), _sha(rec.payload), rec.deliveries,
                          rec.topic))
            stop.wait(0.002)            # some work: the Java member gets its share


@pytest.mark.parametrize("rolling", [False, True])
def test_python_and_java_members_ack_every_message_once_whole(tmp_path, java, rolling):
    bus = str(tmp_path / "bus")
    sizes = _sizes(240, seed=21)
    expected = sorted((n, _sha(_message(i, n)), _topic(i)) for i, n in enumerate(sizes))
    with _writer(bus, rolling) as w:
        py = GroupReader(bus, "g", lease=LEASE_MS // 1000)
        jm = JavaMember("consume", bus, "g", LEASE_MS)
        jm.gather()
        acked, stop = [], threading.Event()
        t = threading.Thread(target=_python_consume, args=(py, acked, stop))
        t.start()
        try:
            for i, n in enumerate(sizes):
                w.write(_message(i, n), topic=_topic(i))
                if i % 16 == 15:
                    threading.Event().wait(0.003)       # bursts: both members get to run
            for _ in range(2000):
                if len(acked) + len(jm.acked()) >= len(sizes):
                    break
                threading.Event().wait(0.005)
        finally:
            stop.set()
            t.join(30)
            jm.stop()
            py.close()
    java_acked = [(int(p), int(n), sha, int(d), None if topic == "-" else topic)
                  for _, p, n, sha, d, topic in jm.acked()]
    both = acked + java_acked
    assert sorted((n, sha, topic) for _, n, sha, _, topic in both) == expected   # once, whole
    assert len({p for p, *_ in both}) == len(sizes)
    assert all(d == 1 for *_, d, _ in both)
    assert acked and java_acked                       # shared, not all taken by one side
    assert any(n > RECORD for _, n, *_ in java_acked)         # multi-slot ones to Java too
    if rolling:
        assert max(p for p, *_ in both) // SEGMENT >= 5     # over several segments


@pytest.mark.parametrize("rolling", [False, True])
def test_a_killed_java_members_messages_go_whole_to_a_python_member(tmp_path, java, rolling):
    bus = str(tmp_path / "bus")
    # the first three (the ones the Java member takes): multi-slot; on a rolling bus the second
    # meets the first segment's end and is written whole in the next
    sizes = [150_000, 150_000, 5000, 0, 7, 300, 3 * 256, 20_000, 1, 64]
    msgs = [_message(i, n) for i, n in enumerate(sizes)]
    with _writer(bus, rolling) as w:
        for i, m in enumerate(msgs):
            w.write(m, topic=_topic(i))
    py = GroupReader(bus, "g", lease=LEASE_MS // 1000)
    jm = JavaMember("hold", bus, "g", LEASE_MS, 3)
    try:
        held = {int(p): (int(n), sha, None if topic == "-" else topic)
                for _, p, n, sha, d, topic in jm.read_until("holding")[:-1]}
        assert sorted(held.values()) == sorted((n, _sha(msgs[i]), _topic(i))
                                               for i, n in enumerate(sizes[:3]))
        mine = []
        while (rec := py.read(0)) is not None:          # the rest, while the Java member lives
            mine.append(rec)
        assert sorted(r.payload for r in mine) == sorted(msgs[3:])
        jm.kill()
        back = [py.read(5.0) for _ in held]             # at the next look (1 ms), not the lease's end
        assert all(r is not None and r.deliveries == 2 for r in back)
        assert {r.position: (len(r.payload), _sha(r.payload), r.topic) for r in back} == held
        assert sorted(r.payload for r in back) == sorted(msgs[:3])     # whole, byte-identical
        if rolling:
            assert len({p // SEGMENT for p in held}) == 2
        assert py.read(0) is None
        assert all(py.ack(r) for r in mine + back)
        assert not any(py.ack(r) for r in back)        # once
        info, = mappedbus_py.groups(bus)
        assert (info.acked, info.pending, info.redelivered) == (len(sizes), 0, 3)
    finally:
        jm.kill()
        py.close()


PY_CHILD = [sys.executable,
            os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support", "group_child.py")]


def test_a_killed_python_members_message_goes_whole_to_a_java_member(tmp_path, java):
    bus = str(tmp_path / "bus")
    msgs = [_message(0, 100_000), b"", _message(2, 3000), b"x"]       # the first: 391 slots
    with _writer(bus, False) as w:
        for i, m in enumerate(msgs):
            w.write(m, topic=_topic(i))
    holder = subprocess.Popen(PY_CHILD + [bus, "g", str(tmp_path / "log"), "stall",
                                          '{"lease": %d}' % (LEASE_MS // 1000)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().startswith("ready")
        held = int(holder.stdout.readline().split()[1])              # "got POSITION"
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
    jm = JavaMember("consume", bus, "g", LEASE_MS)
    jm.gather()
    try:
        for _ in range(1000):
            if len(jm.acked()) >= len(msgs):
                break
            threading.Event().wait(0.005)
    finally:
        jm.stop()
    got = {int(p): (int(n), sha, int(d), None if topic == "-" else topic)
           for _, p, n, sha, d, topic in jm.acked()}
    assert len(jm.acked()) == len(got) == len(msgs)                  # each once
    assert got[held] == (len(msgs[0]), _sha(msgs[0]), 2, _topic(0))  # taken back whole
    assert sorted((n, sha, t) for n, sha, _, t in got.values()) == \
        sorted((len(m), _sha(m), _topic(i)) for i, m in enumerate(msgs))
    info, = mappedbus_py.groups(bus)
    assert (info.acked, info.pending) == (len(msgs), 0)
