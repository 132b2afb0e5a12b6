"""A rolling bus's time index (the layout is in ``layout``, "the journal"): one file per
segment, ``DIR/index/<segment>.time``, a header then 16-byte (time_ns, position) entries that
writers append, at most one per writer per millisecond.

    path = create_index(dir, bus_id, segment, segment_size, record_size)  # or the existing one
    fd = open_for_append(path); append(fd, time_ns, position)
    read_index(path, bus_id, segment, segment_size, record_size) -> TimeIndex

``interop/.../TimeIndex.java`` reads and writes the same files.
"""
import dataclasses
import os
import secrets
import struct

import numpy

from ..errors import CorruptBusError
from .files import open_file, read_to_end
from .layout import (FIRST_RECORD_OFFSET, TIME_INDEX_BUS_ID_SIZE, TIME_INDEX_DIR,
                     TIME_INDEX_ENTRIES_OFFSET, TIME_INDEX_ENTRY_SIZE, TIME_INDEX_MAGIC,
                     TIME_INDEX_RESOLUTION_NS, TIME_INDEX_VERSION, TMP_PREFIX, slot_size,
                     time_index_name)

__all__ = ("TimeIndex", "index_path", "encode_header", "create_index", "open_for_append",
           "append", "read_index", "entry_bytes", "floor_ms")

# magic, version, entry size, bus id, segment, segment_size, record_size, padding to 64
_HEADER = struct.Struct("<qii16sqqi12x")
_ENTRY = struct.Struct("<qq")
assert _HEADER.size == TIME_INDEX_ENTRIES_OFFSET and _ENTRY.size == TIME_INDEX_ENTRY_SIZE


def floor_ms(time_ns):
    """``time_ns`` rounded down to the index's resolution (1 ms)."""
    return time_ns // TIME_INDEX_RESOLUTION_NS * TIME_INDEX_RESOLUTION_NS


def index_path(directory, segment):
    """``directory/index/<segment>.time`` (``directory``: the hot bus or its archive)."""
    return os.path.join(os.fspath(directory), TIME_INDEX_DIR, time_index_name(segment))


def encode_header(bus_id, segment, segment_size, record_size):
    """The 64 header bytes of segment ``segment``'s index (``bus_id``: 32 hex digits)."""
    return _HEADER.pack(TIME_INDEX_MAGIC, TIME_INDEX_VERSION, TIME_INDEX_ENTRY_SIZE,
                        bytes.fromhex(bus_id), segment, segment_size, record_size)


def entry_bytes(time_ns, position):
    """One entry's 16 bytes."""
    return _ENTRY.pack(time_ns, position)


def create_index(directory, bus_id, segment, segment_size, record_size, *, mode=0o600):
    """The index file of ``segment`` under ``directory``, made with its whole header first (a
    temporary file linked into place: nobody sees half a header) unless it exists. Returns
    its path; the ``index`` directory is made (0700) if needed."""
    d = os.path.join(os.fspath(directory), TIME_INDEX_DIR)
    try:
        os.mkdir(d, 0o700)
    except FileExistsError:
        pass
    path = os.path.join(d, time_index_name(segment))
    if os.path.lexists(path):
        return path
    tmp = os.path.join(d, f"{TMP_PREFIX}{time_index_name(segment)}-{os.getpid()}-"
                          f"{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        os.fchmod(fd, mode)
        os.write(fd, encode_header(bus_id, segment, segment_size, record_size))
        os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass        # another writer made it first: the same header
    finally:
        os.unlink(tmp)
    return path


def open_for_append(path, *, allow_foreign=False):
    """A descriptor of the index ``path`` opened ``O_APPEND``: each ``append`` is one
    ``write(2)`` of 16 bytes, which concurrent writers never interleave."""
    fd, _ = open_file(path, os.O_WRONLY | os.O_APPEND, allow_foreign=allow_foreign)
    return fd


def append(fd, time_ns, position):
    """Append one entry (one write of 16 bytes)."""
    os.write(fd, _ENTRY.pack(time_ns, position))


@dataclasses.dataclass(frozen=True)
class TimeIndex:
    """A segment's index as read: ``times`` and ``positions`` (int64 numpy arrays, sorted by
    time, all-zero entries dropped) and ``torn`` (bytes of a partial last entry ignored)."""
    path: str
    segment: int
    times: numpy.ndarray
    positions: numpy.ndarray
    torn: int

    @property
    def empty(self):
        """No entry."""
        return len(self.times) == 0

    def first_at_or_after(self, t_ns):
        """The smallest position among entries with time >= ``t_ns``, or None (no such entry:
        every record this index knows was allocated before ``t_ns``)."""
        i = int(numpy.searchsorted(self.times, t_ns, side="left"))
        if i >= len(self.times):
            return None
        return int(self.positions[i:].min())

    def union(self, other):
        """This index's entries and ``other``'s (the same segment's index from the other
        tier), sorted by time: entries are facts about slots, so an entry in either file holds.
        A segment's hot index can gain entries after its archived copy was made (a writer
        stalled between its write and its append, docs/design/journal.md), and both files
        exist while the segment moves or when such an append made the hot one again."""
        times = numpy.concatenate((self.times, other.times))
        positions = numpy.concatenate((self.positions, other.positions))
        order = numpy.argsort(times, kind="stable")
        return TimeIndex(f"{self.path} + {other.path}", self.segment, times[order],
                         positions[order], self.torn + other.torn)


def read_index(path, bus_id, segment, segment_size, record_size, *, allow_foreign=False):
    """Read and check the index file ``path`` of segment ``segment`` of bus ``bus_id``
    (FileNotFoundError if absent; CorruptBusError naming the file for a bad header or entry;
    UnsafeBusFileError for a link or a file of another user)."""
    fd, st = open_file(path, os.O_RDONLY, allow_foreign=allow_foreign)
    try:
        data = read_to_end(fd)
    finally:
        os.close(fd)

    def bad(why):
        return CorruptBusError(f"{path!r} is not the time index of segment {segment} of bus "
                               f"{bus_id}: {why}")
    if len(data) < TIME_INDEX_ENTRIES_OFFSET:
        raise bad(f"{len(data)} bytes, shorter than its {TIME_INDEX_ENTRIES_OFFSET}-byte header")
    magic, version, esize, bid, seg, ssize, rsize = _HEADER.unpack_from(data)
    if magic != TIME_INDEX_MAGIC:
        raise bad(f"magic {magic:#x}, not {TIME_INDEX_MAGIC:#x} (\"MBUSTIX1\")")
    if version != TIME_INDEX_VERSION or esize != TIME_INDEX_ENTRY_SIZE:
        raise bad(f"version {version} with {esize}-byte entries; this version reads "
                  f"{TIME_INDEX_VERSION} with {TIME_INDEX_ENTRY_SIZE}")
    if len(bid) != TIME_INDEX_BUS_ID_SIZE or bid.hex() != bus_id:
        raise bad(f"it belongs to bus {bid.hex()}")
    if (seg, ssize, rsize) != (segment, segment_size, record_size):
        raise bad(f"its header says segment {seg}, segment_size {ssize}, record_size {rsize}")
    body = len(data) - TIME_INDEX_ENTRIES_OFFSET
    n, torn = divmod(body, TIME_INDEX_ENTRY_SIZE)
    arr = numpy.frombuffer(data, dtype="<i8", count=2 * n,
                           offset=TIME_INDEX_ENTRIES_OFFSET).reshape(n, 2)
    keep = (arr[:, 0] != 0) | (arr[:, 1] != 0)
    arr = arr[keep]
    times, positions = arr[:, 0], arr[:, 1]
    base = segment * segment_size
    off = positions - base
    slot = slot_size(record_size)
    wrong = (times <= 0) | (off < FIRST_RECORD_OFFSET) | (off + slot > segment_size) \
        | ((off - FIRST_RECORD_OFFSET) % slot != 0)
    if wrong.any():
        k = int(numpy.argmax(wrong))
        raise bad(f"entry ({int(times[k])}, {int(positions[k])}) is not a time and a record "
                  f"position of this segment")
    order = numpy.argsort(times, kind="stable")
    return TimeIndex(path, segment, times[order].copy(), positions[order].copy(), torn)
