# cython: language_level=3
# The reader's walk over the slots of one bus file (Java: SlotScan).
from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy

from ._layout cimport METADATA_OFFSET

from ._atomic cimport status_load_acquire
from ._guard cimport guard_is_dead
from ._mapping cimport MappedFile
from ._writers cimport WritersFile
from ._frames cimport TopicNames


# What scan_next (and SlotScan.poll) return at the end of the file (no record fits past the
# position), where scan_next_raising and the reader's _next raise BusFullError; else 1 (a
# record is current) or 0 (none yet).
cdef enum:
    END = 2

# A reader that waits or polls looks at its file (removed, replaced, truncated: one
# lstat) at least this often: a blocking wait by itself; a poller (next(), read(0),
# read_async) at its first empty poll once this much time passed since the last look.
cdef enum:
    FILE_CHECK_NS = 10000000


cdef class SlotScan:
    cdef MappedFile file       # the mapping; None until opened
    cdef char *base            # file.base, cached for the hot path; NULL when closed
    cdef int *dead             # &file.dead (set by the SIGBUS guard), or a constant 0
    cdef object path           # the bus file's path (for messages)
    cdef int64_t file_size     # the bus's logical size
    cdef int32_t record_size   # payload bytes per record
    cdef int64_t slot          # header + record_size
    cdef int64_t last          # the last offset a record may start at
    cdef bint aligned          # statuses are 4-byte aligned (record_size % 4 == 0)
    cdef bint read_only        # never writes: passes over a stalled slot without rollback
    cdef bint segment          # a rolling bus's segment (retention may unlink it)
    cdef bint allow_foreign    # the writers file may be another owner's
    cdef int64_t pos           # the next slot to look at
    cdef int64_t cur           # the current record (the last step returned 1 for it), or -1
    cdef int64_t limit_seen    # the last limit loaded: slots below it are allocated, so the
                               # shared limit line is only re-read once the scan catches up
    cdef bint delivered        # a record since the last empty poll: the next one pauses first
    cdef unsigned int idle     # empty polls: the limit is read on one in 16 of them
    cdef bint path_check_due   # an empty poll asks for the file's look (it is due)
    cdef int64_t next_look     # monotonic (coarse) ns when the file's next look is due
    cdef int64_t timeout_ns    # how long a slot may stay uncommitted before rollback
    cdef int64_t wait_pos      # the uncommitted slot being timed, or -1
    cdef int64_t wait_start    # monotonic ns when this reader saw the stall begin
    cdef int64_t wait_limit    # the limit known then: slots below it were allocated by
                               # wait_start, so a crashed batch costs one timeout, not N
    cdef int64_t wait_seen     # monotonic ns of the last look at the stalled slot
    cdef bint wait_start_new   # wait_pos moved to another slot since stalled() last ran
    cdef object writers_path   # the bus's writers file, asked who holds a stalled slot
    cdef WritersFile writers   # it, opened at the first stall that asks; None until then
    cdef int64_t position_base # the bus position of this file's offset 0 (a rolling
                               # bus's segment: index * segment_size; else 0)
    cdef int64_t ask_due       # monotonic ns when the stalled slot's writer is asked (again)
    cdef int holder            # what it said last: WRITER_ALIVE, WRITER_DEAD, WRITER_UNKNOWN
    cdef int holder_index      # the live holder's slot in the writers file (for its pid)
    cdef int64_t dead_begin    # the last dead writer's claim [begin, end), in positions:
    cdef int64_t dead_end      # its slots are rolled back without asking again
    cdef bint stall_bounded    # a stall limit given: a live writer's stall raises after it
    cdef int64_t stall_limit_ns
    cdef bint frames           # a framed bus: messages over consecutive slots (_frames.h)
    cdef TopicNames topics     # framed: the topic names and the filter; None until set
    cdef unsigned char *want   # framed with a filter: its byte per topic id; NULL: none
    cdef int64_t rollbacks     # slots this scan rolled back (CAS of status 0 -> 2)
    cdef int64_t skipped       # records lost: rolled-back or timed-out slots passed over

    cdef int opened(self, MappedFile f, int64_t limit) except -1
    cdef int closed(self) except -1
    cdef int move_to(self, int64_t pos) except -1
    cdef int64_t end_boundary(self)
    cdef int poll(self) except -1
    cdef int truncated(self) except -1
    cdef int check_limit_now(self, int64_t limit) except -1
    cdef int raise_end(self) except -1
    cdef int check_replaced(self) except -1
    cdef int check_file(self) except -1
    cdef int look_if_due(self) except -1
    cdef bint timed_out(self, int64_t pos) except -1
    cdef int stalled(self, int64_t pos) except -1
    cdef int ask_writers(self, int64_t position) except -1
    cdef int32_t length(self, int64_t rec) except -1
    cdef int set_frames(self, TopicNames topics) except -1
    cdef int64_t frame_committed(self, int64_t pos) except -1
    cdef int64_t frame_give_up(self, int64_t pos) except -1


cdef inline int scan_next(SlotScan s) except -1:
    # The per-record step of every reader (the single file's, a rolling bus's segment's, a
    # work group member's): 1 when a committed record became current (s.cur), 0 when none
    # is ready yet, END past the last slot. The common case, the next slot committed, is
    # taken here, inline in the caller; everything else (rolled-back slots, the limit, a
    # stall, the end, a closed or truncated mapping) is s.poll()'s. After it, the dead mark
    # once more (a poll that touched a page past the file's new end read the guard's zeros,
    # which must not pass for "nothing new"), and on an empty poll the file's look if due.
    cdef int64_t pos = s.pos
    cdef int found
    if s.base != NULL and pos <= s.last and not s.frames and not guard_is_dead(s.dead) \
            and status_load_acquire(s.base + pos, s.aligned) == 1:
        s.cur = pos
        s.pos = pos + s.slot
        s.wait_pos = -1         # a commit stops the stall clock
        s.delivered = True
        found = 1
    else:
        found = s.poll()
    if guard_is_dead(s.dead):
        s.truncated()
    if s.path_check_due and not found:
        s.path_check_due = False
        found = s.check_file()
    return found


cdef inline int scan_next_raising(SlotScan s) except -1:
    # scan_next with the end of the file raised (BusFullError): 1 or 0.
    cdef int found = scan_next(s)
    if found == END:
        s.raise_end()
    return found


cdef inline int32_t scan_meta(SlotScan s, int64_t rec) noexcept:
    # Record rec's metadata field (its type id, or its payload's length).
    cdef int32_t meta
    memcpy(&meta, s.base + rec + METADATA_OFFSET, 4)
    return meta
