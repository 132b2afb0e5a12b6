# cython: language_level=3, embedsignature=True
"""The reader's walk over the slots of one bus file, in allocation order (Java: SlotScan):
the status of each slot, the limit (looked at only when caught up), the rollback clock of a
slot left uncommitted and the writers file asked who holds it, the pause on catching up with
a writer, and the file's look (truncated, replaced) when it is due. The per-record step is
``scan_next`` in _slotscan.pxd (inline in each caller); the rest is here."""
import os
import warnings

from libc.stdint cimport int32_t, int64_t

from ._layout cimport FIRST_RECORD_OFFSET
from ._atomic cimport load_acquire_i64, status_load_acquire, status_cas, cpu_relax
from ._clock cimport monotonic_ns, coarse_ns
from ._guard cimport guard_is_dead
from ._mapping cimport MappedFile
from ._writers cimport WritersFile, writers_roll_back, WRITER_ALIVE, WRITER_DEAD, WRITER_UNKNOWN
from ._frames cimport (TopicNames, frame_check, frame_topic, frame_skip, frame_meta_slots,
                       frame_meta_load, frame_roll_back, frame_slots_left, FRAME_TOPIC_WANTED,
                       FRAME_TOPIC_UNKNOWN, FRAME_RECORD_ALIGN)

from ._checks import check_limit as _check_limit
from ..errors import BusClosedError, BusFullError, BusReplacedError, CorruptBusError, \
    WriterStalledError

cdef int64_t FIRST = FIRST_RECORD_OFFSET
# What stalled() says of an uncommitted slot below the limit.
cdef enum:
    STALL_WAIT = 0          # wait on: its writer may still commit it
    STALL_DEAD = 1          # its writer is gone (the writers file says): give it up now
    STALL_TIMED_OUT = 2     # no live writer known and the timeout passed: give it up
# A slot uncommitted this long has its writer looked up in the writers file (one scan and
# one system call), then again this often while it stays so (the writer may die meanwhile).
cdef int64_t ASK_AFTER_NS = 1000000
cdef int64_t ASK_AGAIN_NS = 1000000
#: Seconds between a waiting or polling reader's looks at its file (docs/safety.md).
FILE_CHECK = FILE_CHECK_NS / 1e9
# Pauses (about 25 ns each on the AMD EPYC of perf/) on the first empty poll after a record.
cdef int CATCH_UP_PAUSES = 4
cdef int NEVER_DEAD = 0      # what dead points to while no mapping is open


cdef class SlotScan:
    """The slots of one bus file as one reader walks them (internal: MappedBusReader holds
    one). Made closed; ``opened`` gives it a mapping."""

    def __cinit__(self, path, int64_t file_size, int32_t record_size, bint read_only,
                  bint segment, bint allow_foreign, writers_path, int64_t position_base):
        self.path = path
        self.file_size = file_size
        self.record_size = record_size
        self.slot = 8 + record_size
        self.last = file_size - self.slot
        self.aligned = record_size % 4 == 0
        self.read_only = read_only
        self.segment = segment
        self.allow_foreign = allow_foreign
        self.writers_path = writers_path
        self.position_base = position_base
        self.dead = &NEVER_DEAD
        self.base = NULL
        self.pos = FIRST
        self.cur = -1
        self.wait_pos = -1
        self.holder = WRITER_UNKNOWN

    cdef int opened(self, MappedFile f, int64_t limit) except -1:
        # The mapping f is the scan's, its limit at open checked: no slot seen yet.
        self.file = f
        self.base = f.base
        self.dead = &f.dead
        self.limit_seen = 0
        self.cur = -1
        self.wait_pos = -1
        return 0

    cdef int closed(self) except -1:
        self.base = NULL
        self.dead = &NEVER_DEAD
        self.cur = -1
        if self.file is not None:
            self.file.close()
        self.file = None
        if self.writers is not None:
            self.writers.close()
            self.writers = None
        return 0

    cdef int move_to(self, int64_t pos) except -1:
        # Continue from pos (checked by the caller): no current record, no stall clock.
        self.pos = pos
        self.cur = -1
        self.wait_pos = -1
        return 0

    cdef int64_t end_boundary(self):
        # The first record boundary past the last record that fits in file_size.
        return FIRST + ((self.file_size - FIRST) // self.slot) * self.slot

    cdef int truncated(self) except -1:
        self.cur = -1
        return self.file.raise_dead()

    cdef int check_limit_now(self, int64_t limit) except -1:
        # Every limit loaded must be on this reader's grid: off it means another
        # record_size (a file without metadata cannot say so otherwise) or corruption.
        if limit != 0 and (limit < FIRST or (limit - FIRST) % self.slot != 0):
            self.file.check_intact()
            _check_limit(limit, self.slot, self.record_size, self.path)
        return 0

    cdef int raise_end(self) except -1:
        raise BusFullError(f"end of bus: position {self.pos}, file_size {self.file_size}")

    cdef int check_replaced(self) except -1:
        # After an empty poll, one lstat: a file shorter than the mapping raises
        # BusTruncatedError (even with the pages read so far kept: no SIGBUS would tell).
        # A path that names another file, or none (a segment's removal is retention's and
        # fine: its mapping stays readable), raises BusReplacedError, but records already
        # committed are still delivered first (a writer that wrote its last record and
        # removed the bus must not lose it): one more poll, the error only if it is empty.
        cdef int found
        try:
            self.file.check_file(self.segment)
        except BusReplacedError:
            found = self.poll()
            if found == END:
                self.raise_end()
            if found == 1:
                if guard_is_dead(self.dead):
                    self.truncated()
                return 1
            raise
        return 0

    cdef int check_file(self) except -1:
        # A waiting or polling reader's look at its file: replaced or removed (after the
        # records it still holds), or truncated below the mapping, raise as they do for a
        # writer. A segment's too: its replacement or truncation (not its removal).
        self.next_look = coarse_ns() + FILE_CHECK_NS
        return self.check_replaced()

    cdef int look_if_due(self) except -1:
        # An empty read(0) (or wait(0), read_batch(timeout=0)), by a caller that may poll
        # seldom (read_async every 20 ms): the file's look once FILE_CHECK_NS passed since the
        # last one, so a removed, replaced or truncated file raises within that bound at any
        # poll rate. (next() and read_into(), the spinning forms, leave it to poll()'s look
        # on every 16th empty poll: no clock read on their other empty polls.)
        # 1: a record is current.
        cdef int64_t now = coarse_ns()
        if now < self.next_look:
            return 0
        self.next_look = now + FILE_CHECK_NS
        return self.check_file()

    cdef int poll(self) except -1:
        # The whole look for the next committed record (scan_next takes the common case
        # inline and calls this for the rest): 1, 0 or END, as scan_next.
        cdef char *base = self.base
        cdef int64_t pos = self.pos
        cdef int64_t limit
        cdef int32_t status
        cdef int _k
        cdef int64_t n
        self.cur = -1
        if base == NULL:
            raise BusClosedError("read from a closed MappedBusReader (call open() first)")
        if guard_is_dead(self.dead):
            self.truncated()
        while True:
            # A slot that cannot fit is the end, never a wait: a writer whose fetch-and-add
            # went past the end failed with EOF and will not commit it.
            if pos > self.last:
                self.pos = pos
                self.file.check_intact()
                return END
            # The status first: a committed slot was allocated, so the common path never
            # touches the limit's cache line, which every writer's fetch-and-add owns.
            status = status_load_acquire(base + pos, self.aligned)
            if status == 1:
                if self.frames:
                    # A message: its slot count from its meta; a topic the filter does not
                    # want is passed over here, with no Python call.
                    n = self.frame_committed(pos)
                    self.wait_pos = -1
                    self.delivered = True
                    if n < 0:
                        pos -= n
                        continue
                    self.cur = pos
                    self.pos = pos + n
                    return 1
                self.cur = pos
                self.pos = pos + self.slot
                self.wait_pos = -1      # a commit stops the stall clock
                self.delivered = True
                return 1
            if status == 2:
                pos += frame_skip(base + pos) * self.slot if self.frames else self.slot
                self.skipped += 1
                continue
            if pos >= self.limit_seen:
                # Caught up with the writers. The limit's line is the one every writer's
                # fetch-and-add needs exclusively: look at it on one empty poll in 16 only
                # (it matters only to start a stalled slot's timeout, which so starts
                # within 16 polls), and pause, so a spinning reader does not slow the
                # writers it waits for (measured: 1->1 Python 7.8 -> 12.6 M msgs/s,
                # round trip p50 331 -> 241 ns).
                if status == 0 and self.delivered:
                    # Just caught up: the writer is most likely filling this slot's line
                    # now. Looking at once would take the line from it mid-record; about
                    # 100 ns later the record is usually whole (measured side by side:
                    # 1->1 Python 12.1 -> 12.8 M msgs/s, round trip p50 281 -> 250 ns: in
                    # a ping-pong the echo is not there yet anyway).
                    self.delivered = False
                    for _k in range(CATCH_UP_PAUSES):
                        cpu_relax()
                    continue
                if status == 0:
                    self.idle += 1
                    if self.idle & 15:
                        cpu_relax()
                        self.pos = pos
                        return 0
                    # One (coarse) clock read per 16 empty polls: the file's look, when due.
                    if coarse_ns() >= self.next_look:
                        self.path_check_due = True
                limit = load_acquire_i64(base)
                if guard_is_dead(self.dead):
                    self.pos = pos
                    self.truncated()
                self.check_limit_now(limit)
                self.limit_seen = limit
                if limit <= pos:
                    self.pos = pos        # not allocated yet: nothing new
                    return 0
                continue                  # allocated: look at its status again
            if status != 0:
                self.pos = pos
                self.file.check_intact()
                raise CorruptBusError(f"{self.path!r}: record at {pos} has status {status} "
                                      f"(valid: 0, 1, 2): corrupt file or wrong record_size")
            stall = self.stalled(pos)
            if stall == STALL_WAIT:
                self.pos = pos
                return 0
            if self.read_only:
                if stall == STALL_TIMED_OUT:
                    warnings.warn(f"read-only reader skipped the uncommitted record at {pos} "
                                  f"after {self.timeout_ns / 1e9:g} s without rolling it back; "
                                  f"other readers may still deliver it", RuntimeWarning,
                                  stacklevel=3)
                if self.frames:
                    n = frame_meta_slots(frame_meta_load(base + pos))
                    pos += (n if n >= 1 else 1) * self.slot
                else:
                    pos += self.slot
                self.skipped += 1
                continue
            # Before writing: the limit must still be on the grid and above this slot, and
            # the mapping alive (a rollback into zeros would report a record that is gone).
            self.pos = pos
            limit = load_acquire_i64(base)
            self.check_limit_now(limit)
            if limit <= pos:
                self.file.check_intact()
                raise CorruptBusError(f"{self.path!r}: the limit went back from "
                                      f"{self.limit_seen} to {limit}: the file was reset "
                                      f"or is corrupt")
            if guard_is_dead(self.dead):
                self.truncated()
            if self.frames:
                n = self.frame_give_up(pos)
                if n > 0:
                    self.rollbacks += 1
                    self.skipped += 1
                    pos += n
                continue
            if status_cas(base + pos, self.aligned, 0, 2) == 0:
                self.rollbacks += 1
                self.skipped += 1
                pos += self.slot
            # else the writer committed, or another reader rolled it back: look again

    cdef bint timed_out(self, int64_t pos) except -1:
        cdef int64_t now = monotonic_ns()
        self.wait_seen = now
        if pos != self.wait_pos:
            # A slot below the limit seen when the last stall began was allocated by then:
            # it keeps that start time. Otherwise its clock starts now.
            if self.wait_pos < 0 or pos >= self.wait_limit:
                self.wait_start = now
                self.wait_limit = self.limit_seen
            self.wait_pos = pos
            self.wait_start_new = True
        return now - self.wait_start >= self.timeout_ns

    cdef int stalled(self, int64_t pos) except -1:
        # Slot pos, allocated, is still uncommitted: STALL_WAIT, or give up on it now because
        # its writer is gone (STALL_DEAD) or, no live writer known, the timeout passed
        # (STALL_TIMED_OUT). The writers file is asked only once a slot has stayed
        # uncommitted for ASK_AFTER_NS: a reader right behind a live writer finds its slot
        # uncommitted for a few hundred ns all the time, and must not pay a system call then.
        cdef int64_t position = self.position_base + pos
        cdef bint timed_out = self.timed_out(pos)       # keeps the stall clock
        cdef int64_t now
        if self.dead_begin <= position < self.dead_end:
            return STALL_DEAD
        if self.wait_start_new:
            self.wait_start_new = False
            self.ask_due = self.wait_seen + ASK_AFTER_NS
            self.holder = WRITER_UNKNOWN
        now = self.wait_seen
        if now >= self.ask_due:
            self.ask_due = now + ASK_AGAIN_NS
            self.holder = self.ask_writers(position)
            if self.holder == WRITER_DEAD:
                if not self.read_only and not self.frames:
                    # The rest of the dead claim at once, in one C loop (a killed write_batch of
                    # millions of rows: ms, not a pass of this loop per slot); the scan then
                    # passes them as rolled back.
                    self.rollbacks += writers_roll_back(
                        self.base, self.position_base, position, self.dead_end, FIRST,
                        self.last, self.slot, self.aligned)
                    if guard_is_dead(self.dead):
                        self.truncated()
                return STALL_DEAD
        if self.holder == WRITER_ALIVE:
            if self.stall_bounded and now - self.wait_start >= self.stall_limit_ns:
                pid = self.writers.pid_of(self.holder_index) if self.writers is not None else 0
                raise WriterStalledError(
                    f"{self.path!r}: the writer of the record at {pos} (pid {pid}, as it "
                    f"recorded itself) is alive but has not committed it for "
                    f"{(now - self.wait_start) / 1e9:.3g} s (stall_limit "
                    f"{self.stall_limit_ns / 1e9:g} s); nothing was rolled back: reading "
                    f"again waits on", pid, position)
            return STALL_WAIT
        return STALL_TIMED_OUT if timed_out else STALL_WAIT

    cdef int ask_writers(self, int64_t position) except -1:
        # Who holds position: WRITER_ALIVE, WRITER_DEAD or WRITER_UNKNOWN. The writers file is
        # opened here, at the first stall, and again when its path names another file (made
        # anew); one the reader cannot open (none yet, the Java original's bus, unsafe) is
        # asked again at the next stall.
        cdef WritersFile wf = self.writers
        cdef int index = 0
        cdef int64_t begin = 0, end = 0
        cdef int r
        if self.writers_path is None:
            return WRITER_UNKNOWN
        try:
            st = os.stat(self.writers_path)
            if wf is None or wf.st_ino != st.st_ino or wf.st_dev != st.st_dev:
                if wf is not None:
                    wf.close()
                self.writers = wf = None
                wf = WritersFile(self.writers_path, writable=False,
                                 allow_foreign=self.allow_foreign)
                self.writers = wf
        except (OSError, CorruptBusError):
            return WRITER_UNKNOWN
        r = wf.holder(position, &index, &begin, &end)
        if r == WRITER_DEAD:
            self.dead_begin = begin
            self.dead_end = end
        elif r == WRITER_ALIVE:
            self.holder_index = index
        return r

    cdef int set_frames(self, TopicNames topics) except -1:
        # Read this file as a framed bus (docs/design/frames.md) with these topic names and
        # filter.
        if self.record_size % FRAME_RECORD_ALIGN:
            raise ValueError(f"{self.path!r}: a framed bus has a record_size that is a "
                             f"multiple of 8, not {self.record_size}")
        self.frames = True
        self.topics = topics
        self.want = topics.filter
        return 0

    cdef int64_t frame_committed(self, int64_t pos) except -1:
        # The committed message at pos: its bytes (slots * slot) when delivered, minus them
        # when the filter passes it over. CorruptBusError for an impossible frame header.
        cdef char *rec = self.base + pos
        cdef int64_t n = frame_check(rec, pos, self.slot, self.file_size)
        cdef int32_t t
        if n == 0:
            self.pos = pos
            self.file.check_intact()
            raise CorruptBusError(f"{self.path!r}: the message at {pos} has an impossible "
                                  f"frame header (meta {frame_meta_load(rec):#x}): a corrupt "
                                  f"file, or not a framed bus")
        if self.want != NULL:
            t = frame_topic(rec)
            if self.want[t] != FRAME_TOPIC_WANTED:
                if self.want[t] == FRAME_TOPIC_UNKNOWN:
                    self.topics.learn(t)            # once per id
                if self.want[t] != FRAME_TOPIC_WANTED:
                    return -n * self.slot
        return n * self.slot

    cdef int64_t frame_give_up(self, int64_t pos) except -1:
        # Roll back the uncommitted message at pos (its meta first: docs/design/frames.md):
        # its bytes to pass over, or 0 when the writer committed first (look again).
        cdef int64_t k = 1, n = 0
        cdef int64_t position = self.position_base + pos
        if self.dead_begin == position and self.dead_end > position:
            k = min((self.dead_end - self.dead_begin) // self.slot,
                    frame_slots_left(pos, self.last, self.slot))
        if frame_roll_back(self.base + pos, k, &n) == 0:
            return n * self.slot
        return 0

    cdef int32_t length(self, int64_t rec) except -1:
        # Record rec's stored payload length (a byte-array record), checked.
        cdef int32_t n = scan_meta(self, rec)
        if n < 0 or n > self.record_size:
            self.file.check_intact()
            raise CorruptBusError(f"{self.path!r}: record at {rec} stores length {n}, "
                                  f"outside 0..{self.record_size}")
        return n
