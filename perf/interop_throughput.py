"""1 writer -> 1 reader throughput across languages, in separate processes on /dev/shm:
Java -> Java (PerfWriter/PerfReader), Java -> Python and Python -> Java, PriceUpdate records
(record size 12).

    python perf/interop_throughput.py [--messages 5000000] [--no-precreate]

Prints one JSON object: java_java_msgs_per_s, java_py_msgs_per_s, py_java_msgs_per_s (each
measured in the reader, from message n/10 to the last) and the details of each run.
The harness creates every bus file first (blocks reserved, so the JVM's mapping does not fault
in fresh pages while timing); --no-precreate leaves that to the writer, to see the difference.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from mappedbus_py import MappedBusReader, MappedBusWriter, PriceUpdate, jvm  # noqa: E402

RECORD_SIZE = 12
JVM_ARGS = ("-Xms256m", "-Xmx256m")


def warmup(n):
    """Messages read before the clock starts (JIT compilation, first page touches)."""
    return n // 10


def file_size(n):
    return 8 + (n + 16) * (8 + RECORD_SIZE)


def py_writer(path, n):
    with MappedBusWriter(path, file_size(n), RECORD_SIZE, prefault=True) as w:
        write, msg = w.write, PriceUpdate(1, 0, 0)
        for i in range(n):
            msg.price = i
            write(msg)


def py_reader(path, n):
    """Like PerfReader: "ready" on stderr once open, the clock from message warmup(n) on."""
    warm = warmup(n)
    with MappedBusReader(path, file_size(n), RECORD_SIZE, prefault=True) as r:
        print("ready", file=sys.stderr, flush=True)
        msg, read_into = PriceUpdate(), r.read_into
        got = 0
        while got <= warm:
            if read_into(msg):
                got += 1
        t0 = time.perf_counter()
        while got < n:
            if read_into(msg):
                got += 1
        dt = time.perf_counter() - t0
    assert msg.price == n - 1, msg
    timed = n - warm - 1
    print(json.dumps({"messages": n, "seconds": dt, "msgs_per_s": timed / dt,
                      "ns_per_msg": dt / timed * 1e9}), flush=True)


def command(side, role, path, n):
    if side == "java":
        if role == "writer":
            return jvm.java_command("io.mappedbuspy.perf.PerfWriter", path, file_size(n), n,
                                    jvm_args=JVM_ARGS)
        return jvm.java_command("io.mappedbuspy.perf.PerfReader", path, file_size(n), n, warmup(n),
                                jvm_args=JVM_ARGS)
    return [sys.executable, os.path.abspath(__file__), "--role", role, "--path", path,
            "--messages", str(n)]


def measure(writer_side, reader_side, n, precreate):
    path = f"/dev/shm/mbperf-interop-{os.getpid()}-{writer_side}-{reader_side}"
    try:
        if precreate:
            MappedBusWriter(path, file_size(n), RECORD_SIZE).open().close()
        reader = subprocess.Popen(command(reader_side, "reader", path, n), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        line = reader.stderr.readline()      # "ready": the reader has the bus open and polls
        if line.strip() != "ready":
            raise SystemExit(f"{reader_side} reader did not start: {line}{reader.stderr.read()}")
        writer = subprocess.Popen(command(writer_side, "writer", path, n), stderr=subprocess.DEVNULL)
        writer.wait(600)
        out, _ = reader.communicate(timeout=600)
        if writer.returncode or reader.returncode:
            raise SystemExit(f"{writer_side} -> {reader_side} failed: writer {writer.returncode}, "
                             f"reader {reader.returncode}")
        return json.loads(out.strip().splitlines()[-1])
    finally:
        if os.path.exists(path):
            os.unlink(path)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=5_000_000)
    p.add_argument("--no-precreate", dest="precreate", action="store_false")
    p.add_argument("--role", choices=["writer", "reader"], help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.role == "writer":
        return py_writer(a.path, a.messages)
    if a.role == "reader":
        return py_reader(a.path, a.messages)
    jvm.build_jars()
    runs = {name: measure(w, r, a.messages, a.precreate)
            for name, (w, r) in {"java_java": ("java", "java"), "java_py": ("java", "py"),
                                 "py_java": ("py", "java")}.items()}
    result = {f"{name}_msgs_per_s": round(run["msgs_per_s"]) for name, run in runs.items()}
    result.update(runs=runs, messages=a.messages, precreate=a.precreate,
                  java=subprocess.run([jvm.java_executable(), "-version"], capture_output=True,
                                      text=True).stderr.splitlines()[0],
                  machine=f"{platform.machine()}, {os.cpu_count()} cores, "
                          f"{platform.python_implementation()} {platform.python_version()}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
