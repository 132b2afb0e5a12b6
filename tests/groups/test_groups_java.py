"""Python and Java members share one work group (issue 35; docs/groups.md, "Java members"): the
Java member (io.mappedbuspy.GroupReader, over _group.h through the JNI library) and the Python
one take records from one group file, each record acked once across both languages; a member of
either language SIGKILLed while holding records loses them to the members of the other at once
(its liveness lock, not the lease: the lease here is a minute). The Java side is ``GroupChild``
(interop/src/test/java), one JVM per member; the Python holder is tests/group_child.py."""
import os
import signal
import struct
import subprocess
import sys
import threading

import pytest

import mappedbus_py
from mappedbus_py import MappedBusWriter, RollingBusReader, RollingBusWriter, jvm
from mappedbus_py.formats import layout
from mappedbus_py.errors import BusFullError
from mappedbus_py.groups import GroupReader
from tests.support import procs

pytestmark = pytest.mark.java

TESTS_JAR = (jvm.pathlib.Path(os.environ["MAPPEDBUS_PY_JARS"]) if os.environ.get("MAPPEDBUS_PY_JARS")
             else jvm.BUILD) / "mappedbuspy-tests.jar"
CHILD = "io.mappedbuspy.GroupChild"
PY_CHILD = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support",
                                         "group_child.py")]
RECORD = 8
SLOT = layout.slot_size(RECORD)
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
    """A Java member in its own JVM (GroupChild), its stdout lines gathered by a thread."""

    def __init__(self, *args):
        cmd = jvm.java_command(CHILD, *map(str, args), classpath=[TESTS_JAR],
                               jvm_args=("-Xmx64m", "-XX:+UseSerialGC"))
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        first = self.proc.stdout.readline().split()
        assert first[:1] == ["member"], (first, "" if first else self.proc.stderr.read())
        self.member = int(first[1])
        self.lines = []
        self.thread = threading.Thread(target=self._gather, daemon=True)

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

    def stop(self):
        self.proc.stdin.write("stop\n")
        self.proc.stdin.flush()
        assert self.proc.wait(60) == 0, self.proc.stderr.read()
        self.thread.join(10)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


def value(i):
    return struct.pack("<q", i)


def python_consume(member, acked, stop):
    """Acks what ``member`` gets until the bus's end (single file) or ``stop`` is set."""
    while not stop.is_set():
        try:
            rec = member.read(0.02)
        except BusFullError:
            return
        if rec is not None:
            v = struct.unpack_from("<q", rec.payload)[0]
            if member.ack(rec):
                acked.append(v)
                # Some work, as a member does: without it this thread, beside the writer, could
                # take every record before a cold JVM (seconds under load) takes its first.
                stop.wait(0.002)


def check_each_acked_once(py_acked, java):
    java_acked = [int(line[1]) for line in java.lines if line[0] == "acked"]
    assert not [line for line in java.lines if line[0] == "error"], java.lines
    both = py_acked + java_acked
    assert len(both) == len(set(both)), "a record acked twice"
    return set(both), java_acked


def test_python_and_java_members_ack_every_record_once(tmp_path, java):
    # A single-file bus filled to its end while a Python and a Java member consume it: both stop
    # at its end (BusFullError, EOFException) once every record is done.
    bus = str(tmp_path / "bus")
    file_size = 1 << 16
    n = (file_size - layout.FIRST_RECORD_OFFSET) // SLOT
    with MappedBusWriter(bus, file_size, RECORD) as w:
        py = GroupReader(bus, "g", lease=LEASE_MS // 1000)
        jm = JavaMember("consume", bus, "g", LEASE_MS)
        jm.thread.start()
        acked, stop = [], threading.Event()
        t = threading.Thread(target=python_consume, args=(py, acked, stop))
        t.start()
        for i in range(n):
            w.write(value(i))
            if i % 64 == 63:
                threading.Event().wait(0.002)          # bursts: both members get to run
    t.join(60)
    assert not t.is_alive()
    assert jm.proc.wait(60) == 0, jm.proc.stderr.read()
    jm.thread.join(10)
    assert jm.lines[-1] == ["done"]
    done, java_acked = check_each_acked_once(acked, jm)
    assert done == set(range(n))
    assert acked and java_acked                          # shared, not all taken by one side
    py.close()


def test_rolling_bus_shared_across_segments(tmp_path, java):
    bus = str(tmp_path / "rbus")
    n = 300
    with RollingBusWriter(bus, layout.FIRST_RECORD_OFFSET + 16 * SLOT, RECORD) as w:
        w.write(value(0))
        py = GroupReader(bus, "g", lease=LEASE_MS // 1000)
        jm = JavaMember("consume", bus, "g", LEASE_MS)
        jm.thread.start()
        acked, stop = [], threading.Event()
        t = threading.Thread(target=python_consume, args=(py, acked, stop))
        t.start()
        for i in range(1, n):
            w.write(value(i))
            if i % 16 == 15:
                threading.Event().wait(0.002)
        for _ in range(3000):
            if len(acked) + sum(1 for line in list(jm.lines) if line[0] == "acked") >= n:
                break
            threading.Event().wait(0.01)
        stop.set()
        t.join(30)
        jm.stop()
    done, java_acked = check_each_acked_once(acked, jm)
    assert done == set(range(n))
    py.close()


def test_a_killed_java_members_records_go_to_a_python_member(tmp_path, java):
    bus = str(tmp_path / "bus")
    with MappedBusWriter(bus, 1 << 16, RECORD) as w:
        for i in range(10):
            w.write(value(i))
    py = GroupReader(bus, "g", lease=LEASE_MS / 1000)
    jm = JavaMember("hold", bus, "g", LEASE_MS, 3)
    held = [int(line[1]) for line in jm.read_until("holding") if line[0] == "held"]
    assert len(held) == 3
    mine = []
    while (rec := py.read(0)) is not None:          # the rest, while the Java member lives
        mine.append(rec)
    assert sorted(struct.unpack_from("<q", r.payload)[0] for r in mine) == \
        sorted(set(range(10)) - set(held))
    jm.kill()
    back = [py.read(5.0) for _ in held]             # at the next look (1 ms), not the lease's end
    assert all(r is not None and r.deliveries == 2 for r in back)
    assert sorted(struct.unpack_from("<q", r.payload)[0] for r in back) == sorted(held)
    assert all(py.ack(r) for r in mine + back)
    py.close()


def test_a_killed_python_members_records_go_to_a_java_member(tmp_path, java):
    bus = str(tmp_path / "bus")
    with MappedBusWriter(bus, 1 << 16, RECORD) as w:
        for i in range(5):
            w.write(value(i))
    holder = subprocess.Popen(PY_CHILD + [bus, "g", str(tmp_path / "log"), "stall",
                                          '{"lease": %d}' % (LEASE_MS // 1000)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().startswith("ready")
    got = int(holder.stdout.readline().split()[1])              # "got POSITION"
    held = (got - layout.FIRST_RECORD_OFFSET) // SLOT
    holder.send_signal(signal.SIGKILL)
    holder.wait(10)
    jm = JavaMember("consume", bus, "g", LEASE_MS)
    jm.thread.start()
    for _ in range(3000):
        if sum(1 for line in list(jm.lines) if line[0] in ("acked", "error")) >= 5:
            break
        threading.Event().wait(0.01)
    jm.stop()
    acked = {int(line[1]): int(line[2]) for line in jm.lines if line[0] == "acked"}
    assert sorted(acked) == list(range(5)), jm.lines
    assert acked[held] == 2                          # taken back from the dead Python member
    assert all(d == 1 for v, d in acked.items() if v != held)


def test_a_java_reject_is_a_dead_letter_python_reads(tmp_path, java):
    bus = str(tmp_path / "bus")
    with MappedBusWriter(bus, 1 << 16, RECORD) as w:
        w.write(value(41))
        w.write(value(42))
    with GroupReader(bus, "g", lease=LEASE_MS // 1000) as py:
        first = py.read(0)
        jm = JavaMember("reject", bus, "g", LEASE_MS)
        assert jm.read_until("rejected")[-1] == ["rejected", "42", "true"]
        assert jm.proc.wait(60) == 0
        assert py.ack(first)
    dead = os.path.join(bus + layout.GROUP_DIR_SUFFIX, "g" + layout.GROUP_DEAD_SUFFIX)
    with RollingBusReader(dead) as r:
        rec = r.read(0)
        assert r.read(0) is None
    pos, deliveries, meta = struct.unpack_from("<qii", rec.data)
    name = rec.data[layout.GROUP_DEAD_NAME_OFFSET:layout.GROUP_DEAD_HEADER_SIZE].rstrip(b"\0")
    assert (pos, deliveries, meta, name) == (layout.FIRST_RECORD_OFFSET + SLOT, 1, RECORD, b"g")
    assert rec.data[layout.GROUP_DEAD_HEADER_SIZE:] == value(42)
    info, = mappedbus_py.groups(bus)
    assert (info.rejected, info.dead_lettered, info.acked, info.pending) == (1, 1, 1, 0)
