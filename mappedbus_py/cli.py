"""``mappedbus`` (or ``python -m mappedbus_py``): look inside a bus file.

    mappedbus stat /dev/shm/prices --record-size 12
    mappedbus dump /dev/shm/prices --record-size 12 --layout PriceUpdate
    mappedbus dump bus.dat --record-size 16 --layout "id:int64,price:float64" --status 0,2

Nothing is written to the file: it is safe on a live bus. File names and payload bytes are
printed escaped (no raw control characters reach the terminal).
"""
import argparse
import json
import os
import sys

from . import messages
from .inspect import STATUS_NAMES, scan, summarize
from .layout import FIRST_RECORD_OFFSET, STATUS_ROLLED_BACK, slot_size

__all__ = ("main", "parse_layout")

_TYPES = {"int8": messages.int8, "int16": messages.int16, "int32": messages.int32,
          "int64": messages.int64, "uint8": messages.uint8, "uint16": messages.uint16,
          "uint32": messages.uint32, "uint64": messages.uint64, "float32": messages.float32,
          "float64": messages.float64}


def parse_layout(spec):
    """A Message class from a shipped name (``PriceUpdate``) or a field list
    (``"source:int32,price:int32,tag:bytes8"``)."""
    shipped = {c.__name__.lower(): c for c in (messages.PriceUpdate, messages.Token, messages.Trade)}
    if spec.lower() in shipped:
        return shipped[spec.lower()]
    fields = {}
    for part in spec.split(","):
        name, _, typ = part.strip().partition(":")
        if not name.isidentifier() or not typ:
            raise ValueError(f"bad field {part!r} in layout {spec!r}: use name:type")
        if name.startswith("_"):
            raise ValueError(f"bad field name {name!r} in layout {spec!r}: field names may "
                             f"not start with '_'")
        if name in fields:
            raise ValueError(f"field {name!r} appears twice in layout {spec!r}")
        if typ in _TYPES:
            fields[name] = _TYPES[typ]()
        elif typ.startswith("bytes") and typ[5:].isdigit():
            fields[name] = messages.fixed_bytes(int(typ[5:]))
        else:
            raise ValueError(f"unknown type {typ!r} in layout {spec!r} (known: "
                             f"{', '.join(_TYPES)}, bytesN)")
    return type("Layout", (messages.Message,), fields)


def escape(text):
    """``text`` with every non-printable character (control characters, escape
    sequences, undecodable bytes of a file name) written as a Python escape."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def _integer(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{escape(text)!r} is not an integer") from None


def _positive(text):
    value = _integer(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def _non_negative(text):
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def _statuses(text):
    """Checked here, kept as text (the rolling-bus inspector parses it too)."""
    try:
        {int(s) for s in text.split(",")}
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{escape(text)!r} is not a comma-separated list of statuses (0 not set, "
            f"1 committed, 2 rolled back), e.g. 0,2") from None
    return text


def _args(argv):
    p = argparse.ArgumentParser(prog="mappedbus", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name, text in (("stat", "limit, capacity and record counts by status"),
                       ("dump", "the figures of stat, then every allocated slot")):
        s = sub.add_parser(name, help=text)
        s.add_argument("path")
        s.add_argument("--record-size", "-r", type=_positive,
                       help="payload bytes per record (not stored in the file; optional for "
                            "a rolling-bus directory, whose bus.meta has it)")
        s.add_argument("--file-size", "-f", type=_positive,
                       help="the logical file size the bus was opened with (default: the file length)")
        s.add_argument("--json", action="store_true", help="machine-readable output")
        if name == "dump":
            s.add_argument("--layout", "-l", help="decode payloads: PriceUpdate, Token, Trade or name:type,...")
            s.add_argument("--bytes", action="store_true",
                           help="byte-array records: show the first <meta> payload bytes")
            s.add_argument("--status", type=_statuses, help="only these statuses, e.g. 0,2")
            s.add_argument("--max", type=_non_negative, default=None,
                           help="at most this many slots")
            s.add_argument("--start", type=_integer, default=FIRST_RECORD_OFFSET,
                           help="first slot offset (a record boundary)")
    a = p.parse_args(argv)
    if a.command == "dump":
        if a.start < FIRST_RECORD_OFFSET:
            p.error(f"argument --start: {a.start} is before the first record "
                    f"({FIRST_RECORD_OFFSET})")
        if a.record_size is not None and not os.path.isdir(a.path):
            step = slot_size(a.record_size)
            if (a.start - FIRST_RECORD_OFFSET) % step:
                p.error(f"argument --start: {a.start} is not a record boundary for "
                        f"record_size {a.record_size} (8, {8 + step}, {8 + 2 * step}, ...)")
        if a.layout:
            try:
                parse_layout(a.layout)
            except ValueError as e:
                p.error(f"argument --layout/-l: {escape(e)}")
    return a


def main(argv=None):
    a = _args(argv)
    if os.path.isdir(a.path):
        from . import inspect_rolling   # a rolling bus: its directory
        try:
            return inspect_rolling.main(a, sys.stdout)
        except (OSError, ValueError) as e:
            print(f"mappedbus: {escape(e)}", file=sys.stderr)
            return 2
    if a.record_size is None:
        print("mappedbus: --record-size is required for a bus file", file=sys.stderr)
        return 2
    try:
        summary = summarize(a.path, a.record_size, a.file_size)
    except (OSError, ValueError) as e:
        print(f"mappedbus: {escape(e)}", file=sys.stderr)
        return 2
    out = sys.stdout
    # Lost records: slots rolled back because their writer crashed or stalled past the
    # readers' timeout. Readers count the ones they skip (reader.skipped); this is the file's view.
    lost = summary.by_status.get(STATUS_ROLLED_BACK, 0)
    if a.json and a.command == "stat":
        json.dump({**summary._asdict(), "lost": lost}, out)
        out.write("\n")
        return 0
    if not a.json:
        print(f"file        {escape(repr(summary.path))} ({summary.file_length} bytes)", file=out)
        print(f"file_size   {summary.file_size}   record_size {summary.record_size}   "
              f"capacity {summary.capacity} records", file=out)
        print(f"limit       {summary.limit}   allocated {summary.allocated} slots", file=out)
        counts = ", ".join(f"{STATUS_NAMES.get(st, f'status {st}')}: {n}"
                           for st, n in sorted(summary.by_status.items()))
        print(f"records     {counts or 'none'}", file=out)
        print(f"lost        {lost} (rolled back: a writer crashed or stalled past the readers' "
              f"timeout)", file=out)
        for problem in summary.problems:
            print(f"note        {escape(problem)}", file=out)
    if a.command == "stat":
        return 0
    try:
        layout = parse_layout(a.layout) if a.layout else None
    except ValueError as e:
        print(f"mappedbus: {escape(e)}", file=sys.stderr)
        return 2
    wanted = {int(s) for s in a.status.split(",")} if a.status else None
    shown = 0
    if not a.json:
        print(f"{'offset':>12}  {'status':<11}  {'meta':>11}  payload", file=out)
    for slot in scan(a.path, a.record_size, a.file_size, start=a.start):
        if wanted is not None and slot.status not in wanted:
            continue
        if a.max is not None and shown >= a.max:
            break
        shown += 1
        if layout is not None and len(slot.payload) >= layout._payload_size_:
            body = layout.from_bytes(slot.payload)
            text = repr(body).split(" ", 1)[1]
            value = body.as_dict()
        elif a.bytes and 0 <= slot.meta <= len(slot.payload):
            text = value = slot.payload[:slot.meta].hex()
        else:
            text = value = slot.payload.hex()
        if a.json:
            json.dump({"offset": slot.offset, "status": slot.status, "meta": slot.meta,
                       "payload": value if not isinstance(value, dict) else
                       {k: (v.hex() if isinstance(v, bytes) else v) for k, v in value.items()}}, out)
            out.write("\n")
        else:
            st = STATUS_NAMES.get(slot.status, f"BAD {slot.status}")
            print(f"{slot.offset:>12}  {st:<11}  {slot.meta:>11}  {escape(text)}", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
