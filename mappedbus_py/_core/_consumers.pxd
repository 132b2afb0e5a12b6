# cython: language_level=3
from libc.stdint cimport int32_t, int64_t

from ._mapping cimport MappedFile

cdef extern from "_consumers.h" nogil:
    int CONSUMERS_FILE_SIZE
    char *consumer_entry(char *c, int i)
    void consumer_commit(char *e, int64_t position, int64_t now_ns)


cdef class ConsumerRegistry:
    cdef MappedFile _file      # the registry's mapping; None once closed
    cdef char *base            # _file.base; NULL once closed
    cdef readonly object path
    cdef int _pid              # the process that opened _live (a forked child opens its own)
    cdef object _live          # LiveFile: this object's own description, for its holds
                               # (the lock, claimed entries) and probes; None once closed
    cdef object _mutex         # threads sharing this object (and so _live) lock it first
    cdef bint _empty           # read-only look at a never-sized (all zero, short) file
    cdef readonly double lock_timeout

    cdef int _lock(self) except -1
    cdef void _unlock(self) noexcept
    cdef int _check(self) except -1
    cdef object _entry_fields(self, int i)
    cdef object _holder(self, int i, int32_t pid)
    cdef object _pid_of(self, int i)
    cdef int *dead_flag(self)
    cdef int *fork_flag(self)
    cdef int64_t *clock(self)
