# cython: language_level=3
# Declarations of _liveness.h: liveness kept by the kernel (OFD locks on a slot's byte).
from libc.stdint cimport int64_t

cdef extern from "_liveness.h" nogil:
    int LIVE_TAKEN
    int LIVE_BUSY
    int LIVE_DEAD
    int LIVE_ALIVE
    int LIVE_ERROR
    int live_hold(int fd, int64_t byte)
    int live_release(int fd, int64_t byte)
    int live_probe(int fd, int64_t byte)
