"""Python and Java share one consumer registry (issue 23): a name Java registers and commits is listed
by ``mappedbus_py.consumers``, and the other way round; a name held on one side is refused on the
other, naming the holder's pid; a rolling bus's consumer policy written by either side's bus.meta is
read by the other byte for byte, and a consumer of one side holds back a blocking writer of the other.
The Java side is ``ConsumerChild`` (interop/src/test/java), one JVM per call.
"""
import os
import struct
import subprocess
import time

import pytest

import mappedbus_py
from mappedbus_py import (ConsumerInUseError, MappedBusReader, MappedBusWriter, RollingBusReader,
                          RollingBusWriter, jvm)
from mappedbus_py.formats import layout
from mappedbus_py.formats.busmeta import BusMeta
from support import procs

pytestmark = pytest.mark.java

TESTS_JAR = (jvm.pathlib.Path(os.environ["MAPPEDBUS_PY_JARS"]) if os.environ.get("MAPPEDBUS_PY_JARS")
             else jvm.BUILD) / "mappedbuspy-tests.jar"
CHILD = "io.mappedbuspy.ConsumerChild"
FILE_SIZE, RECORD_SIZE = 1 << 16, 8
SLOT = layout.slot_size(RECORD_SIZE)
SEGMENT_SIZE = 8 + 16 * SLOT        # 16 records a segment


@pytest.fixture(scope="module")
def java():
    procs.java_or_skip()
    if not TESTS_JAR.is_file():
        pytest.skip(f"{TESTS_JAR} is missing: run `bash interop/build.sh`")


def command(*args):
    return jvm.java_command(CHILD, *args, classpath=[TESTS_JAR], jvm_args=("-Xmx64m", "-XX:+UseSerialGC"))


def run(*args):
    """Runs ConsumerChild to its end; its stdout lines."""
    proc = subprocess.run(command(*args), capture_output=True, text=True, timeout=120)
    return proc.stdout.splitlines()


class Holder:
    """A Java process holding a consumer (ConsumerChild hold), told to commit or to let go."""

    def __init__(self, path, name):
        self.proc = subprocess.Popen(command("hold", path, name), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().split()
        assert line[:1] == ["held"], (line, self.proc.stderr.read() if line[:1] != ["held"] else "")
        self.pid, self.position = int(line[1]), int(line[2])

    def commit(self, position):
        self.proc.stdin.write(f"commit {position}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "committed"

    def close(self):
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


def value(v):
    return struct.pack("<q", v)


@pytest.fixture
def bus(tmp_path):
    path = str(tmp_path / "bus")
    with MappedBusWriter(path, FILE_SIZE, RECORD_SIZE) as w:
        for v in range(10):
            w.write(value(v))
    return path


def by_name(path):
    return {c.name: c for c in mappedbus_py.consumers(path)}


def java_list(path):
    """ConsumerChild list: {name: (position, lag, alive, pid, expired)}."""
    out = {}
    for line in run("list", path):
        name, pos, lag, alive, pid, expired = line.split()
        out[name] = (int(pos), int(lag), alive == "true", int(pid), expired == "true")
    return out


def test_java_commits_python_sees(java, bus):
    h = Holder(bus, "jbilling")
    assert h.position == 8, "a new consumer starts at the oldest record"
    h.commit(8 + 4 * SLOT)
    c = by_name(bus)["jbilling"]
    assert (c.position, c.lag, c.alive, c.pid, c.expired) == (8 + 4 * SLOT, 6, True, h.pid, False)
    h.close()
    c = by_name(bus)["jbilling"]
    assert not c.alive and c.position == 8 + 4 * SLOT
    with MappedBusReader(bus, consumer="jbilling") as r:
        rec = r.read(timeout=5)
        assert struct.unpack("<q", rec.data[:8])[0] == 4, "Python goes on where Java committed"
        r.commit()
    assert java_list(bus)["jbilling"][:2] == (8 + 5 * SLOT, 5), "and Java sees Python's commit"


def test_python_commits_java_sees(java, bus):
    with MappedBusReader(bus, consumer="pybilling") as r:
        for _ in range(3):
            r.read(timeout=5)
        r.commit()
        seen = java_list(bus)["pybilling"]
        assert seen == (8 + 3 * SLOT, 7, True, os.getpid(), False)
        py = by_name(bus)["pybilling"]
        assert (py.position, py.lag, py.alive, py.pid, py.expired) == seen
    h = Holder(bus, "pybilling")
    assert h.position == 8 + 3 * SLOT, "Java opens where Python committed"
    h.close()


def test_a_name_held_in_python_is_refused_in_java(java, bus):
    with MappedBusReader(bus, consumer="x"):
        out = run("hold", bus, "x")
        assert out and out[0].startswith("error ConsumerInUseException"), out
        assert f"pid {os.getpid()}" in out[0]
    h = Holder(bus, "x")                  # released by the Python reader's close
    h.close()


def test_a_name_held_in_java_is_refused_in_python(java, bus):
    h = Holder(bus, "y")
    try:
        with pytest.raises(ConsumerInUseError) as e:
            MappedBusReader(bus, consumer="y").open()
        assert str(h.pid) in str(e.value)
        with pytest.raises(ConsumerInUseError):
            mappedbus_py.remove_consumer(bus, "y")
    finally:
        h.close()
    with MappedBusReader(bus, consumer="y") as r:
        assert r.position == 8
    mappedbus_py.remove_consumer(bus, "y")
    assert "y" not in java_list(bus)


def test_consumer_policy_in_bus_meta_is_one_format(java, tmp_path):
    made_by_java = str(tmp_path / "j")
    assert run("create", made_by_java, SEGMENT_SIZE, RECORD_SIZE, 3, "block", 1500) == ["created"]
    data = open(os.path.join(made_by_java, layout.META_FILE), "rb").read()
    meta = BusMeta.decode(data)
    assert meta.encode() == data
    assert (meta.max_consumer_lag, meta.on_consumer_lag, meta.consumer_block_ms) == (3, "block", 1500)
    made_by_python = str(tmp_path / "p")
    with RollingBusWriter(made_by_python, SEGMENT_SIZE, RECORD_SIZE, max_consumer_lag=2,
                          on_consumer_lag="expire", consumer_block_timeout=0.25):
        pass
    assert run("meta", os.path.join(made_by_python, layout.META_FILE)) == ["same", "2 expire 250"]
    single = str(tmp_path / "s")
    with MappedBusWriter(single, FILE_SIZE, RECORD_SIZE):
        pass
    assert run("meta", single + layout.META_SUFFIX) == ["same", f"0 expire {layout.DEFAULT_CONSUMER_BLOCK_MS}"]


def test_rolling_consumers_hold_writers_of_the_other_language(java, tmp_path):
    d = str(tmp_path / "r")
    with RollingBusWriter(d, SEGMENT_SIZE, RECORD_SIZE, retain_segments=1, max_consumer_lag=1,
                          on_consumer_lag="block", consumer_block_timeout=0.2):
        pass
    # A Python consumer at the start holds a Java writer: two segments, then back-pressure.
    with RollingBusReader(d, consumer="py") as r:
        out = run("write", d, 100)
        assert out == [f"backpressure 32 py 8 32"], out
        assert java_list(d)["py"] == (8, 32, True, os.getpid(), False)
        for _ in range(16):
            r.read(timeout=5)
        r.commit()
    # A Java consumer (registered now, at the oldest record) holds a Python writer the same way.
    mappedbus_py.remove_consumer(d, "py")
    h = Holder(d, "java")
    try:
        with RollingBusWriter(d) as w:
            with pytest.raises(mappedbus_py.BusBackPressureError) as e:
                for v in range(100):
                    w.write(value(v))
            assert "java" in str(e.value)
        assert by_name(d)["java"].alive
    finally:
        h.close()


def test_a_java_holder_killed_and_not_reaped_is_dead_to_both_languages(java, bus):
    # liveness is the kernel's OFD lock on the entry (both languages take and probe it), never
    # the pid: a SIGKILLed JVM that is still a zombie holds nothing
    h = Holder(bus, "k")
    assert by_name(bus)["k"].alive and java_list(bus)["k"][2]
    h.proc.kill()
    deadline = time.monotonic() + 30
    while True:
        with open(f"/proc/{h.proc.pid}/stat") as f:
            zombie = f.read().rsplit(")", 1)[1].split()[0] == "Z"
        if zombie and os.listdir(f"/proc/{h.proc.pid}/task") == [str(h.proc.pid)]:
            break
        assert time.monotonic() < deadline
        time.sleep(0.01)
    try:
        assert not by_name(bus)["k"].alive
        assert java_list(bus)["k"][2] is False
        with MappedBusReader(bus, consumer="k"):          # taken at once by Python
            out = run("hold", bus, "k")                   # and refused to Java while held
            assert out and out[0].startswith("error ConsumerInUseException"), out
    finally:
        h.proc.wait()
