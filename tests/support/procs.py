"""Helpers for tests that run bus clients as separate processes: the Python one (bus_child.py)
and the Java one (BusTool), which take the same commands and print the same lines.

Run as a script, ``procs.py --go FILE <bus_child args>`` is bus_child.py behind a start gate,
like ``BusTool --go FILE ...``: it prints "ready", waits until FILE exists, then runs.
"""
import os
import re
import signal
import struct
import subprocess
import sys
import time
from collections import defaultdict

from mappedbus_py import MappedBusReader, MappedBusWriter, jvm

CHILD = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "bus_child.py")]
BUS_TOOL = "io.mappedbuspy.tools.BusTool"
END_RE = re.compile(r"END (\d+) rolledBackSkipped=(\d+) rollbacks=(\d+)")


def java_or_skip():
    """The project's jar, rebuilt when older than its sources; skips the calling test when
    there is no JDK."""
    import pytest
    try:
        jvm.java_executable()
        try:
            jvm.build_jars()
        except jvm.JavaNotFoundError:
            pass                    # no javac: a jar built earlier still serves
        return jvm.jar_path(build=False)
    except jvm.JavaNotFoundError as e:
        pytest.skip(str(e))


def start(*args, go=None):
    """A bus_child.py process (write/read/allocate-and-hang/slow-write); with ``go``, gated
    (see the module docstring; call ``open_gate`` once every gated process is ready)."""
    cmd = CHILD if go is None else [sys.executable, os.path.abspath(__file__), "--go", go]
    return subprocess.Popen(cmd + [str(a) for a in args], stdout=subprocess.PIPE, text=True)


def start_java(*args, go=None):
    """A BusTool process (write-bytes/write-objects/read/read-objects/allocate-and-hang/slow-write),
    gated like ``start`` with ``go``. A small heap and the serial GC keep many JVMs light."""
    gate = () if go is None else ("--go", go)
    return subprocess.Popen(jvm.java_command(BUS_TOOL, *gate, *args,
                                             jvm_args=("-Xmx64m", "-XX:+UseSerialGC")),
                            stdout=subprocess.PIPE, text=True)


def roll_back_frozen(slow, bus_path, fsize):
    """A slow-write child ``slow`` (either language, record size 8) has allocated its slot: it is
    frozen (SIGSTOP) before its commit while another writer writes b"other" and a reader with a
    0.2 s timeout rolls the frozen slot back and delivers b"other"; then it runs on (SIGCONT).
    Its sleep only has to outlast the SIGSTOP, not the reader (a JVM's start alone can take
    seconds under load)."""
    assert slow.stdout.readline().startswith("allocated")
    slow.send_signal(signal.SIGSTOP)
    try:
        with MappedBusWriter(bus_path, fsize, 8) as w:
            w.write(b"other")
        with MappedBusReader(bus_path, fsize, 8, timeout=0.2) as r:
            rec = r.read(timeout=5)
            assert rec.data == b"other" and r.rollbacks == 1
    finally:
        slow.send_signal(signal.SIGCONT)


def open_gate(go, procs):
    """Waits until every gated process has printed "ready", then lets them all run at once."""
    for p in procs:
        line = p.stdout.readline()
        assert line.strip() == "ready", f"{p.args}: {line!r}"
    with open(go, "w"):
        pass


def parse_reader(out):
    """A reader's output -> ([(position, meta, payload bytes)], its END line)."""
    lines = out.strip().splitlines()
    assert lines and lines[-1].startswith("END "), lines[-1:]
    recs = [line.split() for line in lines[:-1]]
    return [(int(p), int(m), bytes.fromhex(h)) for p, m, h in recs], lines[-1]


def end_counts(end_line):
    """'END n rolledBackSkipped=s rollbacks=r' -> (n, s, r)."""
    m = END_RE.fullmatch(end_line)
    assert m, end_line
    return tuple(int(g) for g in m.groups())


def check_integrity(records, writers, per_writer):
    """Every record untorn; each writer's records complete and in its own order."""
    seen = defaultdict(list)
    for _, meta, payload in records:
        assert meta == 8
        wid, i = struct.unpack_from("<ii", payload)
        seen[wid].append(i)
    assert sorted(seen) == sorted(writers)
    for wid in writers:
        assert seen[wid] == list(range(per_writer)), f"writer {wid} out of order or incomplete"


def _gated_child(argv):
    go, args = argv[1], argv[2:]
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.001)
    import bus_child  # beside this script, so on sys.path
    bus_child.main(args)


if __name__ == "__main__":
    _gated_child(sys.argv[1:])
