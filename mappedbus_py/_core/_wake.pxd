# cython: language_level=3
from libc.stdint cimport int32_t, int64_t, uint32_t

from ._mapping cimport MappedFile

cdef extern from "_wake.h" nogil:
    int WAKE_FILE_SIZE
    int wake_init(char *w)
    int64_t wake_slot_byte(int i)
    int wake_reclaim(char *w, int fd, int parked_only)
    int wake_claim(char *w, int fd, int pid)
    void wake_release(char *w, int fd, int i)
    uint32_t wake_prepare(char *w, int i)
    uint32_t wake_arm(char *w)
    uint32_t wake_seq(const char *w)
    void wake_wait(char *w, uint32_t v, int64_t ns)
    void wake_done(char *w, int i)
    int wake_needed(const char *w)
    int wake_all(char *w)
    int wake_bump(char *w)
    int64_t wake_now_ns()
    ctypedef struct wake_backoff:
        int64_t min_ns
        int64_t max_ns
        int64_t cur_ns
    void wake_backoff_init(wake_backoff *b, int64_t min_ns, int64_t max_ns)
    void wake_backoff_after(wake_backoff *b, int woken, int found, int64_t now)


cdef class WakeFile:
    cdef MappedFile _file      # the wake file's mapping; None once closed
    cdef char *base            # _file.base: the wake words; NULL once closed
    cdef readonly object path
    cdef int _slot             # this object's parking slot, claimed at the first park; -1
    cdef int _pid              # the pid that claimed it (a forked child claims its own)
    cdef object _live          # LiveFile holding _slot's liveness byte; None without a slot
    cdef int _futile           # wakes in a row that woke nobody (dead parkers?)
    cdef int64_t _reclaimed_ns # when this parker last looked for dead parkers
    cdef int64_t _claim_failed_ns  # when it last found no slot (it retries a second later)

    cdef int claim(self) except -2
    cdef object open_live(self)
    cdef int hold_slot(self, object live) except -2
    cdef void let_go_slot(self, object live, int i) noexcept
    cdef int reclaim_dead(self, bint parked_only) except -2
    cdef uint32_t prepare(self) except? 0xFFFFFFFF
    cdef void done(self) noexcept
    cdef int wake(self) except -1
