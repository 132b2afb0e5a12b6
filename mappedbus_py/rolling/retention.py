"""Retention (docs/files-and-rolling.md, "Retention" and "Retention that holds consumers"):
which segments of history go, and what consumers hold back or are expired; the decisions
alone (``retention_plan``, ``consumer_retention``, ``consumer_blockers``, pinned for both
languages by tests/vectors/rolling.json) and their application to a directory."""
import os
import time

from ..formats.layout import TIME_INDEX_DIR, time_index_name
from ..formats.positions import consumer_segment
from .directory import list_segments, segment_path

__all__ = ("retention_plan", "apply_retention", "consumer_retention", "consumer_blockers",
           "bus_consumer_entries")


def retention_plan(segments, meta, newest, keep_from, now_ms, full_ms, hold_from=None):
    """Which segments retention removes, oldest first (the decision alone; the arithmetic
    the test vectors in tests/vectors/rolling.json pin for both languages). ``segments``:
    the indices present, ascending; history is those below ``min(keep_from, newest + 1)``;
    ``full_ms(index)``: when the writer rolled out of it (its mtime, Unix ms; None if
    unknown); ``hold_from``: the oldest segment a consumer needs (None: no hold)."""
    if not (meta.retain_segments or meta.retain_bytes or meta.retain_age_ms):
        return []
    history = [i for i in segments if i < min(keep_from, newest + 1)]
    removed = []
    for n, oldest in enumerate(history):
        if hold_from is not None and oldest >= hold_from:
            break
        count = len(history) - n
        drop = bool(meta.retain_segments and count > meta.retain_segments)
        drop |= bool(meta.retain_bytes and count * meta.segment_size > meta.retain_bytes)
        if not drop and meta.retain_age_ms:
            full = full_ms(oldest)
            drop = full is not None and now_ms - full > meta.retain_age_ms
        if not drop:
            break
        removed.append(oldest)
    return removed


def _full_ms(path, index):
    try:
        return os.stat(segment_path(path, index)).st_mtime_ns // 1_000_000
    except FileNotFoundError:
        return None


def apply_retention(path, meta, newest, keep_from, now_ns=None, hold_from=None):
    """Remove the oldest segments of history beyond ``meta``'s retention, each with its time
    index (``retention_plan``: the segments below ``keep_from``, the one being written, and
    below ``hold_from``, the oldest segment a consumer still needs). Returns the removed
    indices."""
    if not (meta.retain_segments or meta.retain_bytes or meta.retain_age_ms):
        return []
    now_ms = (time.time_ns() if now_ns is None else now_ns) // 1_000_000
    plan = retention_plan(list_segments(path), meta, newest, keep_from, now_ms,
                          lambda i: _full_ms(path, i), hold_from)
    removed = []
    for index in plan:
        try:
            os.unlink(segment_path(path, index))
            removed.append(index)
        except FileNotFoundError:
            pass
        try:
            # its time index goes with it (a writer's late entry is not appended again for a
            # segment that is gone: journal.WriterJournal.note_time)
            os.unlink(os.path.join(path, TIME_INDEX_DIR, time_index_name(index)))
        except FileNotFoundError:
            pass
    return removed


def consumer_retention(entries, meta, current):
    """What retention does about consumers when the writers are in segment ``current``:
    ``(hold_from, expire)``: the oldest segment a consumer that is not expired needs (None:
    none holds any), and the entries to flag expired first (policy ``expire``: those more
    than ``max_consumer_lag`` segments behind). Nothing when ``max_consumer_lag`` is 0."""
    if not meta.max_consumer_lag:
        return None, []
    hold, expire = None, []
    for e in entries:
        if e["flags"] & 1:
            continue
        need = consumer_segment(e["position"], meta.segment_size, meta.record_size)
        if meta.on_consumer_lag == "expire" and current - need > meta.max_consumer_lag:
            expire.append(e)
            continue
        hold = need if hold is None else min(hold, need)
    return hold, expire


def consumer_blockers(entries, meta, target):
    """Policy ``block``: the consumers (not expired) that would lag more than
    ``max_consumer_lag`` segments once the writers are in segment ``target``, most behind
    first."""
    if not meta.max_consumer_lag or meta.on_consumer_lag != "block":
        return []
    out = []
    for e in entries:
        if e["flags"] & 1:
            continue
        lag = target - consumer_segment(e["position"], meta.segment_size, meta.record_size)
        if lag > meta.max_consumer_lag:
            out.append((lag, e))
    out.sort(key=lambda le: -le[0])
    return [e for _, e in out]


def bus_consumer_entries(registry, meta):
    """The registry's entries that belong to this bus (its id)."""
    return [e for e in registry.entries() if e["bus_id"] == meta.id]
