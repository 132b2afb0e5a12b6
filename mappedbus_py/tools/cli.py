"""``mappedbus`` (or ``python -m mappedbus_py``): look inside a bus.

    mappedbus stat /dev/shm/prices                  # sizes from /dev/shm/prices.meta
    mappedbus stat /dev/shm/prices.d --json         # a rolling bus: its directory
    mappedbus dump /dev/shm/prices --layout PriceUpdate --status 0,2
    mappedbus dump java.bus -r 16 -f 4096 --layout "id:int64,price:float64"
    mappedbus consumers /dev/shm/prices             # named consumers: position, lag, alive
    mappedbus groups /dev/shm/jobs                  # work groups: members, acked, pending
    mappedbus exporter /dev/shm/prices /dev/shm/prices.d --port 9478   # Prometheus metrics
    mappedbus top /dev/shm/prices                   # a live view: rates and lag

Nothing is written (``dump --follow`` aside: its parking slot): it is safe on a live bus.
File names and payload bytes are printed escaped (no raw control characters reach the
terminal). Errors (no such file, not a bus,
sizes that disagree with the metadata, ...) are one line on stderr and exit status 2. The
JSON of ``--json`` is described in ``docs/cli.md``.
"""
import argparse
import dataclasses
import json
import os
import stat as _stat
import sys
import time
from typing import Callable

from .. import messages
from . import views, views_rolling
from ..errors import MappedBusError
from .slots import Slot
from .views import STATUS_NAMES, InspectError, escape
from ..formats.layout import FIRST_RECORD_OFFSET, META_FILE
from .exporter import DEFAULT_HOST, DEFAULT_PORT

__all__ = ("main", "parse_layout")

_TYPES = {"int8": messages.int8, "int16": messages.int16, "int32": messages.int32,
          "int64": messages.int64, "uint8": messages.uint8, "uint16": messages.uint16,
          "uint32": messages.uint32, "uint64": messages.uint64, "float32": messages.float32,
          "float64": messages.float64}
_SHIPPED = {c.__name__.lower(): c for c in (messages.PriceUpdate, messages.Token, messages.Trade)}


def parse_layout(spec):
    """A Message class from a shipped name (``PriceUpdate``) or a field list
    (``"source:int32,price:int32,tag:bytes8"``)."""
    if spec.lower() in _SHIPPED:
        return _SHIPPED[spec.lower()]
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


# -- arguments ------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    """Usage errors as one line on stderr, exit status 2, like every other error."""

    def error(self, message):
        self.exit(2, f"mappedbus: {escape(message)} (see {self.prog} -h)\n")


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


def _int32(text):
    value = _integer(text)
    if not -2**31 <= value < 2**31:
        raise argparse.ArgumentTypeError(f"{value} is not an int32")
    return value


def _statuses(text):
    legend = "0 not set, 1 committed, 2 rolled back"
    try:
        wanted = frozenset(int(s) for s in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{escape(text)!r} is not a comma-separated list of statuses ({legend}), "
            f"e.g. 0,2") from None
    bad = sorted(wanted - STATUS_NAMES.keys())
    if bad:
        raise argparse.ArgumentTypeError(f"{', '.join(map(str, bad))}: not a status ({legend})")
    return wanted


def _non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{escape(text)!r} is not a number of seconds >= 0")
    return value


def _port(text):
    value = _integer(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a TCP port (0 to 65535)")
    return value


def _positive_float(text):
    value = _non_negative_float(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be more than 0 seconds")
    return value


def _args(argv):
    p = _Parser(prog="mappedbus", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name, text in (("stat", "sizes, limit, capacity and record counts"),
                       ("dump", "the figures of stat, then every allocated slot")):
        s = sub.add_parser(name, help=text, description=text)
        s.add_argument("path", help="a bus file, or a rolling bus's directory")
        s.add_argument("--record-size", "-r", type=_positive,
                       help="payload bytes per record: read from the bus's metadata (PATH.meta, "
                            "DIR/bus.meta); needed for a file without one (the Java original's)")
        s.add_argument("--file-size", "-f", type=_positive,
                       help="the file size the bus was made with: read from PATH.meta; for a "
                            "file without metadata the default is its length. Not for a "
                            "rolling bus")
        s.add_argument("--json", action="store_true",
                       help="machine-readable output (docs/cli.md)")
        if name == "dump":
            how = s.add_mutually_exclusive_group()
            how.add_argument("--layout", "-l",
                             help="decode payloads: PriceUpdate, Token, Trade or name:type,...; "
                                  "a shipped layout decodes only records of its type id")
            how.add_argument("--bytes", action="store_true",
                             help="byte-array records: show the first <meta> payload bytes")
            s.add_argument("--type-id", type=_int32,
                           help="decode with --layout only records of this type id (default: "
                                "the shipped layout's; a field list decodes every record)")
            s.add_argument("--status", type=_statuses,
                           help="only these statuses (0 not set, 1 committed, 2 rolled back), "
                                "e.g. 0,2")
            s.add_argument("--max", type=_non_negative, default=None,
                           help="at most this many slots")
            s.add_argument("--follow", "-F", action="store_true",
                           help="after the slots there are, print each committed record as it "
                                "comes (as tail -f; the reader parks and writers wake it) "
                                "until Ctrl-C or --idle-exit")
            s.add_argument("--idle-exit", type=_non_negative_float, default=None,
                           metavar="SECONDS",
                           help="with --follow: stop once no record came for this long")
            s.add_argument("--start", type=_integer, default=None,
                           help="the position of the first slot (a record boundary; on a "
                                "rolling bus a position across segments, as "
                                "RollingBusReader.seek takes it)")
    c = sub.add_parser("consumers", help="the named consumers: position, lag, liveness",
                       description="the named consumers of a bus (its registry beside it): "
                                   "position, lag, liveness, last commit")
    c.add_argument("path", help="a bus file, or a rolling bus's directory")
    c.add_argument("--json", action="store_true", help="machine-readable output (docs/cli.md)")
    g = sub.add_parser("groups", help="the work groups: members, acked, pending, dead letters",
                       description="the work groups of a bus (their files beside it): members "
                                   "(pid, alive, in flight), acked, pending, redelivered, "
                                   "dead-lettered, the oldest unacked record's age")
    g.add_argument("path", help="a bus file, or a rolling bus's directory")
    g.add_argument("--json", action="store_true", help="machine-readable output (docs/groups.md)")
    e = sub.add_parser("exporter", help="serve metrics of buses for Prometheus",
                       description="serve the metrics of the buses over HTTP in the Prometheus "
                                   "text format (/metrics) until Ctrl-C or SIGTERM")
    e.add_argument("paths", nargs="+", metavar="PATH",
                   help="a bus file (with metadata), or a rolling bus's directory")
    e.add_argument("--host", default=DEFAULT_HOST,
                   help=f"the address to listen on (default {DEFAULT_HOST}: this machine "
                        f"only; 0.0.0.0 or :: for every interface)")
    e.add_argument("--port", type=_port, default=DEFAULT_PORT,
                   help=f"the TCP port (default {DEFAULT_PORT}; 0: any free port, printed)")
    t = sub.add_parser("top", help="a live view of a bus: rates and lag",
                       description="a live view of a bus, refreshed every second: records "
                                   "written per second, each consumer's lag and rate")
    t.add_argument("path", help="a bus file (with metadata), or a rolling bus's directory")
    t.add_argument("--interval", type=_positive_float, default=1.0, metavar="SECONDS",
                   help="seconds between frames (default 1)")
    t.add_argument("--once", action="store_true",
                   help="print one frame (rates over one interval) without escape sequences")
    a = p.parse_args(argv)
    if a.command == "dump":
        dump = sub.choices["dump"]
        if a.start is not None and a.start < FIRST_RECORD_OFFSET:
            dump.error(f"argument --start: {a.start} is before the first record "
                       f"({FIRST_RECORD_OFFSET})")
        if a.type_id is not None and not a.layout:
            dump.error("argument --type-id: only with --layout")
        if a.idle_exit is not None and not a.follow:
            dump.error("argument --idle-exit: only with --follow")
        if a.layout:
            try:
                parse_layout(a.layout)
            except ValueError as e:
                dump.error(f"argument --layout/-l: {e}")
    return a


# -- output ---------------------------------------------------------------------------------

def _records_line(r):
    text = (f"committed {r['committed']}, rolled back {r['rolled_back']}, "
            f"pending {r['pending']}")
    return text + (f", corrupt {r['corrupt']}" if r["corrupt"] else "")


def _print_stat(d, out):
    def line(label, text):
        print(f"{label:<12}{text}", file=out)
    rolling = d["kind"] == "rolling"
    if rolling:
        line("rolling bus", f"{escape(d['path'])} ({len(d['segments'])} segments, "
                            f"{d['file_bytes']} bytes)")
    else:
        line("bus", f"{escape(d['path'])} (single file, {d['file_bytes']} bytes)")
    if d["metadata"] is None:
        line("metadata", "none (a file of the Java original): sizes as given")
    else:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(d["created_ns"] / 1e9))
        line("metadata", f"{escape(d['metadata'])}   bus id {d['bus_id']}   created {created}")
    if rolling:
        line("sizes", f"segment_size {d['segment_size']}   record_size {d['record_size']}   "
                      f"capacity {d['capacity']} records per segment")
        ret = d["retention"]
        line("retention", f"segments {ret['segments'] or 'no limit'}   bytes "
                          f"{ret['bytes'] or 'no limit'}   age_ms {ret['age_ms'] or 'no limit'}")
        line("positions", f"first {d['positions']['first']}   limit {d['positions']['limit']}")
    else:
        line("sizes", f"file_size {d['file_size']}   record_size {d['record_size']}   "
                      f"capacity {d['capacity']} records")
        unit = "messages" if d.get("frames") else "slots"
        line("limit", f"{d['positions']['limit']}   allocated {d['records']['allocated']} "
                      f"{unit}   end {d['positions']['end']}" + ("   (full)" if d["full"] else ""))
    line("records", _records_line(d["records"]) + ("   (messages)" if d.get("frames") else ""))
    if d.get("frames"):
        names = ", ".join(f"{escape(n)} {ids}" for n, ids in d["topics"].items()) or "none"
        line("frames", f"framed: messages of any size (docs/messages.md); topics: {names}")
    if rolling:
        lost = d["lost_to_retention"]
        line("lost", f"positions {lost['from']} to {lost['to']} ({lost['slots']} record "
                     f"slots) removed by retention" if lost else "nothing removed by retention")
    for problem in d["problems"]:
        line("note", escape(problem))
    if d.get("consumers") is not None:
        alive = sum(1 for c in d["consumers"] if c["alive"])
        line("consumers", f"{len(d['consumers'])} registered, {alive} alive")
        if d["consumers"]:
            _print_consumers(d["consumers"], out, indent="  ")
    if d.get("groups"):
        line("groups", f"{len(d['groups'])} work groups")
        for g in d["groups"]:
            print("  " + _group_line(g), file=out)
    if rolling:
        print(f"{'segment':>8}  {'first position':>16}  {'limit':>10}  records", file=out)
        for s in d["segments"]:
            print(f"{s['index']:>8}  {s['first_position']:>16}  {s['limit']:>10}  "
                  f"{_records_line(s['records'])}", file=out)


def _payload(slot, layout, type_id, as_bytes):
    """(text, JSON value) of a slot's payload: decoded by ``layout`` when its type id
    matches (or ``type_id`` is None), the used bytes of a byte array, else raw hex."""
    if layout is not None and (type_id is None or slot.meta == type_id):
        body = layout.from_bytes(slot.payload)
        value = {k: (v.hex() if isinstance(v, bytes) else v) for k, v in body.as_dict().items()}
        return repr(body).split(" ", 1)[1], value
    if as_bytes and 0 <= slot.meta <= len(slot.payload):
        text = slot.payload[:slot.meta].hex()
    else:
        text = slot.payload.hex()
    return text, text


def _dump(rows, a, layout, type_id, out, shown=0, header=True):
    """Print the slots ``rows`` yields (position, segment or None, Slot): both kinds of bus.
    Returns how many were shown, ``shown`` included."""
    if not a.json and header:
        print(f"{'position':>16}  {'status':<11}  {'meta':>11}  payload", file=out)
    if a.max == 0:
        return shown
    for position, segment, slot in rows:
        if a.status is not None and slot.status not in a.status:
            continue
        text, value = _payload(slot, layout, type_id, a.bytes)
        if a.json:
            json.dump({"position": position, "segment": segment, "status": slot.status,
                       "meta": slot.meta, "payload": value}, out)
            out.write("\n")
        else:
            st = STATUS_NAMES.get(slot.status, f"BAD {slot.status}")
            print(f"{position:>16}  {st:<11}  {slot.meta:>11}  {escape(text)}", file=out)
        shown += 1
        if a.follow:
            out.flush()
        if shown == a.max:
            return shown
    return shown


def _dump_frames(rows, a, out, topics):
    """Print the frames ``rows`` yields (position, segment or None, Frame). Returns how many
    were shown."""
    names = {i: n for n, ids in (topics or {}).items() for i in ids}
    shown = 0
    if not a.json:
        print(f"{'position':>16}  {'status':<11}  {'slots':>7}  {'topic':<12}  {'length':>10}  "
              f"payload", file=out)
    if a.max == 0:
        return shown
    for position, segment, f in rows:
        if a.status is not None and f.status not in a.status:
            continue
        topic = names.get(f.topic, f"#{f.topic}") if f.topic else None
        more = f.length > len(f.preview)
        if a.json:
            json.dump({"position": position, "segment": segment, "status": f.status,
                       "slots": f.slots, "topic": topic, "length": f.length if f.status == 1
                       else None, "flags": f.flags, "preview": f.preview.hex()}, out)
            out.write("\n")
        else:
            st = STATUS_NAMES.get(f.status, f"BAD {f.status}")
            length = f.length if f.status == 1 else "-"
            print(f"{position:>16}  {st:<11}  {f.slots:>7}  {escape(topic or '-'):<12}  "
                  f"{length:>10}  {f.preview.hex()}{'...' if more else ''}", file=out)
        shown += 1
        if shown == a.max:
            return shown
    return shown


def _follow(d, a, layout, type_id, out, shown):
    """--follow: every record committed from the limit the dump stopped at, as it comes (the
    reader parks between records; writers wake it)."""
    from .._core._reader import MappedBusReader
    from ..rolling import RollingBusReader
    rolling = d["kind"] == "rolling"
    start = d["positions"]["limit"]
    if rolling:
        reader = RollingBusReader(a.path, start=start, read_only=True, on_gap="skip")
    else:
        start = min(start, d["positions"]["end"])
        reader = MappedBusReader(a.path, d["file_size"], d["record_size"], start=start,
                                 read_only=True)
    with reader:
        rows = ((rec.position, reader.segment if rolling else None,
                 Slot(rec.position, 1, rec.meta, rec.payload))
                for rec in reader.records(timeout=a.idle_exit))
        return _dump(rows, a, layout, type_id, out, shown, header=False)


# -- the command ----------------------------------------------------------------------------

def _check_bus(path):
    """The lstat of ``path``: InspectError unless it exists and, as a directory, has a
    bus.meta (a rolling bus)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise InspectError(f"{escape(path)}: no such file or directory") from None
    if _stat.S_ISDIR(st.st_mode) and not os.path.isfile(os.path.join(path, META_FILE)):
        raise InspectError(f"{escape(path)} is a directory without {META_FILE}: not a rolling "
                           f"bus")
    return st


def _ago(seconds):
    if seconds < 120:
        return f"{seconds:.1f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def _print_consumers(rows, out, indent=""):
    """The consumers table (``consumers``, and ``stat`` under its figures)."""
    if not rows:
        print(f"{indent}no consumers registered", file=out)
        return
    now = time.time()
    print(f"{indent}{'consumer':<24} {'position':>16} {'lag':>12}  {'state':<8} {'pid':>8}  "
          f"last commit", file=out)
    for r in rows:
        state = "expired" if r["expired"] else ("alive" if r["alive"] else "stopped")
        last = _ago(max(0.0, now - r["committed_at"])) if r["committed_at"] else "never"
        lag = "-" if r["lag"] is None else r["lag"]
        print(f"{indent}{escape(r['name']):<24} {r['position']:>16} {lag:>12}  "
              f"{state:<8} {r['pid'] or '-':>8}  {last}", file=out)


def _consumers_cmd(a, out):
    _check_bus(a.path)
    rows = views.consumer_entries(a.path)
    if a.json:
        json.dump({"path": a.path, "consumers": rows}, out)
        out.write("\n")
    else:
        _print_consumers(rows, out)
    return 0


def _group_row(info):
    # GroupInfo as JSON: liveness by name ("alive", "dead", "unknown")
    d = dataclasses.asdict(info)
    d["members"] = [dict(dataclasses.asdict(m), alive=m.alive.value) for m in info.members]
    return d


def _group_line(g):
    """One line for a group (a ``_group_row``): ``groups``, and ``stat`` for each group."""
    alive = sum(1 for m in g["members"] if m["alive"] == "alive")
    return (f"group {escape(g['name'])}: acked {g['acked']}, pending {g['pending']}, "
            f"redelivered {g['redelivered']}, dead-lettered {g['dead_lettered']}, oldest "
            f"unacked {g['oldest_unacked_age']:.3f} s, {alive} of {len(g['members'])} members "
            f"alive; records {g['start']}..{g['end']} (window {g['window']}, lease "
            f"{g['lease']:g} s, max_deliveries {g['max_deliveries']})")


def _stat_groups(path, d):
    # stat: the work groups (a list of _group_row), or None and a note if they cannot be read.
    from ..groups import groups
    try:
        d["groups"] = [_group_row(g) for g in groups(path, allow_foreign=True)]
    except (MappedBusError, OSError, ValueError) as e:
        d["groups"] = None
        d["problems"].append(f"work groups: {e}")


def _groups_cmd(a, out):
    from ..groups import groups
    _check_bus(a.path)
    rows = groups(a.path)
    if a.json:
        json.dump({"path": a.path, "groups": [_group_row(g) for g in rows]}, out)
        out.write("\n")
        return 0
    if not rows:
        print("no work groups", file=out)
    for g in rows:
        print(_group_line(_group_row(g)), file=out)
        print(f"  {'member':>6} {'pid':>8}  {'state':<7} {'in flight':>9} {'delivered':>12} "
              f"{'acked':>12}  name", file=out)
        for m in g.members:
            print(f"  {m.index:>6} {m.pid:>8}  {m.alive.value:<7} {m.in_flight:>9} "
                  f"{m.delivered:>12} {m.acked:>12}  {escape(m.name)}", file=out)
    return 0


def _exporter(a, out):
    import signal
    import threading
    from .exporter import serve
    for path in a.paths:
        _check_bus(path)
        views.consumer_entries(path)       # a corrupt registry: refused now, one line
    try:
        server, _, stop = serve(a.paths, a.host, a.port)
    except OSError as e:
        if e.filename is None:
            raise InspectError(f"{escape(a.host)}:{a.port}: cannot listen: "
                               f"{e.strerror or e}") from None
        raise
    done = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: done.set())
    host = a.host if ":" not in a.host else f"[{a.host}]"
    print(f"serving the metrics of {len(a.paths)} bus(es) on "
          f"http://{host}:{server.server_port}/metrics", file=out, flush=True)
    try:
        while not done.wait(3600):
            pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        stop()
    return 0


def _top(a, out):
    from . import top
    _check_bus(a.path)
    views.consumer_entries(a.path)
    return top.run(a.path, out, interval=a.interval, once=a.once)


@dataclasses.dataclass(frozen=True)
class _BusView:
    """What ``stat`` and ``dump`` read of one kind of bus (``views``, ``views_rolling``)."""
    describe: Callable      # (args) -> the stat dict of docs/cli.md
    check_start: Callable   # (dict, --start) -> the offset or position to dump from
    slots: Callable         # (dict, start) -> (position, segment or None, Slot) rows
    frames: Callable        # (dict, start) -> (position, segment or None, Frame) rows (framed)


_SINGLE_FILE = _BusView(
    describe=lambda a: views.describe(a.path, a.record_size, a.file_size,
                                      lengths=a.command == "dump" and a.bytes),
    check_start=views.check_start, slots=views.slots, frames=views.frames)
_ROLLING = _BusView(describe=lambda a: views_rolling.describe(a.path, a.record_size),
                    check_start=views_rolling.check_start, slots=views_rolling.slots,
                    frames=views_rolling.frames)


def _bus_view(a):
    """The view of the bus at ``a.path`` and its stat dict."""
    st = _check_bus(a.path)
    if not _stat.S_ISDIR(st.st_mode):
        return _SINGLE_FILE, _SINGLE_FILE.describe(a)
    if a.file_size is not None:
        raise InspectError(f"{escape(a.path)}: --file-size does not apply to a rolling bus "
                           f"(each segment's size is segment_size in its {META_FILE})")
    return _ROLLING, _ROLLING.describe(a)


def _stat_cmd(a, out):
    _, d = _bus_view(a)
    try:
        d["consumers"] = views.consumer_entries(a.path)
    except InspectError as e:                   # a corrupt registry: a note, as for the bus
        d["consumers"] = None
        d["problems"].append(str(e))
    _stat_groups(a.path, d)
    if a.json:
        json.dump(d, out)
        out.write("\n")
    else:
        _print_stat(d, out)
    return 0


def _dump_cmd(a, out):
    view, d = _bus_view(a)
    layout = type_id = None
    if a.layout:
        layout = parse_layout(a.layout)
        if layout._payload_size_ > d["record_size"]:
            raise InspectError(f"--layout {escape(a.layout)} is {layout._payload_size_} bytes "
                               f"wide, wider than the records of {escape(a.path)} "
                               f"(record_size {d['record_size']})")
        type_id = a.type_id if a.type_id is not None else \
            getattr(_SHIPPED.get(a.layout.lower()), "type_id", None)
    start = view.check_start(d, a.start)
    if not a.json:
        _print_stat(d, out)
    if d.get("frames"):
        if layout is not None or a.follow:
            raise InspectError(f"{escape(a.path)} is a framed bus: --layout and --follow "
                               f"apply to fixed records (dump shows its frames)")
        _dump_frames(view.frames(d, start), a, out, d["topics"])
        return 0
    shown = _dump(view.slots(d, start), a, layout, type_id, out)
    if a.follow and shown != a.max:
        _follow(d, a, layout, type_id, out, shown)
    return 0


#: The commands, by the name a user types: each runs with the parsed arguments and the output.
COMMANDS = {"stat": _stat_cmd, "dump": _dump_cmd, "consumers": _consumers_cmd,
            "groups": _groups_cmd, "exporter": _exporter, "top": _top}


def _run(a, out):
    return COMMANDS[a.command](a, out)


def _message(e):
    """One line for an error: ``path: what`` for a system error, else its text."""
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        return escape(f"{e.filename}: {e.strerror[:1].lower()}{e.strerror[1:]}")
    return escape(e)


def main(argv=None):
    """The ``mappedbus`` command (``stat``, ``dump``, ...; see docs/cli.md) with ``argv``
    (default: ``sys.argv[1:]``); returns the exit status."""
    try:
        a = _args(argv)
    except SystemExit as e:      # a usage error (one line on stderr, exit 2) or --help
        return e.code if isinstance(e.code, int) else 2
    try:
        return _run(a, sys.stdout)
    except KeyboardInterrupt:
        return 130                  # Ctrl-C ends --follow: the shell's code for SIGINT
    except BrokenPipeError:
        # The reader of the output went away (``| head``): stop quietly, and keep Python
        # from failing again when it flushes stdout at exit.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 1
    except (MappedBusError, OSError, ValueError) as e:
        print(f"mappedbus: {_message(e)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
