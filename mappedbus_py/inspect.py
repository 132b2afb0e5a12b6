"""Read a bus file slot by slot without changing it: what the CLI dump shows.

Works on any file, however corrupt: it reads with ``pread`` (no mapping, so a file that
shrinks while it is read only ends the scan early, never a SIGBUS) and never looks past
the file's end, so a wrong ``record_size`` or a garbage limit only gives odd rows, never a
crash. The file is opened as bus files are (no symbolic links, regular files only, so a
FIFO is refused without blocking), but files of other users are accepted: nothing is
written.
"""
import os
import struct
from collections import Counter
from typing import NamedTuple, Optional

from .files import open_file
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


_CHUNK = 1 << 20     # bytes read at a time


def _open(path):
    fd, _ = open_file(path, os.O_RDONLY, allow_foreign=True)
    return fd


def _read_limit(fd):
    head = os.pread(fd, 8, LIMIT_OFFSET)
    return struct.unpack("<q", head)[0] if len(head) == 8 else 0


def _scan_fd(fd, record_size, file_size, start, all_slots):
    length = os.fstat(fd).st_size
    end = min(length, file_size if file_size is not None else length)
    stop = end if all_slots else min(end, max(_read_limit(fd), 0))
    step = slot_size(record_size)
    pos = start
    per_chunk = max(1, _CHUNK // step)
    while pos + step <= end and pos < stop:
        n = min(per_chunk, (min(end, stop + step - 1) - pos) // step)
        if n <= 0:
            break
        data = os.pread(fd, n * step, pos)
        for i in range(len(data) // step):     # a short read: the file shrank; stop there
            at = i * step
            status, meta = struct.unpack_from("<ii", data, at)
            yield Slot(pos + at, status, meta, data[at + PAYLOAD_OFFSET:at + step])
        if len(data) < n * step:
            return
        pos += n * step


def scan(path, record_size, file_size=None, start=FIRST_RECORD_OFFSET, all_slots=False):
    """Yield every allocated slot (below the limit) as a ``Slot``; with ``all_slots`` also
    the empty ones up to the end of the file."""
    if record_size <= 0:
        raise ValueError(f"record_size must be positive, got {record_size}")
    fd = _open(path)
    try:
        yield from _scan_fd(fd, record_size, file_size, start, all_slots)
    finally:
        os.close(fd)


def summarize(path, record_size, file_size=None) -> Summary:
    """The figures a user needs when a reader seems stuck."""
    if record_size <= 0:
        raise ValueError(f"record_size must be positive, got {record_size}")
    fd = _open(path)
    try:
        length = os.fstat(fd).st_size
        limit = _read_limit(fd)
        counts = Counter(s.status for s in _scan_fd(fd, record_size, file_size,
                                                   FIRST_RECORD_OFFSET, False))
    finally:
        os.close(fd)
    fsize = file_size if file_size is not None else length
    step = slot_size(record_size)
    end = min(length, fsize)
    capacity = max(0, (end - FIRST_RECORD_OFFSET) // step)
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
