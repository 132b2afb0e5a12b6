# cython: language_level=3
# Declarations of _group.h (the work-group protocol) and the member's fields.
from libc.stdint cimport int32_t, int64_t, uint32_t

from mappedbus_py._core._reader cimport MappedBusReader
from mappedbus_py._core._record cimport Record


cdef extern from "_atomic.h" nogil:
    void store_release_i32(void *p, int32_t v)   # (not in _atomic.pxd): a member's in_flight


cdef extern from "_group.h" nogil:
    int GROUP_FULL
    int GROUP_CORRUPT
    int GROUP_NONE
    int GROUP_EMPTY
    int GROUP_ACQUIRED
    int GROUP_RELEASED
    int GROUP_ACKED
    int GROUP_DEAD
    int GROUP_SKIP
    int GROUP_START_OFFSET
    int GROUP_END_OFFSET
    int GROUP_HINT_OFFSET
    int GROUP_DEAD_LETTERED_OFFSET
    int GROUP_REJECTED_OFFSET
    int GROUP_ENTRY_POSITION_OFFSET
    int GROUP_MEMBER_IN_FLIGHT_OFFSET
    int GROUP_MEMBER_PID_OFFSET
    int GROUP_MEMBER_TAKEN_NS_OFFSET
    int GROUP_MEMBER_ACKED_OFFSET
    int GROUP_MEMBER_DELIVERED_OFFSET
    uint32_t group_tag(int64_t g, int shift)
    int64_t group_word(uint32_t tag, int state, int deliveries, int owner)
    uint32_t group_word_tag(int64_t w)
    int group_word_state(int64_t w)
    int group_word_deliveries(int64_t w)
    int group_word_owner(int64_t w)
    char *group_entry(char *base, int64_t g, int64_t window)
    char *group_member_slot(char *base, int index)
    int64_t group_member_byte(int index)
    int64_t group_next_new(char *base, int64_t window, int shift)
    int64_t group_take_new(char *base, int64_t window, int shift, int64_t g, int owner,
                           int64_t lease_deadline, int64_t position)
    void group_skip(char *base, int64_t window, int shift, int64_t g)
    int64_t group_advance(char *base, int64_t window, int shift)
    int group_finish(char *base, int64_t window, int64_t g, int64_t acquired, int state)
    int64_t group_redeliver(char *base, int64_t window, int64_t g, int64_t seen, int owner,
                            int64_t lease_deadline)
    int64_t group_find_redelivery(char *base, int64_t window, int shift, int64_t now, int me,
                                  int live_fd, int64_t *seen)
    int64_t group_release_owner(char *base, int64_t window, int shift, int owner)


cdef extern from "_group_frames.h" nogil:
    int GROUP_ASK
    int64_t group_f_next_new(char *base, int64_t window, int shift, int64_t *seen, int64_t *ask)
    int64_t group_f_take_new(char *base, int64_t window, int shift, int64_t g, int64_t seen,
                             int64_t n, int owner, int64_t lease_deadline, int64_t position)
    void group_f_skip(char *base, int64_t window, int shift, int64_t g, int64_t seen, int64_t n)
    int64_t group_f_advance(char *base, int64_t window, int shift, int64_t *ask)
    void group_f_pass_end(char *base, int64_t g, int64_t n)
    void group_f_pass_start(char *base, int64_t s, int64_t n)


cdef class GroupRecord(Record):
    cdef readonly int deliveries
    """How many times this record was handed out, this delivery included (1: the first)."""
    cdef int64_t _g            # its global slot index
    cdef int64_t _word         # the entry word this delivery acquired (ack CASes from it)


cdef class GroupReader:
    cdef object _mm            # the group file's mmap (keeps _base valid)
    cdef char *_base           # the group file's mapping; NULL when closed
    cdef int64_t _window       # entries in the group file (a power of two)
    cdef int _shift            # log2(_window): tag(g) = g >> _shift
    cdef object _live          # LiveFile: this member's own description of the group file
    cdef int _live_fd          # its descriptor (probes of other members' slots go through it)
    cdef int _gen              # the module's fork counter when made: a forked child's differs
    cdef readonly int member
    """This member's slot in the group (0..127)."""
    cdef char *_mslot          # its slot in the mapping
    cdef int64_t _lease_ns     # the group's lease
    cdef int _max_deliveries   # deliveries before a record goes to the dead-letter bus
    cdef int _max_in_flight    # records a member may hold unacked
    cdef int _in_flight        # records this member holds (acquired, not yet finished)
    cdef int64_t *_words       # per entry: the word this member last acquired there, or 0
    cdef int64_t _delivered    # this slot's counters (published to the member slot)
    cdef int64_t _acked
    cdef int64_t _hint_seen    # the group's release hint when last looked at
    cdef unsigned int _count   # acquisitions: the clock is read for a scan every 1024
    cdef int64_t _next_scan    # monotonic ns of the next look for redeliveries
    # the bus
    cdef bint _rolling         # a rolling bus (segments), else a single file
    cdef MappedBusReader _r    # the reader of the segment (or file) holding _k's records
    cdef int64_t _k            # that segment's index (0 for a single file)
    cdef int64_t _sps          # slots per segment (a single file: all of them)
    cdef int64_t _slot         # header + record_size
    cdef int64_t _segment_size # a rolling bus's segment size (positions), else 0
    cdef readonly int32_t record_size
    """Payload bytes per record."""
    cdef object _reader_kw     # options of the segment readers
    cdef object _bus_id        # a rolling bus's id (hex), from its bus.meta at the open
    cdef bint _framed          # a framed bus: a message (its first slot) is the unit
                               # (_group_frames.h)
    cdef object _names         # framed: the bus's TopicNames (shared by segment readers)
    # the current record (the last acquired)
    cdef int64_t _cur_g        # its g, or -1
    cdef int64_t _cur_word     # the word acquired
    cdef int64_t _cur_off      # its offset in _r's mapping
    cdef readonly object path
    """The bus's path."""
    cdef readonly object group
    """The group's name."""
    cdef readonly object group_path
    """The group file's path."""
    cdef object _dead_path     # the dead-letter bus's directory
    cdef object _dead          # its RollingBusWriter, opened at the first dead letter
    cdef bytes _name_bytes     # the group name, for dead letters
    cdef object _creg          # a rolling bus's consumer registry (the group's retention
                               # entry, group:NAME); None for a single file
    cdef int _creg_i           # that entry's index
    cdef object _creg_name     # its name
    cdef int64_t _creg_start   # the group start last committed there (by this member)
    cdef int64_t _creg_next    # coarse ns before which no other commit is made

    cdef int _acquire(self) except -1
    cdef int _acquire_new(self) except -1
    cdef int _redeliver(self, int64_t now) except -1
    cdef int _select(self, int64_t g) except -1
    cdef int _took(self, int64_t g, int64_t word) except -1
    cdef int _wait(self, object timeout) except -1
    cdef int _finish(self, int64_t g, int64_t word, int state) except -1
    cdef int _dead_letter(self, int64_t g, int64_t word, int counter) except -1
    cdef int _hold(self, int64_t start, bint now) except -1
    cdef int64_t _advance(self) except -1
    cdef int64_t _bus_slots(self, int64_t g) except -1
    cdef int _pass_skipped(self) except -1
    cdef int _skip_passed(self, int64_t g, int64_t seen, int64_t off, int64_t stop) except -1
    cdef int _acquire_new_framed(self) except -1
    cdef int64_t _g_of(self, rec) except -2
    cdef int64_t _word_of(self, rec, int64_t g)
    cdef int64_t _position(self, int64_t g)
    cdef GroupRecord _record(self)
