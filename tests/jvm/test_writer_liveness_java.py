"""Writer liveness across languages (issue 33): Java writers hold a slot in the writers file and
publish their claims; Java readers ask it. A Java writer killed between its reservation and its
commit costs a waiting reader (Python or Java) no timeout; one stopped 5 s loses nothing; a Java
process reserving without a claim (as the Java original does) still costs the timeout. Real
processes, SIGKILL and SIGSTOP; WriterLivenessChild (interop/src/test) is the Java side."""
import os
import signal
import subprocess
import sys
import time

import numpy
import pytest

from mappedbus_py import MappedBusReader, MappedBusWriter, jvm
from mappedbus_py.formats.layout import WRITERS_SUFFIX
from support import procs
from tests.core.test_writer_liveness import (BATCH_WRITER, RECORD, ROWS, SIZE, _python, _stop_mid_batch)

pytestmark = pytest.mark.java

TESTS_JAR = (jvm.pathlib.Path(os.environ["MAPPEDBUS_PY_JARS"]) if os.environ.get("MAPPEDBUS_PY_JARS")
             else jvm.BUILD) / "mappedbuspy-tests.jar"
CHILD = "io.mappedbuspy.WriterLivenessChild"
MARKER = 7777777


@pytest.fixture(scope="module")
def java():
    procs.java_or_skip()
    if not TESTS_JAR.is_file():
        pytest.skip(f"{TESTS_JAR} is missing: run `bash interop/build.sh`")
    if jvm.wake_library() is None:
        pytest.skip("no libmappedbuswake.so beside the jar: Java takes no liveness locks without it")


@pytest.fixture
def bus(tmp_path):
    return str(tmp_path / "bus")


def _java(*args):
    cmd = jvm.java_command(CHILD, *map(str, args), classpath=[TESTS_JAR],
                           jvm_args=("-Xmx64m", "-XX:+UseSerialGC"))
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _int(v):
    return numpy.int64(v).tobytes()


def _java_holder(bus):
    """A Java writer that wrote -1 and holds one more slot reserved (claim published)."""
    MappedBusWriter(bus, 1 << 20, RECORD).open().close()
    w = _java("hold", bus)
    line = w.stdout.readline().split()
    assert line[:1] == ["reserved"] and line[2] == "native", line
    return w


@pytest.mark.parametrize("reader", ["python", "java"])
def test_a_java_writer_killed_after_its_reservation_costs_no_timeout(java, bus, reader):
    w = _java_holder(bus)
    other = MappedBusWriter(bus).open()           # holds another slot: takes over nothing
    try:
        if reader == "python":
            r = MappedBusReader(bus).open()
            assert numpy.frombuffer(r.read(1).payload[:8], "<i8")[0] == -1
            assert r.read(0.1) is None               # the reserved slot: alive, waited for
            w.kill()
            w.wait()
            other.write(_int(MARKER))
            start = time.monotonic()
            rec = r.read(timeout=1.9)
            took = time.monotonic() - start
            assert rec is not None and numpy.frombuffer(rec.payload[:8], "<i8")[0] == MARKER
            assert took < 1.0 and r.rollbacks == 1
            r.close()
        else:
            jr = _java("read", bus, MARKER)
            assert jr.stdout.readline().strip() == "ready"
            time.sleep(0.3)                          # it reads -1, then waits on the reserved slot
            w.kill()
            w.wait()
            other.write(_int(MARKER))
            start = time.monotonic()
            out = jr.stdout.readline().split()
            took = time.monotonic() - start
            jr.wait(30)
            assert out == ["END", "2", "1", "1", "true"], out
            assert took < 1.0, took
    finally:
        other.close()
        if w.poll() is None:
            w.kill()


@pytest.mark.parametrize("reader", ["python", "java"])
def test_a_java_writer_stopped_5s_after_its_reservation_loses_nothing(java, bus, reader):
    w = _java_holder(bus)
    jr = None
    try:
        if reader == "java":
            jr = _java("read", bus, 42)
            assert jr.stdout.readline().strip() == "ready"
        else:
            r = MappedBusReader(bus).open()
            assert r.read(1) is not None
        os.kill(w.pid, signal.SIGSTOP)
        if reader == "python":
            end = time.monotonic() + 5.0
            while time.monotonic() < end:
                assert r.read(0.1) is None
            assert r.rollbacks == 0 and r.skipped == 0
        else:
            time.sleep(5.0)
        os.kill(w.pid, signal.SIGCONT)
        w.stdin.write("commit\n")
        w.stdin.flush()
        assert w.stdout.readline().split() == ["committed", "true"]
        if reader == "python":
            rec = r.read(5)
            assert numpy.frombuffer(rec.payload[:8], "<i8")[0] == 42
            assert r.rollbacks == 0 and r.skipped == 0
            r.close()
        else:
            assert jr.stdout.readline().split() == ["END", "2", "0", "0", "true"]
    finally:
        for p in (w, jr):
            if p is not None and p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()


def test_a_java_reader_waits_out_a_python_writer_stopped_5s_mid_batch(java, bus):
    MappedBusWriter(bus, SIZE, RECORD).open().close()
    child = _python(BATCH_WRITER, bus, ROWS, "single")
    assert child.stdout.readline().strip() == "ready"
    watcher = MappedBusReader(bus).open()             # only to see when the batch is reserved
    assert watcher.read(1) is not None
    jr = _java("read", bus, ROWS - 1)
    try:
        assert jr.stdout.readline().strip() == "ready"
        if _stop_mid_batch(child, watcher) is None:
            pytest.skip("the batch was over before the writer stopped")
        time.sleep(5.0)
        assert jr.poll() is None
        os.kill(child.pid, signal.SIGCONT)
        out = jr.stdout.readline().split()
        assert out == ["END", str(ROWS + 1), "0", "0", "true"], " ".join(out)
        assert child.communicate(timeout=30)[0].split() == ["committed", str(ROWS)]
    finally:
        watcher.close()
        for p in (child, jr):
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()


def test_a_java_process_reserving_without_a_claim_still_costs_the_timeout(java, bus):
    # BusTool allocate-and-hang takes a slot by fetch-and-add alone, as the Java original's writer
    # does: no claim, so its slot is unknown, alive or not, and readers wait their timeout.
    procs.java_or_skip()
    MappedBusWriter(bus, 1 << 20, RECORD).open().close()
    p = procs.start_java("allocate-and-hang", bus, 1 << 20, RECORD)
    try:
        assert p.stdout.readline().startswith("allocated")
        with MappedBusReader(bus, timeout=0.3) as r, MappedBusWriter(bus) as w:
            w.write(_int(MARKER))
            start = time.monotonic()
            rec = r.read(5)
            assert numpy.frombuffer(rec.payload[:8], "<i8")[0] == MARKER
            assert time.monotonic() - start >= 0.3 and r.rollbacks == 1
    finally:
        p.kill()
        p.wait()


def test_the_next_java_writer_rolls_back_what_a_killed_one_left(java, bus):
    w = _java_holder(bus)                              # slot 0, one slot reserved at 8 + 16
    w.kill()
    w.wait()
    tool = procs.start_java("write-bytes", bus, 1 << 20, RECORD, 1, 7)   # takes slot 0 over
    assert tool.wait(60) == 0
    with MappedBusReader(bus, timeout=float("inf")) as r:   # never rolls back by itself
        got = [r.read(5) for _ in range(2)]
        assert all(rec is not None for rec in got)
        assert numpy.frombuffer(got[0].payload[:8], "<i8")[0] == -1
        assert r.skipped == 1 and r.rollbacks == 0     # the Java writer rolled the slot back


def test_a_java_rolling_reader_goes_on_past_a_killed_python_writers_batch(java, tmp_path):
    from mappedbus_py import RollingBusWriter
    from tests.core.test_writer_liveness import _batch_writer_stopped_mid_batch
    bus = str(tmp_path / "rolling")
    child, watcher, _ = _batch_writer_stopped_mid_batch(bus, rolling=True)
    jr = _java("read-rolling", bus, MARKER)
    other = RollingBusWriter(bus).open()             # holds another slot: takes over nothing
    try:
        assert jr.stdout.readline().strip() == "ready"
        time.sleep(0.5)                              # it reads what was committed, then waits
        assert jr.poll() is None
        child.kill()
        child.wait()
        other.write(_int(MARKER))
        start = time.monotonic()
        out = jr.stdout.readline().split()
        took = time.monotonic() - start
        assert out[0] == "END" and out[2] == "true" and int(out[3]) > 0, out   # it rolled back
        assert took < 1.0, took                      # the timeout is 2 s
    finally:
        other.close()
        watcher.close()
        for p in (child, jr):
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
