# cython: language_level=3, embedsignature=True
"""The reader: one bus file's records, delivered in order. It composes the concerns the Java
reader splits the same way: the walk over the slots (``SlotScan``, _slotscan: statuses, the
limit, stalled slots and their rollback), the waiting (``Waiter``, _waiter: spin, park, wake,
the event loops' descriptor) and the consumer held (``ConsumerHold``, _consumerhold); here the
mapping, the position and the read methods."""
cimport cython
import errno
import time
import warnings

from cpython.buffer cimport (PyObject_GetBuffer, PyBuffer_Release, PyBUF_WRITABLE,
                             PyBUF_C_CONTIGUOUS, PyBUF_FORMAT)
from cpython.bytearray cimport PyByteArray_CheckExact, PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy

from ._layout cimport PAYLOAD_OFFSET
from ._atomic cimport load_acquire_i64, status_load_acquire
from ._guard cimport guard_is_dead
from ._mapping cimport MappedFile, copy_payload
from ._message cimport MessageBase, check_message_fits
from ._record cimport Record
from ._slotscan cimport SlotScan, scan_next, scan_next_raising, scan_meta
from ._waiter cimport Waiter
from ._wake cimport WakeFile
from ._wakefd cimport WakeFd
from ._consumerhold cimport ConsumerHold, hold_commit
from ._frames cimport (TopicNames, frame_record, frame_object, frame_into, frame_view,
                       check_into_buffer)
from ._consumers cimport ConsumerRegistry

from ._mapping import DEFAULT_LOCK_TIMEOUT, check_lock_timeout
from ._checks import (check_limit as _check_limit, check_path as _check_path,
                      resolve_sizes as _resolve_sizes, check_position as _check_position,
                      check_rollback_timeout as _check_rollback_timeout, check_sizes as _check_sizes,
                      check_stall_limit as _check_stall_limit, check_start as _check_start)
from ._consumers import check_name as _check_consumer_name
from ._slotscan import FILE_CHECK
from ._writer import reopen as _reopen
from ._frames import check_topics
from ..formats.objects import check_serializer
from ..errors import BusClosedError, BusFullError, CorruptBusError
from ..formats.layout import (FIRST_RECORD_OFFSET, DEFAULT_TIMEOUT_MS, DEFAULT_PARK_NS,
                              DEFAULT_PARK_MAX_NS, DEFAULT_SPIN_NS, WRITERS_SUFFIX,
                              CONSUMERS_SUFFIX, TOPICS_SUFFIX)

cdef int64_t FIRST = FIRST_RECORD_OFFSET
cdef object _NO_WAIT = 0      # read_into's default timeout (only a framed bus waits)
#: Seconds a spin_park reader spins before it parks (layout.DEFAULT_SPIN_NS).
DEFAULT_SPIN = DEFAULT_SPIN_NS / 1e9
#: Seconds a parked reader sleeps before it looks by itself, at first and at most.
DEFAULT_PARK = DEFAULT_PARK_NS / 1e9
DEFAULT_PARK_MAX = DEFAULT_PARK_MAX_NS / 1e9
#: Seconds a slot may stay allocated but uncommitted before a reader rolls it back.
DEFAULT_TIMEOUT = DEFAULT_TIMEOUT_MS / 1000


@cython.embedsignature(False)     # the docstring carries the signature
cdef class MappedBusReader:
    # The first lines are the signature that inspect.signature() reads (a static type's
    # __init__ has none it can see).
    """MappedBusReader(path, file_size=None, record_size=None, *, timeout=2.0, start=None, read_only=False, prefault=False, allow_foreign=False, lock_timeout=10.0, idle="spin_park", spin=1e-05, park=0.001, park_max=0.016, consumer=None, group=None, stall_limit=None, frames=None, topics=None, serializer=None)
--

    Reads every record of a bus file, in the one order all readers share.

    Java-style: ``open()``, then ``if reader.next(): reader.read_type();
    reader.read_message(msg)`` or ``reader.read_buffer(buf)``. ``next()`` moves to the next
    committed record and makes it current; the read methods read the current record, in
    any order, until the next ``next()``.

    Pythonic: ``reader.read(timeout)`` returns a ``Record`` or None, ``for rec in reader``
    blocks for each record until the end of the bus, ``read_batch(array)`` fills a numpy
    array with up to ``len(array)`` records in one call.

    **Waiting.** Every call that can wait takes ``timeout`` in seconds with one meaning:
    ``None`` (the default) waits until a record comes, as ``queue.Queue.get`` does; ``0``
    does not wait; ``t > 0`` waits up to ``t`` seconds. ``read()`` returns None and
    ``read_batch()`` 0 when the time is up; ``records(timeout)`` (and iteration, which never
    stops waiting) ends. ``next()`` never waits. A blocking wait spins briefly, then sleeps
    with backoff (up to 1 ms): an idle reader costs next to no CPU. ``read_async()`` and
    ``records_async()`` wait the same way without blocking an asyncio event loop.

    **The end of the bus.** Once every record that fits in ``file_size`` is read, every
    read call (``next``, ``wait``, ``read``, ``read_into``, ``read_batch`` with nothing
    copied, ``records``, iteration and the async forms) raises ``BusFullError`` (an
    ``EOFError``): a full single-file bus takes no more records, which its readers should
    not mistake for a quiet writer.

    **Stalled slots.** A slot allocated but not committed for a millisecond has its writer
    looked up in the bus's writers file (``PATH.writers``, docs/safety.md): a dead writer's
    slots are rolled back (status 2) at once; a live writer's are never rolled back
    (``stall_limit`` seconds, default None, raises WriterStalledError naming its pid instead
    of waiting longer); a slot no writer claims (the Java original's) is rolled back once
    it has stayed uncommitted ``timeout`` seconds (constructor keyword, default 2.0;
    ``reader.timeout`` in seconds; ``set_timeout(ms)`` is Java's millisecond setter).
    ``skipped`` counts lost records. ``read_only=True`` opens the file read-only
    and never writes: it skips a stalled slot after the timeout without rolling it back,
    with a RuntimeWarning. A reader that may not write the file (EACCES, EPERM, EROFS)
    becomes read-only, with a warning. ``start`` is where reading begins: None (the first
    record), ``"end"`` (the current end, only new records), or a record position.

    **Other processes.** A reader pickles (for ``multiprocessing`` spawn): the copy
    reopens the bus by path with the same sizes and options, at this reader's position,
    open if this one was open.

    **Consumers.** With ``consumer="name"`` the reader holds that name in the bus's consumer
    registry (``PATH.consumers``): it opens at the name's committed position (the first
    time, at ``start``, which is stored then), ``commit()`` stores its position (the slot
    after the last record read) and ``close()`` lets the name go. One live reader holds a
    name at a time (``ConsumerInUseError``). Commit after each record for exactly-once
    across restarts; ``mappedbus_py.consumers(path)`` lists names, positions and lag.

    **Work groups.** ``group="name"`` returns a member of that work group of the bus instead
    (``mappedbus_py.groups.GroupReader``, docs/groups.md): each record goes to one member,
    which acks it. The sizes, if given, are checked against the bus's; the other keywords
    are GroupReader's (``start``, ``lease``, ``max_deliveries``, ``max_in_flight``, ...).

    **Frames.** On a framed bus (``frames=1`` in its metadata; ``frames=True`` for a file
    without metadata) every read delivers whole messages of any size: ``read()`` a
    ``Record`` whose ``payload`` is the message and ``topic`` its topic name,
    ``read_into(buffer)`` the message copied into a buffer, ``read_object()`` the object
    ``write_object`` wrote (``serializer=``: the writer's). ``topics=["name", ...]``
    delivers only those topics (``None`` in it: untagged messages too), passing over the
    others in compiled code. docs/messages.md has the guide.

    **Sizes.** Left out (None), they come from the bus's metadata file ``PATH.meta``; a
    size given that disagrees with it raises BusMismatchError naming both. A file without
    metadata (the Java original's), or a bus not made yet (``open(wait=...)``), needs both.

    A reader never creates, grows or writes a file that is not a bus: a missing file is
    FileNotFoundError, a short one is refused. Opening is checked as for the writer
    (links, file type, owner and mode unless ``allow_foreign``, the open lock within
    ``lock_timeout`` seconds, the metadata's sizes). A file that shrinks under the mapping
    raises BusTruncatedError; a path that no longer names the mapped file (removed,
    replaced) raises BusReplacedError once the reader is caught up. A waiting or polling
    reader looks every ``FILE_CHECK`` (10 ms) seconds (docs/safety.md has the bounds).
    """

    def __init__(self, path, file_size=None, record_size=None, *, timeout=DEFAULT_TIMEOUT,
                 start=None, bint read_only=False, bint prefault=False,
                 bint allow_foreign=False, lock_timeout=DEFAULT_LOCK_TIMEOUT,
                 idle="spin_park", spin=DEFAULT_SPIN, park=DEFAULT_PARK,
                 park_max=DEFAULT_PARK_MAX, consumer=None, group=None, stall_limit=None,
                 frames=None, topics=None, serializer=None,
                 bint _segment=False, WakeFile _wake=None, _writers_path=None,
                 int64_t _position_base=0, TopicNames _topics=None, int _fd=-1):
        path = _check_path(path)
        if frames is not None and not isinstance(frames, bool):
            raise TypeError(f"frames= is True, False or None (from the metadata), not {frames!r}")
        self._frames_opt = frames
        self._topics_opt = check_topics(topics)
        self._serializer = check_serializer(serializer)
        self._names = _topics
        if group is not None:
            # MappedBusReader(..., group=) is routed to a GroupReader by the public class's
            # __new__; only the bare Cython type (mappedbus_py._reader's) gets here with one.
            raise TypeError("group= needs mappedbus_py.MappedBusReader, not the Cython type "
                            "mappedbus_py._reader.MappedBusReader (or use "
                            "mappedbus_py.groups.GroupReader)")
        if consumer is not None:
            _check_consumer_name(consumer)
            if _segment:
                raise ValueError("a rolling bus's segment reader holds no consumer")
        file_size, record_size = _check_sizes(
            *_resolve_sizes(path, file_size, record_size, allow_foreign))
        check_lock_timeout(lock_timeout)
        start = _check_start(start)
        self._waiter = Waiter(idle, spin, park, park_max, _wake)
        self.path = path
        self.file_size = file_size
        self.record_size = record_size
        self._scan = SlotScan(path, file_size, record_size, read_only, _segment, allow_foreign,
                              _writers_path if _writers_path is not None or _segment
                              else path + WRITERS_SUFFIX, _position_base)
        self._start = start
        self._prefault = prefault
        self._allow_foreign = allow_foreign
        self._lock_timeout = lock_timeout
        self._segment = _segment
        if _fd >= 0 and not _segment:
            raise ValueError("_fd= is for a rolling bus's segment (_segment=True)")
        self._fd = _fd
        self.timeout = timeout
        self.consumer = consumer
        self._hold = None
        self.stall_limit = stall_limit

    @property
    def read_only(self):
        """True: this reader never writes; it passes over a stalled slot after ``timeout``
        without rolling it back."""
        return self._scan.read_only

    @property
    def idle(self):
        """How this reader waits when there is nothing to read: "busy_spin", "spin_park" or
        "park"."""
        return self._waiter.idle

    @property
    def rollbacks(self):
        """Slots this reader rolled back (compare-and-swap of status 0 -> 2): their writer
        stalled past ``timeout`` between allocating and committing."""
        return self._scan.rollbacks

    @property
    def skipped(self):
        """Records lost: rolled-back or timed-out slots this reader passed over."""
        return self._scan.skipped

    @property
    def stall_limit(self):
        """Seconds this reader waits for a record whose writer is alive (it holds its slot in
        the writers file) before ``WriterStalledError``; None (the default): no limit. Such a
        record is never rolled back, however long it takes."""
        return self._scan.stall_limit_ns / 1e9 if self._scan.stall_bounded else None

    @stall_limit.setter
    def stall_limit(self, seconds):
        if seconds is None:
            self._scan.stall_bounded = False
            self._scan.stall_limit_ns = 0
            return
        _check_stall_limit(seconds)
        self._scan.stall_bounded = True
        self._scan.stall_limit_ns = <int64_t>(seconds * 1e9)

    def open(self, wait=0.0):
        """Map the bus file and place the reader. A reader never creates a bus: with ``wait``
        (seconds; None: no limit) it waits that long for a writer to create it, else a missing
        bus is FileNotFoundError at once."""
        if self._scan.base != NULL:
            return self
        cdef MappedFile f
        deadline = None if wait is None else time.monotonic() + wait
        while True:
            try:
                f = self._open_mapping()
                break
            except FileNotFoundError:
                if deadline is not None and time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)
        self._place(f)
        return self

    cdef MappedFile _open_mapping(self):
        cdef MappedFile f
        try:
            f = self._map(self._scan.read_only)
        except OSError as e:
            # A bus this process may read but not write (mode 0444, another owner, a
            # read-only mount) is still readable: fall back to read-only and say so.
            if self._scan.read_only or e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            f = self._map(True)
            self._scan.read_only = True
            warnings.warn(f"{self.path!r} is not writable by this process ({e.strerror}): "
                          f"reading it read-only; a stalled record will be skipped after the "
                          f"timeout, not rolled back", RuntimeWarning, stacklevel=2)
        return f

    cdef _place(self, MappedFile f):
        cdef int64_t limit = load_acquire_i64(f.base)
        cdef bint framed
        try:
            if f.meta is not None:
                if self._frames_opt is not None:
                    f.meta.check_frames(self._frames_opt, self.path)
                framed = bool(f.meta.frames)
            else:
                framed = bool(self._frames_opt)
            if self._topics_opt is not None and not framed:
                raise TypeError(f"topics= needs a framed bus: {self.path!r} has fixed-size "
                                f"records")
            _check_limit(limit, self._scan.slot, self.record_size, self.path)
            if f.bus_id is None and not self._segment and not framed:
                f.check_slots(self.record_size)    # no metadata: nothing misaligned read
            if framed:
                if self._names is None:
                    self._names = TopicNames(self.path + TOPICS_SUFFIX, self._topics_opt,
                                             self._allow_foreign)
                self._scan.set_frames(self._names)
            self.frames = framed
        except BaseException:
            f.close()
            raise
        self._scan.opened(f, limit)
        if not self._segment:
            self._waiter.open_wake(self.path, self._allow_foreign)
        # Recovered once every record that fits in the file below the opening limit is read.
        self._initial_limit = min(max(limit, FIRST), self._scan.end_boundary())
        if self._start is None:
            self._scan.move_to(FIRST)
        elif isinstance(self._start, str) and self._start == "end":
            self.seek_end()
        else:
            self.seek(self._start)
        if self.consumer is not None:
            try:
                self._claim_consumer()
            except BaseException:
                self.close()
                raise
        return self

    def _claim_consumer(self):
        # Hold the name; go on from its committed position (the first time: from here).
        reg = ConsumerRegistry(self.path + CONSUMERS_SUFFIX, allow_foreign=self._allow_foreign,
                               lock_timeout=self._lock_timeout)
        hold = ConsumerHold(reg, self.consumer, self.bus_id, self._scan.pos, self.path)
        self._hold = hold
        if not hold.made:
            try:
                self.seek(hold.position)
            except ValueError as e:
                raise CorruptBusError(
                    f"{hold.registry_path!r}: consumer {self.consumer!r} has position "
                    f"{hold.position}, not a position of this bus ({e})") from None

    def commit(self, position=None, /):
        """Store this reader's position (the slot after the last record read), or
        ``position``, as its consumer's committed position: one atomic store, no lock. A
        restarted reader with the same ``consumer`` goes on from there."""
        cdef int64_t pos
        cdef int64_t end
        if position is None:
            pos = self._scan.pos
        else:
            pos = _check_position(position)
            end = self._scan.end_boundary()
            if pos < FIRST or (pos - FIRST) % self._scan.slot != 0 or pos > end:
                raise ValueError(f"commit({position!r}): not a record position of this bus "
                                 f"(records start at {FIRST}, take {self._scan.slot} bytes, "
                                 f"end at {end})")
        if self._hold is None:
            if self.consumer is None:
                raise ValueError("commit() needs a consumer: open the reader with "
                                 "consumer=\"name\"")
            raise BusClosedError(f"the MappedBusReader of consumer {self.consumer!r} is closed")
        hold_commit(self._hold, pos)

    def _map(self, bint read_only) -> MappedFile:
        return MappedFile(self.path, self.file_size, read_only=read_only, create=False,
                          prefault=self._prefault, record_size=self.record_size,
                          allow_foreign=self._allow_foreign, lock_timeout=self._lock_timeout,
                          segment=self._segment, fd=self._fd)

    def close(self):
        """Unmap the file (and the wake file); let go of the consumer name. Closing twice is
        harmless."""
        if self._hold is not None:
            hold, self._hold = self._hold, None
            hold.release()
        self._waiter.close()        # before the mapping: the fd's thread may read it
        self._release_view()
        self._scan.closed()
        if self._names is not None and not self._segment:
            self._names.close()

    @property
    def bus_id(self):
        """The bus's id from its metadata file; None for a file without one (made by the
        Java original) or while closed."""
        return self._scan.file.bus_id if self._scan.file is not None else None

    cdef int _truncated(self) except -1:
        return self._scan.truncated()

    @property
    def closed(self):
        """True until ``open()``, and again after ``close()``."""
        return self._scan.base == NULL

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()

    def __reduce__(self):
        # Another process maps the file itself: what crosses is how to reopen it.
        opened = self._scan.base != NULL
        start = self._scan.pos if opened else self._start
        kwargs = dict(timeout=self.timeout, start=start, read_only=self.read_only,
                      prefault=self._prefault, allow_foreign=self._allow_foreign,
                      lock_timeout=self._lock_timeout, _segment=self._segment,
                      idle=self.idle, spin=self._waiter.spin_ns / 1e9,
                      park=self._waiter.park_ns / 1e9, park_max=self._waiter.park_max_ns / 1e9,
                      consumer=self.consumer, stall_limit=self.stall_limit,
                      _writers_path=self._scan.writers_path,
                      _position_base=self._scan.position_base, frames=self._frames_opt,
                      topics=self._topics_opt, serializer=self._serializer)
        # The copy is the public class (the one that routes group=), as the original
        # was, never the bare Cython type.
        return (_reopen, (PublicReader, self.path, self.file_size, self.record_size,
                          kwargs, opened))

    def __repr__(self):
        state = "closed" if self._scan.base == NULL else f"open at {self._scan.pos}"
        return (f"<MappedBusReader {state} path={self.path!r} file_size={self.file_size} "
                f"record_size={self.record_size}>")

    # -- position -----------------------------------------------------------------

    @property
    def position(self):
        """Offset of the next slot this reader will look at."""
        return self._scan.pos

    @property
    def limit(self):
        """The bus's limit now: the offset just past the last allocated slot."""
        if self._scan.base == NULL:
            raise BusClosedError("the MappedBusReader is closed")
        return load_acquire_i64(self._scan.base)

    def seek(self, position_):
        """Continue from the record at ``position`` (a record boundary)."""
        cdef int64_t position = _check_position(position_)
        cdef int64_t slot = self._scan.slot
        if position < FIRST or (position - FIRST) % slot != 0:
            raise ValueError(f"position {position} is not a record boundary (records start "
                             f"at {FIRST} and take {slot} bytes)")
        if position > self._scan.end_boundary():
            raise ValueError(f"position {position} is past the end of the bus "
                             f"({self._scan.end_boundary()})")
        self._scan.move_to(position)

    def seek_end(self):
        """Skip to the current end of the bus: only records allocated from now on."""
        if self._scan.base == NULL:
            raise BusClosedError("the MappedBusReader is closed")
        cdef int64_t limit = load_acquire_i64(self._scan.base)
        _check_limit(limit, self._scan.slot, self.record_size, self.path)
        self.seek(min(max(limit, FIRST), self._scan.end_boundary()))

    def has_recovered(self):
        """True once every record present when the reader opened has been read."""
        return self._scan.pos >= self._initial_limit

    # -- timeout ------------------------------------------------------------------

    @property
    def timeout(self):
        """Seconds (float) a slot may stay uncommitted before this reader rolls it back."""
        return self._scan.timeout_ns / 1e9

    @timeout.setter
    def timeout(self, seconds):
        self._scan.timeout_ns = _check_rollback_timeout(seconds)

    def set_timeout(self, milliseconds):
        """Java's ``setTimeout(int)``: the rollback timeout in **milliseconds**
        (``reader.timeout = seconds`` is the Python form)."""
        if isinstance(milliseconds, bool) or not isinstance(milliseconds, (int, float)):
            raise ValueError(f"set_timeout() takes a number of milliseconds, got {milliseconds!r}")
        self._scan.timeout_ns = _check_rollback_timeout(milliseconds / 1000, "set_timeout(ms)",
                                                        f"{milliseconds!r} milliseconds")

    set_timeout_ms = set_timeout

    def _set_timeout_ns(self, int64_t ns):
        # Tests only: a rollback timeout below the floor (0: roll back at first sight).
        self._scan.timeout_ns = ns

    # -- the protocol -------------------------------------------------------------

    @cython.final
    cdef int _next(self) except -1:
        # 1: a record is current; 0: none yet; the end of the file raises BusFullError.
        return scan_next_raising(self._scan)

    @cython.final
    cdef int _next_code(self) except -1:
        # As _next, but the end of the file is END, not an exception: a rolling reader's
        # per-record path then needs no try block (its setup alone cost ~5 ns a record).
        return scan_next(self._scan)

    cdef int _raise_end(self) except -1:
        return self._scan.raise_end()

    cdef int _wait(self, object timeout) except -1:
        # 1 when a record became current, 0 when ``timeout`` seconds passed first.
        if scan_next_raising(self._scan):
            return 1
        return self._waiter.wait(self._scan, timeout)

    # -- event loops --------------------------------------------------------------

    def fileno(self):
        """A file descriptor for event loops (``loop.add_reader``, ``selectors``): after
        ``arm()`` it becomes readable when a record may be there (a writer woke the
        readers, or the reader's next slot changed: looked at every ``park`` seconds).
        Then ``next()``/``read(0)`` and ``arm()`` again. ``read_async`` does all this.
        OSError for a ``busy_spin`` reader or one without a wake file."""
        if self._scan.base == NULL:
            raise BusClosedError("the MappedBusReader is closed")
        return self._waiter.fileno(self.path)

    def arm(self, within=None):
        """Make ``fileno()`` fire once the next record may be there, and not before (clears
        an earlier readiness). ``within``: seconds; fire after that long at the latest even
        if nothing came (an event loop's deadline, without a timer of its own; None: only
        the self-look's bound, ``park`` to ``park_max``). Returns False, without arming, if
        a record is ready now."""
        self.fileno()
        return not self._arm_fd(self._waiter.fd, within)

    def _ready(self):
        # Something to look at: the next slot's status is set, or the end of the file.
        cdef SlotScan s = self._scan
        if s.base == NULL:
            raise BusClosedError("the MappedBusReader is closed")
        return s.pos > s.last or status_load_acquire(s.base + s.pos, s.aligned) != 0

    def disarm(self):
        """Stop watching for ``fileno()`` (a wait that ended by timeout or cancellation)."""
        if self._waiter.fd is not None:
            self._waiter.fd.disarm()

    def _arm_fd(self, WakeFd fd, within=None):
        # Arm ``fd`` on the slot this reader looks at next (past the last slot, on any wake:
        # a rolling reader waiting for the next segment). True if a record may be there now.
        if self._scan.base == NULL:
            raise BusClosedError("the MappedBusReader is closed")
        return self._waiter.arm_fd(fd, self._scan, within)

    # -- reading ------------------------------------------------------------------

    cdef int64_t _current(self) except -1:
        if self._scan.cur < 0:
            if self._scan.base == NULL:
                raise BusClosedError("the MappedBusReader is closed")
            raise RuntimeError("no current record: call next() and check it returned True")
        return self._scan.cur

    def next(self):
        """Move to the next committed record; True if there is one (it becomes current),
        False if none is ready yet. Raises BusFullError at the end of the bus."""
        return self._next() == 1

    def _look(self):
        """The file's look if it is due, for a rolling reader's poll of its segment: True
        if a record became current (the segment was replaced with records left to read)."""
        return self._scan.look_if_due() == 1

    def wait(self, timeout=None):
        """Like ``next()``, but wait up to ``timeout`` seconds (None: until a record
        comes, 0: not at all); True if a record became current."""
        return self._wait(timeout) == 1

    def read_type(self):
        """The current record's metadata: its type id (object messages)."""
        cdef int32_t meta = scan_meta(self._scan, self._current())
        if guard_is_dead(self._scan.dead):
            self._truncated()
        return meta

    def read_message(self, message):
        """Copy the current record's payload into ``message`` (no allocation); returns it."""
        cdef int64_t rec = self._current()
        if self._scan.frames:
            raise TypeError("read_message() reads Message records: a framed bus's messages "
                            "are read with read(), read_into(buffer) or read_object()")
        check_message_fits(message, self.record_size, "read_message()")
        cdef MessageBase m = <MessageBase>message
        copy_payload(m._buf, self._scan.base + rec + PAYLOAD_OFFSET, m._size)
        if guard_is_dead(self._scan.dead):
            self._truncated()
        return message

    def read_into(self, message, timeout=0):
        """``next()`` and ``read_message(message)`` in one call: True if a record was read.

        On a framed bus ``message`` is a buffer (a ``bytearray``, a numpy array: writable
        and C-contiguous): the next message is copied straight into it and its length
        returned, None if none came within ``timeout`` seconds (0: no wait, None: until one
        comes). A buffer too small raises MessageTooSmallBufferError (with the message's
        ``length``) and the message stays the next one."""
        if self._scan.frames:
            check_into_buffer(message)
            if self._frame_next(timeout) != 1:
                return None
            return self._frame_into(message)
        if timeout is not _NO_WAIT:
            raise TypeError("read_into(message, timeout) waits on a framed bus only: use "
                            "wait(timeout), then read_message(message)")
        return self._read_into(message)

    cdef int _frame_next(self, object timeout) except -1:
        # A framed bus's next message made current, waiting as read(timeout) does.
        if timeout is not None and timeout == 0:
            return self._next()
        return self._wait(timeout)

    def _frame_into(self, buffer):
        cdef SlotScan s = self._scan
        cdef int64_t cur = s.cur
        try:
            n = frame_into(s.base, cur, buffer)
        except BaseException:
            s.move_to(cur)              # not consumed: the same message comes next
            raise
        if guard_is_dead(s.dead):
            s.truncated()
        return n

    def read_object(self, timeout=None):
        """The next message of a framed bus as the object ``write_object`` wrote (copied once
        into memory of its own: numpy arrays come back writable), waiting up to ``timeout``
        seconds (None: until one comes); None if none came. A message of raw bytes raises
        TypeError (consumed)."""
        if not self._scan.frames:
            raise TypeError("read_object() reads a framed bus (frames=True)")
        if self._frame_next(timeout) != 1:
            return None
        cdef SlotScan s = self._scan
        obj = frame_object(s.base, s.cur, s.cur, self._serializer)
        if guard_is_dead(s.dead):
            s.truncated()
        return obj

    def read_view(self, timeout=None):
        """The next message of a framed bus as a read-only ``memoryview`` of the mapping
        itself (no copy: the fastest read of large messages), waiting up to ``timeout``
        seconds (None: until one comes, 0: not at all); None if none came.

        The view is valid until the next ``read_view()`` or ``close()``, which release it
        (using it then raises ValueError): copy out what must outlive it. A buffer made from
        it (``numpy.frombuffer(view)``) cannot be released: it stays valid (a message's bytes
        never change once committed) and keeps the file mapped, so ``close()`` raises
        BufferError while it lives."""
        if not self._scan.frames:
            raise TypeError("read_view() reads a framed bus (frames=True)")
        self._release_view()
        if self._frame_next(timeout) != 1:
            return None
        cdef SlotScan s = self._scan
        view = frame_view(s.file, s.base, s.cur)
        if guard_is_dead(s.dead):
            view.release()
            s.truncated()
        self._view = view
        return view

    cdef int _release_view(self) except -1:
        if self._view is not None:
            view, self._view = self._view, None
            try:
                view.release()
            except BufferError:
                pass    # a buffer made from it lives on: it keeps the mapping (see read_view)
        return 0

    @property
    def topics(self):
        """The topic filter (a frozenset of names; None in it: untagged messages), or None."""
        return self._topics_opt

    cdef bint _read_into(self, object message) except -1:
        cdef int found = self._read_into_code(message)
        if found == END:
            self._scan.raise_end()
        return found

    @cython.final
    cdef int _read_into_code(self, object message) except -1:
        # As _read_into, with the end of the file as END (see _next_code).
        check_message_fits(message, self.record_size, "read_into()")
        cdef MessageBase m = <MessageBase>message
        cdef SlotScan s = self._scan
        cdef int found = scan_next(s)
        if found != 1:
            return found
        copy_payload(m._buf, s.base + s.cur + PAYLOAD_OFFSET, m._size)
        if guard_is_dead(s.dead):
            s.truncated()
        return 1

    def read_buffer(self, buffer, Py_ssize_t offset=0):
        """Copy the current byte-array record into ``buffer[offset:]``; returns its length."""
        cdef int64_t rec = self._current()
        cdef int32_t n = self._scan.length(rec)
        cdef Py_buffer view
        cdef char *dst
        cdef Py_ssize_t size
        if PyByteArray_CheckExact(buffer):
            dst = PyByteArray_AS_STRING(buffer)
            size = PyByteArray_GET_SIZE(buffer)
            if offset < 0 or offset > size or n > size - offset:
                raise ValueError(f"a {n}-byte record does not fit at offset {offset} of a "
                                 f"{size}-byte buffer")
            copy_payload(dst + offset, self._scan.base + rec + PAYLOAD_OFFSET, n)
            if guard_is_dead(self._scan.dead):
                self._truncated()
            return n
        PyObject_GetBuffer(buffer, &view, PyBUF_WRITABLE)
        try:
            if offset < 0 or offset > view.len or n > view.len - offset:
                raise ValueError(f"a {n}-byte record does not fit at offset {offset} of a "
                                 f"{view.len}-byte buffer")
            memcpy(<char *>view.buf + offset, self._scan.base + rec + PAYLOAD_OFFSET, n)
        finally:
            PyBuffer_Release(&view)
        if guard_is_dead(self._scan.dead):
            self._truncated()
        return n

    def read_bytes(self):
        """The current byte-array record's bytes (its stored length of them)."""
        cdef int64_t rec = self._current()
        cdef int32_t n = self._scan.length(rec)
        data = self._scan.base[rec + PAYLOAD_OFFSET:rec + PAYLOAD_OFFSET + n]
        if guard_is_dead(self._scan.dead):
            self._truncated()
        return data

    cdef Record _record(self):
        cdef SlotScan s = self._scan
        cdef int64_t rec = s.cur
        if s.frames:
            record = frame_record(s.base, rec, rec, self._names, self._serializer)
            if guard_is_dead(s.dead):
                s.truncated()
            return record
        cdef int64_t payload = rec + PAYLOAD_OFFSET
        record = Record(rec, scan_meta(s, rec), s.base[payload:payload + self.record_size])
        if guard_is_dead(s.dead):
            s.truncated()
        return record

    def read(self, timeout=None):
        """The next committed record as a ``Record``, waiting up to ``timeout`` seconds
        (None: until one comes, 0: not at all); None if none came in time."""
        if not self._wait(timeout):
            return None
        return self._record()

    def records(self, timeout=None):
        """Yield records until none arrives for ``timeout`` seconds (None: never stop
        waiting). Raises BusFullError at the end of the bus, as ``read()`` does."""
        while True:
            if not self._wait(timeout):
                return
            yield self._record()

    def __iter__(self):
        return self.records(None)

    def read_async(self, timeout=None):
        """``read(timeout)`` to ``await``: polls without blocking the event loop (see
        ``mappedbus_py.aio``)."""
        from .. import aio
        return aio.read_async(self, timeout)

    def records_async(self, timeout=None):
        """``records(timeout)`` for ``async for``, without blocking the event loop."""
        from .. import aio
        return aio.records_async(self, timeout)

    def read_batch(self, out, meta=None, timeout=None):
        """Copy up to ``len(out)`` committed records into ``out`` and return how many.
        ``out`` is C-contiguous with one row per record (a numpy structured array whose
        itemsize is at most record_size, or a 2-D uint8 array); each row gets the first
        ``itemsize`` payload bytes. ``meta``, if given, is an int32 array receiving each
        record's metadata. With no record ready, wait up to ``timeout`` seconds for the
        first one (None: until one comes, 0: return 0 at once), then take what is ready.
        Raises BusFullError at the end of the bus if it copied nothing."""
        cdef Py_buffer view, mview
        cdef Py_ssize_t nrows, rowlen, n = 0
        cdef int32_t *metas = NULL
        cdef char *dst
        cdef bint have_meta = meta is not None
        cdef SlotScan s = self._scan
        if s.frames:
            raise TypeError("read_batch() reads fixed-size records: a framed bus's messages "
                            "are read with read(), read_into(buffer) or read_object()")
        PyObject_GetBuffer(out, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS)
        try:
            nrows = view.shape[0] if view.ndim > 0 else 1
            if nrows == 0:
                return 0
            rowlen = view.len // nrows
            if rowlen > self.record_size:
                raise ValueError(f"rows of {rowlen} bytes are longer than record_size "
                                 f"{self.record_size}")
            if have_meta:
                PyObject_GetBuffer(meta, &mview,
                                   PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
                fmt = mview.format.decode("ascii", "replace") if mview.format != NULL else "B"
                if mview.itemsize != 4 or mview.len < 4 * nrows \
                        or fmt.lstrip("@=<") not in ("i", "l"):
                    PyBuffer_Release(&mview)
                    raise ValueError(f"meta must be an int32 array of at least {nrows} items, "
                                     f"got format {fmt!r}, {mview.len // max(mview.itemsize, 1)} "
                                     f"items")
                metas = <int32_t *>mview.buf
            try:
                dst = <char *>view.buf
                while n < nrows:
                    try:
                        if not (self._wait(timeout) if n == 0 else self._next()):
                            break
                    except BusFullError:
                        if n == 0:
                            raise
                        break
                    memcpy(dst, s.base + s.cur + PAYLOAD_OFFSET, rowlen)
                    dst += rowlen
                    if have_meta:
                        metas[n] = scan_meta(s, s.cur)
                    if guard_is_dead(s.dead):
                        s.truncated()
                    n += 1
            finally:
                if have_meta:
                    PyBuffer_Release(&mview)
        finally:
            PyBuffer_Release(&view)
        return n


class _CythonTypeSignature:
    # inspect.signature(mappedbus_py.MappedBusReader) is the Cython type's (read from its
    # docstring), not __new__'s (*args, group=None, **kwargs); inspect loaded when asked.
    def __get__(self, obj, cls):
        import inspect
        return inspect.signature(MappedBusReader)


class _GroupReaderHook:
    """Where ``MappedBusReader(path, group=...)`` and ``RollingBusReader(path, group=...)``
    find the work groups' reader: ``mappedbus_py.groups`` (a layer above the core and the
    rolling bus, tests/test_layers.py) sets ``make`` to its ``GroupReader`` when imported,
    which ``import mappedbus_py`` does."""
    __slots__ = ("make",)

    def __init__(self):
        self.make = self._missing

    @staticmethod
    def _missing(path, group, **kwargs):
        raise ImportError("a reader with group=... needs mappedbus_py.groups "
                          "(import mappedbus_py imports it)")


#: Set by mappedbus_py.groups: see _GroupReaderHook.
GROUP_READER = _GroupReaderHook()


class PublicReader(MappedBusReader):
    # mappedbus_py.MappedBusReader: the Cython type above plus a __new__ that makes
    # MappedBusReader(path, ..., group="x") a work-group member (a cdef class cannot define
    # __new__). No __dict__ (__slots__ empty), so a per-record call finds its method through
    # the type's attribute cache as on the Cython type (perf: read_into costs the same).
    # Cython code typed ``cdef MappedBusReader r`` takes it: it is a subclass.
    __slots__ = ()
    __doc__ = MappedBusReader.__doc__
    __signature__ = _CythonTypeSignature()

    def __new__(cls, *args, group=None, **kwargs):
        if group is None:
            return MappedBusReader.__new__(cls)
        return _group_member(GROUP_READER.make, args, group, kwargs)


def _group_member(make, args, group, kwargs):
    """MappedBusReader(path, file_size=None, record_size=None, *, group=..., **kw) as a
    GroupReader: the sizes go as its keywords (checked against the bus's)."""
    if not args:
        if "path" not in kwargs:
            raise TypeError("MappedBusReader(path, ..., group=...) needs the bus's path")
        args = (kwargs.pop("path"),)
    if len(args) > 3:
        raise TypeError(f"MappedBusReader takes at most 3 positional arguments "
                        f"(path, file_size, record_size), got {len(args)}")
    for name, value in zip(("file_size", "record_size"), args[1:]):
        if name in kwargs:
            raise TypeError(f"MappedBusReader got {name} twice")
        kwargs[name] = value
    return make(args[0], group, **kwargs)


# mappedbus_py exports PublicReader as MappedBusReader. This module's MappedBusReader stays
# the Cython type: cimport finds the type under that name (its vtable), and the package's
# own readers (rolling segments, groups, the CLI) need no routing.
PublicReader.__name__ = PublicReader.__qualname__ = "MappedBusReader"
PublicReader.__module__ = "mappedbus_py"     # pickle finds the class there
