"""The demo: two writer processes and a reader process on one bus in /dev/shm.

Each writer publishes PriceUpdate(source=<its id>, price, quantity) a few times; the
reader prints every message in the order the bus holds them, which every reader shares.

    python samples/demo.py [--messages 5] [--interval 0.05]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from mappedbus_py import MappedBusReader, MappedBusWriter, PriceUpdate  # noqa: E402

FILE_SIZE = 1_000_000
RECORD_SIZE = 12


def writer(path, source, count, interval):
    with MappedBusWriter(path, FILE_SIZE, RECORD_SIZE) as w:
        for i in range(count):
            w.write(PriceUpdate(source=source, price=100 + i, quantity=(source + 1) * 10 + i))
            time.sleep(interval)


def reader(path, expected):
    msg = PriceUpdate()
    with MappedBusReader(path, FILE_SIZE, RECORD_SIZE) as r:
        for _ in range(expected):
            if not r.wait(timeout=10):
                sys.exit("reader: timed out waiting for a message")
            r.read_message(msg)
            print(f"Read: {msg}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=5, help="messages per writer")
    p.add_argument("--interval", type=float, default=0.05, help="seconds between messages")
    p.add_argument("--role", choices=["writer", "reader"], help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    p.add_argument("--source", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.role == "writer":
        return writer(a.path, a.source, a.messages, a.interval)
    if a.role == "reader":
        return reader(a.path, a.messages)

    shm = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    path = os.path.join(shm, f"mappedbus-demo-{os.getpid()}")
    me = [sys.executable, os.path.abspath(__file__), "--path", path,
          "--interval", str(a.interval)]
    print(f"bus: {path}  (2 Python writers, 1 Python reader)")
    try:
        MappedBusWriter(path, FILE_SIZE, RECORD_SIZE).open().close()
        rd = subprocess.Popen(me + ["--role", "reader", "--messages", str(2 * a.messages)])
        ws = [subprocess.Popen(me + ["--role", "writer", "--source", str(s),
                                     "--messages", str(a.messages)]) for s in (0, 1)]
        codes = [w.wait(60) for w in ws] + [rd.wait(60)]
        if any(codes):
            sys.exit(f"demo: a process failed: exit codes {codes}")
        print("demo: done")
    finally:
        if os.path.exists(path):
            os.unlink(path)


if __name__ == "__main__":
    main()
