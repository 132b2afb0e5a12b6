"""Price update sample, writer: publishes PriceUpdate(source, price, quantity) messages.

    python samples/object_writer.py 0                     # source id 0: 20 messages, 0.25 s apart
    python samples/object_writer.py 1 --count 5 --interval 0

Start any number of writers (Python or Java, io.mappedbuspy.samples.ObjectWriter) with
different source ids, and any number of readers (samples/object_reader.py): every reader
prints the same messages in the same order. Message i of a source is
PriceUpdate(source, price=2*i, quantity=4*i).
"""
import argparse
import os
import sys
import tempfile
import time
from typing import List, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from mappedbus_py import BusFullError, MappedBusWriter, PriceUpdate  # noqa: E402

# Every process on the bus must use the same file and record sizes (they are not stored in it).
SHM = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
DEFAULT_PATH = os.path.join(SHM, "mappedbus-sample-prices")
FILE_SIZE = 2_000_000
RECORD_SIZE = 12


def main(argv: Optional[List[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source", type=int, help="this writer's source id")
    p.add_argument("--count", type=int, default=20, help="messages to write (default 20)")
    p.add_argument("--interval", type=float, default=0.25,
                   help="seconds between messages (default 0.25)")
    p.add_argument("--path", default=DEFAULT_PATH, help=f"bus file (default {DEFAULT_PATH})")
    p.add_argument("--quiet", action="store_true", help="print nothing per message")
    a = p.parse_args(argv)

    msg = PriceUpdate(source=a.source)
    try:
        with MappedBusWriter(a.path, FILE_SIZE, RECORD_SIZE) as writer:
            for i in range(a.count):
                msg.price = 2 * i
                msg.quantity = 4 * i
                # False: a reader rolled the record back because this process stalled.
                committed = writer.write(msg)
                if not a.quiet:
                    print(f"Wrote: {msg}" if committed else f"Lost: {msg}", flush=True)
                if a.interval > 0 and i + 1 < a.count:
                    time.sleep(a.interval)
    except BusFullError as e:
        sys.exit(f"object_writer: {e} (remove {a.path} to start a new bus)")


if __name__ == "__main__":
    main()
