# cython: language_level=3
cimport cython
from libc.stdint cimport int32_t, int64_t

from ._mapping cimport MappedFile
from ._record cimport Record
from ._wake cimport WakeFile, wake_backoff
from ._wakefd cimport WakeFd
from ._consumers cimport ConsumerRegistry
from ._writers cimport WritersFile


# What _next_code, _poll_code and _read_into_code return at the end of the file (no record
# fits past the position), where _next and _read_into raise BusFullError; else 1 (a
# record is current) or 0 (none yet).
cdef enum:
    END = 2


cdef class MappedBusReader:
    cdef MappedFile _file      # the mapping; None until open()
    cdef char *_base           # _file.base, cached for the hot path; NULL when closed
    cdef int *_dead            # &_file.dead (set by the SIGBUS guard), or a constant 0
    cdef readonly object path
    """The bus file's path."""
    cdef readonly int64_t file_size
    """The bus's logical size in bytes: no record ends past it."""
    cdef readonly int32_t record_size
    """Payload bytes per record (not stored in the file; ``PATH.meta`` records it)."""
    cdef readonly bint read_only
    """True: this reader never writes; it passes over a stalled slot after ``timeout``
    without rolling it back."""
    cdef int64_t _slot         # header + record_size
    cdef int64_t _last         # the last offset a record may start at
    cdef bint _aligned         # statuses are 4-byte aligned (record_size % 4 == 0)
    cdef int64_t _pos          # the next slot to look at
    cdef int64_t _cur          # the current record (next() returned True for it), or -1
    cdef int64_t _limit_seen   # the last limit loaded: slots below it are allocated, so the
                               # shared limit line is only re-read once the reader catches up
    cdef int64_t _initial_limit  # the limit at open(), for has_recovered()
    cdef bint _delivered       # a record since the last empty poll: the next one pauses first
    cdef unsigned int _idle    # empty polls: the limit is read on one in 16 of them
    cdef bint _path_check_due  # an empty poll asks for the file's look (it is due)
    cdef int64_t _next_look    # monotonic ns when the file's next look is due
    cdef int64_t _timeout_ns   # how long a slot may stay uncommitted before rollback
    cdef int64_t _wait_pos     # the uncommitted slot being timed, or -1
    cdef int64_t _wait_start   # monotonic ns when this reader saw the stall begin
    cdef int64_t _wait_limit   # the limit known then: slots below it were allocated by
                               # _wait_start, so a crashed batch costs one timeout, not N
    cdef int64_t _wait_seen    # monotonic ns of the last look at the stalled slot
    cdef bint _wait_start_new  # _wait_pos moved to another slot since _stalled last ran
    cdef object _writers_path  # the bus's writers file, asked who holds a stalled slot
    cdef WritersFile _writers  # it, opened at the first stall that asks; None until then
    cdef int64_t _position_base  # the bus position of this file's offset 0 (a rolling
                               # bus's segment: index * segment_size; else 0)
    cdef int64_t _ask_due      # monotonic ns when the stalled slot's writer is asked (again)
    cdef int _holder           # what it said last: WRITER_ALIVE, WRITER_DEAD, WRITER_UNKNOWN
    cdef int _holder_index     # the live holder's slot in the writers file (for its pid)
    cdef int64_t _dead_begin   # the last dead writer's claim [begin, end), in positions:
    cdef int64_t _dead_end     # its slots are rolled back without asking again
    cdef bint _stall_bounded   # stall_limit given: a live writer's stall raises after it
    cdef int64_t _stall_limit_ns
    cdef object _start         # where open() puts the reader: None, "end" or a position
    cdef bint _prefault        # map every page at open (MAP_POPULATE)
    cdef bint _allow_foreign   # accept a file of another owner, or group/other-writable
    cdef double _lock_timeout  # seconds to wait for the open lock
    cdef bint _segment         # a rolling bus's segment: exists already, no sidecar
                               # metadata, may be unlinked by retention while mapped
    cdef WakeFile _wake        # the bus's wake file to park on; None: no parking
    cdef bint _own_wake        # this reader opened _wake (a rolling reader shares its own)
    cdef int _idle_mode        # IDLE_BUSY_SPIN, IDLE_SPIN_PARK or IDLE_PARK
    cdef readonly object idle  # its name: "busy_spin", "spin_park" or "park"
    """How this reader waits when there is nothing to read: "busy_spin", "spin_park" or
    "park"."""
    cdef int64_t _spin_ns      # spin_park: how long to spin before parking
    cdef int64_t _park_ns      # a parked reader looks by itself after this long at first,
    cdef int64_t _park_max_ns  # backing off to this while its looks find nothing
    cdef wake_backoff _backoff # the next park's bound (_wake.h)
    cdef WakeFd _fd            # fileno()'s watcher thread and eventfd; None until asked
    cdef readonly object consumer
    """The name this reader holds in the bus's consumer registry, or None."""
    cdef ConsumerRegistry _creg  # the registry while a consumer is held; None otherwise
    cdef char *_centry         # the held entry in _creg's mapping; NULL: no consumer
    cdef int _cindex           # its index
    cdef int *_cdead           # _creg's truncation flag and the fork counter, checked
    cdef int *_cfork           # by commit() before its store
    cdef int64_t *_cclock      # the commits' clock (_consumers_clock.h)
    cdef int _cgen             # the fork counter when the entry was claimed
    cdef readonly int64_t rollbacks
    """Slots this reader rolled back (compare-and-swap of status 0 -> 2): their writer
    stalled past ``timeout`` between allocating and committing."""
    cdef readonly int64_t skipped
    """Records lost: rolled-back or timed-out slots this reader passed over."""

    cdef int _truncated(self) except -1
    cdef int _check_limit_now(self, int64_t limit) except -1
    # final: called directly (inlinable), not through the vtable, on every read
    @cython.final
    cdef int _next(self) except -1
    @cython.final
    cdef int _next_code(self) except -1
    @cython.final
    cdef int _poll_code(self) except -1
    @cython.final
    cdef int _read_into_code(self, object message) except -1
    cdef int _raise_end(self) except -1
    cdef int _check_replaced(self) except -1
    cdef int _check_file(self) except -1
    cdef int _look_if_due(self) except -1
    cdef int _park(self, int64_t ns) except -1
    cdef bint _timed_out(self, int64_t pos) except -1
    cdef int _stalled(self, int64_t pos) except -1
    cdef int _ask_writers(self, int64_t position) except -1
    cdef int _wait(self, object timeout) except -1
    cdef int64_t _current(self) except -1
    cdef int32_t _meta(self, int64_t rec) noexcept
    cdef int32_t _length(self, int64_t rec) except -1
    cdef int64_t _end_boundary(self)
    cdef Record _record(self)
    cdef MappedFile _open_mapping(self)
    cdef _place(self, MappedFile f)
    cdef int _commit_refused(self) except -1
    cdef bint _read_into(self, object message) except -1
