"""``mappedbus stat|dump DIR`` for a rolling bus: bus.meta, every segment, the lost range.

Read-only, like the single-file inspector (``inspect``), whose dict schema ``describe``
shares (``docs/cli.md``); segments are read through ``inspect.survey`` and ``inspect.scan``.
"""
import contextlib
import dataclasses
import os

from ..formats.archive import archive_config
from ..formats.layout import (FIRST_RECORD_OFFSET, META_FILE, TOPICS_FILE, is_record_boundary,
                              join_position,
                              mapped_size, slot_size, split_position)
from ..formats.positions import end_boundary, gap_range, slots_per_segment
from ..rolling.archive import ArchiveTier
from ..rolling.directory import list_segments, open_dir, read_bus_meta, segment_path
from .slots import frames_of, open_read_only, slots_of
from .views import (InspectError, content_notes, escape, off_grid, record_counts, survey,
                    topic_names)

__all__ = ("describe", "check_start", "slots", "frames", "segment_file", "SegmentFile", "tier_of")


def tier_of(meta, path):
    """The ``ArchiveTier`` of the bus (its bus.meta names an archive), or None."""
    cfg = archive_config(meta, os.path.join(path, META_FILE))
    return None if cfg is None else ArchiveTier(cfg, meta, allow_foreign=True, ahead=False)


@dataclasses.dataclass(frozen=True)
class SegmentFile:
    """Segment open for reading (``segment_file``): ``fd``, a read-only descriptor of its
    bytes, and ``tier``, "hot" or "archive"."""
    fd: int
    tier: str


@contextlib.contextmanager
def segment_file(path, index, tier):
    """A ``SegmentFile`` of segment ``index``: the hot file, else the archived one (a
    compressed one decompressed into an anonymous memory file, ``memfd_create``, that the
    kernel frees with the process even if it is killed: nothing is left behind); closed
    after. FileNotFoundError if it is in neither."""
    hot = segment_path(path, index)
    if os.path.lexists(hot) or tier is None:
        fd, _ = open_read_only(hot)
        where = "hot"
    else:
        seg = tier.open_segment(index)
        if seg.fd is None:
            fd, _ = open_read_only(seg.path)
        else:
            fd, seg.fd = seg.fd, None           # ours to close now
        where = "archive"
    try:
        yield SegmentFile(fd, where)
    finally:
        os.close(fd)


def _segment(path, index, meta, tier=None):
    """The figures of segment ``index``, or None if retention removed it meanwhile."""
    try:
        with segment_file(path, index, tier) as seg:
            sv = survey(seg.fd, meta.record_size, meta.segment_size, framed=bool(meta.frames))
            where = seg.tier
    except FileNotFoundError:
        return None
    problems = []
    if sv.length < mapped_size(meta.segment_size):
        problems.append(f"{sv.length} bytes, shorter than the {mapped_size(meta.segment_size)} "
                        f"a segment of segment_size {meta.segment_size} has: truncated")
    if off_grid(sv.limit, meta.record_size):
        problems.append(f"limit {sv.limit} is not a record boundary for record_size "
                        f"{meta.record_size}: a corrupt segment")
    problems += content_notes(sv.counts)
    return {"index": index, "tier": where,
            "first_position": join_position(index, FIRST_RECORD_OFFSET, meta.segment_size),
            "limit": sv.limit, "limit_position": join_position(index, sv.limit, meta.segment_size),
            "file_bytes": sv.length,
            "records": record_counts(sv.counts), "problems": problems}


def describe(path, record_size=None):
    """The stat figures of the rolling bus in directory ``path`` as a dict, in the schema
    of ``inspect.describe`` (``docs/cli.md``). Sizes come from its bus.meta; a
    ``record_size`` that differs is InspectError."""
    path = os.fspath(path)
    open_dir(path, create=False, allow_foreign=True)
    meta = read_bus_meta(path, allow_foreign=True)
    mpath = os.path.join(path, META_FILE)
    if meta is None:
        raise InspectError(f"{escape(path)} is a directory without {META_FILE}: not a rolling "
                           f"bus")
    if record_size is not None and record_size != meta.record_size:
        raise InspectError(f"{escape(path)}: --record-size {record_size} given, but its "
                           f"metadata ({escape(mpath)}) says record_size {meta.record_size}")
    tier = tier_of(meta, path)
    indices = set(list_segments(path)) | (set(tier.segments()) if tier is not None else set())
    segs = [s for s in (_segment(path, i, meta, tier) for i in sorted(indices)) if s is not None]
    # Where writers are: the newest segment with records (a spare ahead of it has none).
    current = next((s for s in reversed(segs) if s["limit"] > FIRST_RECORD_OFFSET),
                   segs[0] if segs else None)
    lost = None
    if segs and segs[0]["index"] > 0:
        lf, lt, n = gap_range(0, FIRST_RECORD_OFFSET, segs[0]["index"], meta.segment_size,
                              meta.record_size)
        lost = {"from": lf, "to": lt, "slots": n}
    totals = {}
    for s in segs:
        for k, n in s["records"].items():
            totals[k] = totals.get(k, 0) + n
    return {
        "kind": "rolling", "path": path, "metadata": mpath, "bus_id": meta.id,
        "created_ns": meta.created_ns, "record_size": meta.record_size,
        "slot_size": slot_size(meta.record_size), "file_size": None,
        "segment_size": meta.segment_size,
        "retention": {"segments": meta.retain_segments, "bytes": meta.retain_bytes,
                      "age_ms": meta.retain_age_ms},
        "file_bytes": sum(s["file_bytes"] for s in segs),
        "capacity": slots_per_segment(meta.segment_size, meta.record_size),
        "positions": {"first": segs[0]["first_position"] if segs else FIRST_RECORD_OFFSET,
                      "limit": current["limit_position"] if current else FIRST_RECORD_OFFSET,
                      "end": None},
        "records": totals or record_counts({}), "full": False,
        "lost_to_retention": lost, "segments": segs,
        "archive": None if tier is None else {
            "dir": tier.cfg.dir, "compress": tier.cfg.compress, "after": tier.cfg.after,
            "segments": sum(1 for s in segs if s["tier"] == "archive")},
        "problems": [f"segment {s['index']}: {p}" for s in segs for p in s["problems"]],
        "frames": bool(meta.frames),
        "topics": topic_names(os.path.join(path, TOPICS_FILE)) if meta.frames else None,
    }


def check_start(d, start):
    """The first position to dump on the rolling bus ``d`` (describe's dict): ``start``
    checked as ``RollingBusReader.seek`` checks a position (None: the oldest record)."""
    indices = [s["index"] for s in d["segments"]]
    if start is None:
        return d["positions"]["first"]
    where = f"{escape(d['path'])}: --start {start}"
    size = d["segment_size"]
    k, off = split_position(start, size)
    end = end_boundary(size, d["record_size"])
    if not is_record_boundary(off, d["record_size"]) or off > end:
        raise InspectError(
            f"{where} is not a record boundary (offset {off} in segment {k}; records start at "
            f"{FIRST_RECORD_OFFSET} and take {d['slot_size']} bytes, the last ends at {end})")
    if not indices:
        raise InspectError(f"{escape(d['path'])} has no segment")
    if k < indices[0]:
        raise InspectError(f"{where} is in segment {k}, removed by retention: the oldest "
                           f"retained record is at position {d['positions']['first']}")
    if k > indices[-1]:
        raise InspectError(f"{where} is in segment {k}, past the newest segment {indices[-1]}")
    return start


def _walk(d, start, scanner):
    # (position, segment, item) for every item ``scanner`` (slots_of or frames_of, on an open
    # segment) finds in the segments of the rolling bus ``d`` from position ``start``, hot or archived.
    size = d["segment_size"]
    k, off = split_position(start, size)
    tier = None
    if d.get("archive"):
        tier = tier_of(read_bus_meta(d["path"], allow_foreign=True), d["path"])
    for s in d["segments"]:
        i = s["index"]
        if i < k:
            continue
        try:
            with segment_file(d["path"], i, tier) as seg:
                for item in scanner(seg.fd, d["record_size"], size,
                                    off if i == k else FIRST_RECORD_OFFSET):
                    yield join_position(i, item.offset, size), i, item
        except FileNotFoundError:
            continue            # removed by retention (or archived) meanwhile


def slots(d, start):
    """``(position, segment, Slot)`` for every allocated slot of the rolling bus ``d``
    from position ``start`` (from check_start), across its segments."""
    return _walk(d, start, _slots_from)


def _slots_from(fd, record_size, size, start):
    return slots_of(fd, record_size, size, start, False)


def frames(d, start):
    """``(position, segment, Frame)`` for every frame of the framed rolling bus ``d`` from
    position ``start``, across its segments."""
    return _walk(d, start, frames_of)
