"""The one slot scanner of the tools: a bus file's slots read with ``pread``, a chunk at a time,
never written. ``mappedbus stat|dump`` (``views``) read them one ``Slot`` at a time; the
exporter and ``top`` (``metrics``) count their statuses a chunk at a time (``statuses``).

Reading with ``pread`` (no mapping) makes a file that shrinks while it is read end the scan
early, never a SIGBUS; a scan never looks past the file's end. Files are opened as bus files
are (no symbolic links, regular files only, so a FIFO is refused without blocking), but files
of other users are accepted: nothing is written.
"""
import os
import struct
from typing import NamedTuple

from ..formats.files import open_file
from ..formats.layout import (FIRST_RECORD_OFFSET, FRAME_PAYLOAD_OFFSET, LIMIT_OFFSET,
                              PAYLOAD_OFFSET, STATUS_COMMITTED, frame_meta_slots, slot_size)

__all__ = ("Slot", "Frame", "CHUNK", "PREVIEW", "open_read_only", "read_limit", "chunks",
           "statuses", "slots_of", "scan", "frames_of", "scan_frames")

#: Payload bytes a frame row shows.
PREVIEW = 32

#: Bytes read by one pread.
CHUNK = 1 << 20


class Slot(NamedTuple):
    """One slot as read: its ``offset`` in the file, ``status``, ``meta`` and ``payload``."""
    offset: int
    status: int
    meta: int
    payload: bytes


class Frame(NamedTuple):
    """One frame of a framed bus as read (docs/design/frames.md): its first slot's
    ``offset``, ``status``, ``slots`` (from its meta; 1 while the meta is not written),
    ``meta``; of a committed one its ``length``, ``topic`` id, ``flags`` and the first
    PREVIEW payload bytes (else length -1, topic and flags 0, preview empty)."""
    offset: int
    status: int
    slots: int
    meta: int
    length: int
    topic: int
    flags: int
    preview: bytes


def open_read_only(path):
    """``(fd, stat)`` of the bus file ``path``, read-only, whoever owns it."""
    return open_file(path, os.O_RDONLY, allow_foreign=True)


def read_limit(fd):
    """The limit stored in the open bus file ``fd`` (0 for a file too short to hold one)."""
    head = os.pread(fd, 8, LIMIT_OFFSET)
    return struct.unpack("<q", head)[0] if len(head) == 8 else 0


def chunks(fd, step, start, stop, budget=None):
    """Yield ``(offset, data)``: the whole slots of ``step`` bytes from ``start`` while a slot
    ends at or before ``stop``, read ``CHUNK`` bytes at a time and at most ``budget`` bytes in
    all (None: no limit; at least one slot). A short read (the file shrank) ends the scan."""
    pos, done = start, 0
    per = max(1, CHUNK // step)
    while budget is None or done < budget:
        n = min(per, (stop - pos) // step)
        if n <= 0:
            return
        if budget is not None:
            n = max(1, min(n, (budget - done) // step))
        data = os.pread(fd, n * step, pos)
        whole = len(data) // step
        if whole:
            yield pos, data[:whole * step]
        if whole < n:
            return
        pos += n * step
        done += n * step


def statuses(data, step):
    """The int32 status of every whole slot in ``data`` (slots of ``step`` bytes), as numpy."""
    import numpy as np                  # here: the CLI's other commands start without it
    n = len(data) // step
    return np.ndarray((n,), dtype="<i4", buffer=data, offset=0, strides=(step,))


def slots_of(fd, record_size, file_size, start, all_slots):
    """Yield the allocated slots (below the limit) of the open file ``fd`` from ``start`` as
    ``Slot``; with ``all_slots`` also the empty ones up to the end of the file."""
    length = os.fstat(fd).st_size
    end = min(length, file_size if file_size is not None else length)
    stop = end if all_slots else min(end, max(read_limit(fd), 0))
    step = slot_size(record_size)
    if start >= stop:
        return
    # Every slot that starts below ``stop`` (the limit may be off the grid), and fits in the file.
    for pos, data in chunks(fd, step, start, min(end, stop + step - 1)):
        for at in range(0, len(data), step):
            status, meta = struct.unpack_from("<ii", data, at)
            yield Slot(pos + at, status, meta, data[at + PAYLOAD_OFFSET:at + step])


def scan(path, record_size, file_size=None, start=FIRST_RECORD_OFFSET, all_slots=False):
    """Yield every allocated slot (below the limit) as a ``Slot``; with ``all_slots`` also
    the empty ones up to the end of the file."""
    if record_size <= 0:
        raise ValueError(f"record_size must be positive, got {record_size}")
    fd, _ = open_read_only(path)
    try:
        yield from slots_of(fd, record_size, file_size, start, all_slots)
    finally:
        os.close(fd)


def frames_of(fd, record_size, file_size, start):
    """Yield the frames (below the limit) of the open framed file ``fd`` from ``start`` (a
    frame's first slot) as ``Frame``, one pread each, walking by their slot counts. A frame
    whose header is impossible (a count past the end, a length longer than its slots) ends
    the walk with a Frame of status -1."""
    length = os.fstat(fd).st_size
    end = min(length, file_size if file_size is not None else length)
    stop = min(end, max(read_limit(fd), 0))
    step = slot_size(record_size)
    pos = start
    while pos < stop and pos + step <= end:
        head = os.pread(fd, FRAME_PAYLOAD_OFFSET + PREVIEW, pos)
        if len(head) < FRAME_PAYLOAD_OFFSET:
            return
        status, meta, n, topic, flags = struct.unpack_from("<iiqii", head, 0)
        slots = frame_meta_slots(meta) or 1
        if slots > (end - pos) // step:
            yield Frame(pos, -1, slots, meta, -1, 0, 0, b"")
            return
        if status == STATUS_COMMITTED:
            if not 0 <= n <= slots * step - FRAME_PAYLOAD_OFFSET:
                yield Frame(pos, -1, slots, meta, n, topic, flags, b"")
                return
            yield Frame(pos, status, slots, meta, n, topic, flags,
                        head[FRAME_PAYLOAD_OFFSET:FRAME_PAYLOAD_OFFSET + min(n, PREVIEW)])
        else:
            yield Frame(pos, status, slots, meta, -1, 0, 0, b"")
        pos += slots * step


def scan_frames(path, record_size, file_size=None, start=FIRST_RECORD_OFFSET):
    """Yield every frame of the framed bus file ``path`` from ``start`` as a ``Frame``."""
    fd, _ = open_read_only(path)
    try:
        yield from frames_of(fd, record_size, file_size, start)
    finally:
        os.close(fd)
