"""Java and Python on one bus inside one process, through JPype: Java writer threads with a
Python reader, and a Python writer thread with the Java reader.

A JVM starts only once per process and keeps its classpath, so each scenario runs in a fresh
interpreter (this file run as a script) and the pytest process never starts a JVM.
"""
import os
import subprocess
import sys
import threading
import time

import pytest

if __name__ == "__main__":      # a scenario (below): the helpers are in tests/support
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from mappedbus_py import MappedBusReader, MappedBusWriter, PriceUpdate, Trade, jvm  # noqa: E402
from support.procs import java_or_skip  # noqa: E402

pytestmark = pytest.mark.java
pytest.importorskip("jpype")


def run_scenario(name, *args):
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), name, *map(str, args)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module", autouse=True)
def jar():
    return java_or_skip()


def test_java_writer_threads_while_a_python_reader_in_the_same_process_reads(bus_path):
    assert run_scenario("java-threads-write", bus_path) == "ok 400000"


def test_python_writer_thread_while_the_java_reader_in_the_same_process_reads(bus_path):
    assert run_scenario("python-thread-writes", bus_path) == "ok 20000"


def test_start_jvm_again_adds_classpath_to_the_running_jvm():
    tests_jar = jvm.BUILD / "mappedbuspy-tests.jar"
    assert run_scenario("start-twice", tests_jar) == "ok"


# --- the scenarios, each run in its own interpreter --------------------------------------------

def java_threads_write(path):
    """Two Java threads (ThreadedWriter) write PriceUpdates; this thread reads them all."""
    java = jvm.java_classes()
    per, ids = 200_000, (1, 2)
    total = per * len(ids)
    fsize = 8 + (total + 10) * 20
    MappedBusWriter(path, fsize, 12).open().close()
    msg, expect, got = PriceUpdate(), dict.fromkeys(ids, 0), 0
    with MappedBusReader(path, fsize, 12, timeout=10.0) as r:
        writers = [java.ThreadedWriter(path, fsize, 12, per, "price", wid).start() for wid in ids]
        deadline = time.monotonic() + 120
        while got < total:
            if not r.read_into(msg):
                assert time.monotonic() < deadline, f"only {got} of {total} records arrived"
                continue
            # Each writer's records in its own order, untorn.
            assert msg.price == expect[msg.source] and msg.quantity == 2 * msg.price, msg
            expect[msg.source] += 1
            got += 1
            if got == 1:
                written_at_first = sum(w.wrote() for w in writers)
    for w in writers:
        assert w.join(30_000) and w.failure() is None and w.committed() == per
    # The reader was reading while the Java threads were still writing.
    assert written_at_first < total, written_at_first
    print(f"ok {got}")


def python_thread_writes(path):
    """A Python thread writes Trades (int64, float64, int32); the Java reader reads them here."""
    java = jvm.java_classes()
    n = 20_000
    fsize = 8 + (n + 10) * 28
    writer = MappedBusWriter(path, fsize, 20).open()
    reader = java.MappedBusReader(path, fsize, 20).open()
    reader.setTimeout(10_000)

    def write():
        for i in range(n):
            writer.write(Trade(i - 2**62, i / 3, -i))

    t = threading.Thread(target=write)
    t.start()
    trade, got = java.Trade(), 0
    deadline = time.monotonic() + 120
    while got < n:
        if not reader.next():
            assert time.monotonic() < deadline, f"only {got} of {n} records arrived"
            continue
        assert reader.readType() == Trade.type_id
        reader.readMessage(trade)
        assert (trade.getId(), trade.getPrice(), trade.getQuantity()) == (got - 2**62, got / 3, -got)
        got += 1
    t.join()
    reader.close()
    writer.close()
    print(f"ok {got}")


def start_twice(extra_jar):
    jpype = jvm.start_jvm()
    writer_class = jpype.JClass("io.mappedbuspy.MappedBusWriter")
    # The JVM is running: a second call adds the new jar instead of failing, ignores jvm_args.
    assert jvm.start_jvm(classpath=[extra_jar], jvm_args=("-Xmx1g",)) is jpype
    jpype.JClass("io.mappedbuspy.SafetyChild")
    assert jvm.java_classes().MappedBusWriter == writer_class
    print("ok")


if __name__ == "__main__":
    {"java-threads-write": java_threads_write,
     "python-thread-writes": python_thread_writes,
     "start-twice": start_twice}[sys.argv[1]](*sys.argv[2:])
