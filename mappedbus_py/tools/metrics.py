"""What ``mappedbus exporter`` and ``mappedbus top`` measure: record counts kept
incrementally, consumers, parked readers (the Prometheus collector over them is
``exporter``).

Counting slots by status is incremental: a ``SlotCounter`` keeps a cursor per bus file (per
segment on a rolling bus) and reads, at each ``refresh``, only the slots allocated since the
last one, plus the few slots it saw uncommitted (status 0), which a writer may commit or a
reader roll back later. It reads with ``pread`` and never writes; a file that shrinks only
ends a scan early. Segments removed by retention keep the totals counted before they went.

Nothing here writes a file: the wake file's parked count is read with ``pread`` (an absent
wake file is 0 parked, and is not created), the consumers through
``mappedbus_py.consumers``.
"""
import os
import stat as _stat
import threading
import time

from .._core._wake import parked_alive
from ..formats.busmeta import meta_path, read_meta
from ..formats.layout import (FIRST_RECORD_OFFSET, META_FILE, STATUS_COMMITTED,
                     STATUS_NOT_SET, STATUS_ROLLED_BACK, WAKE_FILE, WAKE_SUFFIX,
                     join_position, slot_size)
from ..formats.positions import end_boundary, records_to, slots_per_segment
from ..rolling.directory import list_segments, open_dir, read_bus_meta, segment_path
from .slots import CHUNK, chunks, open_read_only, read_limit, statuses

__all__ = ("SlotCounter", "BusCounter", "BusSnapshot", "open_bus", "parked_readers",
           "list_consumers", "list_groups")

_RECHECK_SPAN = 1 << 20     # uncommitted slots within this many bytes are re-read with one pread


class SlotCounter:
    """Slots of one bus file (a single-file bus, or one segment) counted by status,
    incrementally. ``end`` is the offset just past the last slot that fits.

    ``committed``, ``rolled_back`` and ``corrupt`` (a status other than 0/1/2) only grow;
    ``not_set`` is the number of allocated slots seen uncommitted at the last refresh;
    ``limit`` the limit as stored; ``cursor`` the offset up to which slots were read."""

    def __init__(self, path, record_size, end, fd=None):
        self.path = os.fspath(path)
        self.step = slot_size(record_size)
        self.end = end
        self.cursor = FIRST_RECORD_OFFSET
        self.limit = 0
        self.committed = self.rolled_back = self.corrupt = 0
        self._pending = []          # offsets of allocated slots seen with status 0, ascending
        self._fd = fd
        if fd is None:
            self._fd, _ = open_read_only(self.path)

    @property
    def not_set(self):
        """Allocated slots seen uncommitted (status 0) at the last refresh."""
        return len(self._pending)

    @property
    def unscanned(self):
        """Allocated slots (at the last refresh) not read yet: a refresh ran out of budget."""
        return max(0, (min(self.limit, self.end) - self.cursor) // self.step)

    @property
    def settled(self):
        """True when every slot up to the limit was read and none is uncommitted."""
        return not self._pending and self.cursor >= min(self.limit, self.end)

    def close(self):
        """Close the file (the counts stay)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _tally(self, st):
        import numpy as np
        c = np.bincount(np.clip(st, -1, 3) + 1, minlength=5)   # -1 and 3 stand for "other"
        self.committed += int(c[STATUS_COMMITTED + 1])
        self.rolled_back += int(c[STATUS_ROLLED_BACK + 1])
        self.corrupt += int(c[0] + c[4])

    def _recheck(self):
        """Re-read the slots seen uncommitted; count the ones that are final now. Few are
        uncommitted at a time (writers mid-write), so a plain loop does."""
        still = []
        pend, i = self._pending, 0
        while i < len(pend):
            j = i
            while j + 1 < len(pend) and pend[j + 1] - pend[i] < _RECHECK_SPAN:
                j += 1
            base = pend[i]
            data = os.pread(self._fd, pend[j] - base + 4, base)
            final = []
            for off in pend[i:j + 1]:
                at = off - base
                if at + 4 > len(data):
                    still.append(off)               # the file shrank: look again later
                    continue
                status = int.from_bytes(data[at:at + 4], "little", signed=True)
                if status == STATUS_NOT_SET:
                    still.append(off)
                else:
                    final.append(status)
            if final:
                import numpy as np
                self._tally(np.asarray(final, dtype=np.int32))
            i = j + 1
        self._pending = still

    def refresh(self, budget=None):
        """Read the limit, re-read the uncommitted slots, then read the slots allocated
        since the last refresh, at most ``budget`` bytes of them (None: all). Returns the
        number of bytes of new slots read."""
        self.limit = read_limit(self._fd)
        if self._pending:
            self._recheck()
        stop = min(self.limit, self.end)
        done = 0
        for pos, data in chunks(self._fd, self.step, self.cursor, stop, budget):
            st = statuses(data, self.step)
            waiting = (st == STATUS_NOT_SET).nonzero()[0]
            self._tally(st)                 # status 0 lands in no total
            self._pending.extend(int(pos + k * self.step) for k in waiting)
            self.cursor = pos + len(st) * self.step
            done += len(st) * self.step
        return done


class BusSnapshot:
    """The figures of one bus at one moment (``BusCounter.snapshot``): ``kind``, ``bus_id``,
    ``allocated`` (slots below the limit, from the limit alone: on a rolling bus since
    position 8, segments removed by retention included), ``committed``, ``rolled_back``,
    ``not_set``, ``corrupt``, ``unscanned``, ``limit`` (a
    position), ``first`` (the oldest retained position), ``capacity`` (records; per segment
    on a rolling bus), ``full``, ``segments`` (None for a single file), ``record_size``,
    ``segment_size`` (None for a single file), ``taken`` (time.time()), ``parked`` (readers
    parked on the wake file, when the caller filled it in; else None)."""

    _FIELDS = ("kind", "bus_id", "allocated", "committed", "rolled_back", "not_set", "corrupt",
               "unscanned", "limit", "first", "capacity", "full", "segments", "record_size",
               "segment_size", "taken", "parked")

    def __init__(self, **kw):
        for k in self._FIELDS:
            setattr(self, k, kw.get(k))


class BusCounter:
    """The incremental record counts of one bus (``open_bus`` makes one): a single file,
    or a rolling bus's directory, whose segments are each a ``SlotCounter``. ``refresh``
    reads what is new; ``snapshot`` gives the figures. Thread-safe: one lock per bus, held
    for at most one chunk of reading at a time."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self.lock = threading.Lock()
        st = os.lstat(self.path)
        self.rolling = _stat.S_ISDIR(st.st_mode)
        self._segments = {}                     # index -> SlotCounter (not yet settled)
        self._sealed = {}                       # index -> (committed, rolled_back, corrupt)
        self._retired = [0, 0, 0]               # totals of segments removed by retention
        self._single = None
        self._open()

    # -- opening -------------------------------------------------------------------------

    def _open(self):
        if self.rolling:
            open_dir(self.path, create=False, allow_foreign=True)
            meta = read_bus_meta(self.path, allow_foreign=True)
            if meta is None:
                raise ValueError(f"{self.path}: a directory without {META_FILE}: not a rolling "
                                 f"bus")
            self.meta = meta
            self.record_size, self.segment_size = meta.record_size, meta.segment_size
            self.capacity = slots_per_segment(meta.segment_size, meta.record_size)
            self._ident = os.stat(os.path.join(self.path, META_FILE)).st_ino
            return
        meta = read_meta(meta_path(self.path), allow_foreign=True)
        fd, st = open_read_only(self.path)
        if meta is None or meta.kind != "single" or meta.inode != st.st_ino:
            os.close(fd)
            raise ValueError(f"{self.path}: no metadata ({meta_path(self.path)}) describing "
                             f"this file, so its record size is unknown (a file of the Java "
                             f"original): not supported here")
        self.meta = meta
        self.record_size, self.segment_size = meta.record_size, None
        self.capacity = max(0, (meta.file_size - FIRST_RECORD_OFFSET)
                            // slot_size(meta.record_size))
        end = FIRST_RECORD_OFFSET + self.capacity * slot_size(meta.record_size)
        self._single = SlotCounter(self.path, meta.record_size, end, fd=fd)
        self._ident = st.st_ino

    def _replaced(self):
        """True if the bus at the path is not the one counted (deleted and recreated);
        FileNotFoundError if it is gone."""
        where = os.path.join(self.path, META_FILE) if self.rolling else self.path
        return os.stat(where).st_ino != self._ident

    def close(self):
        """Close every file held."""
        if self._single is not None:
            self._single.close()
        for c in self._segments.values():
            c.close()
        self._segments.clear()

    # -- counting ------------------------------------------------------------------------

    def refresh(self, budget=None):
        """Read what is new (at most ``budget`` bytes of new slots per file; None: all).
        Returns True when every allocated slot was read."""
        if self._replaced():
            self.close()
            self._sealed, self._retired = {}, [0, 0, 0]
            self._open()
        if not self.rolling:
            self._single.refresh(budget)
            return self._single.unscanned == 0
        present = list_segments(self.path)
        have = set(present)
        for i in [i for i in self._segments if i not in have]:
            c = self._segments.pop(i)           # removed by retention: keep its totals
            c.close()
            self._retire((c.committed, c.rolled_back, c.corrupt))
        for i in [i for i in self._sealed if i not in have]:
            self._retire(self._sealed.pop(i))
        end = end_boundary(self.segment_size, self.record_size)
        newest_with_records = None
        for i in present:
            if i in self._sealed:
                continue
            c = self._segments.get(i)
            if c is None:
                try:
                    c = self._segments[i] = SlotCounter(segment_path(self.path, i),
                                                        self.record_size, end)
                except FileNotFoundError:
                    continue                    # removed meanwhile
            c.refresh(budget)
            if c.limit > FIRST_RECORD_OFFSET:
                newest_with_records = i
        # A segment older than one with records gets no more slots: once read whole and
        # without uncommitted slots, its counts are final.
        for i in list(self._segments):
            c = self._segments[i]
            if newest_with_records is not None and i < newest_with_records and c.settled:
                c.close()
                del self._segments[i]
                self._sealed[i] = (c.committed, c.rolled_back, c.corrupt)
        return all(c.unscanned == 0 for c in self._segments.values())

    def _retire(self, counts):
        for k in range(3):
            self._retired[k] += counts[k]

    def snapshot(self):
        """A ``BusSnapshot`` of the counts as of the last refresh."""
        if not self.rolling:
            c = self._single
            return BusSnapshot(kind="single", bus_id=self.meta.id,
                               allocated=max(0, (min(c.limit, c.end) - FIRST_RECORD_OFFSET)
                                             // c.step), committed=c.committed,
                               rolled_back=c.rolled_back, not_set=c.not_set,
                               corrupt=c.corrupt, unscanned=c.unscanned, limit=c.limit,
                               first=FIRST_RECORD_OFFSET, capacity=self.capacity,
                               full=c.limit >= c.end, segments=None,
                               record_size=self.record_size, segment_size=None,
                               taken=time.time())
        tot = list(self._retired)
        for t in self._sealed.values():
            for k in range(3):
                tot[k] += t[k]
        live = self._segments.values()
        for c in live:
            tot[0] += c.committed
            tot[1] += c.rolled_back
            tot[2] += c.corrupt
        indices = sorted(set(self._segments) | set(self._sealed))
        limit = first = FIRST_RECORD_OFFSET
        if indices:
            first = join_position(indices[0], FIRST_RECORD_OFFSET, self.segment_size)
            with_records = [i for i in indices if i in self._sealed
                            or self._segments[i].limit > FIRST_RECORD_OFFSET]
            if with_records:
                i = with_records[-1]
                lim = self._segments[i].limit if i in self._segments else \
                    end_boundary(self.segment_size, self.record_size)
                limit = join_position(i, lim, self.segment_size)
            else:
                limit = first
        return BusSnapshot(kind="rolling", bus_id=self.meta.id,
                           allocated=records_to(FIRST_RECORD_OFFSET, limit,
                                                self.record_size, self.segment_size),
                           committed=tot[0],
                           rolled_back=tot[1], not_set=sum(c.not_set for c in live),
                           corrupt=tot[2], unscanned=sum(c.unscanned for c in live),
                           limit=limit, first=first, capacity=self.capacity, full=False,
                           segments=len(indices), record_size=self.record_size,
                           segment_size=self.segment_size, taken=time.time())

    def catch_up(self, chunk=CHUNK):
        """Refresh in steps of ``chunk`` bytes, taking the lock for each step only, until
        every allocated slot was read (what the exporter's background thread runs)."""
        while True:
            with self.lock:
                if self.refresh(chunk):
                    return


def open_bus(path):
    """A ``BusCounter`` for the bus at ``path`` (a file with metadata, or a rolling bus's
    directory), its counts read up to now."""
    c = BusCounter(path)
    c.refresh()
    return c


def parked_readers(path, rolling):
    """Readers parked on the bus's wake file now (``PATH.wake``, ``DIR/bus.wake``), alive:
    0 when there is none (it is not created) or when it is not a wake file yet."""
    wake = os.path.join(path, WAKE_FILE) if rolling else os.fspath(path) + WAKE_SUFFIX
    try:
        fd, _ = open_read_only(wake)
    except FileNotFoundError:
        return 0
    try:
        # parked slots whose parker is alive (its liveness lock), not the parked count: a
        # reader killed while parked (a zombie too) is not counted, nothing is written
        return parked_alive(fd)
    finally:
        os.close(fd)


def list_consumers(path):
    """``mappedbus_py.consumers(path)``: the bus's registered consumers ([] without a
    registry). A corrupt registry raises CorruptBusError."""
    from ..consumers import consumers
    return consumers(path, allow_foreign=True)


def list_groups(path):
    """``mappedbus_py.groups(path)``: the bus's work groups ([] without any). A corrupt
    group file raises CorruptBusError."""
    from ..groups import groups
    return groups(path, allow_foreign=True)
