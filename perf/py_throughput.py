"""1 writer -> 1 reader throughput of the Python bus, in separate processes on /dev/shm.

    python perf/py_throughput.py [--messages 10000000] [--api message|bytes|batch]

Prints one JSON object: messages, seconds, msgs_per_s, ns_per_msg (measured in the reader,
from its first message to its last), plus the machine.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np  # noqa: E402

from mappedbus_py import MappedBusReader, MappedBusWriter, PriceUpdate  # noqa: E402

RECORD_SIZE = 12
BATCH = 4096


def file_size(n):
    return 8 + (n + 2 * BATCH) * (8 + RECORD_SIZE)


def run_writer(path, n, api):
    with MappedBusWriter(path, file_size(n), RECORD_SIZE, prefault=True) as w:
        write = w.write
        if api == "message":
            msg = PriceUpdate(1, 0, 0)
            for i in range(n):
                msg.price = i
                write(msg)
        elif api == "bytes":
            data = bytearray(PriceUpdate(1, 0, 0).to_bytes())
            for i in range(n):
                data[4] = i & 0xFF
                write(data)
        else:
            rows = np.zeros(BATCH, PriceUpdate.numpy_dtype())
            rows["source"] = 1
            done = 0
            while done < n:
                k = min(BATCH, n - done)
                rows["price"][:k] = np.arange(done, done + k)
                done += w.write_batch(rows[:k])


def run_reader(path, n, api):
    with MappedBusReader(path, file_size(n), RECORD_SIZE, prefault=True) as r:
        got = 0
        if api == "message":
            msg = PriceUpdate()
            read_into = r.read_into
            while not read_into(msg):
                pass
            t0 = time.perf_counter()
            got = 1
            while got < n:
                if read_into(msg):
                    got += 1
            assert msg.price == n - 1, msg
        elif api == "bytes":
            buf = bytearray(RECORD_SIZE)
            nxt, read_buffer = r.next, r.read_buffer
            while not nxt():
                pass
            t0 = time.perf_counter()
            read_buffer(buf)
            got = 1
            while got < n:
                if nxt():
                    read_buffer(buf)
                    got += 1
        else:
            out = np.zeros(BATCH, PriceUpdate.numpy_dtype())
            k = 0
            while not k:
                k = r.read_batch(out)
            t0 = time.perf_counter()
            got = k
            while got < n:
                got += r.read_batch(out)
        dt = time.perf_counter() - t0
    print(json.dumps({"messages": n, "seconds": dt, "msgs_per_s": (n - 1) / dt,
                      "ns_per_msg": dt / (n - 1) * 1e9}), flush=True)


def measure(n, api):
    path = f"/dev/shm/mbperf-{os.getpid()}-{api}"
    try:
        MappedBusWriter(path, file_size(n), RECORD_SIZE).open().close()
        me = [sys.executable, os.path.abspath(__file__), "--messages", str(n), "--api", api,
              "--path", path]
        reader = subprocess.Popen(me + ["--role", "reader"], stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)      # the reader maps the file and starts polling
        writer = subprocess.Popen(me + ["--role", "writer"])
        writer.wait(600)
        out, _ = reader.communicate(timeout=600)
        if writer.returncode or reader.returncode:
            raise SystemExit(f"benchmark processes failed: {writer.returncode}, {reader.returncode}")
        return json.loads(out)
    finally:
        if os.path.exists(path):
            os.unlink(path)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=10_000_000)
    p.add_argument("--api", choices=["message", "bytes", "batch"], default="message")
    p.add_argument("--role", choices=["writer", "reader"], help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.role == "writer":
        return run_writer(a.path, a.messages, a.api)
    if a.role == "reader":
        return run_reader(a.path, a.messages, a.api)
    result = measure(a.messages, a.api)
    result.update(api=a.api, machine=f"{platform.machine()}, {os.cpu_count()} cores, "
                  f"{platform.python_implementation()} {platform.python_version()}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
