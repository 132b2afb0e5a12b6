# cython: language_level=3, embedsignature=True
"""The reader: follows the limit, delivers committed records, rolls back stalled ones."""
cimport cython
import errno
import os
import time
import warnings
from operator import index

from cpython.buffer cimport (PyObject_GetBuffer, PyBuffer_Release, PyBUF_WRITABLE,
                             PyBUF_C_CONTIGUOUS, PyBUF_SIMPLE, PyBUF_FORMAT)
from cpython.bytearray cimport PyByteArray_CheckExact, PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.string cimport memcpy
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC, nanosleep

from ._layout cimport METADATA_OFFSET, PAYLOAD_OFFSET
from ._atomic cimport load_acquire_i64, status_load_acquire, status_cas, cpu_relax
from ._guard cimport guard_is_dead
from ._mapping cimport MappedFile, copy_payload
from ._message cimport MessageBase
from ._record cimport Record
from ._wake cimport (WakeFile, wake_wait, wake_seq, wake_needed, wake_backoff_init,
                    wake_backoff_after, wake_now_ns)
from ._wakefd cimport WakeFd
from ._writers cimport WritersFile, writers_roll_back, WRITER_ALIVE, WRITER_DEAD, WRITER_UNKNOWN
from ._consumers cimport ConsumerRegistry, consumer_entry, consumer_commit

from ._mapping import DEFAULT_LOCK_TIMEOUT, check_lock_timeout
from ._checks import (IDLE_STRATEGIES, check_idle as _check_idle, check_limit as _check_limit,
                      check_path as _check_path, resolve_sizes as _resolve_sizes,
                      check_position as _check_position,
                      check_rollback_timeout as _check_rollback_timeout, check_sizes as _check_sizes,
                      check_stall_limit as _check_stall_limit, check_start as _check_start,
                      check_timeout as _check_timeout)
from ._writer import reopen as _reopen
from ..errors import (BusClosedError, BusFullError, BusReplacedError, CorruptBusError,
                     WriterStalledError)
from ..formats.layout import (FIRST_RECORD_OFFSET, HEADER_SIZE, DEFAULT_TIMEOUT_MS, MIN_ROLLBACK_TIMEOUT_MS,
                     DEFAULT_PARK_NS, DEFAULT_PARK_MAX_NS, DEFAULT_SPIN_NS, WAKE_SUFFIX, WRITERS_SUFFIX,
                     CONSUMERS_SUFFIX)
from ._consumers import check_name as _check_consumer_name

cdef extern from "sched.h" nogil:
    int sched_yield()

cdef extern from "Python.h":
    int PyErr_CheckSignals() except -1

cdef int64_t FIRST = FIRST_RECORD_OFFSET
# The blocking wait: spin for spin_ns (a busy stream's next record is usually there within
# it), then park on the wake file until a writer wakes us or park_ns passes.
cdef enum:
    IDLE_BUSY_SPIN = 0
    IDLE_SPIN_PARK = 1
    IDLE_PARK = 2
#: Seconds a spin_park reader spins before it parks (layout.DEFAULT_SPIN_NS).
DEFAULT_SPIN = DEFAULT_SPIN_NS / 1e9
#: Seconds a parked reader sleeps before it looks by itself, at first and at most.
DEFAULT_PARK = DEFAULT_PARK_NS / 1e9
DEFAULT_PARK_MAX = DEFAULT_PARK_MAX_NS / 1e9
# What _stalled says of an uncommitted slot below the limit.
cdef enum:
    STALL_WAIT = 0          # wait on: its writer may still commit it
    STALL_DEAD = 1          # its writer is gone (the writers file says): give it up now
    STALL_TIMED_OUT = 2     # no live writer known and the timeout passed: give it up
# A slot uncommitted this long has its writer looked up in the writers file (one scan and
# one system call), then again this often while it stays so (the writer may die meanwhile).
cdef int64_t ASK_AFTER_NS = 1000000
cdef int64_t ASK_AGAIN_NS = 1000000
# A reader that waits or polls looks at its file (removed, replaced, truncated: one
# lstat) at least this often: a blocking wait by itself; a poller (next(), read(0),
# read_async) at its first empty poll once this much time passed since the last look.
cdef int64_t FILE_CHECK_NS = 10000000
#: Seconds between a waiting or polling reader's looks at its file (docs/safety.md).
FILE_CHECK = FILE_CHECK_NS / 1e9
cdef double MAX_WAIT_S = 2.0**62 / 1e9
# Pauses (about 25 ns each on the AMD EPYC of perf/) on the first empty poll after a record.
cdef int CATCH_UP_PAUSES = 4
cdef int NEVER_DEAD = 0      # what _dead points to while no mapping is open

#: Seconds a slot may stay allocated but uncommitted before a reader rolls it back.
DEFAULT_TIMEOUT = DEFAULT_TIMEOUT_MS / 1000


cdef inline int64_t monotonic_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec


cdef extern from "time.h" nogil:
    int CLOCK_MONOTONIC_COARSE


cdef inline int64_t coarse_ns() noexcept nogil:
    # The time of the files' looks: a jiffy's resolution (1-4 ms) is plenty for a 10 ms
    # bound, at a fraction of CLOCK_MONOTONIC's cost (measured on the 2-core VM: 14 ns
    # against 78 ns), as an empty poll reads it.
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec


@cython.embedsignature(False)     # the docstring carries the signature
cdef class MappedBusReader:
    # The first lines are the signature that inspect.signature() reads (a static type's
    # __init__ has none it can see).
    """MappedBusReader(path, file_size=None, record_size=None, *, timeout=2.0, start=None, read_only=False, prefault=False, allow_foreign=False, lock_timeout=10.0, idle="spin_park", spin=1e-05, park=0.001, park_max=0.016, consumer=None, group=None, stall_limit=None)
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
                 bint _segment=False, WakeFile _wake=None, _writers_path=None,
                 int64_t _position_base=0):
        path = _check_path(path)
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
        _check_idle(idle, spin, park, park_max)
        self.idle = idle
        self._idle_mode = IDLE_STRATEGIES.index(idle)
        self._spin_ns = <int64_t>(spin * 1e9)
        self._park_ns = <int64_t>(park * 1e9)
        self._park_max_ns = <int64_t>(park_max * 1e9)
        wake_backoff_init(&self._backoff, self._park_ns, self._park_max_ns)
        self._wake = _wake
        self._own_wake = False
        self._fd = None
        self.path = path
        self.file_size = file_size
        self.record_size = record_size
        self.read_only = read_only
        self._slot = HEADER_SIZE + record_size
        self._last = file_size - self._slot
        self._aligned = record_size % 4 == 0
        self._start = start
        self._prefault = prefault
        self._allow_foreign = allow_foreign
        self._lock_timeout = lock_timeout
        self._segment = _segment
        self.timeout = timeout
        self._file = None
        self._base = NULL
        self._dead = &NEVER_DEAD
        self._pos = FIRST
        self._cur = -1
        self._wait_pos = -1
        self.consumer = consumer
        self._creg = None
        self._centry = NULL
        self._cdead = &NEVER_DEAD
        self._cfork = &NEVER_DEAD
        self.stall_limit = stall_limit
        self._writers_path = (_writers_path if _writers_path is not None or _segment
                              else path + WRITERS_SUFFIX)
        self._writers = None
        self._position_base = _position_base
        self._holder = WRITER_UNKNOWN
        self._holder_index = 0
        self._dead_begin = self._dead_end = 0

    @property
    def stall_limit(self):
        """Seconds this reader waits for a record whose writer is alive (it holds its slot in
        the writers file) before ``WriterStalledError``; None (the default): no limit. Such a
        record is never rolled back, however long it takes."""
        return self._stall_limit_ns / 1e9 if self._stall_bounded else None

    @stall_limit.setter
    def stall_limit(self, seconds):
        if seconds is None:
            self._stall_bounded = False
            self._stall_limit_ns = 0
            return
        _check_stall_limit(seconds)
        self._stall_bounded = True
        self._stall_limit_ns = <int64_t>(seconds * 1e9)

    def open(self, wait=0.0):
        """Map the bus file and place the reader. A reader never creates a bus: with ``wait``
        (seconds; None: no limit) it waits that long for a writer to create it, else a missing
        bus is FileNotFoundError at once."""
        if self._base != NULL:
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
            f = self._map(self.read_only)
        except OSError as e:
            # A bus this process may read but not write (mode 0444, another owner, a
            # read-only mount) is still readable: fall back to read-only and say so.
            if self.read_only or e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            f = self._map(True)
            self.read_only = True
            warnings.warn(f"{self.path!r} is not writable by this process ({e.strerror}): "
                          f"reading it read-only; a stalled record will be skipped after the "
                          f"timeout, not rolled back", RuntimeWarning, stacklevel=2)
        return f

    cdef _place(self, MappedFile f):
        cdef int64_t limit = load_acquire_i64(f.base)
        try:
            _check_limit(limit, self._slot, self.record_size, self.path)
            if f.bus_id is None and not self._segment:
                f.check_slots(self.record_size)    # no metadata: nothing misaligned read
        except BaseException:
            f.close()
            raise
        self._file = f
        self._base = f.base
        self._dead = &f.dead
        if self._wake is None and self._idle_mode != IDLE_BUSY_SPIN and not self._segment:
            self._open_wake()
        # Recovered once every record that fits in the file below the opening limit is read.
        self._initial_limit = min(max(limit, FIRST), self._end_boundary())
        self._limit_seen = 0
        self._cur = -1
        self._wait_pos = -1
        if self._start is None:
            self._pos = FIRST
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
        index, position, made = reg.claim(self.consumer, self.bus_id, self._pos, self.path)
        self._creg = reg
        self._cindex = index
        self._centry = consumer_entry(reg.base, index)
        self._cdead = reg.dead_flag()
        self._cfork = reg.fork_flag()
        self._cclock = reg.clock()
        self._cgen = self._cfork[0]
        if not made:
            try:
                self.seek(position)
            except ValueError as e:
                raise CorruptBusError(
                    f"{reg.path!r}: consumer {self.consumer!r} has position {position}, not a "
                    f"position of this bus ({e})") from None

    def _release_consumer(self):
        if self._creg is not None:
            reg, self._creg = self._creg, None
            self._centry = NULL
            self._cdead = &NEVER_DEAD
            self._cfork = &NEVER_DEAD
            try:
                reg.release(self._cindex)
            finally:
                reg.close()

    def commit(self, position=None, /):
        """Store this reader's position (the slot after the last record read), or
        ``position``, as its consumer's committed position: one atomic store, no lock. A
        restarted reader with the same ``consumer`` goes on from there."""
        cdef int64_t pos
        if position is None:
            pos = self._pos
        else:
            pos = _check_position(position)
            if pos < FIRST or (pos - FIRST) % self._slot != 0 or pos > self._end_boundary():
                raise ValueError(f"commit({position!r}): not a record position of this bus "
                                 f"(records start at {FIRST}, take {self._slot} bytes, end at "
                                 f"{self._end_boundary()})")
        if self._centry == NULL or self._cfork[0] != self._cgen:
            self._commit_refused()
        consumer_commit(self._centry, pos, load_acquire_i64(self._cclock))
        if self._cdead[0]:          # the registry shrank under us: the store went nowhere
            self._commit_refused()

    cdef int _commit_refused(self) except -1:
        if self.consumer is None:
            raise ValueError("commit() needs a consumer: open the reader with consumer=\"name\"")
        if self._centry == NULL:
            raise BusClosedError(f"the MappedBusReader of consumer {self.consumer!r} is closed")
        return self._creg.refuse_commit(self.consumer, self._cgen)

    def _open_wake(self):
        # The wake file beside the bus, made by the first reader or writer that needs it.
        # A reader that may not make or write it still waits, polling every park_ns.
        try:
            self._wake = WakeFile(self.path + WAKE_SUFFIX, allow_foreign=self._allow_foreign)
            self._own_wake = True
        except OSError as e:
            warnings.warn(f"{self.path!r}: no wake file ({e}): this reader polls every "
                          f"{self._park_ns / 1e6:g} ms when idle instead of being woken",
                          RuntimeWarning, stacklevel=3)
            self._wake = None

    def _map(self, bint read_only) -> MappedFile:
        return MappedFile(self.path, self.file_size, read_only=read_only, create=False,
                          prefault=self._prefault, record_size=self.record_size,
                          allow_foreign=self._allow_foreign, lock_timeout=self._lock_timeout,
                          segment=self._segment)

    def close(self):
        """Unmap the file (and the wake file); let go of the consumer name. Closing twice is
        harmless."""
        self._release_consumer()
        if self._fd is not None:
            self._fd.close()        # its thread may read the mapping: stopped first
            self._fd = None
        if self._own_wake and self._wake is not None:
            self._wake.close()
            self._wake = None
            self._own_wake = False
        self._base = NULL
        self._dead = &NEVER_DEAD
        if self._file is not None:
            self._file.close()
        self._file = None
        self._cur = -1

    @property
    def bus_id(self):
        """The bus's id from its metadata file; None for a file without one (made by the
        Java original) or while closed."""
        return self._file.bus_id if self._file is not None else None

    cdef int _truncated(self) except -1:
        self._cur = -1
        return self._file.raise_dead()

    cdef int _check_limit_now(self, int64_t limit) except -1:
        # Every limit loaded must be on this reader's grid: off it means another
        # record_size (a file without metadata cannot say so otherwise) or corruption.
        if limit != 0 and (limit < FIRST or (limit - FIRST) % self._slot != 0):
            self._file.check_intact()
            _check_limit(limit, self._slot, self.record_size, self.path)
        return 0

    @property
    def closed(self):
        """True until ``open()``, and again after ``close()``."""
        return self._base == NULL

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()

    def __reduce__(self):
        # Another process maps the file itself: what crosses is how to reopen it.
        opened = self._base != NULL
        start = self._pos if opened else self._start
        kwargs = dict(timeout=self.timeout, start=start, read_only=self.read_only,
                      prefault=self._prefault, allow_foreign=self._allow_foreign,
                      lock_timeout=self._lock_timeout, _segment=self._segment,
                      idle=self.idle, spin=self._spin_ns / 1e9, park=self._park_ns / 1e9,
                      park_max=self._park_max_ns / 1e9, consumer=self.consumer,
                      stall_limit=self.stall_limit, _writers_path=self._writers_path,
                      _position_base=self._position_base)
        # The copy is the public class (the one that routes group=), as the original
        # was, never the bare Cython type.
        return (_reopen, (PublicReader, self.path, self.file_size, self.record_size,
                          kwargs, opened))

    def __repr__(self):
        state = "closed" if self._base == NULL else f"open at {self._pos}"
        return (f"<MappedBusReader {state} path={self.path!r} file_size={self.file_size} "
                f"record_size={self.record_size}>")

    # -- position -----------------------------------------------------------------

    cdef int64_t _end_boundary(self):
        # The first record boundary past the last record that fits in file_size.
        return FIRST + ((self.file_size - FIRST) // self._slot) * self._slot

    @property
    def position(self):
        """Offset of the next slot this reader will look at."""
        return self._pos

    @property
    def limit(self):
        """The bus's limit now: the offset just past the last allocated slot."""
        if self._base == NULL:
            raise BusClosedError("the MappedBusReader is closed")
        return load_acquire_i64(self._base)

    def seek(self, position_):
        """Continue from the record at ``position`` (a record boundary)."""
        cdef int64_t position = _check_position(position_)
        if position < FIRST or (position - FIRST) % self._slot != 0:
            raise ValueError(f"position {position} is not a record boundary (records start "
                             f"at {FIRST} and take {self._slot} bytes)")
        if position > self._end_boundary():
            raise ValueError(f"position {position} is past the end of the bus "
                             f"({self._end_boundary()})")
        self._pos = position
        self._cur = -1
        self._wait_pos = -1

    def seek_end(self):
        """Skip to the current end of the bus: only records allocated from now on."""
        if self._base == NULL:
            raise BusClosedError("the MappedBusReader is closed")
        cdef int64_t limit = load_acquire_i64(self._base)
        _check_limit(limit, self._slot, self.record_size, self.path)
        self.seek(min(max(limit, FIRST), self._end_boundary()))

    def has_recovered(self):
        """True once every record present when the reader opened has been read."""
        return self._pos >= self._initial_limit

    # -- timeout ------------------------------------------------------------------

    @property
    def timeout(self):
        """Seconds (float) a slot may stay uncommitted before this reader rolls it back."""
        return self._timeout_ns / 1e9

    @timeout.setter
    def timeout(self, seconds):
        self._timeout_ns = _check_rollback_timeout(seconds)

    def set_timeout(self, milliseconds):
        """Java's ``setTimeout(int)``: the rollback timeout in **milliseconds**
        (``reader.timeout = seconds`` is the Python form)."""
        if isinstance(milliseconds, bool) or not isinstance(milliseconds, (int, float)):
            raise ValueError(f"set_timeout() takes a number of milliseconds, got {milliseconds!r}")
        self._timeout_ns = _check_rollback_timeout(milliseconds / 1000, "set_timeout(ms)",
                                                   f"{milliseconds!r} milliseconds")

    set_timeout_ms = set_timeout

    def _set_timeout_ns(self, int64_t ns):
        # Tests only: a rollback timeout below the floor (0: roll back at first sight).
        self._timeout_ns = ns

    # -- the protocol -------------------------------------------------------------

    @cython.final
    cdef int _next(self) except -1:
        # 1: a record is current; 0: none yet; the end of the file raises BusFullError.
        cdef int found = self._next_code()
        if found == END:
            self._raise_end()
        return found

    @cython.final
    cdef int _next_code(self) except -1:
        # As _next, but the end of the file is END, not an exception: a rolling reader's
        # per-record path then needs no try block (its setup alone cost ~5 ns a record).
        # The dead mark is checked after the poll too: a poll that touched a page past the
        # file's new end read the guard's zeros, which must not pass for "nothing new".
        cdef int found = self._poll_code()
        if guard_is_dead(self._dead):
            self._truncated()
        if self._path_check_due and not found:
            self._path_check_due = False
            found = self._check_file()
        return found

    cdef int _raise_end(self) except -1:
        raise BusFullError(f"end of bus: position {self._pos}, file_size {self.file_size}")

    cdef int _check_replaced(self) except -1:
        # After an empty poll, one lstat: a file shorter than the mapping raises
        # BusTruncatedError (even with the pages read so far kept: no SIGBUS would tell).
        # A path that names another file, or none (a segment's removal is retention's and
        # fine: its mapping stays readable), raises BusReplacedError, but records already
        # committed are still delivered first (a writer that wrote its last record and
        # removed the bus must not lose it): one more poll, the error only if it is empty.
        cdef int found
        try:
            self._file.check_file(self._segment)
        except BusReplacedError:
            found = self._poll_code()
            if found == END:
                self._raise_end()
            if found == 1:
                if guard_is_dead(self._dead):
                    self._truncated()
                return 1
            raise
        return 0

    @cython.final
    cdef int _poll_code(self) except -1:
        cdef char *base = self._base
        cdef int64_t pos = self._pos
        cdef int64_t limit
        cdef int32_t status
        cdef int _k
        self._cur = -1
        if base == NULL:
            raise BusClosedError("read from a closed MappedBusReader (call open() first)")
        if guard_is_dead(self._dead):
            self._truncated()
        while True:
            # A slot that cannot fit is the end, never a wait: a writer whose fetch-and-add
            # went past the end failed with EOF and will not commit it.
            if pos > self._last:
                self._pos = pos
                self._file.check_intact()
                return END
            # The status first: a committed slot was allocated, so the common path never
            # touches the limit's cache line, which every writer's fetch-and-add owns.
            status = status_load_acquire(base + pos, self._aligned)
            if status == 1:
                self._cur = pos
                self._pos = pos + self._slot
                self._wait_pos = -1     # a commit stops the stall clock
                self._delivered = True
                return 1
            if status == 2:
                pos += self._slot
                self.skipped += 1
                continue
            if pos >= self._limit_seen:
                # Caught up with the writers. The limit's line is the one every writer's
                # fetch-and-add needs exclusively: look at it on one empty poll in 16 only
                # (it matters only to start a stalled slot's timeout, which so starts
                # within 16 polls), and pause, so a spinning reader does not slow the
                # writers it waits for (measured: 1->1 Python 7.8 -> 12.6 M msgs/s,
                # round trip p50 331 -> 241 ns).
                if status == 0 and self._delivered:
                    # Just caught up: the writer is most likely filling this slot's line
                    # now. Looking at once would take the line from it mid-record; about
                    # 100 ns later the record is usually whole (measured side by side:
                    # 1->1 Python 12.1 -> 12.8 M msgs/s, round trip p50 281 -> 250 ns: in
                    # a ping-pong the echo is not there yet anyway).
                    self._delivered = False
                    for _k in range(CATCH_UP_PAUSES):
                        cpu_relax()
                    continue
                if status == 0:
                    self._idle += 1
                    if self._idle & 15:
                        cpu_relax()
                        self._pos = pos
                        return 0
                    # One (coarse) clock read per 16 empty polls: the file's look, when due.
                    if coarse_ns() >= self._next_look:
                        self._path_check_due = True
                limit = load_acquire_i64(base)
                if guard_is_dead(self._dead):
                    self._pos = pos
                    self._truncated()
                self._check_limit_now(limit)
                self._limit_seen = limit
                if limit <= pos:
                    self._pos = pos       # not allocated yet: nothing new
                    return 0
                continue                  # allocated: look at its status again
            if status != 0:
                self._pos = pos
                self._file.check_intact()
                raise CorruptBusError(f"{self.path!r}: record at {pos} has status {status} "
                                      f"(valid: 0, 1, 2): corrupt file or wrong record_size")
            stall = self._stalled(pos)
            if stall == STALL_WAIT:
                self._pos = pos
                return 0
            if self.read_only:
                if stall == STALL_TIMED_OUT:
                    warnings.warn(f"read-only reader skipped the uncommitted record at {pos} "
                                  f"after {self.timeout:g} s without rolling it back; other "
                                  f"readers may still deliver it", RuntimeWarning, stacklevel=3)
                pos += self._slot
                self.skipped += 1
                continue
            # Before writing: the limit must still be on the grid and above this slot, and
            # the mapping alive (a rollback into zeros would report a record that is gone).
            self._pos = pos
            limit = load_acquire_i64(base)
            self._check_limit_now(limit)
            if limit <= pos:
                self._file.check_intact()
                raise CorruptBusError(f"{self.path!r}: the limit went back from "
                                      f"{self._limit_seen} to {limit}: the file was reset "
                                      f"or is corrupt")
            if guard_is_dead(self._dead):
                self._truncated()
            if status_cas(base + pos, self._aligned, 0, 2) == 0:
                self.rollbacks += 1
                self.skipped += 1
                pos += self._slot
            # else the writer committed, or another reader rolled it back: look again

    cdef bint _timed_out(self, int64_t pos) except -1:
        cdef int64_t now = monotonic_ns()
        self._wait_seen = now
        if pos != self._wait_pos:
            # A slot below the limit seen when the last stall began was allocated by then:
            # it keeps that start time. Otherwise its clock starts now.
            if self._wait_pos < 0 or pos >= self._wait_limit:
                self._wait_start = now
                self._wait_limit = self._limit_seen
            self._wait_pos = pos
            self._wait_start_new = True
        return now - self._wait_start >= self._timeout_ns

    cdef int _stalled(self, int64_t pos) except -1:
        # Slot pos, allocated, is still uncommitted: STALL_WAIT, or give up on it now because
        # its writer is gone (STALL_DEAD) or, no live writer known, the timeout passed
        # (STALL_TIMED_OUT). The writers file is asked only once a slot has stayed
        # uncommitted for ASK_AFTER_NS: a reader right behind a live writer finds its slot
        # uncommitted for a few hundred ns all the time, and must not pay a system call then.
        cdef int64_t position = self._position_base + pos
        cdef bint timed_out = self._timed_out(pos)      # keeps the stall clock
        cdef int64_t now
        if self._dead_begin <= position < self._dead_end:
            return STALL_DEAD
        if self._wait_start_new:
            self._wait_start_new = False
            self._ask_due = self._wait_seen + ASK_AFTER_NS
            self._holder = WRITER_UNKNOWN
        now = self._wait_seen
        if now >= self._ask_due:
            self._ask_due = now + ASK_AGAIN_NS
            self._holder = self._ask_writers(position)
            if self._holder == WRITER_DEAD:
                if not self.read_only:
                    # The rest of the dead claim at once, in one C loop (a killed write_batch of
                    # millions of rows: ms, not a pass of this loop per slot); the scan then
                    # passes them as rolled back.
                    self.rollbacks += writers_roll_back(
                        self._base, self._position_base, position, self._dead_end, FIRST,
                        self._last, self._slot, self._aligned)
                    if guard_is_dead(self._dead):
                        self._truncated()
                return STALL_DEAD
        if self._holder == WRITER_ALIVE:
            if self._stall_bounded and now - self._wait_start >= self._stall_limit_ns:
                pid = self._writers.pid_of(self._holder_index) if self._writers is not None else 0
                raise WriterStalledError(
                    f"{self.path!r}: the writer of the record at {pos} (pid {pid}, as it "
                    f"recorded itself) is alive but has not committed it for "
                    f"{(now - self._wait_start) / 1e9:.3g} s (stall_limit "
                    f"{self._stall_limit_ns / 1e9:g} s); nothing was rolled back: reading "
                    f"again waits on", pid, position)
            return STALL_WAIT
        return STALL_TIMED_OUT if timed_out else STALL_WAIT

    cdef int _ask_writers(self, int64_t position) except -1:
        # Who holds position: WRITER_ALIVE, WRITER_DEAD or WRITER_UNKNOWN. The writers file is
        # opened here, at the first stall, and again when its path names another file (made
        # anew); one the reader cannot open (none yet, the Java original's bus, unsafe) is
        # asked again at the next stall.
        cdef WritersFile wf = self._writers
        cdef int index = 0
        cdef int64_t begin = 0, end = 0
        cdef int r
        if self._writers_path is None:
            return WRITER_UNKNOWN
        try:
            st = os.stat(self._writers_path)
            if (wf is None or wf.st_ino != st.st_ino or wf.st_dev != st.st_dev
                    or guard_is_dead(&wf.dead)):      # truncated under us: open it again
                if wf is not None:
                    wf.close()
                self._writers = wf = None
                wf = WritersFile(self._writers_path, writable=False,
                                 allow_foreign=self._allow_foreign)
                self._writers = wf
        except (OSError, CorruptBusError):
            return WRITER_UNKNOWN
        r = wf.holder(position, &index, &begin, &end)
        if r == WRITER_DEAD:
            self._dead_begin = begin
            self._dead_end = end
        elif r == WRITER_ALIVE:
            self._holder_index = index
        return r

    cdef int _wait(self, object timeout) except -1:
        # 1 when a record became current, 0 when ``timeout`` seconds passed first.
        if self._next():
            return 1
        cdef int64_t deadline = -1
        cdef int64_t now, spin_end, ns, next_check
        cdef long spins = 0
        cdef int k
        if timeout is not None:
            _check_timeout(timeout)
            if timeout <= 0:
                return self._look_if_due()
        now = monotonic_ns()
        if timeout is not None and timeout < MAX_WAIT_S:
            deadline = now + <int64_t>(timeout * 1e9)
        next_check = now + FILE_CHECK_NS
        if self._idle_mode != IDLE_PARK:
            spin_end = now + self._spin_ns
            while True:
                for k in range(64):
                    if self._next():
                        return 1
                    cpu_relax()
                spins += 1
                now = monotonic_ns()
                if deadline >= 0 and now >= deadline:
                    return 0
                if (spins & 255) == 0:
                    PyErr_CheckSignals()
                if self._idle_mode == IDLE_SPIN_PARK:
                    if now >= spin_end:
                        break
                elif now >= next_check:
                    next_check = now + FILE_CHECK_NS
                    if self._check_file():
                        return 1
        while True:
            ns = self._backoff.cur_ns
            if deadline >= 0:
                if now >= deadline:
                    return 0
                ns = min(ns, deadline - now)
            if self._park(ns):
                return 1
            PyErr_CheckSignals()
            now = monotonic_ns()
            if now >= next_check:
                next_check = now + FILE_CHECK_NS
                if self._check_file():
                    return 1

    cdef int _park(self, int64_t ns) except -1:
        # Park on the wake file for at most ns, then look: 1 if a record became current.
        # The registration comes before the first look: a commit after that look wakes us.
        cdef timespec ts
        cdef uint32_t v
        cdef char *w
        cdef int found
        if self._wake is None or self._wake.base == NULL:
            ts.tv_sec = ns // 1000000000
            ts.tv_nsec = ns % 1000000000
            with nogil:
                nanosleep(&ts, NULL)
            found = self._next()
            wake_backoff_after(&self._backoff, 0, found, monotonic_ns())
            return found
        w = self._wake.base
        v = self._wake.prepare()
        try:
            if self._next():
                return 1
            with nogil:
                wake_wait(w, v, ns)
        finally:
            self._wake.done()
        found = self._next()
        # Announced: seq moved, or a writer took the arming (its bump may precede v).
        wake_backoff_after(&self._backoff, wake_seq(w) != v or not wake_needed(w), found,
                           monotonic_ns())
        return found

    cdef int _check_file(self) except -1:
        # A waiting or polling reader's look at its file: replaced or removed (after the
        # records it still holds), or truncated below the mapping, raise as they do for a
        # writer. A segment's too: its replacement or truncation (not its removal).
        self._next_look = coarse_ns() + FILE_CHECK_NS
        return self._check_replaced()

    # -- event loops --------------------------------------------------------------

    def fileno(self):
        """A file descriptor for event loops (``loop.add_reader``, ``selectors``): after
        ``arm()`` it becomes readable when a record may be there (a writer woke the
        readers, or the reader's next slot changed: looked at every ``park`` seconds).
        Then ``next()``/``read(0)`` and ``arm()`` again. ``read_async`` does all this.
        OSError for a ``busy_spin`` reader or one without a wake file."""
        if self._base == NULL:
            raise BusClosedError("the MappedBusReader is closed")
        if self._wake is None:
            raise OSError(f"{self.path!r}: this reader has no wake file (idle={self.idle!r}, "
                          f"or it could not be made): no descriptor to wait on")
        if self._fd is None:
            self._fd = WakeFd(self._wake, self._park_ns, self._park_max_ns)
        return self._fd.fileno()

    def arm(self, within=None):
        """Make ``fileno()`` fire once the next record may be there, and not before (clears
        an earlier readiness). ``within``: seconds; fire after that long at the latest even
        if nothing came (an event loop's deadline, without a timer of its own; None: only
        the self-look's bound, ``park`` to ``park_max``). Returns False, without arming, if
        a record is ready now."""
        self.fileno()
        return not self._arm_fd(self._fd, within)

    def _ready(self):
        # Something to look at: the next slot's status is set, or the end of the file.
        if self._base == NULL:
            raise BusClosedError("the MappedBusReader is closed")
        return self._pos > self._last or \
            status_load_acquire(self._base + self._pos, self._aligned) != 0

    def disarm(self):
        """Stop watching for ``fileno()`` (a wait that ended by timeout or cancellation)."""
        if self._fd is not None:
            self._fd.disarm()

    def _arm_fd(self, WakeFd fd, within=None):
        # Arm ``fd`` on the slot this reader looks at next (past the last slot, on any wake:
        # a rolling reader waiting for the next segment). True if a record may be there now.
        cdef char *watch = NULL
        cdef int64_t within_ns = 0
        if within is not None:
            _check_timeout(within, "within")
            # at least 1 us (0 means no bound down there); a day at most (it only bounds a wait)
            within_ns = max(1000, <int64_t>(min(within, 86400.0) * 1e9))
        if self._base == NULL:
            raise BusClosedError("the MappedBusReader is closed")
        if self._pos <= self._last:
            watch = self._base + self._pos
        elif not self._segment:
            return True            # the end of a single-file bus: read() raises it
        return fd.arm(watch, self._aligned, within_ns) == 1

    cdef int64_t _current(self) except -1:
        if self._cur < 0:
            if self._base == NULL:
                raise BusClosedError("the MappedBusReader is closed")
            raise RuntimeError("no current record: call next() and check it returned True")
        return self._cur

    cdef int32_t _meta(self, int64_t rec) noexcept:
        cdef int32_t meta
        memcpy(&meta, self._base + rec + METADATA_OFFSET, 4)
        return meta

    def next(self):
        """Move to the next committed record; True if there is one (it becomes current),
        False if none is ready yet. Raises BusFullError at the end of the bus."""
        return self._next() == 1

    cdef int _look_if_due(self) except -1:
        # An empty read(0) (or wait(0), read_batch(timeout=0)), by a caller that may poll
        # seldom (read_async every 20 ms): the file's look once FILE_CHECK_NS passed since the
        # last one, so a removed, replaced or truncated file raises within that bound at any
        # poll rate. (next() and read_into(), the spinning forms, leave it to _poll_code's
        # look on every 16th empty poll: no clock read on their other empty polls.)
        # 1: a record is current.
        cdef int64_t now = coarse_ns()
        if now < self._next_look:
            return 0
        self._next_look = now + FILE_CHECK_NS
        return self._check_file()

    def _look(self):
        """The file's look if it is due, for a rolling reader's poll of its segment: True
        if a record became current (the segment was replaced with records left to read)."""
        return self._look_if_due() == 1

    def wait(self, timeout=None):
        """Like ``next()``, but wait up to ``timeout`` seconds (None: until a record
        comes, 0: not at all); True if a record became current."""
        return self._wait(timeout) == 1

    def read_type(self):
        """The current record's metadata: its type id (object messages)."""
        cdef int32_t meta = self._meta(self._current())
        if guard_is_dead(self._dead):
            self._truncated()
        return meta

    def read_message(self, message):
        """Copy the current record's payload into ``message`` (no allocation); returns it."""
        cdef int64_t rec = self._current()
        if not isinstance(message, MessageBase):
            raise TypeError(f"read_message() needs a Message, got {type(message).__name__}")
        cdef MessageBase m = <MessageBase>message
        if m._size > self.record_size:
            raise ValueError(f"{type(message).__name__} takes {m._size} bytes, more than "
                             f"record_size {self.record_size}")
        copy_payload(m._buf, self._base + rec + PAYLOAD_OFFSET, m._size)
        if guard_is_dead(self._dead):
            self._truncated()
        return message

    def read_into(self, message):
        """``next()`` and ``read_message(message)`` in one call: True if a record was read."""
        return self._read_into(message)

    cdef bint _read_into(self, object message) except -1:
        cdef int found = self._read_into_code(message)
        if found == END:
            self._raise_end()
        return found

    @cython.final
    cdef int _read_into_code(self, object message) except -1:
        # As _read_into, with the end of the file as END (see _next_code).
        if not isinstance(message, MessageBase):
            raise TypeError(f"read_into() needs a Message, got {type(message).__name__}")
        cdef MessageBase m = <MessageBase>message
        if m._size > self.record_size:
            raise ValueError(f"{type(message).__name__} takes {m._size} bytes, more than "
                             f"record_size {self.record_size}")
        cdef int found = self._next_code()
        if found != 1:
            return found
        copy_payload(m._buf, self._base + self._cur + PAYLOAD_OFFSET, m._size)
        if guard_is_dead(self._dead):
            self._truncated()
        return 1

    cdef int32_t _length(self, int64_t rec) except -1:
        cdef int32_t n = self._meta(rec)
        if n < 0 or n > self.record_size:
            self._file.check_intact()
            raise CorruptBusError(f"{self.path!r}: record at {rec} stores length {n}, "
                                  f"outside 0..{self.record_size}")
        return n

    def read_buffer(self, buffer, Py_ssize_t offset=0):
        """Copy the current byte-array record into ``buffer[offset:]``; returns its length."""
        cdef int64_t rec = self._current()
        cdef int32_t n = self._length(rec)
        cdef Py_buffer view
        cdef char *dst
        cdef Py_ssize_t size
        if PyByteArray_CheckExact(buffer):
            dst = PyByteArray_AS_STRING(buffer)
            size = PyByteArray_GET_SIZE(buffer)
            if offset < 0 or offset > size or n > size - offset:
                raise ValueError(f"a {n}-byte record does not fit at offset {offset} of a "
                                 f"{size}-byte buffer")
            copy_payload(dst + offset, self._base + rec + PAYLOAD_OFFSET, n)
            if guard_is_dead(self._dead):
                self._truncated()
            return n
        PyObject_GetBuffer(buffer, &view, PyBUF_WRITABLE)
        try:
            if offset < 0 or offset > view.len or n > view.len - offset:
                raise ValueError(f"a {n}-byte record does not fit at offset {offset} of a "
                                 f"{view.len}-byte buffer")
            memcpy(<char *>view.buf + offset, self._base + rec + PAYLOAD_OFFSET, n)
        finally:
            PyBuffer_Release(&view)
        if guard_is_dead(self._dead):
            self._truncated()
        return n

    def read_bytes(self):
        """The current byte-array record's bytes (its stored length of them)."""
        cdef int64_t rec = self._current()
        cdef int32_t n = self._length(rec)
        data = self._base[rec + PAYLOAD_OFFSET:rec + PAYLOAD_OFFSET + n]
        if guard_is_dead(self._dead):
            self._truncated()
        return data

    cdef Record _record(self):
        cdef int64_t rec = self._cur
        cdef int64_t payload = rec + PAYLOAD_OFFSET
        record = Record(rec, self._meta(rec), self._base[payload:payload + self.record_size])
        if guard_is_dead(self._dead):
            self._truncated()
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
                    memcpy(dst, self._base + self._cur + PAYLOAD_OFFSET, rowlen)
                    dst += rowlen
                    if have_meta:
                        metas[n] = self._meta(self._cur)
                    if guard_is_dead(self._dead):
                        self._truncated()
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
