"""The samples run end to end as real processes, Python and Java mixed on one bus: readers in
both languages print the same lines in the same order, the token ring goes round, and every
process exits cleanly."""
import os
import shutil
import struct
import subprocess
import sys
import time

import pytest

from mappedbus_py import MappedBusWriter, Token, jvm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = os.path.join(ROOT, "samples")
TIMEOUT = 90  # per process; generous because the machine is shared

pytestmark = [
    pytest.mark.slow,
    pytest.mark.java,
    pytest.mark.skipif(shutil.which("java") is None or shutil.which("javac") is None,
                       reason="needs a JDK (java and javac) on PATH"),
]


@pytest.fixture(scope="module", autouse=True)
def jar():
    """Builds the jars once per module; a no-op when they are up to date."""
    jvm.build_jars()
    return jvm.jar_path()


def python(sample, *args):
    return [sys.executable, os.path.join(SAMPLES, sample), *map(str, args)]


def java(cls, *args):
    return jvm.java_command(f"io.mappedbuspy.samples.{cls}", *args,
                            jvm_args=("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"))


def start(cmd):
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc):
    """The process's stdout lines, once it has exited 0."""
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"{proc.args} did not finish in {TIMEOUT} s:\n{out}{err}")
    assert proc.returncode == 0, f"{proc.args} exited {proc.returncode}:\n{out}{err}"
    return out.splitlines()


def run_writers_and_readers(path, writer_py, writer_java, reader_py, reader_java, count):
    """A Python writer (id 0) and a Java writer (id 1) writing ``count`` messages each at the
    same time as a Python and a Java reader; then a Python and a Java reader started after
    the writers finished. Returns (writer outputs, reader outputs)."""
    total = 2 * count
    reader_opts = ("--path", path, "--count", total, "--timeout", 60)
    # Writing for about half a second lets the JVM start in time for the writers to interleave.
    writer_opts = ("--path", path, "--count", count, "--interval", 0.01)
    live = [start(python(reader_py, *reader_opts)), start(java(reader_java, *reader_opts))]
    writers = [start(python(writer_py, 0, *writer_opts)),
               start(java(writer_java, 1, *writer_opts))]
    wrote = [finish(w) for w in writers]
    late = [start(python(reader_py, *reader_opts)), start(java(reader_java, *reader_opts))]
    return wrote, [finish(r) for r in live + late]


def assert_same_order(outputs, expected_by_writer):
    """Every reader printed the same lines in the same order: every message once, and each
    writer's messages in the order it wrote them."""
    first = outputs[0]
    for other in outputs[1:]:
        assert other == first
    assert sorted(first) == sorted(line for lines in expected_by_writer for line in lines)
    for lines in expected_by_writer:
        assert [line for line in first if line in set(lines)] == lines


def test_price_update_readers_in_both_languages_print_the_same_messages_in_one_order(bus_path):
    count = 40
    wrote, outputs = run_writers_and_readers(bus_path, "object_writer.py", "ObjectWriter",
                                             "object_reader.py", "ObjectReader", count)
    expected = [[f"PriceUpdate [source={s}, price={2 * i}, quantity={4 * i}]"
                 for i in range(count)] for s in (0, 1)]
    # The writers print the same messages, Python and Java alike.
    assert wrote == [[f"Wrote: {m}" for m in msgs] for msgs in expected]
    assert_same_order(outputs, [[f"Read: {m}" for m in msgs] for msgs in expected])
    assert outputs[0][0].startswith("Read: PriceUpdate [source=")


def test_bytearray_readers_in_both_languages_print_the_same_messages_in_one_order(bus_path):
    count = 40
    wrote, outputs = run_writers_and_readers(bus_path, "bytearray_writer.py", "ByteArrayWriter",
                                             "bytearray_reader.py", "ByteArrayReader", count)
    texts = [[f"writer {w} message {i}" for i in range(count)] for w in (0, 1)]
    expected = [[f'{len(t)} bytes: "{t}"' for t in ts] for ts in texts]
    assert wrote == [[f"Wrote: {m}" for m in msgs] for msgs in expected]
    assert_same_order(outputs, [[f"Read: {m}" for m in msgs] for msgs in expected])


def test_bytearray_readers_print_binary_payloads_as_the_same_hex(bus_path):
    payloads = [b"\x00\x01\xfe\xff", b'say "hi"', b"", b"plain text"]
    with MappedBusWriter(bus_path, 2_000_000, 32) as w:
        for p in payloads:
            w.write(p)
    opts = ("--path", bus_path, "--count", len(payloads), "--timeout", 30)
    py, jv = finish(start(python("bytearray_reader.py", *opts))), \
        finish(start(java("ByteArrayReader", *opts)))
    assert py == jv == ["Read: 4 bytes: 0001feff", "Read: 8 bytes: 7361792022686922",
                        'Read: 0 bytes: ""', 'Read: 10 bytes: "plain text"']


def ring_commands(path, kinds, rounds):
    opts = ("--rounds", rounds, "--interval", 0, "--timeout", 60, "--path", path)
    n = len(kinds)
    return [python("token_ring.py", i, n, *opts) if kind == "python" else java("TokenRing", i, n, *opts)
            for i, kind in enumerate(kinds)]


def expected_ring_output(node, n, rounds):
    return ([f"Node {node} received Token [from={(node - 1) % n}, to={node}]"] * rounds
            + [f"Node {node} done: received {rounds} tokens"])


@pytest.mark.parametrize("kinds", [
    ("python", "java", "python"),
    ("java", "python", "java", "python"),
], ids=["py-java-py", "java-py-java-py"])
def test_mixed_token_ring_goes_round_and_every_node_exits(bus_path, kinds):
    rounds = 5
    cmds = ring_commands(bus_path, kinds, rounds)
    # Nodes 1.. first (they wait for node 0's bus file), then node 0.
    procs = {i: start(cmds[i]) for i in range(1, len(kinds))}
    procs[0] = start(cmds[0])
    outputs = {i: finish(p) for i, p in procs.items()}
    for i in range(len(kinds)):
        assert outputs[i] == expected_ring_output(i, len(kinds), rounds)
    assert not os.path.exists(bus_path), "node 0 removes the bus file when the ring stops"


def bus_limit(path):
    """The bus's limit (8 when empty, more once a record is allocated); 0 with no file yet."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except FileNotFoundError:
        return 0
    return struct.unpack("<q", head)[0] if len(head) == 8 else 0


def test_token_ring_node_started_late_finds_the_token_waiting(bus_path):
    kinds = ("java", "python", "python")
    cmds = ring_commands(bus_path, kinds, 3)
    procs = {0: start(cmds[0]), 2: start(cmds[2])}
    # Node 0 has sent Token(0 -> 1) before node 1 exists: node 1 reads it from the start.
    deadline = time.monotonic() + TIMEOUT
    while bus_limit(bus_path) <= 8:
        assert time.monotonic() < deadline, "node 0 never sent the first token"
        time.sleep(0.02)
    procs[1] = start(cmds[1])
    for i, p in procs.items():
        assert finish(p) == expected_ring_output(i, 3, 3)


def test_token_ring_node_0_replaces_a_previous_rings_bus_file(bus_path):
    # A ring that was killed left a file ending in a stop token; a new ring must not stop on it.
    with MappedBusWriter(bus_path, 2_000_000, 8) as w:
        w.write(Token(from_=0, to=1))
        w.write(Token(from_=0, to=-1))
    old = os.stat(bus_path).st_ino
    cmds = ring_commands(bus_path, ("python", "java"), 2)
    node0 = start(cmds[0])
    deadline = time.monotonic() + TIMEOUT
    while not os.path.exists(bus_path) or os.stat(bus_path).st_ino == old:
        assert time.monotonic() < deadline, "node 0 did not replace the old bus file"
        time.sleep(0.01)
    node1 = start(cmds[1])
    assert finish(node0) == expected_ring_output(0, 2, 2)
    assert finish(node1) == expected_ring_output(1, 2, 2)


@pytest.mark.parametrize("cmd", [
    python("object_reader.py", "--count", 1, "--timeout", 0.2, "--path", "{path}"),
    python("bytearray_reader.py", "--count", 1, "--timeout", 0.2, "--path", "{path}"),
], ids=["object_reader", "bytearray_reader"])
def test_python_reader_with_a_count_fails_when_messages_stop_coming(bus_path, cmd):
    proc = subprocess.run([c.replace("{path}", bus_path) for c in cmd],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 1 and "read 0 of 1 messages" in proc.stderr


@pytest.mark.parametrize("cls, record_size", [("ObjectReader", 12), ("ByteArrayReader", 32)])
def test_java_reader_with_a_count_fails_when_messages_stop_coming(bus_path, cls, record_size):
    # Readers never create a bus: an empty one is there, and nothing comes.
    MappedBusWriter(bus_path, 2_000_000, record_size).open().close()
    proc = subprocess.run(java(cls, "--count", 1, "--timeout", 0.2, "--path", bus_path),
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 1 and "read 0 of 1 messages" in proc.stderr


def test_samples_reject_bad_arguments_with_usage():
    for cmd in (python("token_ring.py", 3, 3), python("object_writer.py"),
                java("TokenRing", 3, 3), java("ObjectWriter"), java("ObjectReader", "--bogus")):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
        assert proc.returncode == 2, (cmd, proc.stderr)
        assert "usage" in proc.stderr


def test_demo_mixes_languages_and_finishes_by_itself():
    proc = subprocess.run([sys.executable, os.path.join(SAMPLES, "demo.py")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "readers agree: 10 messages in the same order" in proc.stdout
    assert "java reader:" in proc.stdout and "python reader:" in proc.stdout
    assert "[java  ] Node 1 received Token [from=0, to=1]" in proc.stdout
    assert proc.stdout.rstrip().endswith("demo: done")
