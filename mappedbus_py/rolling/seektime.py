"""Replay from a time (docs/journal.md, "Replay from a time"): where ``seek_time(t)`` puts a
reader, from the segments' time indices (``formats.timeindex``; the rule is in layout.py, "the
journal"): the smallest position among the entries at or after ``floor_ms(t)``, in the first
segment (oldest first, archive then hot) holding one."""
import dataclasses
import datetime
import enum
import os

from ..formats.layout import TIME_INDEX_DIR, segment_name, time_index_name
from ..formats.positions import end_boundary
from ..formats.timeindex import floor_ms, read_index

__all__ = ("time_ns_of", "TimeTarget", "Target", "seek_position")


class Target(enum.Enum):
    """Where a time falls."""
    POSITION = "at the record at ``position``"
    END = "after every record indexed so far: the end of the bus"


for _target in Target:
    _target.__doc__ = _target.value    # each member documented by what it means
del _target


@dataclasses.dataclass(frozen=True)
class TimeTarget:
    """``seek_position``'s answer: ``kind`` and, for ``Target.POSITION``, the ``position``."""
    kind: Target
    position: int = 0


def time_ns_of(t):
    """``t`` (a ``datetime``, naive meaning local time, or Unix epoch seconds as int or
    float) as Unix epoch nanoseconds; ValueError for anything else."""
    if isinstance(t, datetime.datetime):
        return int(t.timestamp()) * 1_000_000_000 + t.microsecond * 1000
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        raise ValueError(f"seek_time takes a datetime or Unix epoch seconds, got {t!r}")
    if t != t or t in (float("inf"), float("-inf")) or t < 0:
        raise ValueError(f"seek_time takes a time at or after the epoch, got {t!r}")
    if isinstance(t, int):
        return t * 1_000_000_000
    sec = int(t)
    return sec * 1_000_000_000 + round((t - sec) * 1e9)


def _load(hot, tier, meta, k, allow_foreign):
    # Segment k's index: the union of the hot directory's file and the archive's when both
    # exist (TimeIndex.union: the hot one may hold entries appended after the archived copy
    # was made); either alone; None without one. The hot file is read first: a move writes
    # the archive's before it unlinks the hot one, so one of the two reads finds it.
    def read(d):
        p = os.path.join(d, TIME_INDEX_DIR, time_index_name(k))
        try:
            return read_index(p, meta.id, k, meta.segment_size, meta.record_size,
                              allow_foreign=allow_foreign)
        except FileNotFoundError:
            return None
    hot_ix = read(hot)
    arch_ix = read(tier.cfg.dir) if tier is not None else None
    if hot_ix is not None and arch_ix is not None:
        return hot_ix.union(arch_ix)
    return hot_ix if hot_ix is not None else arch_ix


def _filled_before(hot, tier, meta, k, newest, x):
    # A full segment below the newest whose mtime (set when its writer rolled out of it, kept
    # by the archive) is before x: every slot of it was allocated before x.
    if k >= newest:
        return False
    hot_path = os.path.join(hot, segment_name(k))
    try:
        fd = os.open(hot_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        fd = None
    if fd is not None:
        try:
            limit = int.from_bytes(os.pread(fd, 8, 0), "little", signed=True)
            full = limit >= end_boundary(meta.segment_size, meta.record_size)
            return full and os.fstat(fd).st_mtime_ns < x
        finally:
            os.close(fd)
    if tier is not None:
        names = tier.segments()         # archived: full and settled when it moved
        if k in names:
            try:
                return os.stat(os.path.join(tier.cfg.dir, names[k])).st_mtime_ns < x
            except FileNotFoundError:
                return False
    return False


def seek_position(hot, tier, meta, segments, t_ns, *, allow_foreign=False):
    """Where a reader starts for time ``t_ns``: a ``TimeTarget``. ``segments``: the bus's,
    oldest first. A segment without an index (written before the bus kept one, or by writers
    that keep none) is passed over only when it filled before ``floor_ms(t_ns)`` (its mtime)
    or a later segment's index has an entry before that."""
    x = floor_ms(t_ns)
    unindexed = None        # the oldest segment without entries since the last one skipped
    newest = segments[-1] if segments else 0
    for k in segments:
        ix = _load(hot, tier, meta, k, allow_foreign)
        if ix is None or ix.empty:
            if unindexed is None and not _filled_before(hot, tier, meta, k, newest, x):
                unindexed = k
            continue
        if unindexed is not None:
            if int(ix.times[0]) >= x:
                # Records of the unindexed segments may be at or after t: start there.
                return TimeTarget(Target.POSITION, unindexed * meta.segment_size + 8)
            unindexed = None
        p = ix.first_at_or_after(x)
        if p is not None:
            return TimeTarget(Target.POSITION, p)
    if unindexed is not None:
        return TimeTarget(Target.POSITION, unindexed * meta.segment_size + 8)
    return TimeTarget(Target.END)
