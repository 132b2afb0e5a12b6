"""The demo: Python and Java processes on one bus, in one agreed order.

1. Price updates: a Python writer (source 0) and a Java writer (source 1) publish at the
   same time; a Python reader and a Java reader print every message. Both readers print the
   same lines in the same order, the bus's order.
2. A token ring of three nodes, Python, Java, Python, passing a token round a few times.

Exits non-zero if any process fails or the readers or ring nodes disagree.

    python samples/demo.py [--messages 5] [--interval 0.05] [--rounds 3]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import threading
from typing import List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from mappedbus_py import MappedBusWriter, jvm  # noqa: E402
from mappedbus_py.formats.files import remove_bus  # noqa: E402

# The price bus of object_reader.py/object_writer.py (and their Java twins).
PRICES_FILE_SIZE, PRICES_RECORD_SIZE = 2_000_000, 12

SAMPLES = os.path.join(ROOT, "samples")
# Small samples: a JVM that starts fast matters more than peak speed.
JVM_ARGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
TIMEOUT = 60


def python(sample: str, *args: object) -> List[str]:
    return [sys.executable, os.path.join(SAMPLES, sample), *map(str, args)]


def java(cls: str, *args: object) -> List[str]:
    return jvm.java_command(f"io.mappedbuspy.samples.{cls}", *args, jvm_args=JVM_ARGS)


def start(cmd: List[str]) -> "subprocess.Popen[str]":
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)


def finish(name: str, proc: "subprocess.Popen[str]") -> List[str]:
    out, _ = proc.communicate(timeout=TIMEOUT)
    if proc.returncode:
        sys.exit(f"demo: {name} failed with exit code {proc.returncode}")
    return out.splitlines()


def prices(path: str, messages: int, interval: float) -> None:
    total = 2 * messages
    print(f"== price updates on {path}: a Python and a Java writer, "
          f"a Python and a Java reader")
    # Readers never create a bus: make it first, so they can start before the writers.
    MappedBusWriter(path, PRICES_FILE_SIZE, PRICES_RECORD_SIZE).open().close()
    readers = {
        "python reader": start(python("object_reader.py", "--path", path, "--count", total,
                                      "--timeout", 30)),
        "java reader": start(java("ObjectReader", "--path", path, "--count", total,
                                  "--timeout", 30)),
    }
    writers = {
        "python writer": start(python("object_writer.py", 0, "--path", path, "--count",
                                      messages, "--interval", interval, "--quiet")),
        "java writer": start(java("ObjectWriter", 1, "--path", path, "--count", messages,
                                  "--interval", interval, "--quiet")),
    }
    for name, proc in writers.items():
        finish(name, proc)
    outputs = {name: finish(name, proc) for name, proc in readers.items()}
    for name, lines in outputs.items():
        print(f"{name}:")
        for line in lines:
            print(f"  {line}")
    py, jv = outputs.values()
    expected = {f"Read: PriceUpdate [source={s}, price={2 * i}, quantity={4 * i}]"
                for s in (0, 1) for i in range(messages)}
    if py != jv or len(py) != total or set(py) != expected:
        sys.exit("demo: the readers disagree, or missed messages")
    print(f"readers agree: {total} messages in the same order")


def ring(path: str, rounds: int, interval: float) -> None:
    kinds = ["python", "java", "python"]
    n = len(kinds)
    print(f"== token ring on {path}: nodes 0..{n - 1} are {', '.join(kinds)}; "
          f"{rounds} rounds")
    opts = ("--rounds", rounds, "--interval", interval, "--timeout", 30, "--path", path)
    procs: List["subprocess.Popen[str]"] = []
    # Node 0 last: the others wait for the bus file it makes.
    for node in reversed(range(n)):
        cmd = (python("token_ring.py", node, n, *opts) if kinds[node] == "python"
               else java("TokenRing", node, n, *opts))
        procs.insert(0, start(cmd))
    lines: List[List[str]] = [[] for _ in range(n)]
    lock = threading.Lock()

    def relay(node: int, proc: "subprocess.Popen[str]") -> None:
        # Print as the token moves; each node prints before it passes the token on.
        assert proc.stdout is not None
        for line in proc.stdout:
            with lock:
                print(f"  [{kinds[node]:6}] {line.rstrip()}", flush=True)
            lines[node].append(line.rstrip())

    threads = [threading.Thread(target=relay, args=(i, p)) for i, p in enumerate(procs)]
    for t in threads:
        t.start()
    codes = [p.wait(TIMEOUT) for p in procs]
    for t in threads:
        t.join()
    if any(codes):
        sys.exit(f"demo: a ring node failed: exit codes {codes}")
    for node in range(n):
        prev = (node - 1) % n
        want = [f"Node {node} received Token [from={prev}, to={node}]"] * rounds
        want.append(f"Node {node} done: received {rounds} tokens")
        if lines[node] != want:
            sys.exit(f"demo: node {node} printed {lines[node]}, expected {want}")
    print(f"token ring: {rounds} full rounds, every node got the token in turn")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=5, help="messages per writer (default 5)")
    p.add_argument("--interval", type=float, default=0.05,
                   help="seconds between messages and between token passes (default 0.05)")
    p.add_argument("--rounds", type=int, default=3, help="token ring rounds (default 3)")
    a = p.parse_args()
    try:
        jvm.build_jars()  # a no-op when the jar is up to date
    except jvm.JavaNotFoundError:
        jvm.jar_path()  # no javac: a jar built earlier still does
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    base = os.path.join(shm, f"mappedbus-demo-{os.getpid()}")
    try:
        prices(base + "-prices", a.messages, a.interval)
        ring(base + "-token", a.rounds, a.interval)
        print("demo: done")
    finally:
        remove_bus(base + "-prices")
        remove_bus(base + "-token")


if __name__ == "__main__":
    main()
