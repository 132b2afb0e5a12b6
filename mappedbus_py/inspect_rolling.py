"""``mappedbus stat|dump DIR`` for a rolling bus: bus.meta, every segment, the lost range.

Read-only, like the single-file inspector: segments are read through ``inspect.scan``.
"""
import json
import os
import time

from .inspect import STATUS_NAMES, scan, summarize
from .layout import FIRST_RECORD_OFFSET
from .rolling import gap_range, list_segments, read_bus_meta, segment_path

__all__ = ("describe", "main")


def describe(path, record_size=None):
    """A dict with the bus's metadata, its segments and the range lost to retention."""
    meta = read_bus_meta(path, allow_foreign=True)
    if meta is None:
        raise FileNotFoundError(f"{path!r} holds no bus.meta: not a rolling bus")
    if record_size is not None and record_size != meta.record_size:
        raise ValueError(f"{path!r} has record_size {meta.record_size} in its bus.meta, "
                         f"not {record_size}")
    segs = []
    for i in list_segments(path):
        try:
            s = summarize(segment_path(path, i), meta.record_size, meta.segment_size)
        except FileNotFoundError:
            continue                # removed by retention meanwhile
        segs.append({"index": i, "first_position": i * meta.segment_size + FIRST_RECORD_OFFSET,
                     "limit": s.limit, "limit_position": i * meta.segment_size + s.limit,
                     "capacity": s.capacity, "allocated": s.allocated,
                     "by_status": {STATUS_NAMES.get(k, f"status {k}"): n
                                   for k, n in sorted(s.by_status.items())},
                     "problems": s.problems})
    lost = None
    if segs and segs[0]["index"] > 0:
        lf, lt, n = gap_range(0, FIRST_RECORD_OFFSET, segs[0]["index"], meta.segment_size,
                              meta.record_size)
        lost = {"from": lf, "to": lt, "slots": n}
    return {"path": os.fspath(path), "bus_id": meta.id, "created_ns": meta.created_ns,
            "record_size": meta.record_size, "segment_size": meta.segment_size,
            "retain_segments": meta.retain_segments, "retain_bytes": meta.retain_bytes,
            "retain_age_ms": meta.retain_age_ms, "segments": segs, "lost_to_retention": lost,
            "rolled_back": sum(s["by_status"].get("rolled back", 0) for s in segs)}


def main(a, out):
    """The rolling-bus part of ``mappedbus stat|dump`` (``a``: cli's parsed arguments)."""
    d = describe(a.path, a.record_size)
    if a.json and a.command == "stat":
        json.dump(d, out)
        out.write("\n")
        return 0
    if not a.json:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(d["created_ns"] / 1e9))
        print(f"rolling bus {d['path']}", file=out)
        print(f"bus id      {d['bus_id']}   created {created}", file=out)
        print(f"sizes       segment_size {d['segment_size']}   record_size {d['record_size']}",
              file=out)
        print(f"retention   segments {d['retain_segments'] or 'no limit'}   bytes "
              f"{d['retain_bytes'] or 'no limit'}   age_ms {d['retain_age_ms'] or 'no limit'}",
              file=out)
        lost = d["lost_to_retention"]
        print("lost        " + (f"positions {lost['from']} to {lost['to']} ({lost['slots']} "
                                 f"record slots) removed by retention" if lost else "nothing "
                                 "removed by retention"), file=out)
        print(f"{'segment':>8}  {'first position':>16}  {'limit':>10}  records", file=out)
        for s in d["segments"]:
            counts = ", ".join(f"{k}: {n}" for k, n in s["by_status"].items()) or "none"
            print(f"{s['index']:>8}  {s['first_position']:>16}  {s['limit']:>10}  {counts}",
                  file=out)
            for problem in s["problems"]:
                print(f"{'':>8}  note: {problem}", file=out)
    if a.command == "stat":
        return 0
    from .cli import parse_layout
    layout = parse_layout(a.layout) if a.layout else None
    wanted = {int(s) for s in a.status.split(",")} if a.status else None
    shown = 0
    if not a.json:
        print(f"{'position':>16}  {'status':<11}  {'meta':>11}  payload", file=out)
    for s in d["segments"]:
        base = s["index"] * d["segment_size"]
        try:
            slots = list(scan(segment_path(a.path, s["index"]), d["record_size"],
                              d["segment_size"]))
        except FileNotFoundError:
            continue
        for slot in slots:
            if wanted is not None and slot.status not in wanted:
                continue
            if a.max is not None and shown >= a.max:
                return 0
            shown += 1
            if layout is not None and len(slot.payload) >= layout._payload_size_:
                body = layout.from_bytes(slot.payload)
                text, value = repr(body).split(" ", 1)[1], body.as_dict()
                value = {k: (v.hex() if isinstance(v, bytes) else v) for k, v in value.items()}
            elif a.bytes and 0 <= slot.meta <= len(slot.payload):
                text = value = slot.payload[:slot.meta].hex()
            else:
                text = value = slot.payload.hex()
            if a.json:
                json.dump({"position": base + slot.offset, "segment": s["index"],
                           "status": slot.status, "meta": slot.meta, "payload": value}, out)
                out.write("\n")
            else:
                st = STATUS_NAMES.get(slot.status, f"BAD {slot.status}")
                print(f"{base + slot.offset:>16}  {st:<11}  {slot.meta:>11}  {text}", file=out)
    return 0


