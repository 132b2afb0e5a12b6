"""Positions on a rolling bus and their arithmetic, written once (the Java side's is
``RollingLayout``; both are pinned by tests/vectors/rolling.json): where a position is (segment,
offset), where a segment's records end, the spare's trigger, how many records lie between two
places, and the range a gap lost. Positions across segments are ``segment * segment_size +
offset`` (``layout.join_position``/``split_position``)."""
from .layout import FIRST_RECORD_OFFSET, is_record_boundary, join_position, slot_size, split_position

__all__ = ("end_boundary", "locate", "on_grid", "spare_trigger", "slots_per_segment",
           "consumer_segment", "records_between", "records_to", "gap_range")

_FIRST = FIRST_RECORD_OFFSET


def end_boundary(segment_size, record_size):
    """The offset just past the last record that fits in a segment."""
    slot = slot_size(record_size)
    return _FIRST + ((segment_size - _FIRST) // slot) * slot


def locate(position, segment_size, record_size):
    """``(segment, offset)`` of a rolling-bus position, as readers use them: the split of
    ``layout.split_position``, except that the end of a segment that records fill to its
    last byte (offset ``segment_size``) stays in that segment rather than reading as offset
    0 of the next. Whether the offset is on the record grid is not checked here."""
    k, off = split_position(position, segment_size)
    if off == 0 and k > 0 and end_boundary(segment_size, record_size) == segment_size:
        return k - 1, segment_size
    return k, off


def on_grid(offset, segment_size, record_size):
    """True when ``offset`` (in a segment) is where a record starts or the segment's end."""
    return (is_record_boundary(offset, record_size)
            and offset <= end_boundary(segment_size, record_size))


def spare_trigger(segment_size, record_size):
    """The offset of a segment's first slot at or past its middle: the writer whose allocation
    returns it makes the next segment (docs/files-and-rolling.md, "Spare segment")."""
    slot = slot_size(record_size)
    return _FIRST + -(-(segment_size // 2 - _FIRST) // slot) * slot


def slots_per_segment(segment_size, record_size):
    """How many records one segment holds."""
    return (segment_size - _FIRST) // slot_size(record_size)


def consumer_segment(position, segment_size, record_size):
    """The segment a consumer at ``position`` needs next: its own, or the one after when it
    has read all of it (its offset is at the end boundary)."""
    k, off = locate(position, segment_size, record_size)
    return k + 1 if off >= end_boundary(segment_size, record_size) else k


def records_between(position, head_index, head_limit, segment_size, record_size):
    """Record slots from ``position`` to the end of the bus (segment ``head_index``, whose
    limit is ``head_limit``): a consumer's lag in records."""
    slot = slot_size(record_size)
    end = end_boundary(segment_size, record_size)
    k, off = locate(position, segment_size, record_size)
    head = min(max(head_limit, _FIRST), end)
    if k > head_index:
        return 0
    if k == head_index:
        return max(0, (head - off) // slot)
    per = slots_per_segment(segment_size, record_size)
    return (max(0, (end - off) // slot) + (head_index - k - 1) * per + (head - _FIRST) // slot)


def records_to(a, b, record_size, segment_size=None):
    """Record slots from position ``a`` up to position ``b`` (0 if ``b <= a``); across
    segments on a rolling bus (``segment_size``), through ``records_between``."""
    if b <= a:
        return 0
    if segment_size is None:
        return (b - a) // slot_size(record_size)
    return records_between(a, *locate(b, segment_size, record_size), segment_size, record_size)


def gap_range(from_index, from_offset, oldest, segment_size, record_size):
    """``(lost_from, lost_to, lost)`` for a reader at ``from_offset`` of the removed segment
    ``from_index`` whose next retained record is the first of segment ``oldest``."""
    slot = slot_size(record_size)
    per = slots_per_segment(segment_size, record_size)
    first = max(0, (from_offset - _FIRST) // slot)
    lost = max(0, per - first) + (oldest - from_index - 1) * per
    return (join_position(from_index, from_offset, segment_size),
            join_position(oldest, _FIRST, segment_size), lost)
