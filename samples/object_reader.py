"""Price update sample, reader: prints every PriceUpdate on the bus, in the bus's order.

    python samples/object_reader.py                   # until 10 s pass without a message
    python samples/object_reader.py --count 40        # stop after 40 messages

Reads from the first record, so a reader started late still sees every message, and every
reader (Python or Java, io.mappedbuspy.samples.ObjectReader) prints the same lines:
    Read: PriceUpdate [source=0, price=20, quantity=40]
"""
import argparse
import contextlib
import os
import sys
import tempfile
from typing import List, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from mappedbus_py import BusFullError, MappedBusReader, PriceUpdate  # noqa: E402

SHM = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
DEFAULT_PATH = os.path.join(SHM, "mappedbus-sample-prices")
FILE_SIZE = 2_000_000
RECORD_SIZE = 12


def main(argv: Optional[List[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=0,
                   help="stop after this many messages (default 0: no limit)")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="stop after this many seconds without a message (default 10)")
    p.add_argument("--path", default=DEFAULT_PATH, help=f"bus file (default {DEFAULT_PATH})")
    a = p.parse_args(argv)

    msg = PriceUpdate()
    n = 0
    try:
        # A reader never creates the bus: wait for a writer to, as for a message.
        reader = MappedBusReader(a.path, FILE_SIZE, RECORD_SIZE).open(wait=a.timeout)
    except FileNotFoundError:
        reader = None
    with reader or contextlib.nullcontext():
        while reader is not None and (a.count <= 0 or n < a.count):
            try:
                if not reader.wait(a.timeout):
                    break
            except BusFullError:
                break
            if reader.read_type() != PriceUpdate.type_id:
                print(f"object_reader: skipping a record of type {reader.read_type()}",
                      file=sys.stderr)
                continue
            reader.read_message(msg)
            n += 1
            print(f"Read: {msg}", flush=True)
    if 0 < a.count and n < a.count:
        sys.exit(f"object_reader: read {n} of {a.count} messages")


if __name__ == "__main__":
    main()
