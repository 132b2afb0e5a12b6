"""What ``mappedbus stat|dump`` show of a single-file bus, read slot by slot without changing
it (``slots``: with ``pread``, so it works on any file, however corrupt).

``describe`` takes the sizes from the bus's metadata file (``PATH.meta``) when it has one;
a file without one (the Java original's) needs the sizes given, and is then checked on the
record grid they imply: a limit off the grid or a status other than 0/1/2 is
``InspectError`` ("not a bus, or not one of that record size"), not a report of nonsense.
The dict it returns is the schema of ``docs/cli.md``, shared with ``views_rolling``.
"""
import os
from collections import Counter
from typing import NamedTuple, Optional

from ..formats.busmeta import meta_path, read_meta
from ..formats.layout import (FIRST_RECORD_OFFSET, META_MAGIC, STATUS_COMMITTED, STATUS_NOT_SET,
                              STATUS_ROLLED_BACK, TOPICS_SUFFIX, is_record_boundary, slot_size)
from .slots import Slot, frames_of, open_read_only, read_limit, scan, scan_frames, slots_of

__all__ = ("Summary", "Survey", "InspectError", "survey", "summarize", "off_grid", "content_notes",
           "describe", "check_start", "slots", "frames", "topic_names", "record_counts", "consumer_entries", "escape",
           "STATUS_NAMES")

STATUS_NAMES = {STATUS_NOT_SET: "not set", STATUS_COMMITTED: "committed",
                STATUS_ROLLED_BACK: "rolled back"}


class InspectError(ValueError):
    """The path cannot be inspected as asked (not a bus, sizes that disagree with its
    metadata, a start off the record grid, ...). The message is one line naming the path."""


class Summary(NamedTuple):
    path: str
    file_length: int        # bytes on disk
    file_size: int          # the logical size used for end checks
    record_size: int
    limit: int
    capacity: int           # records that fit in file_size
    allocated: int          # slots below min(limit, end of file)
    by_status: dict         # status -> count among allocated slots
    problems: list          # what looks wrong, in words


class Survey(NamedTuple):
    """One pass over a file's allocated slots."""
    length: int                     # st_size
    limit: int                      # as stored
    capacity: int                   # records that fit in min(file_size, length)
    end: int                        # offset just past the last record that fits
    counts: Counter                 # status -> slots below min(limit, end)
    bad_status: Optional[Slot]      # the first slot whose status is not 0/1/2
    bad_length: Optional[Slot]      # with lengths=True: the first whose meta is not 0..record_size


def survey(fd, record_size, file_size=None, *, lengths=False, framed=False):
    """Count the allocated slots of the open file ``fd`` by status, noting the first that
    no writer could have left (a status other than 0/1/2; with ``lengths``, a byte-array
    length outside 0..record_size). ``framed``: count frames (messages), not slots."""
    length = os.fstat(fd).st_size
    limit = read_limit(fd)
    step = slot_size(record_size)
    capacity = max(0, (min(length, length if file_size is None else file_size)
                       - FIRST_RECORD_OFFSET) // step)
    counts = Counter()
    bad_status = bad_length = None
    if framed:
        for f in frames_of(fd, record_size, file_size, FIRST_RECORD_OFFSET):
            counts[f.status] += 1
            if bad_status is None and f.status not in STATUS_NAMES:
                bad_status = Slot(f.offset, f.status, f.meta, b"")
        return Survey(length, limit, capacity, FIRST_RECORD_OFFSET + capacity * step, counts,
                      bad_status, None)
    for s in slots_of(fd, record_size, file_size, FIRST_RECORD_OFFSET, False):
        counts[s.status] += 1
        if bad_status is None and s.status not in STATUS_NAMES:
            bad_status = s
        if lengths and bad_length is None and not 0 <= s.meta <= record_size:
            bad_length = s
    return Survey(length, limit, capacity, FIRST_RECORD_OFFSET + capacity * step, counts,
                  bad_status, bad_length)


def off_grid(limit, record_size):
    """A limit no writer leaves: neither 0 (a new file) nor a record boundary."""
    return limit != 0 and not is_record_boundary(limit, record_size)


def summarize(path, record_size, file_size=None) -> Summary:
    """The figures of one file, problems in words (lenient: never raises for content)."""
    if record_size <= 0:
        raise ValueError(f"record_size must be positive, got {record_size}")
    fd, _ = open_read_only(path)
    try:
        sv = survey(fd, record_size, file_size)
    finally:
        os.close(fd)
    fsize = file_size if file_size is not None else sv.length
    end = min(sv.length, fsize)
    problems = []
    if off_grid(sv.limit, record_size):
        problems.append(f"limit {sv.limit} is not a record boundary for record_size "
                        f"{record_size}: wrong record_size, or a corrupt file")
    if sv.limit > end:
        problems.append(f"limit {sv.limit} is past the end ({end}): the bus is full "
                        f"(a writer's fetch-and-add went past the end)")
    if fsize > sv.length:
        problems.append(f"file_size {fsize} is larger than the file ({sv.length} bytes)")
    problems += content_notes(sv.counts, "corrupt, or the wrong record_size")
    return Summary(os.fspath(path), sv.length, fsize, record_size, sv.limit, sv.capacity,
                   sum(sv.counts.values()), dict(sv.counts), problems)


def content_notes(counts, why="corrupt"):
    """What the status counts of a bus file say is wrong with it, in words (``why``: the
    word for a status no writer leaves)."""
    notes = []
    bad = sum(n for st, n in counts.items() if st not in STATUS_NAMES)
    if bad:
        notes.append(f"{bad} slot(s) with a status other than 0/1/2: {why}")
    if counts.get(STATUS_NOT_SET):
        notes.append(f"{counts[STATUS_NOT_SET]} allocated slot(s) not committed: a writer is "
                     f"mid-write, or crashed (readers roll them back after their timeout)")
    return notes


def record_counts(counts):
    """The ``records`` object of the JSON schema from status -> count."""
    return {"allocated": sum(counts.values()),
            "committed": counts.get(STATUS_COMMITTED, 0),
            "rolled_back": counts.get(STATUS_ROLLED_BACK, 0),
            "pending": counts.get(STATUS_NOT_SET, 0),
            "corrupt": sum(n for st, n in counts.items() if st not in STATUS_NAMES)}


def consumer_entries(path):
    """The consumers of the bus at ``path`` (a file or a rolling bus's directory) as the
    ``consumers`` objects of the JSON schema (``docs/cli.md``), by name; [] without a
    registry. A corrupt registry is InspectError, one line naming the registry."""
    from ..consumers import registry_path
    from ..errors import MappedBusError
    from .metrics import list_consumers
    try:
        rows = list_consumers(path)
    except MappedBusError as e:     # CorruptBusError; a registry too short to map is another
        reg, text = registry_path(path), str(e)
        if text.startswith(repr(reg)):              # "'PATH' is not a ...": PATH: not a ...
            text = text[len(repr(reg)):].lstrip(":").strip()
            text = text[3:] if text.startswith("is ") else text
        raise InspectError(f"{escape(reg)}: {escape(text)}") from None
    return [{"name": c.name, "position": c.position, "lag": c.lag, "alive": bool(c.alive),
             "pid": c.pid or None, "expired": bool(c.expired),
             "committed_at": c.committed_at or None, "created_at": c.created_at}
            for c in sorted(rows, key=lambda c: c.name)]


def escape(text):
    """``text`` with every non-printable character (control characters, escape
    sequences, undecodable bytes of a file name) written as a Python escape: paths and
    payloads reach the terminal only this way."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def _single_meta(path, st):
    """(BusMeta or None, note or None) for the file ``path`` whose stat is ``st``."""
    mpath = meta_path(path)
    meta = read_meta(mpath, allow_foreign=True)
    if meta is None:
        return None, None
    if meta.kind != "single":
        raise InspectError(f"{escape(mpath)} describes a {meta.kind} bus, not the file "
                           f"{escape(path)}")
    if meta.inode != st.st_ino:
        return None, (f"{escape(mpath)} describes another file (inode {meta.inode}, this one "
                      f"is {st.st_ino}): ignored; the file was recreated by a process that "
                      f"writes no metadata")
    return meta, None


def describe(path, record_size=None, file_size=None, *, lengths=False):
    """The stat figures of the single-file bus ``path`` as a dict (``docs/cli.md``).

    Sizes come from ``PATH.meta`` when it describes this file; a size given that differs is
    InspectError. Without metadata ``record_size`` is required and the file must look like
    a bus of that record size (``lengths``: of byte-array records) on its record grid."""
    path = os.fspath(path)
    fd, st = open_read_only(path)
    try:
        meta, note = _single_meta(path, st)
        if meta is not None:
            for name, given, recorded in (("record_size", record_size, meta.record_size),
                                          ("file_size", file_size, meta.file_size)):
                if given is not None and given != recorded:
                    raise InspectError(
                        f"{escape(path)}: --{name.replace('_', '-')} {given} given, but its "
                        f"metadata ({escape(meta_path(path))}) says {name} {recorded}")
            record_size, file_size = meta.record_size, meta.file_size
        elif record_size is None:
            head = os.pread(fd, len(META_MAGIC), 0)
            if head == META_MAGIC.encode():
                raise InspectError(f"{escape(path)} is a bus metadata file: inspect the bus "
                                   f"beside it")
            raise InspectError(
                f"{escape(path)}: no metadata ({escape(meta_path(path))}), so its sizes are "
                f"unknown: a bus of the Java original needs --record-size (and --file-size "
                f"unless it is the file's length)")
        if file_size is None:
            file_size = st.st_size
        if file_size > st.st_size:
            raise InspectError(f"{escape(path)} is {st.st_size} bytes, shorter than its "
                               f"file_size {file_size}: truncated, or not a bus of that size")
        if file_size < FIRST_RECORD_OFFSET:
            raise InspectError(f"{escape(path)}: file_size {file_size} is smaller than the "
                               f"{FIRST_RECORD_OFFSET}-byte header: not a bus")
        framed = bool(meta is not None and meta.frames)
        sv = survey(fd, record_size, file_size, lengths=lengths and meta is None, framed=framed)
    finally:
        os.close(fd)
    problems = [note] if note else []
    if meta is None:
        _check_grid(path, record_size, sv, lengths)
    elif off_grid(sv.limit, record_size):
        problems.append(f"limit {sv.limit} is not a record boundary for record_size "
                        f"{record_size}: a corrupt file")
    full = sv.limit >= sv.end
    if full:
        problems.append(f"the bus is full: its {sv.capacity} records fill file_size "
                        f"{file_size} (limit {sv.limit}, end {sv.end})")
    problems += content_notes(sv.counts)
    return {
        "kind": "single", "path": path,
        "metadata": meta_path(path) if meta is not None else None,
        "bus_id": meta.id if meta is not None else None,
        "created_ns": meta.created_ns if meta is not None else None,
        "record_size": record_size, "slot_size": slot_size(record_size),
        "file_size": file_size, "segment_size": None, "retention": None,
        "file_bytes": sv.length, "capacity": sv.capacity,
        "positions": {"first": FIRST_RECORD_OFFSET, "limit": sv.limit, "end": sv.end},
        "records": record_counts(sv.counts), "full": full,
        "lost_to_retention": None, "segments": None, "problems": problems,
        "frames": framed, "topics": topic_names(path + TOPICS_SUFFIX) if framed else None,
    }


def topic_names(path):
    """{name: [ids]} of the topics file ``path`` ({} without one); a corrupt one is
    InspectError."""
    from .._core._topics import TopicsFile
    from ..errors import MappedBusError
    try:
        with TopicsFile(path, writable=False, allow_foreign=True) as t:
            table = t.names()
    except FileNotFoundError:
        return {}
    except (MappedBusError, OSError) as e:
        raise InspectError(f"{escape(path)}: {escape(str(e))}") from None
    out = {}
    for tid, name in sorted(table.items()):
        out.setdefault(name, []).append(tid)
    return out


def frames(d, start):
    """``(position, None, Frame)`` for every frame of the framed bus ``d`` from ``start``."""
    for f in scan_frames(d["path"], d["record_size"], d["file_size"], start=start):
        yield f.offset, None, f


def _check_grid(path, record_size, sv, lengths):
    """InspectError unless a file without metadata looks like a bus of ``record_size``."""
    why = f"not a bus, or not one of record_size {record_size}"
    if off_grid(sv.limit, record_size):
        raise InspectError(f"{escape(path)}: limit {sv.limit} is not a record boundary for "
                           f"record_size {record_size} ({FIRST_RECORD_OFFSET}, "
                           f"{FIRST_RECORD_OFFSET + slot_size(record_size)}, ...): {why}")
    if sv.bad_status is not None:
        raise InspectError(f"{escape(path)}: the slot at offset {sv.bad_status.offset} has "
                           f"status {sv.bad_status.status}, not 0, 1 or 2: {why}")
    if lengths and sv.bad_length is not None:
        raise InspectError(f"{escape(path)}: the slot at offset {sv.bad_length.offset} holds "
                           f"length {sv.bad_length.meta}, outside 0..{record_size}: {why} "
                           f"with byte-array records")


def check_start(d, start):
    """The first offset to dump on the bus ``d`` (describe's dict): ``start`` checked to be
    a record boundary (None: the first record)."""
    if start is None:
        return FIRST_RECORD_OFFSET
    step = d["slot_size"]
    if not is_record_boundary(start, d["record_size"]):
        raise InspectError(
            f"{escape(d['path'])}: --start {start} is not a record boundary for record_size "
            f"{d['record_size']} ({FIRST_RECORD_OFFSET}, {FIRST_RECORD_OFFSET + step}, "
            f"{FIRST_RECORD_OFFSET + 2 * step}, ...)")
    return start


def slots(d, start):
    """``(position, None, Slot)`` for every allocated slot of the bus ``d`` from offset
    ``start`` (from check_start): the rows ``mappedbus dump`` prints."""
    for s in scan(d["path"], d["record_size"], d["file_size"], start=start):
        yield s.offset, None, s
