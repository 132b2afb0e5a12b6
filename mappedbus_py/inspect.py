"""Read a bus file slot by slot without changing it: what the CLI dump shows.

Works on any file, however corrupt: it reads through a read-only ``mmap`` and never
looks past the file's end, so a wrong ``record_size`` or a garbage limit only gives odd
rows, never a crash.
"""
import mmap
import os
import struct
from collections import Counter
from typing import NamedTuple, Optional

from .layout import (FIRST_RECORD_OFFSET, HEADER_SIZE, LIMIT_OFFSET, METADATA_OFFSET,
                     PAYLOAD_OFFSET, STATUS_COMMITTED, STATUS_NOT_SET, STATUS_ROLLED_BACK,
                     slot_size)

__all__ = ("Slot", "Summary", "scan", "summarize", "STATUS_NAMES")

STATUS_NAMES = {STATUS_NOT_SET: "not set", STATUS_COMMITTED: "committed",
                STATUS_ROLLED_BACK: "rolled back"}


class Slot(NamedTuple):
    offset: int
    status: int
    meta: int
    payload: bytes


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


def _open(path):
    with open(path, "rb") as f:
        length = os.fstat(f.fileno()).st_size
        if length == 0:
            return None, 0
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), length


def scan(path, record_size, file_size=None, start=FIRST_RECORD_OFFSET, all_slots=False):
    """Yield every allocated slot (below the limit) as a ``Slot``; with ``all_slots`` also
    the empty ones up to the end of the file."""
    if record_size <= 0:
        raise ValueError(f"record_size must be positive, got {record_size}")
    m, length = _open(path)
    if m is None:
        return
    try:
        end = min(length, file_size if file_size is not None else length)
        limit = struct.unpack_from("<q", m, LIMIT_OFFSET)[0] if length >= 8 else 0
        stop = end if all_slots else min(end, max(limit, 0))
        step = slot_size(record_size)
        pos = start
        while pos + step <= end and pos < stop:
            status, meta = struct.unpack_from("<ii", m, pos)
            yield Slot(pos, status, meta, m[pos + PAYLOAD_OFFSET:pos + step])
            pos += step
    finally:
        m.close()


def summarize(path, record_size, file_size=None) -> Summary:
    """The figures a user needs when a reader seems stuck."""
    length = os.stat(path).st_size
    fsize = file_size if file_size is not None else length
    limit = 0
    if length >= 8:
        with open(path, "rb") as f:
            limit = struct.unpack("<q", f.read(8))[0]
    step = slot_size(record_size)
    end = min(length, fsize)
    capacity = max(0, (end - FIRST_RECORD_OFFSET) // step)
    counts = Counter(s.status for s in scan(path, record_size, file_size))
    problems = []
    if limit != 0 and (limit < FIRST_RECORD_OFFSET or (limit - FIRST_RECORD_OFFSET) % step):
        problems.append(f"limit {limit} is not a record boundary for record_size "
                        f"{record_size}: wrong record_size, or a corrupt file")
    if limit > end:
        problems.append(f"limit {limit} is past the end ({end}): the bus is full "
                        f"(a writer's fetch-and-add went past the end)")
    if fsize > length:
        problems.append(f"file_size {fsize} is larger than the file ({length} bytes)")
    bad = sum(n for st, n in counts.items() if st not in STATUS_NAMES)
    if bad:
        problems.append(f"{bad} slot(s) with a status other than 0/1/2: corrupt, or the "
                        f"wrong record_size")
    if counts.get(STATUS_NOT_SET):
        problems.append(f"{counts[STATUS_NOT_SET]} allocated slot(s) not committed: a "
                        f"writer is mid-write, or crashed (readers roll them back after "
                        f"their timeout)")
    return Summary(os.fspath(path), length, fsize, record_size, limit, capacity,
                   sum(counts.values()), dict(counts), problems)
