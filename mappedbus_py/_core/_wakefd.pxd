# cython: language_level=3
from libc.stdint cimport int64_t

from ._wake cimport WakeFile

cdef extern from "_wakefd.h" nogil:
    int WAKEFD_KIND_RING
    int WAKEFD_KIND_THREAD
    ctypedef struct wakefd:
        int kind
    int wakefd_start(wakefd *f, char *w, int slot, int64_t park_ns, int64_t park_max_ns,
                     int kind)
    int wakefd_fileno(const wakefd *f)
    int wakefd_arm(wakefd *f, const char *watch, int aligned, int64_t within_ns)
    void wakefd_disarm(wakefd *f)
    void wakefd_drain(wakefd *f)
    void wakefd_stop(wakefd *f)


cdef class WakeFd:
    cdef wakefd _f             # the ring, or the watcher thread and its eventfd
    cdef WakeFile _wake        # keeps the wake file mapped while the fd may wait on it
    cdef int _slot             # the descriptor's own parking slot, or -1
    cdef object _live          # the LiveFile holding _slot's liveness byte
    cdef int _pid              # the process that made it
    cdef bint _running

    cdef int arm(self, const char *watch, bint aligned, int64_t within_ns) except -1
    cdef disarm(self)
