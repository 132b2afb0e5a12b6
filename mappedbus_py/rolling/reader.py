"""The rolling bus's reader: ``RollingBusReader``. Its per-record paths are
``RollingReaderBase`` (``_rolling.pyx``), which calls this class's ``_live``, ``_follow``,
``_check_id`` and ``_commit_position`` (declared there); inside a segment
the single-file ``MappedBusReader`` reads.

Readers at a segment end look for segment k+1 at most once per ``FOLLOW_MIN_NS`` (50 µs),
backing off to ``FOLLOW_MAX_NS`` (1 ms) while it stays absent (with a spare segment it is almost
always there already), and look at ``bus.meta`` (an lstat; read again for its id only when
that changed) every ``ID_CHECK_NS`` (10 ms) while waiting or polling, as a single-file reader
looks at its file: a bus removed or replaced raises BusReplacedError within that. The segment
being read is looked at as often (its own reader's look): replaced or truncated raises; removed
is retention's, and fine, unless no later segment exists (retention keeps the newest): then
BusReplacedError.
"""
import errno
import os
import time

from .. import aio as _aio
from .._core._checks import (check_idle as _check_idle, check_position as _check_position,
                             check_rollback_timeout as _check_rollback_timeout,
                             check_stall_limit as _check_stall_limit, check_start as _check_start,
                             check_timeout as _check_timeout)
from .._core._consumerhold import ConsumerHold
from .._core._frames import TopicNames as _TopicNames, check_topics as _check_topics
from .._core._consumers import check_name as _check_consumer_name
from .._core._reader import GROUP_READER
from .._core._reader import (DEFAULT_PARK, DEFAULT_PARK_MAX, DEFAULT_SPIN, DEFAULT_TIMEOUT,
                             MappedBusReader)
from .._core._record import Record
from .._core._wakefd import WakeFd
from ..errors import (BusClosedError, BusFullError, BusGapError, BusReplacedError,
                      CorruptBusError)
from ..formats.layout import (FIRST_RECORD_OFFSET, META_FILE, TOPICS_FILE, WRITERS_FILE,
                              join_position, slot_size)
from ..formats.objects import check_serializer as _check_serializer
from ..formats.positions import end_boundary, gap_range, locate, on_grid
from ..messages import Message
from ._rolling import RollingReaderBase
from ..formats.archive import archive_config as _archive_config
from .archive import ArchiveTier
from .seektime import Target, seek_position, time_ns_of
from .journal import keeps_time_index as _keeps_time_index
from .directory import (choose_current as _choose_current, open_bus_segments, open_dir,
                        open_registry as _open_registry, open_wake as _open_wake, read_bus_meta,
                        segment_path)
from .options import check_segment_sizes as _check_segment_sizes, reopen as _reopen_rolling

__all__ = ("RollingBusReader", "FOLLOW_MIN_NS", "FOLLOW_MAX_NS", "ID_CHECK_NS")

FOLLOW_MIN_NS = 50_000
FOLLOW_MAX_NS = 1_000_000
ID_CHECK_NS = 10_000_000
_FIRST = FIRST_RECORD_OFFSET




class RollingBusReader(RollingReaderBase):
    """Reads every record of a rolling bus in the one order all readers share.

    The read API of ``MappedBusReader``; ``position``/``seek``/``start=`` use positions
    across segments (``segment * segment_size + offset``). When the segment a reader needs
    was removed by retention: ``on_gap="raise"`` raises BusGapError (the lost range),
    ``"skip"`` continues at the oldest retained record and adds the slots to ``lost``.

    Times are in seconds, as for ``MappedBusReader``: ``timeout`` (default 2.0) is how long
    a slot no live writer claims (``DIR/bus.writers``) may stay uncommitted before it is rolled
    back, ``stall_limit`` (default None) how long to wait for a live writer's; every call that can wait takes
    ``timeout=None`` (the default: wait until a record comes), ``0`` (do not wait) or
    seconds. ``read_async``/``records_async`` wait without blocking an asyncio loop. A
    reader pickles: the copy reopens the bus by path at this reader's position.

    ``consumer="name"`` holds that name in the bus's consumer registry (``DIR/bus.consumers``):
    the reader opens at its committed position (the first time at ``start``), ``commit()``
    stores the reader's position and ``close()`` lets the name go (see ``MappedBusReader``).
    A consumer whose position retention removed (it lagged past ``max_consumer_lag`` and
    expired) opens, and its first read raises ``BusGapError`` naming the range lost.

    ``group="name"`` makes a member of that work group instead: each record goes to one
    member, which acks it (``mappedbus_py.groups.GroupReader``; docs/groups.md).
    """

    # No instance __dict__: a per-record call finds its method without a dict lookup.
    # (The public attributes are the base class's, with their docstrings.)
    __slots__ = ('_frames_opt', '_topics_opt', '_allow_foreign', '_at_end', '_done_rollbacks',
                 '_done_skipped', '_end', '_follow_at', '_follow_wait', '_idle_kw',
                 '_initial_end', '_k', '_meta_st', '_on_gap', '_park', '_raw', '_slot',
                 '_stall_limit', '_start', '_timeout', '_wake', '_wakefd', '_tier')

    def __new__(cls, *args, group=None, **kwargs):
        # group="name": a member of that work group instead (mappedbus_py.groups.GroupReader;
        # its keywords: start, lease, max_deliveries, max_in_flight, window, timeout, ...)
        if group is None:
            return super().__new__(cls)
        if len(args) != 1:
            raise TypeError("RollingBusReader(path, group=...) takes the bus's path alone: a "
                            "group reads its sizes from bus.meta")
        return GROUP_READER.make(args[0], group, **kwargs)

    def __init__(self, path, segment_size=None, record_size=None, *, timeout=DEFAULT_TIMEOUT,
                 start=None, read_only=False, on_gap="raise", allow_foreign=False,
                 idle="spin_park", spin=DEFAULT_SPIN, park=DEFAULT_PARK,
                 park_max=DEFAULT_PARK_MAX, consumer=None, group=None, stall_limit=None,
                 frames=None, topics=None, serializer=None):
        if consumer is not None:
            _check_consumer_name(consumer)
        if on_gap not in ("raise", "skip"):
            raise ValueError(f"on_gap must be 'raise' or 'skip', got {on_gap!r}")
        if segment_size is not None or record_size is not None:
            s, r = _check_segment_sizes(1 << 20 if segment_size is None else segment_size,
                                        8 if record_size is None else record_size)
            segment_size = None if segment_size is None else s
            record_size = None if record_size is None else r
            MappedBusReader(os.fspath(path), s, r)
        _check_stall_limit(stall_limit)
        _check_rollback_timeout(timeout)
        start = _check_start(start)
        _check_idle(idle, spin, park, park_max)
        self.idle = idle
        self._idle_kw = dict(idle=idle, spin=spin, park=park, park_max=park_max)
        self._wake = None        # DIR/bus.wake, shared by the segment readers
        self._wakefd = None      # fileno()'s watcher
        self._park = park
        self.path = os.fspath(path)
        self.segment_size = segment_size
        self.record_size = record_size
        self.read_only = read_only
        self._timeout = timeout
        self._stall_limit = stall_limit
        self._start = start
        self._on_gap = on_gap
        self._allow_foreign = allow_foreign
        self.meta = None
        self._r = None
        self._k = -1
        self._base_pos = 0
        self._done_skipped = 0
        self._done_rollbacks = 0
        self.lost = 0
        self._at_end = False
        self._follow_at = 0
        self._follow_wait = FOLLOW_MIN_NS
        self._id_at = 0
        self._meta_st = None      # bus.meta's (dev, ino, size, mtime) when its id last matched
        self._idle = 0
        self._initial_end = 0
        self.consumer = consumer
        self._pending_gap = None  # (segment, offset): a consumer's position lost to retention
        self._tier = None         # ArchiveTier of the bus's archive (bus.meta), or None
        if frames is not None and not isinstance(frames, bool):
            raise TypeError(f"frames= is True, False or None (from bus.meta), not {frames!r}")
        self._frames_opt = frames
        self._topics_opt = _check_topics(topics)
        self._serializer = _check_serializer(serializer)
        self._frames = False
        self._names = None

    # -- opening and placing ---------------------------------------------------------

    def open(self):
        """Open the bus (FileNotFoundError if there is none yet), taking the sizes from its
        ``bus.meta`` (BusMismatchError if given ones differ), and place the reader at
        ``start``: the oldest retained record, ``"end"``, or a position. Returns the reader;
        opening an open reader does nothing."""
        if self._r is not None:
            return self
        open_dir(self.path, create=False, allow_foreign=self._allow_foreign)
        meta = read_bus_meta(self.path, allow_foreign=self._allow_foreign)
        mpath = os.path.join(self.path, META_FILE)
        if meta is None:
            raise FileNotFoundError(errno.ENOENT, "no bus.meta: not a rolling bus (or not "
                                    "created yet)", mpath)
        meta.check(self.record_size, self.segment_size, mpath)
        if self._frames_opt is not None:
            meta.check_frames(self._frames_opt, self.path)
        if self._topics_opt is not None and not meta.frames:
            raise TypeError(f"topics= needs a framed bus: {self.path!r} has fixed-size records")
        self._frames = bool(meta.frames)
        if self._frames and self._names is None:
            self._names = _TopicNames(os.path.join(self.path, TOPICS_FILE), self._topics_opt,
                                      self._allow_foreign)
        self.meta = meta
        self._tier = _tier_of(meta, mpath, self._allow_foreign)
        self.segment_size, self.record_size = meta.segment_size, meta.record_size
        if self.idle != "busy_spin" and self._wake is None:
            self._wake = _open_wake(self.path, self._allow_foreign)
        self._slot = slot_size(meta.record_size)
        self._end = end_boundary(meta.segment_size, meta.record_size)
        self._raw = _raw_message(meta.record_size)
        k, limit = _choose_current(self.path, self._hot_segments(), self._allow_foreign)
        self._initial_end = join_position(k, min(limit, self._end), self.segment_size)
        start = self._start
        try:
            if start is None:
                self._place_oldest()
            elif isinstance(start, str) and start == "end":
                self.seek_end()
            else:
                self.seek(start)
        except BaseException:
            self.close()        # a segment decompressed ahead, the wake file
            raise
        if self.consumer is not None:
            try:
                self._claim_consumer()
            except BaseException:
                self.close()
                raise
        return self

    def _claim_consumer(self):
        # Hold the name; go on from its committed position (the first time: from here).
        reg = _open_registry(self.path, self._allow_foreign, create=True)
        hold = ConsumerHold(reg, self.consumer, self.meta.id, self.position, self.path)
        self._hold = hold
        position = hold.position
        if hold.made:
            return
        k, off = locate(position, self.segment_size, self.record_size)
        segs = self._segments()
        if not on_grid(off, self.segment_size, self.record_size) or k > segs[-1]:
            raise CorruptBusError(
                f"{reg.path!r}: consumer {self.consumer!r} has position {position}, not a "
                f"position of this bus (segment {k}, offset {off}; newest segment "
                f"{segs[-1]})")
        if k >= segs[0] and self._has_segment(k):
            self.seek(position)
            return
        # Its segment is gone (retention expired it): the next read reports the gap. Until
        # then the reader waits at the end of the oldest segment, where reading calls
        # _follow(), which raises it (or skips, with on_gap="skip").
        self._open_segment(segs[0], self._end)
        self._pending_gap = (k, off)

    def _release_consumer(self):
        if self._hold is not None:
            hold, self._hold = self._hold, None
            hold.release()

    def _commit_position(self, position):
        # commit()'s slow path (RollingReaderBase.commit): checks, a given position, a
        # position lost to retention; the store is the caller's.
        if self._hold is None:
            if self.consumer is None:
                raise ValueError("commit() needs a consumer: open the reader with "
                                 "consumer=\"name\"")
            raise BusClosedError(f"the RollingBusReader of consumer {self.consumer!r} is closed")
        if position is None:
            return self.position
        position = _check_position(position)
        k, off = locate(position, self.segment_size, self.record_size)
        if position < 0 or not on_grid(off, self.segment_size, self.record_size):
            raise ValueError(f"commit({position!r}): not a record position of this bus")
        return position

    def _hot_segments(self):
        segs = open_bus_segments(self.path, self.meta.id)
        if not segs:
            raise FileNotFoundError(errno.ENOENT, "rolling bus has no segment", self.path)
        return segs

    def _all_segments(self):
        # The hot directory's and the archive's (a segment in both counts once).
        segs = open_bus_segments(self.path, self.meta.id)
        if self._tier is not None:
            archived = self._tier.segments()
            if archived:
                segs = sorted(set(segs) | set(archived))
        return segs

    def _segments(self):
        segs = self._all_segments()
        if not segs:
            raise FileNotFoundError(errno.ENOENT, "rolling bus has no segment", self.path)
        return segs

    def _has_segment(self, index):
        return os.path.lexists(segment_path(self.path, index)) or (
            self._tier is not None and self._tier.has(index))

    def _open_segment(self, index, offset):
        """Make segment ``index`` current at ``offset``, from the hot directory, else from the
        archive (HOT_WINS); FileNotFoundError if it is in neither."""
        kw = dict(timeout=self._timeout, start=offset, allow_foreign=self._allow_foreign,
                  _segment=True, _wake=self._wake, stall_limit=self._stall_limit,
                  _writers_path=os.path.join(self.path, WRITERS_FILE),
                  _position_base=join_position(index, 0, self.segment_size),
                  frames=self._frames, _topics=self._names, serializer=self._serializer,
                  **self._idle_kw)
        hot = segment_path(self.path, index)
        try:
            r = MappedBusReader(hot, self.segment_size, self.record_size,
                                read_only=self.read_only, **kw)
            os.lstat(hot)     # never let an open create a segment
            r.open()
        except FileNotFoundError:
            if self._tier is None or not any(i > index for i in open_bus_segments(self.path, self.meta.id)):
                raise       # the newest segments are never archived: not there (yet)
            # Archived (or moved between the listing and the open): read on from the archive.
            seg = self._tier.open_segment(index)
            try:
                # a decompressed one: the memory file, mapped with its pages (they are there)
                r = MappedBusReader(seg.path, self.segment_size, self.record_size,
                                    read_only=True, prefault=seg.fd is not None,
                                    _fd=-1 if seg.fd is None else seg.fd, **kw)
                r.open()
            finally:
                seg.close()             # mapped: the memory stays until the reader leaves it
        self._drop_current()
        self._r, self._k = r, index
        self._base_pos = join_position(index, 0, self.segment_size)
        self._at_end = False
        self._follow_wait = FOLLOW_MIN_NS

    def _drop_current(self):
        if self._wakefd is not None:
            self._wakefd.stop_watching()     # its thread may read the segment's mapping
        if self._r is not None:
            self._done_skipped += self._r.skipped
            self._done_rollbacks += self._r.rollbacks
            self._r.close()
            self._r = None

    def _place_oldest(self):
        while True:
            oldest = self._segments()[0]
            try:
                return self._open_segment(oldest, _FIRST)
            except FileNotFoundError:
                continue        # removed meanwhile: the next one is the oldest now

    def _gap(self, from_index, from_offset):
        """The segment ``from_index`` is gone: raise or skip to the oldest retained."""
        while True:
            segs = self._segments()
            oldest = segs[0]
            lost_from, lost_to, lost = gap_range(from_index, from_offset, oldest,
                                                 self.segment_size, self.record_size)
            if self._on_gap == "raise":
                raise BusGapError(
                    f"{self.path!r}: positions {lost_from} to {lost_to} (segments {from_index} "
                    f"to {oldest - 1}, {lost} record slots) were removed by retention before "
                    f"this reader read them", lost_from, lost_to, lost)
            try:
                self._open_segment(oldest, _FIRST)
            except FileNotFoundError:
                continue
            self.lost += lost
            return

    def seek(self, position):
        """Continue from the record at ``position`` (a position across segments)."""
        if self.meta is None:
            raise BusClosedError("the RollingBusReader is not open")
        position = _check_position(position)
        if position < 0:
            raise ValueError(f"position must be a non-negative int, got {position!r}")
        self._pending_gap = None
        k, off = locate(position, self.segment_size, self.record_size)
        if not on_grid(off, self.segment_size, self.record_size):
            raise ValueError(f"position {position} is not a record boundary (offset {off} in "
                             f"segment {k}; records start at {_FIRST} and take {self._slot} "
                             f"bytes)")
        if k == self._k and self._r is not None:
            self._r.seek(off)
            self._at_end = False
            return
        segs = self._segments()
        if k > segs[-1]:
            raise ValueError(f"position {position} is in segment {k}, past the newest "
                             f"segment {segs[-1]}")
        try:
            self._open_segment(k, off)
        except FileNotFoundError:
            if k > self._segments()[0]:
                raise
            self._gap(k, off)

    def seek_time(self, t):
        """Continue from the first record committed at or after ``t`` (a ``datetime``, naive
        meaning local time, or Unix epoch seconds), in either tier, to within 1 ms: every
        record whose slot was allocated at or after ``t`` is read, and none allocated before
        the start of ``t``'s millisecond (docs/journal.md, "Replay from a time"). A time past
        every indexed record: the end of the bus. Returns the position."""
        if self.meta is None:
            raise BusClosedError("the RollingBusReader is not open")
        t_ns = time_ns_of(t)
        if not _keeps_time_index(self.meta):
            # bus.meta as it is now: a writer may have turned the index on since the open
            meta = read_bus_meta(self.path, allow_foreign=self._allow_foreign)
            if meta is None or meta.id != self.meta.id or not _keeps_time_index(meta):
                raise ValueError(f"{self.path!r} keeps no time index: seek_time needs its "
                                 f"writers opened with time_index=True (docs/journal.md)")
        end = self._end_position()
        target = seek_position(self.path, self._tier, self.meta, self._segments(), t_ns,
                               allow_foreign=self._allow_foreign)
        self.seek(end if target.kind is Target.END else target.position)
        return self.position

    def _end_position(self):
        # The end before the indices are read: a record allocated after it is read in any case.
        k, limit = _choose_current(self.path, self._hot_segments(), self._allow_foreign)
        return join_position(k, min(max(limit, _FIRST), self._end), self.segment_size)

    def seek_end(self):
        """Skip to the current end of the bus: only records allocated from now on."""
        if self.meta is None:
            raise BusClosedError("the RollingBusReader is not open")
        self._pending_gap = None
        while True:
            k, limit = _choose_current(self.path, self._hot_segments(), self._allow_foreign)
            try:
                return self._open_segment(k, min(max(limit, _FIRST), self._end))
            except FileNotFoundError:
                continue

    def close(self):
        """Unmap the segment the reader is in; ``skipped``, ``rollbacks`` and ``lost`` keep
        their counts; the consumer name is let go. Closing twice is harmless."""
        self._release_consumer()
        self._pending_gap = None
        self._drop_current()
        if self._tier is not None:
            self._tier.close()
        if self._wakefd is not None:
            self._wakefd.close()
            self._wakefd = None
        if self._wake is not None:
            self._wake.close()
            self._wake = None

    def __reduce__(self):
        opened = self._r is not None
        kwargs = dict(timeout=self._timeout, start=self.position if opened else self._start,
                      read_only=self.read_only, on_gap=self._on_gap,
                      allow_foreign=self._allow_foreign, consumer=self.consumer,
                      stall_limit=self._stall_limit, **self._idle_kw)
        return (_reopen_rolling, (RollingBusReader, self.path, self.segment_size,
                                  self.record_size, kwargs, opened))

    @property
    def closed(self):
        """True until ``open()``, and again after ``close()``."""
        return self._r is None

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self._r is None else f"open at {self.position}"
        return (f"<RollingBusReader {state} path={self.path!r} segment_size="
                f"{self.segment_size} record_size={self.record_size}>")

    # -- figures ----------------------------------------------------------------------

    @property
    def bus_id(self):
        """The bus's random id from ``bus.meta``; None until opened. A bus deleted and
        recreated at the same path has another (the reader then raises BusReplacedError)."""
        return self.meta.id if self.meta is not None else None

    @property
    def segment(self):
        """The index of the segment the reader is in (-1 before ``open()``)."""
        return self._k

    @property
    def position(self):
        """The position of the next slot this reader will look at."""
        if self._pending_gap is not None:
            return join_position(*self._pending_gap, self.segment_size)
        return self._base_pos + self._live().position

    @property
    def limit(self):
        """The limit of the segment the reader is in, as a position."""
        return self._base_pos + self._live().limit

    @property
    def skipped(self):
        """Records lost to writers that stalled: rolled-back or timed-out slots passed over,
        in every segment read so far (records lost to retention are counted in ``lost``)."""
        return self._done_skipped + (self._r.skipped if self._r is not None else 0)

    @property
    def rollbacks(self):
        """Slots this reader itself rolled back (their writer stalled past ``timeout``)."""
        return self._done_rollbacks + (self._r.rollbacks if self._r is not None else 0)

    @property
    def timeout(self):
        """Seconds a slot may stay uncommitted before this reader rolls it back."""
        return self._timeout

    @timeout.setter
    def timeout(self, seconds):
        _check_rollback_timeout(seconds)
        self._timeout = seconds
        if self._r is not None:
            self._r.timeout = seconds

    def set_timeout(self, milliseconds):
        """Java's ``setTimeout(int)``: the rollback timeout in **milliseconds**."""
        if isinstance(milliseconds, bool) or not isinstance(milliseconds, (int, float)):
            raise ValueError(f"set_timeout() takes a number of milliseconds, got {milliseconds!r}")
        _check_rollback_timeout(milliseconds / 1000, "set_timeout(ms)",
                                f"{milliseconds!r} milliseconds")
        self.timeout = milliseconds / 1000

    set_timeout_ms = set_timeout

    def has_recovered(self):
        """True once every record present when the reader opened has been read."""
        return self.position >= self._initial_end

    def _live(self):
        if self._r is None:
            raise BusClosedError("the RollingBusReader is closed (call open() first)")
        return self._r

    # -- following segments ------------------------------------------------------------

    def _check_id(self, now):
        # An lstat of bus.meta; its id is read again only when the file looks changed.
        self._id_at = now + ID_CHECK_NS
        try:
            st = os.lstat(os.path.join(self.path, META_FILE))
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        except (FileNotFoundError, NotADirectoryError):
            key = None
        if key is not None and key == self._meta_st:
            return self._check_newest()
        try:
            meta = read_bus_meta(self.path, allow_foreign=self._allow_foreign)
        except (FileNotFoundError, NotADirectoryError):
            meta = None
        if meta is not None and meta.id == self.meta.id:
            self._meta_st = key
            return self._check_newest()
        what = "is gone" if meta is None else f"now holds bus {meta.id}"
        raise BusReplacedError(f"{self.path!r}: the rolling bus {self.meta.id} was "
                               f"replaced: its {META_FILE} {what}")

    def _check_newest(self):
        # Retention removes a segment only once later ones exist: the segment being read gone
        # with none after it means the bus lost its newest segment (its writers raise), and
        # no record can come. One lstat; the listing only then.
        if self._r is None or self._at_end:
            return
        try:
            os.lstat(segment_path(self.path, self._k))
            return
        except FileNotFoundError:
            pass
        if not any(i > self._k for i in open_bus_segments(self.path, self.meta.id)):
            raise BusReplacedError(f"{self.path!r}: its newest segment {self._k} was removed "
                                   f"(not by retention, which keeps the newest): no record can "
                                   f"come to this reader")

    def _follow(self):
        """At the end of segment ``_k``: move on if the next segment is there (throttled).
        True when the reader moved (to k+1 or, skipping a gap, further)."""
        if self._pending_gap is not None:
            k, off = self._pending_gap
            self._gap(k, off)
            self._pending_gap = None
            return True
        now = time.monotonic_ns()
        if not self._at_end:
            self._at_end = True
            self._follow_at = 0
        if now < self._follow_at:
            return False
        if now >= self._id_at:
            self._check_id(now)
        nxt = self._k + 1
        while True:
            try:
                self._open_segment(nxt, _FIRST)
                return True
            except FileNotFoundError:
                pass
            segs = self._all_segments()
            if nxt in segs:
                continue        # made since the look (and a later one too): open it
            if any(i > nxt for i in segs):
                self._gap(nxt, _FIRST)
                return True
            break
        self._follow_at = now + self._follow_wait
        self._follow_wait = min(self._follow_wait * 2, FOLLOW_MAX_NS)
        return False

    # -- the read API ----------------------------------------------------------------------

    def wait(self, timeout=None):
        """Like ``next()``, but wait up to ``timeout`` seconds (None: until a record
        comes, 0: not at all); True if a record became current."""
        if self.next():
            return True
        if timeout is not None and _check_timeout(timeout) <= 0:
            return self._look()
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 20e-6
        while True:
            if deadline is None:
                remaining = 0.1
            else:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
            if self._at_end:
                # Waiting for the next segment: park; the first commit in it wakes us.
                if self._wake is None:
                    time.sleep(min(pause, remaining))
                    pause = min(pause * 2, self._park)
                else:
                    v = self._wake._prepare()
                    try:
                        self._follow_at = 0
                        if self.next():
                            return True
                        self._wake._wait(v, min(remaining, pause))
                    finally:
                        self._wake._done()
                    pause = min(pause * 2, self._park)
                self._follow_at = 0
                if self.next():
                    return True
                continue
            try:
                # The segment's reader looks at its file every 10 ms as it waits; the bus's
                # id is looked at between its waits, as often.
                if self._r.wait(min(remaining, ID_CHECK_NS / 1e9)):
                    return True
                self._check_id(time.monotonic_ns())
            except BusFullError:
                if self._follow() and self.next():
                    return True

    def _look(self):
        # An empty poll's looks when due (read(0), read_async): the bus's id, and the
        # segment's file (True if it was replaced with a record left, now current).
        now = time.monotonic_ns()
        if now >= self._id_at:
            self._check_id(now)
        r = self._r
        return r is not None and not self._at_end and r._look()

    def fileno(self):
        """A file descriptor for event loops, as ``MappedBusReader.fileno()``: after
        ``arm()`` it becomes readable when a record may be there (in this segment or the
        next). OSError for a ``busy_spin`` reader or one without a wake file."""
        self._live()
        if self._wake is None:
            raise OSError(f"{self.path!r}: this reader has no wake file (idle={self.idle!r}, "
                          f"or it could not be made): no descriptor to wait on")
        if self._wakefd is None:
            kw = self._idle_kw
            self._wakefd = WakeFd(self._wake, int(kw["park"] * 1e9), int(kw["park_max"] * 1e9))
        return self._wakefd.fileno()

    def arm(self, within=None):
        """Make ``fileno()`` fire once the next record may be there; ``within`` as for
        ``MappedBusReader.arm()``. Returns False, without arming, if one may be ready now
        (then call ``next()``/``read(0)``)."""
        self.fileno()
        return not self._r._arm_fd(self._wakefd, within)

    def disarm(self):
        """Stop watching for ``fileno()`` (a wait that ended by timeout or cancellation)."""
        if self._wakefd is not None:
            self._wakefd.stop_watching()

    def _record(self):
        if self._frames:
            return self._frame_record()
        r = self._r
        off = r.position - self._slot
        # The whole payload, as the single-file reader's Record has it (read_bytes would
        # check the stored length, which an object message's type id is not).
        meta = r.read_type()
        r.read_message(self._raw)
        return Record(self._base_pos + off, meta, self._raw.to_bytes())

    def records(self, timeout=None):
        """Yield records until none arrives for ``timeout`` seconds (None: never stop)."""
        while True:
            if not self.wait(timeout):
                return
            yield self._record()

    def __iter__(self):
        return self.records(None)

    def read_async(self, timeout=None):
        """``read(timeout)`` to ``await``: polls without blocking the event loop."""
        return _aio.read_async(self, timeout)

    def records_async(self, timeout=None):
        """``records(timeout)`` for ``async for``."""
        return _aio.records_async(self, timeout)

    def read_type(self):
        """The current record's metadata field: its type id (or a byte array's length)."""
        return self._live().read_type()

    def read_message(self, message):
        """Fill ``message`` from the current record's payload, in place; returns it."""
        return self._live().read_message(message)

    def read_buffer(self, buffer, offset=0):
        """Copy the current byte-array record into ``buffer`` at ``offset``; returns its
        length (Java ``readBuffer``)."""
        return self._live().read_buffer(buffer, offset)

    def read_bytes(self):
        """The current byte-array record's bytes."""
        return self._live().read_bytes()

    def read_batch(self, out, meta=None, timeout=None):
        """Copy up to ``len(out)`` committed records into ``out`` (see
        ``MappedBusReader.read_batch``), across segments; returns how many."""
        n = 0
        total = len(out)
        if total == 0:
            return 0
        if not self.wait(timeout):
            return 0
        # The first record is current: copy it, then take what is ready.
        while n < total:
            if n == 0:
                row = out[0:1]
                self._copy_current(row, None if meta is None else meta[0:1])
                n = 1
                continue
            try:
                got = self._r.read_batch(out[n:], None if meta is None else meta[n:], 0.0)
            except BusFullError:
                if not self._follow_keeping(n):
                    break
                continue
            if got == 0:
                if self._r.position > self._r_last():
                    if self._follow_keeping(n):
                        continue
                break
            n += got
        return n

    def _follow_keeping(self, n):
        """``_follow`` for a batch that already holds ``n`` rows: a gap or a replaced bus
        found now is left for the next call, so the rows copied so far are delivered."""
        try:
            return self._follow()
        except (BusGapError, BusReplacedError):
            if n == 0:
                raise
            return False

    def _r_last(self):
        return self._end - self._slot

    def _copy_current(self, row, meta_row):
        import numpy
        view = numpy.frombuffer(memoryview(row).cast("B"), dtype=numpy.uint8)
        rowlen = view.nbytes
        if rowlen > self.record_size:
            raise ValueError(f"rows of {rowlen} bytes are longer than record_size "
                             f"{self.record_size}")
        self._r.read_message(self._raw)
        view[:] = numpy.frombuffer(self._raw.to_bytes(), dtype=numpy.uint8)[:rowlen]
        if meta_row is not None:
            meta_row[0] = self._r.read_type()


def _tier_of(meta, mpath, allow_foreign):
    """The ``ArchiveTier`` of a bus whose ``bus.meta`` names an archive, else None."""
    cfg = _archive_config(meta, mpath)
    return None if cfg is None else ArchiveTier(cfg, meta, allow_foreign=allow_foreign)


def _raw_message(record_size):
    """A message of exactly ``record_size`` payload bytes, to copy whole payloads."""
    class RawPayload(Message, size=record_size):
        pass
    return RawPayload()
