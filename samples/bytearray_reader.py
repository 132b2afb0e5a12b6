"""Byte array sample, reader: prints every byte-array message on the bus, in the bus's order.

    python samples/bytearray_reader.py                # until 10 s pass without a message
    python samples/bytearray_reader.py --count 40     # stop after 40 messages

Prints the length and the bytes (quoted if plain printable ASCII, else hex), exactly as
io.mappedbuspy.samples.ByteArrayReader does:
    Read: 19 bytes: "writer 0 message 10"
"""
import argparse
import contextlib
import os
import sys
import tempfile
from typing import List, Optional, Union

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from mappedbus_py import BusFullError, MappedBusReader  # noqa: E402

SHM = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
DEFAULT_PATH = os.path.join(SHM, "mappedbus-sample-bytearray")
FILE_SIZE = 2_000_000
RECORD_SIZE = 32


def describe(data: Union[bytes, bytearray]) -> str:
    """Quoted text if plain printable ASCII, else hex (the Java sample does the same)."""
    if all(0x20 <= b < 0x7f and b not in b'"\\' for b in data):
        return f'{len(data)} bytes: "{data.decode("ascii")}"'
    return f"{len(data)} bytes: {data.hex()}"


def main(argv: Optional[List[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=0,
                   help="stop after this many messages (default 0: no limit)")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="stop after this many seconds without a message (default 10)")
    p.add_argument("--path", default=DEFAULT_PATH, help=f"bus file (default {DEFAULT_PATH})")
    a = p.parse_args(argv)

    buf = bytearray(RECORD_SIZE)  # one buffer, reused: read_buffer copies into it
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
            length = reader.read_buffer(buf)
            n += 1
            print(f"Read: {describe(buf[:length])}", flush=True)
    if 0 < a.count and n < a.count:
        sys.exit(f"bytearray_reader: read {n} of {a.count} messages")


if __name__ == "__main__":
    main()
