# cython: language_level=3
# How a reader waits for its next record (Java: Waiter).
from libc.stdint cimport int64_t

from ._slotscan cimport SlotScan
from ._wake cimport WakeFile, wake_backoff
from ._wakefd cimport WakeFd


# The idle strategies, as _checks.IDLE_STRATEGIES names them (its index).
cdef enum:
    IDLE_BUSY_SPIN = 0
    IDLE_SPIN_PARK = 1
    IDLE_PARK = 2


cdef class Waiter:
    cdef int mode              # IDLE_BUSY_SPIN, IDLE_SPIN_PARK or IDLE_PARK
    cdef object idle           # its name: "busy_spin", "spin_park" or "park"
    cdef int64_t spin_ns       # spin_park: how long to spin before parking
    cdef int64_t park_ns       # a parked reader looks by itself after this long at first,
    cdef int64_t park_max_ns   # backing off to this while its looks find nothing
    cdef wake_backoff backoff  # the next park's bound (_wake.h)
    cdef WakeFile wake         # the bus's wake file to park on; None: no parking
    cdef bint own_wake         # this waiter opened wake (a rolling reader shares its own)
    cdef WakeFd fd             # fileno()'s watcher thread and eventfd; None until asked

    cdef int wait(self, SlotScan s, object timeout) except -1
    cdef int park(self, SlotScan s, int64_t ns) except -1
    cdef int open_wake(self, object path, bint allow_foreign) except -1
    cdef int fileno(self, object path) except -1
    cdef bint arm_fd(self, WakeFd fd, SlotScan s, object within) except -1
    cdef int close(self) except -1
