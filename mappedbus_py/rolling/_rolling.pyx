# cython: language_level=3, embedsignature=True
"""The rolling bus's per-record paths, at C level: a write or a read goes straight to the
segment's single-file writer or reader (their cdef methods), as it would on a single file.
Everything else (opening, rolling, following, retention, gaps, consumers) is the Python
subclasses', ``RollingBusWriter`` (rolling/writer.py, roller.py) and ``RollingBusReader``
(rolling/reader.py).

The contract between a base and its subclass: the subclass sets the base's fields (declared,
each with its meaning, in _rolling.pxd) and defines the methods the base calls back, which the
base declares below as methods raising NotImplementedError. It calls them only off the
per-record path:

- ``RollingWriterBase``: ``_look_ahead()`` every ``_countdown`` writes, ``_make_spare()`` when
  a write allocated the slot at ``_trigger``, ``_roll()`` when the segment is full (BusFullError),
  ``_note_time(time_ns, offset)`` with ``_tix_on`` for the first record it writes in each
  millisecond of a segment (the time index; the clock is read before the write);
  ``_topic_id(name)`` for a write with a topic (a framed bus);
- ``RollingReaderBase``: ``_live()`` (the open segment reader, or BusClosedError) and
  ``_follow()`` (at a segment's end: True once the reader moved on) when a read finds nothing,
  ``_check_id(now_ns)`` on every 16th empty poll once ``_id_at`` passed (``ID_CHECK_NS`` after
  the last look), ``_commit_position(position)`` (the position to store, checked; raises
  when no consumer is held) in ``commit()``, which stores through ``_hold``; it keeps ``_id_at`` (declared in
  _rolling.pxd) when the id's next look is due.

``WRITER_CONTRACT`` and ``READER_CONTRACT`` name those methods; tests/rolling/test_contract.py
checks that the base declares each (raising NotImplementedError), that the subclass defines
each, and that the base calls no other method it does not define."""

cimport cython
from posix.unistd cimport getpid
from posix.time cimport clock_gettime, timespec, CLOCK_REALTIME
from libc.stdint cimport int32_t

from .._core._record cimport Record
from .._core._frames cimport frame_record, frame_object, check_into_buffer
from .._core._clock cimport coarse_ns
from .._core._reader cimport MappedBusReader
from .._core._slotscan cimport SlotScan, END, scan_meta
from .._core._writer cimport MappedBusWriter
from .._core._mapping cimport MappedFile
from .._core._layout cimport (LIMIT_OFFSET, FIRST_RECORD_OFFSET, STATUS_OFFSET, METADATA_OFFSET,
                       PAYLOAD_OFFSET, HEADER_SIZE)
from .._core._guard cimport guard_is_dead
from .._core._atomic cimport load_acquire_i64
from .._core._consumerhold cimport ConsumerHold, hold_commit

from ..errors import BusClosedError, BusFullError

#: The methods RollingWriterBase calls that its subclass (RollingBusWriter) defines.
WRITER_CONTRACT = ("_look_ahead", "_make_spare", "_roll", "_note_time", "_topic_id")
#: The methods RollingReaderBase calls that its subclass (RollingBusReader) defines.
READER_CONTRACT = ("_live", "_follow", "_check_id", "_commit_position")

#: _layout.pxd's offsets as compiled, for the test that checks them against layout.py.
PXD_CONSTANTS = {
    "LIMIT_OFFSET": LIMIT_OFFSET, "FIRST_RECORD_OFFSET": FIRST_RECORD_OFFSET,
    "STATUS_OFFSET": STATUS_OFFSET, "METADATA_OFFSET": METADATA_OFFSET,
    "PAYLOAD_OFFSET": PAYLOAD_OFFSET, "HEADER_SIZE": HEADER_SIZE,
}


cdef class BackgroundCall:
    """One slow system call on a C thread of its own, which never takes the GIL
    (_background.h): a rolling writer's spare segment preallocated (``fallocate``), then
    its pages mapped (``populate``), while the writing thread goes on writing; the roller
    looks at ``done`` between writes and calls ``wait()`` once it is (or at a roll)."""

    def __cinit__(self):
        self._joined = True
        self._rc = -1

    def __dealloc__(self):
        if not self._joined:
            with nogil:
                mb_bg_join(&self._job)   # never leave its thread writing into freed memory

    @staticmethod
    def fallocate(int fd, int64_t size, int unlock_fd=-1, int64_t unlock_at=0,
                  bint prefault=False):
        """posix_fallocate(fd, 0, size) in the background; with ``prefault``, then its pages
        made up to date through a mapping of the thread's own (MADV_POPULATE_WRITE, else a
        write a page: the zeroing a segment's first writes would pay, 64 MiB in 35-45 ms);
        then, given ``unlock_fd``, the POSIX lock on its byte ``unlock_at`` released (a
        segment's claim lapses with its file made, as the Java writer's does: a writer that
        must roll never waits on one that went quiet before linking it)."""
        cdef BackgroundCall c = BackgroundCall.__new__(BackgroundCall)
        c._job.kind = MB_BG_FALLOCATE
        c._job.fd = fd
        c._job.len = <size_t>size
        c._job.prefault = prefault
        c._job.unlock_fd = unlock_fd
        c._job.unlock_at = unlock_at
        c._start()
        return c

    @staticmethod
    def unmap(MappedBusWriter w):
        """Close ``w`` with its mapping unmapped in the background (a retired segment's:
        4-17 ms for 64 MiB populated, off the writing thread). None when ``w`` was closed
        here and then (nothing mapped, or a buffer still exported, which ``close`` reports)."""
        cdef MappedFile f = w._file
        if f is None or f.base == NULL or f._exports > 0:
            w.close()
            return None
        cdef size_t length = <size_t>f.mapped_size
        cdef char *base = f._detach()
        w.close()                       # the mapping is detached: this unmaps nothing
        cdef BackgroundCall c = BackgroundCall.__new__(BackgroundCall)
        c._job.unlock_fd = -1
        c._job.kind = MB_BG_MUNMAP
        c._job.addr = base
        c._job.len = length
        c._start()
        return c

    @staticmethod
    def populate(MappedBusWriter w, bint made):
        """Map every page of ``w``'s mapping in the background, before any write goes there:
        ``made``, this process just made the file, whose fallocated pages are not up to date
        yet (MADV_POPULATE_WRITE zeroes them: 64 MiB in about 19 ms); else
        MADV_POPULATE_READ, which maps 16 pages a fault, writable (a shared tmpfs mapping
        tracks no dirty pages): about 7 ms against 11 (perf/segment_memory.py). Once it
        succeeded, ``w``'s writes map no pages (its _populate). None when there is nothing
        to do (prefault mapped every page at open, or mapping ahead is off)."""
        if w._base == NULL or w._populated < 0:
            return None
        cdef BackgroundCall c = BackgroundCall.__new__(BackgroundCall)
        c._writer = w
        c._job.unlock_fd = -1
        c._job.kind = MB_BG_MADVISE
        c._job.addr = w._base
        c._job.len = <size_t>w._mapped
        c._job.advice = MADV_POPULATE_WRITE if made else MADV_POPULATE_READ
        c._start()
        return c

    cdef int _start(self) except -1:
        if mb_bg_start(&self._job) == 0:
            self._joined = False
            return 0
        with nogil:                      # no thread to be had: the call here, now
            mb_bg_run(&self._job)
        self._finish(self._job.rc)
        return 0

    cdef _finish(self, int rc):
        self._rc = rc
        if rc == 0 and self._writer is not None and self._writer._populated >= 0:
            self._writer._populated = self._writer._mapped

    @property
    def done(self):
        """True once ``wait()`` would not wait (also in a forked child, where the call's
        thread does not exist)."""
        return self._joined or self._job.pid != getpid() or mb_bg_done(&self._job) != 0

    def wait(self):
        """Wait for the call: 0, the error number, or -1 if it did not run in this process
        (started by the parent of this forked child)."""
        cdef int rc
        if not self._joined:
            with nogil:
                rc = mb_bg_join(&self._job)
            self._joined = True
            self._finish(rc)
        return self._rc


cdef class RollingWriterBase:
    """The write path of ``RollingBusWriter`` (rolling/writer.py)."""

    # The subclass's part of the contract (the module docstring): the roller's steps.
    def _look_ahead(self):
        """Every ``_countdown`` writes: look at the segment's limit, prepare the spare."""
        raise NotImplementedError("RollingWriterBase._look_ahead: defined by the subclass")

    def _make_spare(self):
        """This write allocated the slot at ``_trigger``: make the next segment."""
        raise NotImplementedError("RollingWriterBase._make_spare: defined by the subclass")

    def _roll(self):
        """The segment is full: make the next one current."""
        raise NotImplementedError("RollingWriterBase._roll: defined by the subclass")

    def _note_time(self, time_ns, offset):
        """Append (time_ns, the position of ``offset`` in the current segment) to its index."""
        raise NotImplementedError("RollingWriterBase._note_time: defined by the subclass")

    def _last_offset(self):
        """The offset of the current segment writer's last allocation's first slot (-1:
        none)."""
        return self._w._last_off if self._w is not None else -1

    def _topic_id(self, topic):
        """The id of topic ``topic`` (a framed bus's; defined by the subclass)."""
        raise NotImplementedError("RollingWriterBase._topic_id: defined by the subclass")

    def write(self, data, Py_ssize_t offset=0, Py_ssize_t length=-1, topic=None):
        """Write one record (see ``MappedBusWriter.write``); True once committed. On a
        framed bus: a message of any size up to ``max_message``, with its ``topic``."""
        self._countdown -= 1
        if self._countdown <= 0 and self._w is not None:
            self._look_ahead()
        cdef bint ok
        cdef timespec ts
        cdef int64_t now = 0
        if self._tix_on:
            # Before the slot is allocated: every slot after this record's is allocated later.
            clock_gettime(CLOCK_REALTIME, &ts)
            now = <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec
        cdef MappedBusWriter w
        cdef int32_t tid = 0
        if topic is not None:
            tid = self._topic_id(topic)
        while True:
            w = self._w
            if w is None:
                raise BusClosedError("write to a closed RollingBusWriter (call open() first)")
            try:
                if w.frames:
                    ok = w._write_framed(data, offset, length, tid)
                else:
                    ok = w._write(data, offset, length)
            except BusFullError:
                self._roll()
                continue
            if w.frames:
                # The look-ahead countdown counts slots, not messages: a 1 MiB message of
                # 4 KiB slots moves the segment on as far as 256 one-slot records do, and the
                # spare's steps must keep pace with it (else its make and map wait for the
                # roll, whose write then maps the new segment's pages one by one).
                if w._last_span != w._slot:      # no division for one-slot messages
                    self._countdown -= w._last_span // w._slot - 1
                # A message's slots may pass over the trigger slot: the one that covers it
                # makes the spare.
                if w._last_off <= self._trigger < w._last_off + w._last_span:
                    self._make_spare()
            # One writer of all allocates the slot past the middle: it makes the next segment
            # (the others only map it), so racing writers do not each reserve a segment.
            elif w._last_off == self._trigger:
                self._make_spare()
            # Outside the millisecond of this writer's last entry (no division on this path):
            # [_tix_next - 1 ms, _tix_next); _tix_next 0 means none yet in this segment.
            if self._tix_on and (now >= self._tix_next or now < self._tix_next - 1000000):
                self._tix_next = (now // 1000000 + 1) * 1000000
                self._note_time(now, w._last_off)
            return ok



cdef object _NO_WAIT = 0      # read_into's default timeout (only a framed bus waits)


cdef class RollingReaderBase:
    """The read paths of ``RollingBusReader`` (rolling/reader.py)."""

    # The subclass's part of the contract (the module docstring).
    def _live(self):
        """The open segment's reader; BusClosedError when the reader is closed."""
        raise NotImplementedError("RollingReaderBase._live: defined by the subclass")

    def _follow(self):
        """At the end of the segment: True once the reader moved to a later one."""
        raise NotImplementedError("RollingReaderBase._follow: defined by the subclass")

    def _check_id(self, now):
        """BusReplacedError if the directory now holds another bus (``now``: monotonic ns)."""
        raise NotImplementedError("RollingReaderBase._check_id: defined by the subclass")

    def _commit_position(self, position):
        """The position ``commit(position)`` stores (None: this reader's), checked."""
        raise NotImplementedError("RollingReaderBase._commit_position: defined by the subclass")

    def commit(self, position=None, /):
        """Store this reader's position (the slot after the last record read), or
        ``position``, as its consumer's committed position: one atomic store, no lock (see
        ``MappedBusReader.commit``)."""
        cdef MappedBusReader r = self._r
        cdef int64_t pos
        if position is None and r is not None and self._pending_gap is None \
                and self._hold is not None:
            pos = self._base_pos + r._scan.pos
        else:
            pos = self._commit_position(position)      # raises when no consumer is held
        hold_commit(self._hold, pos)

    cdef int _empty(self) except -1:
        # One (coarse) clock read per 16 empty polls: the bus's id looked at once it is due.
        cdef int64_t now
        self._idle += 1
        if not self._idle & 15:
            now = coarse_ns()
            if now >= self._id_at:
                self._check_id(now)
        return 0

    @cython.final
    cdef inline int _advance(self, object message) except -1:
        # 1 once a record is current (and, given ``message``, copied into it); 0 if none is
        # ready. The common cases, in place in next() and read_into() (read_into of a reader
        # alone: 48.2 -> 46.7 ns a record, a single file 46.1); the rest is _follow_on's.
        cdef MappedBusReader r = self._r
        cdef int found
        if r is not None:
            found = r._next_code() if message is None else r._read_into_code(message)
            if found == 1:
                return 1
            if found == 0:
                self._empty()
                return 0
        return self._follow_on(message)

    cdef int _follow_on(self, object message) except -1:
        # _advance found no segment open (raises), or its end (END: every slot settled):
        # RollingBusReader._follow() moves on (or raises a gap), and the next one is polled.
        cdef MappedBusReader r = self._r
        cdef int found = END
        while found == END:
            if r is None:
                self._live()            # raises: closed
            if not self._follow():
                return 0
            r = self._r
            if r is not None:
                found = r._next_code() if message is None else r._read_into_code(message)
        if found == 0:
            self._empty()
        return found

    def next(self):
        """Move to the next committed record; True if there is one (it becomes current)."""
        return self._advance(None) == 1

    def read_into(self, message, timeout=0):
        """``next()`` and ``read_message(message)`` in one call: True if a record was read.
        On a framed bus: the next message copied into the buffer ``message``, its length
        returned, None if none came within ``timeout`` (see ``MappedBusReader.read_into``)."""
        if self._frames:
            check_into_buffer(message)
            if not self._frame_next(timeout):
                return None
            return self._r._frame_into(message)
        if timeout is not _NO_WAIT:
            raise TypeError("read_into(message, timeout) waits on a framed bus only: use "
                            "wait(timeout), then read_message(message)")
        return self._advance(message) == 1

    def _frame_next(self, timeout):
        # A framed bus's next message made current (waiting as read does): True if one is.
        cdef MappedBusReader r = self._r
        cdef int found = 0
        if r is not None:
            try:
                found = r._next()
            except BusFullError:
                found = 0
        if found == 1:
            return True
        if timeout is not None and timeout == 0:
            return self._advance(None) == 1
        return self.wait(timeout)

    def _frame_record(self):
        # The current message as a Record (records() and iteration on a framed bus).
        cdef MappedBusReader r = self._r
        cdef SlotScan s = r._scan
        record = frame_record(s.base, s.cur, self._base_pos + s.cur, self._names,
                              self._serializer)
        if guard_is_dead(s.dead):
            s.truncated()
        return record

    def read_object(self, timeout=None):
        """The next message as the object ``write_object`` wrote (see
        ``MappedBusReader.read_object``); None if none came within ``timeout``."""
        if not self._frames:
            raise TypeError("read_object() reads a framed bus (frames=True)")
        if not self._frame_next(timeout):
            return None
        cdef MappedBusReader r = self._r
        cdef SlotScan s = r._scan
        obj = frame_object(s.base, s.cur, self._base_pos + s.cur, self._serializer)
        if guard_is_dead(s.dead):
            s.truncated()
        return obj

    def read(self, timeout=None):
        """The next committed record as a ``Record`` (position across segments), waiting up
        to ``timeout`` seconds (None: until one comes, 0: not at all); None if none came."""
        cdef MappedBusReader r = self._r
        cdef int found = 0
        if r is not None:
            try:
                found = r._next()
            except BusFullError:
                found = 0
        if found != 1 and not self.wait(timeout):
            return None
        r = self._r
        cdef SlotScan s = r._scan
        cdef int64_t rec = s.cur
        cdef int64_t payload = rec + PAYLOAD_OFFSET
        if s.frames:
            record = frame_record(s.base, rec, self._base_pos + rec, self._names,
                                  self._serializer)
            if guard_is_dead(s.dead):
                s.truncated()
            return record
        record = Record(self._base_pos + rec, scan_meta(s, rec),
                        s.base[payload:payload + r.record_size])
        if guard_is_dead(s.dead):
            s.truncated()
        return record
