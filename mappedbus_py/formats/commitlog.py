"""A read-only reader of the Spark sink's commit log, and its recovery decision.

The exactly-once sink of the Spark connector (``CommitLog.java``) keeps an append-only log
beside the bus: ``PATH + COMMIT_LOG_SUFFIX`` for a single file, ``DIR/COMMIT_LOG_FILE`` for a
rolling bus. Its entries are COMMIT_ENTRY_SIZE bytes, laid out as ``layout.py``'s diagram
shows; docs/files-and-rolling.md ("Spark sink commit log") gives the protocol. This module
decodes a log (CRC checked, nothing written) and makes the same decision as
``CommitLog.recover`` does for a task's key; tests/vectors/commitlog.json binds the two.
"""
import os
import struct
import zlib
from collections import namedtuple

from .layout import (COMMIT_ENTRY_CRC_OFFSET, COMMIT_ENTRY_DONE, COMMIT_ENTRY_INTENT,
                     COMMIT_ENTRY_SEALED, COMMIT_ENTRY_SIZE, COMMIT_ENTRY_VOID, COMMIT_LOG_FILE,
                     COMMIT_LOG_MAGIC, COMMIT_LOG_SUFFIX)

__all__ = (
    "Entry", "Key", "Range", "Group", "Recovery",
    "NOTHING", "WRITE", "FINISH", "FAIL", "CORRUPT", "KIND_NAMES",
    "log_path", "decode_entry", "decode_log", "read_log", "recover",
)

# magic, kind, query hi, query lo, epoch, partition, 4 zero bytes, first, count, source: the
# fields at the COMMIT_ENTRY_*_OFFSETs, in order (layout.py's diagram), then the CRC.
_ENTRY = struct.Struct("<iiqqqi4xqqq")
_CRC = struct.Struct("<q")
assert _ENTRY.size == COMMIT_ENTRY_CRC_OFFSET and COMMIT_ENTRY_CRC_OFFSET + _CRC.size == COMMIT_ENTRY_SIZE

KIND_NAMES = {COMMIT_ENTRY_INTENT: "INTENT", COMMIT_ENTRY_SEALED: "SEALED",
              COMMIT_ENTRY_DONE: "DONE", COMMIT_ENTRY_VOID: "VOID"}

#: The recovery actions (``Recovery.action``): the key is done; no group was sealed, the
#: attempt writes its rows; a sealed group is finished (its uncommitted slots committed,
#: its rolled-back ones repaired); a range of that group is in a segment retention removed,
#: so the write fails; a SEALED entry names records its INTENTs do not hold.
NOTHING, WRITE, FINISH, FAIL, CORRUPT = "nothing", "write", "finish", "fail", "corrupt"

Entry = namedtuple("Entry", "kind query_hi query_lo epoch partition first count source")
Entry.__doc__ = "One entry of the log; its key is (query_hi, query_lo, epoch, partition)."
Key = namedtuple("Key", "query_hi query_lo epoch partition")
Key.__doc__ = "A task of a write: the query id's halves (signed int64), its epoch (-1: batch), its partition."
Range = namedtuple("Range", "first count source")
Range.__doc__ = "Slots [first, first + count * slot) of one attempt; source -1, or the group a repair copies."
Group = namedtuple("Group", "first source ranges")
Group.__doc__ = "The ranges one SEALED entry seals, named by its first range's position."
Recovery = namedtuple("Recovery", "action voids group removed corrupt")
Recovery.__doc__ = """What recovery does for a key.

``voids``: the ranges never sealed nor voided (an attempt crashed writing them), voided
first; ``group``: the group to finish (FINISH, FAIL), the last of the key's repair chain;
``removed``: the range of it whose segment is gone (FAIL); ``corrupt``: the SEALED entry
(CORRUPT)."""


def log_path(bus_path):
    """The commit log of the bus at ``bus_path``: ``DIR/bus.commits`` for a rolling bus's
    directory, ``PATH.commits`` beside a single file."""
    if os.path.isdir(bus_path):
        return os.path.join(bus_path, COMMIT_LOG_FILE)
    return os.fspath(bus_path) + COMMIT_LOG_SUFFIX


def decode_entry(buf, offset=0):
    """The entry at ``offset`` of ``buf``, or None if its magic or CRC is wrong (a torn or
    foreign entry, which the log does not hold)."""
    fields = _ENTRY.unpack_from(buf, offset)
    if fields[0] != COMMIT_LOG_MAGIC:
        return None
    (crc,) = _CRC.unpack_from(buf, offset + COMMIT_ENTRY_CRC_OFFSET)
    if crc != zlib.crc32(bytes(buf[offset:offset + COMMIT_ENTRY_CRC_OFFSET])):
        return None
    return Entry(*fields[1:])


def decode_log(data):
    """Every valid entry of a log's bytes, in order; a torn last entry (a killed writer's)
    and entries that fail their check are left out, as the Java writer leaves them out."""
    return [e for e in (decode_entry(data, at)
                        for at in range(0, len(data) // COMMIT_ENTRY_SIZE * COMMIT_ENTRY_SIZE,
                                        COMMIT_ENTRY_SIZE))
            if e is not None]


def read_log(path):
    """The valid entries of the log file at ``path``, read without a lock (a snapshot)."""
    with open(path, "rb") as f:
        return decode_log(f.read())


def _seal(ranges, sealed, entry):
    """The group a SEALED entry seals: the key's consecutive INTENTs from its first, with
    ``entry.count`` records in all; None if they do not hold them."""
    at = len(ranges) - 1
    while at >= 0 and ranges[at].first != entry.first:
        at -= 1
    if at < 0:
        return None
    parts = []
    left = entry.count
    i = at
    while i < len(ranges) and left > 0 and ranges[i].source == entry.source:
        sealed.add(i)
        parts.append(ranges[i])
        left -= ranges[i].count
        i += 1
    return Group(entry.first, entry.source, tuple(parts)) if left == 0 else None


def recover(entries, key, present=lambda position: True):
    """The recovery decision for ``key`` (a :class:`Key`), a pure function of the log.

    ``present(position)`` tells whether the file holding a position exists (a rolling bus's
    segment retention may have removed; a single file: always). Ranges neither sealed nor
    voided are to be voided; a DONE means nothing to do; else the original group (source -1)
    of an attempt that sealed one, followed along its repairs to the last, is finished,
    unless a range of it is not present (FAIL); with no sealed group the attempt writes.
    """
    ranges, sealed, voided, groups = [], set(), set(), []
    done = False
    for e in entries:
        if (e.query_hi, e.query_lo, e.epoch, e.partition) != tuple(key):
            continue
        if e.kind == COMMIT_ENTRY_DONE:
            done = True
        elif e.kind == COMMIT_ENTRY_INTENT:
            ranges.append(Range(e.first, e.count, e.source))
        elif e.kind == COMMIT_ENTRY_SEALED:
            g = _seal(ranges, sealed, e)
            if g is None:
                return Recovery(CORRUPT, (), None, None, e)
            groups.append(g)
        elif e.kind == COMMIT_ENTRY_VOID:
            voided.update(i for i, r in enumerate(ranges) if r.first == e.first)
    if done:
        return Recovery(NOTHING, (), None, None, None)
    voids = tuple(r for i, r in enumerate(ranges) if i not in voided and i not in sealed)
    originals = [g for g in groups if g.source < 0]
    if not originals:
        return Recovery(WRITE, voids, None, None, None)
    current = originals[-1]
    while True:
        repairs = [g for g in groups if g.source == current.first]
        if not repairs:
            break
        current = repairs[-1]
    for r in current.ranges:
        if not present(r.first):
            return Recovery(FAIL, voids, current, r, None)
    return Recovery(FINISH, voids, current, None, None)
