"""The rolling bus: a directory of numbered segments, each a complete Mappedbus 0.5.1 file.

    with RollingBusWriter("/dev/shm/prices.d", 16 << 20, 12, retain_segments=8) as w:
        w.write(PriceUpdate(source=1, price=100, quantity=5))

    with RollingBusReader("/dev/shm/prices.d") as r:      # sizes from bus.meta
        msg = PriceUpdate()
        while r.read_into(msg):
            ...

The contract is ``docs/files-and-rolling.md`` ("Rolling bus"). Everything inside one segment is
done by the single-file ``MappedBusWriter``/``MappedBusReader`` (opened with ``_segment=True``);
this package adds the directory, by job:

- ``directory``: the directory protocol (``bus.meta``, segments made complete then linked, the
  segments present, their limits, the wake file and consumers' registry beside them);
- ``retention``: which segments go, and what consumers hold back or are expired;
- ``options``: the arguments checked, the sizes from ``bus.meta``, a pickled one reopened;
- ``roller``: what moves a writer from segment to segment (spare, claims, roll), its state named;
- ``writer`` and ``reader``: ``RollingBusWriter`` and ``RollingBusReader``, over the per-record
  paths of ``_rolling`` (Cython).

Positions across segments are ``mappedbus_py.formats.positions``.

Choices this implementation makes where the contract leaves room:

- **Spare segment.** The rule is the contract's (the spare trigger, claims, three quarters);
  the writer that took the trigger starts making segment k+1 in that write (``_make_spare``),
  its two slow system calls on a C thread (``BackgroundCall``: the preallocation, then the
  mapping of every page), the rest at look-aheads (``_step``); a writer looks at the limit
  once every ``max(1, min(4096, slots_per_segment // 8))`` writes, every 64 while a call runs
  (on a framed bus the countdown counts slots: a message of n slots counts n). A roll waits
  for a spare's preallocation, never for its mapping: it enters a segment whose pages are
  still being mapped, and its writes map what they reach before the call does.
- **Retention** is applied by the writer that creates a segment, counting the new segment as
  the newest; it never removes the new segment nor the one being written (so
  ``retain_segments=1`` keeps two). Expired ``.tmp-*`` files (older than 60 s) go then too.
- **Age.** A writer that rolls out of segment k (k is full) sets k's mtime to the time of the
  roll (shortly after, at its next look-ahead, to keep the ~60 µs of utime off the write
  that rolls; the time is taken at the roll). Segment k is "older than retain_age" once its
  mtime is that old: all its records are. Anything that writes k later (a reader rolling a
  stalled slot back) only makes its mtime later: retention errs on keeping.
"""
from ..formats.positions import (consumer_segment, end_boundary, gap_range, locate, on_grid,
                                records_between, slots_per_segment, spare_trigger)
from .directory import (TMP_MAX_AGE_S, create_or_open_meta, create_segment, list_segments,
                        open_dir, read_bus_meta, remove_stale_tmp, segment_limit, segment_path)
from .reader import RollingBusReader
from .retention import (apply_retention, bus_consumer_entries, consumer_blockers,
                        consumer_retention, retention_plan)
from .writer import RollingBusWriter

__all__ = ("RollingBusWriter", "RollingBusReader", "open_dir", "read_bus_meta",
           "create_or_open_meta", "create_segment", "list_segments", "segment_path",
           "segment_limit", "apply_retention", "retention_plan", "remove_stale_tmp", "gap_range",
           "slots_per_segment", "spare_trigger", "end_boundary", "locate", "on_grid",
           "TMP_MAX_AGE_S", "consumer_segment", "records_between", "consumer_retention",
           "consumer_blockers", "bus_consumer_entries")
