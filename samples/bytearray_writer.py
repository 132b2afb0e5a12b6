"""Byte array sample, writer: publishes raw byte-array messages of varying length.

    python samples/bytearray_writer.py 0                  # writer id 0: 20 messages, 0.25 s apart
    python samples/bytearray_writer.py 1 --count 5 --interval 0

Message i of writer w is the ASCII bytes of "writer <w> message <i>"; the record's metadata
holds its length. Readers: samples/bytearray_reader.py or io.mappedbuspy.samples.ByteArrayReader.
"""
import argparse
import os
import sys
import tempfile
import time
from typing import List, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from mappedbus_py import BusFullError, MappedBusWriter  # noqa: E402

SHM = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
DEFAULT_PATH = os.path.join(SHM, "mappedbus-sample-bytearray")
FILE_SIZE = 2_000_000
RECORD_SIZE = 32  # the longest message this bus carries


def describe(data: bytes) -> str:
    """How both languages' samples print a byte array: quoted text if it is plain
    printable ASCII, else hex."""
    if all(0x20 <= b < 0x7f and b not in b'"\\' for b in data):
        return f'{len(data)} bytes: "{data.decode("ascii")}"'
    return f"{len(data)} bytes: {data.hex()}"


def main(argv: Optional[List[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("writer", type=int, help="this writer's id")
    p.add_argument("--count", type=int, default=20, help="messages to write (default 20)")
    p.add_argument("--interval", type=float, default=0.25,
                   help="seconds between messages (default 0.25)")
    p.add_argument("--path", default=DEFAULT_PATH, help=f"bus file (default {DEFAULT_PATH})")
    p.add_argument("--quiet", action="store_true", help="print nothing per message")
    a = p.parse_args(argv)

    try:
        with MappedBusWriter(a.path, FILE_SIZE, RECORD_SIZE) as writer:
            for i in range(a.count):
                data = f"writer {a.writer} message {i}".encode("ascii")
                committed = writer.write(data)
                if not a.quiet:
                    print(("Wrote: " if committed else "Lost: ") + describe(data), flush=True)
                if a.interval > 0 and i + 1 < a.count:
                    time.sleep(a.interval)
    except BusFullError as e:
        sys.exit(f"bytearray_writer: {e} (remove {a.path} to start a new bus)")


if __name__ == "__main__":
    main()
