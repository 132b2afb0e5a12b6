# cython: language_level=3, embedsignature=True
"""A member of a work group: each record of the bus goes to one member at a time, is
acknowledged once, and comes back to another member if its holder dies, releases it or lets
its lease pass (docs/groups.md; protocol: _group.h; layout: layout.py, GROUP_*)."""
cimport cython
import asyncio
import os
import struct
import time

from cpython.exc cimport PyErr_CheckSignals
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy
from posix.time cimport timespec, nanosleep

from mappedbus_py._core._atomic cimport load_acquire_i64, store_release_i64, fetch_add_i64, cpu_relax
from mappedbus_py._core._message cimport MessageBase, check_message_fits
from mappedbus_py._core._clock cimport monotonic_ns, coarse_ns
from mappedbus_py._core._mapping cimport copy_payload
from mappedbus_py._core._reader cimport MappedBusReader
from mappedbus_py._core._slotscan cimport END
from mappedbus_py._core._consumers cimport ConsumerRegistry, consumer_entry, consumer_commit
from mappedbus_py._core._record cimport Record
from mappedbus_py._core._frames cimport (TopicNames, frame_bytes, frame_skip, frame_meta_load,
                                        frame_length, frame_topic, frame_flags)

from .._core._liveness import Hold, LiveFile
from .._core._reader import DEFAULT_TIMEOUT
from .._core._checks import check_timeout as _check_timeout
from ..errors import (BusClosedError, BusFullError, BusGapError, BusMismatchError, CorruptBusError,
                      MappedBusError)
from mappedbus_py._core._layout cimport FIRST_RECORD_OFFSET, HEADER_SIZE, PAYLOAD_OFFSET, METADATA_OFFSET
from ..formats.layout import TOPICS_FILE
from ..formats.layout import (GROUP_DEAD_HEADER_SIZE, GROUP_MEMBER_COUNT, GROUP_MEMBER_NAME_MAX,
                      GROUP_MEMBER_NAME_OFFSET, GROUP_NAME_MAX)
from ._files import (BusKind, bus_kind, check_group_name, check_options, create_group,
                     dead_letter_path, g_of_position, group_file, open_group, open_live)

__all__ = ("GroupReader", "GroupRecord", "GroupFullError")

cdef int64_t SCAN_NS = 1000000          # a waiting member looks for redeliveries every 1 ms
cdef int64_t HOLD_NS = 1000000          # a member commits the group's retention entry at most
                                        # every 1 ms while acking (at once when it waits)
cdef int64_t SPIN_NS = 20000            # then spins this long before sleeping
cdef int64_t SLEEP_MIN_NS = 20000       # sleeps back off from here
cdef int64_t SLEEP_MAX_NS = 1000000     # to here
cdef double MAX_WAIT_S = 2.0**62 / 1e9
cdef int64_t FIRST = FIRST_RECORD_OFFSET


cdef int _fork_gen = 0


def _after_fork():
    # A child of fork() shares its parent's member slot and not its liveness lock (LiveFile
    # closes it): members made before the fork refuse to work there.
    global _fork_gen
    _fork_gen += 1


os.register_at_fork(after_in_child=_after_fork)


def hold_name(group):
    """The consumer-registry name of a group's retention entry: ``group:NAME`` (a name
    readers can take too, so do not name a consumer so); a group name too long for it is
    cut and given a hash of the whole."""
    name = "group:" + group
    if len(name.encode("utf-8")) <= 64:
        return name
    import hashlib
    digest = hashlib.blake2b(group.encode("utf-8"), digest_size=8).hexdigest()
    return "group:" + group.encode("utf-8")[:41].decode("utf-8", "ignore") + "~" + digest


class GroupFullError(MappedBusError):
    """Every member slot of the group (GROUP_MEMBER_COUNT) is held by a live member."""


cdef class GroupRecord(Record):
    """A record delivered to a group member: a ``Record`` (position, meta, payload) with its
    delivery count. Give it back to the member with ``ack``, ``release`` or ``reject``."""

    def __repr__(self):
        return (f"GroupRecord(position={self.position}, meta={self.meta}, "
                f"deliveries={self.deliveries}, payload={self.payload!r})")

    def __reduce__(self):
        raise TypeError("a GroupRecord is acknowledged by the member it was delivered to; it "
                        "does not travel to other processes (send its position)")


cdef class GroupReader:
    """GroupReader(path, group, *, start=None, lease=None, max_deliveries=None, max_in_flight=None, window=None, timeout=2.0, file_size=None, record_size=None, allow_foreign=False, name=None, topics=None)
--

    A member of the work group ``group`` of the bus at ``path`` (a single-file bus or a
    rolling bus's directory). Every record of the bus from the group's start goes to one
    member; the member acknowledges it with ``ack(rec)`` (True: it was still this member's),
    gives it back with ``release(rec)`` or sends it to the dead-letter bus with
    ``reject(rec)``. A record whose member dies (the kernel drops its lock), or whose lease
    passes, goes to another member, with ``rec.deliveries`` one higher; an ack of the earlier
    delivery then returns False. After ``max_deliveries`` deliveries a record goes to the
    group's dead-letter bus instead (``PATH.groups/NAME.dead``, a rolling bus).

    The first member makes the group file (``PATH.groups/NAME.group``, a rolling bus:
    ``DIR/groups/NAME.group``) with ``start`` (None: the bus's first record, ``"end"``: only
    records from now on, or a position), ``lease`` (seconds, default 30),
    ``max_deliveries`` (5), ``max_in_flight`` (per member; default: the window) and
    ``window`` (records between the oldest unacked and the newest handed out, a power of
    two, 4096). Later members may leave them out; given, they must equal the group's
    (BusMismatchError otherwise). ``timeout`` is the bus readers' rollback timeout.

    Reading as a reader does: ``read(timeout)``, ``records(timeout)``, iteration,
    ``read_into(message)`` (then ``ack()``: the record read last), ``read_async``,
    ``read_batch(n, timeout)`` with ``ack_batch(records)``. Waiting follows the reader's
    rules (None: until a record comes, 0: not at all). A member holds up to 128 at a time.

    **Framed buses** (docs/messages.md): a message, whatever its slot count, is what a member
    takes, acks, releases or rejects whole (``rec.payload``, ``rec.object()``, ``rec.topic``;
    its continuation slots are never handed out); a dead letter carries the whole message on
    a framed dead-letter bus. ``topics=[...]`` (a framed bus) hands out only those topics'
    messages: the others are skipped by whichever member meets them, so give every member of
    a group the same ``topics``.
    """

    def __init__(self, path, group, *, start=None, lease=None, max_deliveries=None,
                 max_in_flight=None, window=None, timeout=DEFAULT_TIMEOUT, file_size=None,
                 record_size=None, bint allow_foreign=False, name=None, topics=None):
        self._base = NULL
        self._words = NULL
        self.member = -1
        self._cur_g = -1
        self._dead = None
        self._creg = None
        self._creg_start = -1
        path = os.fspath(path)
        self._name_bytes = check_group_name(group)
        if name is not None and (not isinstance(name, str)
                                 or len(name.encode("utf-8")) > GROUP_MEMBER_NAME_MAX):
            raise ValueError(f"a member name is a str of at most {GROUP_MEMBER_NAME_MAX} "
                             f"bytes of UTF-8, got {name!r}")
        given = dict(window=window, lease=lease, max_deliveries=max_deliveries,
                     max_in_flight=max_in_flight)
        options = check_options(window, lease, max_deliveries, max_in_flight)
        self.path = path
        self.group = group
        kind = bus_kind(path)
        self._rolling = kind is BusKind.ROLLING
        self._reader_kw = dict(timeout=timeout, allow_foreign=allow_foreign)
        self._r = None
        self._k = -1
        self._framed = False
        self._names = None
        if self._rolling:
            from ..rolling import read_bus_meta, slots_per_segment
            meta = read_bus_meta(path, allow_foreign=allow_foreign)
            if meta is None:
                raise FileNotFoundError(f"{path!r}: a rolling bus without bus.meta (a group "
                                        f"needs the bus made by its first writer)")
            self._framed = bool(meta.frames)
            if topics is not None and not self._framed:
                raise TypeError(f"topics= needs a framed bus: {path!r} has fixed-size records")
            if self._framed:
                self._names = TopicNames(os.path.join(path, TOPICS_FILE), topics, allow_foreign)
            self.record_size = meta.record_size
            self._segment_size = meta.segment_size
            self._sps = slots_per_segment(meta.segment_size, meta.record_size)
            bus_id = bytes.fromhex(meta.id)
            self._bus_id = meta.id
        else:
            r = MappedBusReader(path, file_size, record_size, idle="busy_spin", topics=topics,
                                **self._reader_kw)
            r.open()
            self._framed = r.frames
            self._r = r
            self._k = 0
            self.record_size = r.record_size
            self._segment_size = 0
            self._sps = (r.file_size - FIRST) // (HEADER_SIZE + r.record_size)
            bus_id = bytes.fromhex(r.bus_id) if r.bus_id else bytes(16)
        self._slot = HEADER_SIZE + self.record_size
        self.group_path = group_file(path, kind, group)
        self._dead_path = dead_letter_path(path, kind, group)
        if not os.path.lexists(self.group_path):
            start_position, g0 = self._start_of(start)
            create_group(self.group_path, options, bus_id, start_position, g0,
                                allow_foreign=allow_foreign)
        mm, header = open_group(self.group_path, allow_foreign=allow_foreign)
        try:
            for key, value in given.items():
                if value is not None and getattr(options, "lease_ns" if key == "lease" else key) \
                        != getattr(header.options, "lease_ns" if key == "lease" else key):
                    raise BusMismatchError(
                        f"group {group!r} exists with {header.options}; this member asks for "
                        f"{key}={value!r} (leave it out to join with the group's)")
            if header.bus_id != bus_id and any(header.bus_id) and any(bus_id):
                raise BusMismatchError(f"{self.group_path!r} belongs to bus id "
                                       f"{header.bus_id.hex()}, not to this bus "
                                       f"({bus_id.hex()}): the bus was replaced")
            self._attach(mm, header.options, name)
            if self._rolling:
                self._open_hold(bus_id.hex())
        except BaseException:
            self.close()
            mm.close()
            raise

    def _start_of(self, start):
        # The new group's first record: (start position, g).
        cdef int64_t slot = self._slot
        if self._rolling:
            from ..rolling import segment_limit, end_boundary
            from ..rolling.archive import all_segments
            from ..rolling.directory import open_bus_segments
            segments = open_bus_segments(self.path, self._bus_id)
            if start is None:
                # the oldest record of either tier (the archive's, then the hot directory's)
                segments = all_segments(self.path, self._reader_kw["allow_foreign"])
                k = segments[0] if segments else 0
                return k * self._segment_size + FIRST, k * self._sps
            if isinstance(start, str) and start == "end":
                if not segments:
                    return FIRST, 0
                k = segments[-1]
                limit = segment_limit(self.path, k, allow_foreign=self._reader_kw["allow_foreign"])
                limit = min(max(limit, FIRST), end_boundary(self._segment_size, self.record_size))
                return k * self._segment_size + limit, k * self._sps + (limit - FIRST) // slot
        else:
            if start is None:
                return FIRST, 0
            if isinstance(start, str) and start == "end":
                self._r.seek_end()
                p = self._r.position
                return p, (p - FIRST) // slot
        if isinstance(start, bool) or not isinstance(start, int) or start < FIRST:
            raise ValueError(f"start is None, 'end' or a record position, got {start!r}")
        k, off = divmod(start, self._segment_size) if self._rolling else (0, start)
        if (off - FIRST) % slot or off < FIRST or (off - FIRST) // slot > self._sps:
            raise ValueError(f"start={start} is not a record boundary of this bus")
        return start, g_of_position(start, BusKind.ROLLING if self._rolling else
                                           BusKind.SINGLE, self.record_size,
                                           self._segment_size, self._sps)

    def _attach(self, mm, options, name):
        cdef unsigned char[::1] view = mm
        cdef int i
        self._mm = mm
        self._base = <char *>&view[0]
        self._window = options.window
        self._shift = options.window.bit_length() - 1
        self._lease_ns = options.lease_ns
        self._max_deliveries = options.max_deliveries
        self._max_in_flight = options.max_in_flight or options.window
        self._words = <int64_t *>calloc(self._window, sizeof(int64_t))
        if self._words == NULL:
            raise MemoryError()
        live = LiveFile(open_live(self.group_path,
                                         allow_foreign=self._reader_kw["allow_foreign"]))
        self._live = live
        self._live_fd = live.fileno()
        self._gen = _fork_gen
        for i in range(GROUP_MEMBER_COUNT):
            held = live.hold(group_member_byte(i))
            if held is Hold.TAKEN:
                break
            if held is Hold.UNKNOWN:
                raise OSError(f"{self.group_path!r}: the file system gives no open-file-"
                              f"description locks, which group members need for liveness")
        else:
            raise GroupFullError(f"group {self.group!r}: all {GROUP_MEMBER_COUNT} member "
                                 f"slots are held by live members")
        self.member = i
        self._mslot = group_member_slot(self._base, i)
        # Its last holder is dead (we hold its lock): its records go back to the group
        # before this member takes any under the same owner number.
        group_release_owner(self._base, self._window, self._shift, i)
        self._delivered = load_acquire_i64(self._mslot + GROUP_MEMBER_DELIVERED_OFFSET)
        self._acked = load_acquire_i64(self._mslot + GROUP_MEMBER_ACKED_OFFSET)
        raw = (name or "").encode("utf-8")[:GROUP_MEMBER_NAME_MAX]
        mm[self._mslot - self._base + GROUP_MEMBER_NAME_OFFSET:
           self._mslot - self._base + GROUP_MEMBER_NAME_OFFSET + GROUP_MEMBER_NAME_MAX] = \
            raw.ljust(GROUP_MEMBER_NAME_MAX, b"\0")
        struct.pack_into("<i", mm, self._mslot - self._base + GROUP_MEMBER_PID_OFFSET, os.getpid())
        struct.pack_into("<i", mm, self._mslot - self._base + GROUP_MEMBER_IN_FLIGHT_OFFSET, 0)
        store_release_i64(self._mslot + GROUP_MEMBER_TAKEN_NS_OFFSET, time.time_ns())
        self._hint_seen = load_acquire_i64(self._base + GROUP_HINT_OFFSET) - 1   # look once
        self._next_scan = 0

    # -- the bus ----------------------------------------------------------------------

    cdef int64_t _position(self, int64_t g):
        if self._rolling:
            return (g // self._sps) * self._segment_size + FIRST + (g % self._sps) * self._slot
        return FIRST + g * self._slot

    def _made_after(self, k):
        # Whether a segment after k exists (k, in neither tier, was removed by retention),
        # else k is not made yet: the newest segment is always hot, so the hot directory says.
        from ..rolling.directory import open_bus_segments
        return any(i > k for i in open_bus_segments(self.path, self._bus_id))

    def _oldest_after(self, k):
        # The oldest segment after the removed k, in either tier (the archive's retention
        # may have removed k and kept later archived ones).
        from ..rolling.archive import all_segments
        return min(i for i in all_segments(self.path, self._reader_kw["allow_foreign"])
                   if i > k)

    cdef int _select(self, int64_t g) except -1:
        # Make _r the reader of g's segment: 1, 0 if that segment is not made yet, 2 if
        # retention removed it (a later one exists): g is lost.
        cdef int64_t k
        if not self._rolling:
            return 1
        k = g // self._sps
        if k == self._k:
            return 1
        from ..rolling import segment_path
        seg = segment_path(self.path, k)
        archived = None
        kw = self._reader_kw
        if not os.path.lexists(seg):
            # archived (docs/journal.md): read on from the archive, read-only; a compressed
            # one from a memory file the kernel frees with this process, a killed one's too
            from ..rolling.archive import archived_segment
            archived = archived_segment(self.path, k, self._reader_kw["allow_foreign"])
            if archived is None:
                return 2 if self._made_after(k) else 0
            seg = archived.path
            kw = dict(self._reader_kw, read_only=True)
            if archived.fd is not None:
                kw = dict(kw, _fd=archived.fd, prefault=True)
        if self._framed:
            kw = dict(kw, frames=True, _topics=self._names)
        try:
            r = MappedBusReader(seg, self._segment_size, self.record_size, idle="busy_spin",
                                _segment=True, **kw)
            r.open()
        finally:
            if archived is not None:
                archived.close()        # mapped: the memory stays until the reader leaves it
        if self._r is not None:
            self._r.close()
        self._r, self._k = r, k
        return 1

    # -- retention (a rolling bus) -----------------------------------------------------

    def _open_hold(self, bus_id):
        # The group's entry in the bus's consumer registry: retention keeps the segment of
        # the group's start (its oldest record not done) as it keeps a consumer's, under the
        # same max_consumer_lag / on_consumer_lag. Shared by the members, held by none.
        from ..rolling.directory import open_registry as _open_registry
        self._creg_name = hold_name(self.group)
        self._creg = _open_registry(self.path, self._reader_kw["allow_foreign"], create=True)
        start = load_acquire_i64(self._base + GROUP_START_OFFSET)
        self._creg_i = self._creg.ensure_shared(self._creg_name, bus_id, self._position(start))
        self._hold(start, True)

    cdef int _hold(self, int64_t start, bint now) except -1:
        # Commit the group's start to its registry entry when it moved: at most every
        # HOLD_NS while acking (``now`` False), at once when waiting (``now``).
        cdef int64_t t
        if self._creg is None or start == self._creg_start:
            return 0
        t = coarse_ns()
        if not now and t < self._creg_next:
            return 0
        self._creg_next = t + HOLD_NS
        self._creg_start = start
        self._commit_hold(self._position(start))
        return 1

    def _commit_hold(self, position):
        cdef ConsumerRegistry reg = self._creg
        if not reg.is_entry(self._creg_i, self._creg_name):
            # Removed (remove_consumer): made again, at the group's start.
            from ..rolling import read_bus_meta
            meta = read_bus_meta(self.path, allow_foreign=self._reader_kw["allow_foreign"])
            self._creg_i = reg.ensure_shared(self._creg_name, meta.id, position)
        consumer_commit(consumer_entry(reg.base, self._creg_i), position, time.time_ns())

    def _gap(self, int64_t g_from, int64_t g_to):
        raise BusGapError(
            f"{self.path!r}: group {self.group!r} lost records {self._position(g_from)} to "
            f"{self._position(g_to)} (exclusive, {g_to - g_from} slots): retention removed "
            f"their segments (the group lagged past max_consumer_lag with "
            f"on_consumer_lag='expire', or the archive's retention removed them); reading "
            f"goes on after them",
            self._position(g_from), self._position(g_to), g_to - g_from)

    def _lose_new(self, int64_t g):
        # g (not yet taken) and the records after it in removed segments: skipped, as far
        # as the window lets; one BusGapError names them.
        cdef int64_t first = g, stop, gg, seen = 0, ask = 0
        oldest = self._oldest_after(g // self._sps)
        stop = oldest * self._sps
        if self._framed:
            # messages never span segments: the removed ones are one skip to ``stop``
            if g < stop and group_f_next_new(self._base, self._window, self._shift, &seen,
                                             &ask) == g:
                group_f_skip(self._base, self._window, self._shift, g, seen, stop - g)
                self._hold(self._advance(), True)
                self._gap(first, stop)
            return
        while g < stop:
            gg = group_next_new(self._base, self._window, self._shift)
            if gg != g:
                break               # another member moved on, or the window is full
            group_skip(self._base, self._window, self._shift, g)
            g += 1
        if g > first:
            self._hold(self._advance(), True)
            self._gap(first, g)

    def _lose_taken(self, int64_t g, int64_t seen):
        # g, seen as ``seen`` (another's, takeable), lies in a removed segment: it can be
        # neither redelivered nor dead-lettered (its payload is gone): skipped, a gap.
        cdef int64_t w = seen
        if group_finish(self._base, self._window, g, w, GROUP_SKIP):
            self._hold(self._advance(), True)
            self._gap(g, g + 1)

    # -- acquiring --------------------------------------------------------------------

    cdef int _took(self, int64_t g, int64_t word) except -1:
        self._words[g & (self._window - 1)] = word
        self._cur_g = g
        self._cur_word = word
        self._in_flight += 1
        self._delivered += 1
        store_release_i64(self._mslot + GROUP_MEMBER_DELIVERED_OFFSET, self._delivered)
        store_release_i32(self._mslot + GROUP_MEMBER_IN_FLIGHT_OFFSET, self._in_flight)
        return 1

    cdef int _acquire_new(self) except -1:
        # 1: a new record is current; 0: none yet (or the window is full); END: past the
        # last record of a single-file bus.
        cdef int64_t g, off, w
        cdef int found
        cdef MappedBusReader r
        if self._framed:
            return self._acquire_new_framed()
        while True:
            g = group_next_new(self._base, self._window, self._shift)
            if g < 0:
                if g == GROUP_FULL:
                    # skipped entries (rolled back, other topics) are passed by `start` only
                    # when something moves it: move it here, so a run of skips longer than
                    # the window does not stop the group
                    if self._pass_skipped():
                        continue
                    return 0
                raise CorruptBusError(f"{self.group_path!r}: entry of record "
                                      f"{load_acquire_i64(self._base + GROUP_END_OFFSET)} holds "
                                      f"a word the protocol never writes there: corrupt file")
            found = self._select(g)
            if found == 2:
                self._lose_new(g)       # raises BusGapError once it skipped any
                continue
            if not found:
                return 0
            r = self._r
            off = FIRST + (g - self._k * self._sps) * self._slot
            if r._scan.pos != off:
                r._scan.pos = off
            found = r._next_code()
            if found == 0:
                return 0
            if found == END:
                if not self._rolling:
                    return END
                group_skip(self._base, self._window, self._shift, g)   # rolled-back tail
                continue
            if r._scan.cur != off:          # g's slot was rolled back: no member gets it
                group_skip(self._base, self._window, self._shift, g)
                continue
            w = group_take_new(self._base, self._window, self._shift, g, self.member,
                               coarse_ns() + self._lease_ns, self._position(g))
            if w == 0:
                continue               # another member took it
            self._cur_off = off
            return self._took(g, w)

    cdef int _acquire_new_framed(self) except -1:
        # _acquire_new on a framed bus (_group_frames.h): g is a message's first slot; the
        # message is taken whole and `end` moves past all of its slots.
        cdef int64_t g, off, w, seen = 0, ask = 0, n
        cdef int found
        cdef MappedBusReader r
        while True:
            g = group_f_next_new(self._base, self._window, self._shift, &seen, &ask)
            if g < 0:
                if g == GROUP_FULL:
                    # skipped entries (rolled back, other topics) are passed by `start` only
                    # when something moves it: move it here, so a run of skips longer than
                    # the window does not stop the group
                    if self._pass_skipped():
                        continue
                    return 0
                if g == GROUP_ASK:
                    n = self._bus_slots(ask)
                    if n <= 0:
                        return 0
                    group_f_pass_end(self._base, ask, n)
                    continue
                raise CorruptBusError(f"{self.group_path!r}: entry of record "
                                      f"{load_acquire_i64(self._base + GROUP_END_OFFSET)} holds "
                                      f"a word the protocol never writes there: corrupt file")
            found = self._select(g)
            if found == 2:
                self._lose_new(g)       # raises BusGapError once it skipped any
                continue
            if not found:
                return 0
            r = self._r
            off = FIRST + (g - self._k * self._sps) * self._slot
            if r._scan.pos != off:
                r._scan.pos = off
            found = r._next_code()
            if found == 0:
                return 0
            if found == END and not self._rolling:
                return END              # past the last message
            if found == END or r._scan.cur != off:
                # the scan passed messages from g on: rolled back (their writer died, or a
                # timeout gave them up) or of topics this member does not read. Each is
                # skipped whole, by its final slot count (its status left 0: the meta is
                # final), up to the message the scan stopped at.
                self._skip_passed(g, seen, off, r._scan.cur if found == 1 else
                                  FIRST + self._sps * self._slot)
                continue
            w = group_f_take_new(self._base, self._window, self._shift, g, seen,
                                 frame_meta_load(r._scan.base + off) & 0x7FFFFFFF,
                                 self.member, coarse_ns() + self._lease_ns, self._position(g))
            if w == 0:
                continue               # another member took it
            self._cur_off = off
            return self._took(g, w)

    cdef int _skip_passed(self, int64_t g, int64_t seen, int64_t off, int64_t stop) except -1:
        # Skip the messages of _r's mapping from off (record g, its entry seen as ``seen``)
        # to stop, while `end` follows (another member may skip them too).
        cdef char *base = self._r._scan.base
        cdef int64_t n, ask = 0
        while True:
            n = frame_skip(base + off)
            group_f_skip(self._base, self._window, self._shift, g, seen, n)
            off += n * self._slot
            g += n
            if off >= stop:
                return 0
            if group_f_next_new(self._base, self._window, self._shift, &seen, &ask) != g:
                return 0

    cdef int _pass_skipped(self) except -1:
        # 1 if `start` moved (over done entries) since this member last looked.
        cdef int64_t before = load_acquire_i64(self._base + GROUP_START_OFFSET)
        cdef int64_t after = self._advance()
        if after != before:
            self._hold(after, False)
            return 1
        return 0

    cdef int64_t _bus_slots(self, int64_t g) except -1:
        # The slot count of the settled message at g, read from the bus (its first slot's
        # status left 0, so its meta is final); 0 if its segment is not there.
        cdef int64_t off
        if self._select(g) != 1:
            return 0
        off = FIRST + (g - self._k * self._sps) * self._slot
        return frame_skip(self._r._scan.base + off)

    cdef int64_t _advance(self) except -1:
        # group_advance, or on a framed bus group_f_advance (moving `start` by messages).
        cdef int64_t s, ask = 0, n
        if not self._framed:
            return group_advance(self._base, self._window, self._shift)
        while True:
            s = group_f_advance(self._base, self._window, self._shift, &ask)
            if s != GROUP_ASK:
                return s
            n = self._bus_slots(ask)
            if n <= 0:
                return load_acquire_i64(self._base + GROUP_START_OFFSET)
            group_f_pass_start(self._base, ask, n)

    cdef int _redeliver(self, int64_t now) except -1:
        # Take a record back from a dead or late member (or a released one): 1 if one is
        # current now. Past max_deliveries it goes to the dead-letter bus instead.
        cdef int64_t g, seen = 0, w
        cdef int found
        while True:
            g = group_find_redelivery(self._base, self._window, self._shift, now, self.member,
                                      self._live_fd, &seen)
            if g < 0:
                return 0
            found = self._select(g)
            if found == 2:
                self._lose_taken(g, seen)   # raises BusGapError if it skipped g
                continue
            if group_word_deliveries(seen) >= self._max_deliveries:
                self._dead_letter(g, seen, GROUP_DEAD_LETTERED_OFFSET)
                continue
            if not found:
                return 0
            w = group_redeliver(self._base, self._window, g, seen, self.member,
                                coarse_ns() + self._lease_ns)
            if w == 0:
                continue
            self._cur_off = FIRST + (g - self._k * self._sps) * self._slot
            return self._took(g, w)

    cdef int _acquire(self) except -1:
        # 1: a record is current; 0: none now; END: a single-file bus is read to its end
        # and every record is done.
        cdef int64_t hint, now
        cdef int found
        if self._base == NULL:
            raise BusClosedError("the GroupReader is closed")
        if self._gen != _fork_gen:
            raise BusClosedError("this GroupReader was made before fork(): a member belongs to "
                                 "one process; make a GroupReader in the child")
        if self._in_flight >= self._max_in_flight:
            return 0
        hint = load_acquire_i64(self._base + GROUP_HINT_OFFSET)
        if hint != self._hint_seen:
            self._hint_seen = hint
            if self._redeliver(coarse_ns()):
                return 1
        self._count += 1
        if (self._count & 1023) == 0:
            now = coarse_ns()
            if now >= self._next_scan:
                self._next_scan = now + SCAN_NS
                if self._redeliver(now):
                    return 1
        found = self._acquire_new()
        if found == 1:
            return 1
        now = monotonic_ns()
        if now >= self._next_scan:
            self._next_scan = now + SCAN_NS
            if self._redeliver(now):
                return 1
        if found == END and load_acquire_i64(self._base + GROUP_START_OFFSET) \
                >= load_acquire_i64(self._base + GROUP_END_OFFSET):
            return END
        return 0

    cdef int _wait(self, object timeout) except -1:
        cdef int found = self._acquire()
        cdef int64_t deadline = -1, now, spin_end, ns = SLEEP_MIN_NS
        cdef timespec ts
        cdef long spins = 0
        if found == 1:
            return 1
        if found == END:
            raise BusFullError(f"end of bus: every record of {self.path!r} is done in group "
                               f"{self.group!r}")
        if timeout is not None:
            _check_timeout(timeout)
            if timeout <= 0:
                return 0
        now = monotonic_ns()
        if timeout is not None and timeout < MAX_WAIT_S:
            deadline = now + <int64_t>(timeout * 1e9)
        spin_end = now + SPIN_NS
        while True:
            found = self._acquire()
            if found == 1:
                return 1
            if found == END:
                raise BusFullError(f"end of bus: every record of {self.path!r} is done in "
                                   f"group {self.group!r}")
            now = monotonic_ns()
            if deadline >= 0 and now >= deadline:
                return 0
            if now < spin_end:
                cpu_relax()
                continue
            if deadline >= 0:
                ns = min(ns, deadline - now)
            self._hold(load_acquire_i64(self._base + GROUP_START_OFFSET), True)
            ts.tv_sec = ns // 1000000000
            ts.tv_nsec = ns % 1000000000
            with nogil:
                nanosleep(&ts, NULL)
            ns = min(ns * 2, SLEEP_MAX_NS)
            spins += 1
            if (spins & 15) == 0:
                PyErr_CheckSignals()

    cdef GroupRecord _record(self):
        cdef GroupRecord rec = GroupRecord.__new__(GroupRecord)
        cdef char *p = self._r._scan.base + self._cur_off
        cdef int32_t meta, t
        rec.deliveries = group_word_deliveries(self._cur_word)
        rec._g = self._cur_g
        rec._word = self._cur_word
        if self._framed:
            t = frame_topic(p)
            rec.position = self._position(self._cur_g)
            rec.meta = frame_meta_load(p)
            rec.payload = frame_bytes(self._r._scan.base, self._cur_off)
            rec.topic = (<TopicNames>self._r._names).name(t) if t != 0 else None
            rec.flags = frame_flags(p)
            rec.framed = True
            return rec
        memcpy(&meta, p + METADATA_OFFSET, 4)
        rec.position = self._position(self._cur_g)
        rec.meta = meta
        rec.payload = p[PAYLOAD_OFFSET:PAYLOAD_OFFSET + self.record_size]
        rec.deliveries = group_word_deliveries(self._cur_word)
        rec._g = self._cur_g
        rec._word = self._cur_word
        return rec

    # -- reading ----------------------------------------------------------------------

    def read(self, timeout=None):
        """The next record for this member (new, or another's taken back) as a
        ``GroupRecord``, waiting up to ``timeout`` seconds (None: until one comes, 0: not at
        all); None if none came in time. BusFullError once a single-file bus is read to its
        end and every record of it is done."""
        if not self._wait(timeout):
            return None
        return self._record()

    def records(self, timeout=None):
        """Yield records until none comes for ``timeout`` seconds (None: never stop)."""
        while True:
            if not self._wait(timeout):
                return
            yield self._record()

    def __iter__(self):
        return self.records(None)

    def read_into(self, message):
        """Take the next record if one is there now and copy its payload into ``message``:
        True if one was read; then ``ack()`` (or ``release()``, ``reject()``) settles it."""
        if self._framed:
            raise TypeError(f"{self.path!r} is a framed bus: read its messages with read() "
                            f"(rec.payload, rec.object()); read_into takes fixed-size messages")
        check_message_fits(message, self.record_size, "read_into()")
        cdef MessageBase m = <MessageBase>message
        cdef int found = self._acquire()
        if found != 1:
            if found == END:
                raise BusFullError(f"end of bus: every record of {self.path!r} is done in "
                                   f"group {self.group!r}")
            return False
        copy_payload(m._buf, self._r._scan.base + self._cur_off + PAYLOAD_OFFSET, m._size)
        return True

    async def read_async(self, timeout=None):
        """``read(timeout)`` to ``await``: polls without blocking the event loop."""
        if timeout is not None:
            _check_timeout(timeout)
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        delay = 20e-6
        while True:
            rec = self.read(0)
            if rec is not None:
                return rec
            if deadline is not None and loop.time() >= deadline:
                return None
            await asyncio.sleep(delay if deadline is None else
                                max(0.0, min(delay, deadline - loop.time())))
            delay = min(delay * 2, 1e-3)

    def read_batch(self, int n, timeout=None):
        """Up to ``n`` records as a list: waits up to ``timeout`` for the first (as ``read``),
        then takes what is there now. Settle them with ``ack_batch``."""
        out = []
        if n <= 0:
            return out
        if not self._wait(timeout):
            return out
        out.append(self._record())
        while len(out) < n and self._acquire() == 1:
            out.append(self._record())
        return out

    # -- settling ---------------------------------------------------------------------

    cdef int _finish(self, int64_t g, int64_t word, int state) except -1:
        cdef int ok
        cdef int64_t *mine
        if self._base == NULL:
            raise BusClosedError("the GroupReader is closed")
        if self._gen != _fork_gen:
            raise BusClosedError("this GroupReader was made before fork(): a member belongs to "
                                 "one process; make a GroupReader in the child")
        ok = group_finish(self._base, self._window, g, word, state)
        mine = &self._words[g & (self._window - 1)]
        if mine[0] == word:
            mine[0] = 0
            if self._in_flight > 0:
                self._in_flight -= 1
            store_release_i32(self._mslot + GROUP_MEMBER_IN_FLIGHT_OFFSET, self._in_flight)
        if ok and state == GROUP_ACKED:
            self._acked += 1
            store_release_i64(self._mslot + GROUP_MEMBER_ACKED_OFFSET, self._acked)
            self._hold(self._advance() if self._framed else
                       group_advance(self._base, self._window, self._shift), False)
        return ok

    cdef int _dead_letter(self, int64_t g, int64_t word, int counter) except -1:
        # Append g to the dead-letter bus, then mark it DEAD (a member dying between the two
        # makes the next one append it again: at least once). 1 if this call marked it.
        cdef int64_t *mine
        cdef int ok, found
        cdef MappedBusReader r
        cdef int64_t off
        if load_acquire_i64(group_entry(self._base, g, self._window)) != word:
            return 0
        found = self._select(g)
        if found == 2:
            self._lose_taken(g, word)
            return 0
        if not found:
            return 0
        r = self._r
        off = FIRST + (g - self._k * self._sps) * self._slot
        meta = struct.unpack_from("<i", r._scan.base[off + METADATA_OFFSET:off + METADATA_OFFSET + 4])[0]
        head = struct.pack("<qii", self._position(g), group_word_deliveries(word), meta) \
            + self._name_bytes.ljust(GROUP_NAME_MAX, b"\0")
        if self._framed:
            # the whole message, its topic kept, on a framed dead-letter bus
            t = frame_topic(r._scan.base + off)
            self._dead_writer().write(head + frame_bytes(r._scan.base, off),
                                      topic=(<TopicNames>r._names).name(t) if t != 0 else None)
        else:
            self._dead_writer().write(
                head + r._scan.base[off + PAYLOAD_OFFSET:off + PAYLOAD_OFFSET + self.record_size])
        ok = group_finish(self._base, self._window, g, word, GROUP_DEAD)
        mine = &self._words[g & (self._window - 1)]
        if mine[0] == word:
            mine[0] = 0
            if self._in_flight > 0:
                self._in_flight -= 1
            store_release_i32(self._mslot + GROUP_MEMBER_IN_FLIGHT_OFFSET, self._in_flight)
        if ok:
            fetch_add_i64(self._base + counter, 1)
            if counter != GROUP_DEAD_LETTERED_OFFSET:
                fetch_add_i64(self._base + GROUP_DEAD_LETTERED_OFFSET, 1)
            self._hold(self._advance(), False)
        return ok

    def _dead_writer(self):
        if self._dead is None:
            from ..rolling import RollingBusWriter
            record = GROUP_DEAD_HEADER_SIZE + self.record_size
            slot = HEADER_SIZE + record
            segment = max(1 << 20, -(-(FIRST + 64 * slot) // 4096) * 4096)
            if self._framed:
                # a message of the bus with its header fits one of its segments
                size = self._segment_size if self._rolling else self._r.file_size
                segment = max(segment, -(-(size + FIRST + 2 * slot) // 4096) * 4096)
            os.makedirs(os.path.dirname(self._dead_path), mode=0o700, exist_ok=True)
            w = RollingBusWriter(self._dead_path, None if os.path.lexists(self._dead_path) else
                                 segment, record, allow_foreign=self._reader_kw["allow_foreign"],
                                 frames=self._framed)
            w.open()
            if w.record_size != record:
                w.close()
                raise BusMismatchError(f"{self._dead_path!r} takes records of {w.record_size} "
                                       f"bytes, not the {record} of this group's dead letters")
            self._dead = w
        return self._dead

    cdef int64_t _g_of(self, rec) except -2:
        # The g of a GroupRecord or of a position this member holds.
        cdef int64_t pos, k, off
        if isinstance(rec, GroupRecord):
            return (<GroupRecord>rec)._g
        if isinstance(rec, bool) or not isinstance(rec, int):
            raise TypeError(f"ack/release/reject take a GroupRecord or a record position, "
                            f"got {type(rec).__name__}")
        pos = rec
        if self._rolling:
            k, off = pos // self._segment_size, pos % self._segment_size
        else:
            k, off = 0, pos
        if pos < 0 or off < FIRST or (off - FIRST) % self._slot or (off - FIRST) // self._slot >= self._sps:
            raise ValueError(f"{rec} is not a record position of {self.path!r}")
        return k * self._sps + (off - FIRST) // self._slot

    cdef int64_t _word_of(self, rec, int64_t g):
        if isinstance(rec, GroupRecord):
            return (<GroupRecord>rec)._word
        return self._words[g & (self._window - 1)]

    def _settle(self, rec, int state):
        cdef int64_t g, word
        if self._gen != _fork_gen and self._base != NULL:
            raise BusClosedError("this GroupReader was made before fork(): a member belongs to "
                                 "one process; make a GroupReader in the child")
        if rec is None:
            if self._cur_g < 0:
                raise RuntimeError("nothing read yet: ack() without a record settles the record "
                                   "read last")
            g, word = self._cur_g, self._cur_word
        else:
            g = self._g_of(rec)
            word = self._word_of(rec, g)
        if word == 0 or group_word_tag(word) != group_tag(g, self._shift) \
                or group_word_owner(word) != self.member:
            return False       # not delivered to this member, or not any more
        if state == GROUP_DEAD:
            return self._dead_letter(g, word, GROUP_REJECTED_OFFSET) == 1
        return self._finish(g, word, state) == 1

    def ack(self, rec=None):
        """Settle a record as done (a GroupRecord, a position this member holds, or nothing:
        the record read last). True if it was still this member's delivery: False if it was
        taken away (lease passed, this member seen dead) or settled already."""
        return self._settle(rec, GROUP_ACKED)

    def release(self, rec=None):
        """Give a record back undone: another member (or this one) gets it next, its
        delivery count one higher. True if it was still this member's."""
        return self._settle(rec, GROUP_RELEASED)

    def reject(self, rec=None):
        """Send a record to the group's dead-letter bus now, undone. True if it was still
        this member's."""
        return self._settle(rec, GROUP_DEAD)

    def ack_batch(self, records):
        """``ack`` each record of ``records``; returns how many were still this member's."""
        cdef int n = 0
        cdef GroupRecord r
        if self._base == NULL:
            raise BusClosedError("the GroupReader is closed")
        if self._gen != _fork_gen:
            raise BusClosedError("this GroupReader was made before fork(): a member belongs to "
                                 "one process; make a GroupReader in the child")
        for rec in records:
            if type(rec) is not GroupRecord:
                n += self._settle(rec, GROUP_ACKED)
                continue
            r = <GroupRecord>rec
            if group_word_owner(r._word) != self.member:
                continue
            n += self._finish(r._g, r._word, GROUP_ACKED)
        return n

    # -- state ------------------------------------------------------------------------

    @property
    def in_flight(self):
        """Records this member holds unsettled."""
        return self._in_flight

    @property
    def closed(self):
        """True once ``close()`` ran."""
        return self._base == NULL

    @property
    def dead_letter_path(self):
        """The dead-letter bus's directory (a rolling bus; made at the first dead letter)."""
        return self._dead_path

    def close(self):
        """Give back every record this member holds (others get them at once), let go of its
        member slot and unmap."""
        if self._base != NULL:
            if self.member >= 0 and self._gen == _fork_gen:
                group_release_owner(self._base, self._window, self._shift, self.member)
            self._base = NULL
        if self._live is not None:
            self._live.close()
            self._live = None
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        if self._r is not None:
            self._r.close()
            self._r = None
        if self._dead is not None:
            self._dead.close()
            self._dead = None
        if self._creg is not None:
            self._creg.close()
            self._creg = None
        if self._words != NULL:
            free(self._words)
            self._words = NULL

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __reduce__(self):
        raise TypeError("a GroupReader is a member of its own process: make one per process")

    def __repr__(self):
        state = "closed" if self._base == NULL else f"member {self.member}"
        return f"<GroupReader {state} group={self.group!r} path={self.path!r}>"

    def __dealloc__(self):
        if self._words != NULL:
            free(self._words)
