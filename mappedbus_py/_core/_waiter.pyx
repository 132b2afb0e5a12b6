# cython: language_level=3, embedsignature=True
"""How a reader waits for its next record (Java: Waiter): spin, then park on the bus's wake
file until a writer wakes it or the park bound passes (backing off while its looks find
nothing), looking at its file every ``FILE_CHECK`` seconds meanwhile; and the descriptor an
event loop waits on instead (``fileno``, armed on the slot the reader looks at next)."""
import warnings

from libc.stdint cimport int64_t, uint32_t
from posix.time cimport timespec, nanosleep

from ._atomic cimport cpu_relax
from ._clock cimport monotonic_ns
from ._slotscan cimport SlotScan, scan_next_raising, FILE_CHECK_NS
from ._wake cimport (WakeFile, wake_wait, wake_seq, wake_needed, wake_backoff_init,
                    wake_backoff_after)
from ._wakefd cimport WakeFd

from ._checks import IDLE_STRATEGIES, check_idle as _check_idle, check_timeout as _check_timeout
from ..formats.layout import WAKE_SUFFIX

cdef extern from "Python.h":
    int PyErr_CheckSignals() except -1

cdef double MAX_WAIT_S = 2.0**62 / 1e9


cdef class Waiter:
    """A reader's idle strategy and its wake file (internal: MappedBusReader holds one).
    ``wake``: a wake file to share (a rolling reader's); else ``open_wake`` opens the bus's."""

    def __cinit__(self, idle, spin, park, park_max, WakeFile wake=None):
        _check_idle(idle, spin, park, park_max)
        self.idle = idle
        self.mode = IDLE_STRATEGIES.index(idle)
        self.spin_ns = <int64_t>(spin * 1e9)
        self.park_ns = <int64_t>(park * 1e9)
        self.park_max_ns = <int64_t>(park_max * 1e9)
        wake_backoff_init(&self.backoff, self.park_ns, self.park_max_ns)
        self.wake = wake
        self.own_wake = False
        self.fd = None

    cdef int open_wake(self, object path, bint allow_foreign) except -1:
        # The wake file beside the bus at path, made by the first reader or writer that needs
        # it, unless this waiter has one or never parks. A reader that may not make or write
        # it still waits, polling every park_ns.
        if self.wake is not None or self.mode == IDLE_BUSY_SPIN:
            return 0
        try:
            self.wake = WakeFile(path + WAKE_SUFFIX, allow_foreign=allow_foreign)
            self.own_wake = True
        except OSError as e:
            warnings.warn(f"{path!r}: no wake file ({e}): this reader polls every "
                          f"{self.park_ns / 1e6:g} ms when idle instead of being woken",
                          RuntimeWarning, stacklevel=3)
            self.wake = None
        return 0

    cdef int close(self) except -1:
        if self.fd is not None:
            self.fd.close()         # its thread may read the mapping: stopped first
            self.fd = None
        if self.own_wake and self.wake is not None:
            self.wake.close()
            self.wake = None
            self.own_wake = False
        return 0

    cdef int wait(self, SlotScan s, object timeout) except -1:
        # After an empty poll of s: 1 when a record became current, 0 when ``timeout``
        # seconds (None: no limit) passed first.
        cdef int64_t deadline = -1
        cdef int64_t now, spin_end, ns, next_check
        cdef long spins = 0
        cdef int k
        if timeout is not None:
            _check_timeout(timeout)
            if timeout <= 0:
                return s.look_if_due()
        now = monotonic_ns()
        if timeout is not None and timeout < MAX_WAIT_S:
            deadline = now + <int64_t>(timeout * 1e9)
        next_check = now + FILE_CHECK_NS
        if self.mode != IDLE_PARK:
            spin_end = now + self.spin_ns
            while True:
                for k in range(64):
                    if scan_next_raising(s):
                        return 1
                    cpu_relax()
                spins += 1
                now = monotonic_ns()
                if deadline >= 0 and now >= deadline:
                    return 0
                if (spins & 255) == 0:
                    PyErr_CheckSignals()
                if self.mode == IDLE_SPIN_PARK:
                    if now >= spin_end:
                        break
                elif now >= next_check:
                    next_check = now + FILE_CHECK_NS
                    if s.check_file():
                        return 1
        while True:
            ns = self.backoff.cur_ns
            if deadline >= 0:
                if now >= deadline:
                    return 0
                ns = min(ns, deadline - now)
            if self.park(s, ns):
                return 1
            PyErr_CheckSignals()
            now = monotonic_ns()
            if now >= next_check:
                next_check = now + FILE_CHECK_NS
                if s.check_file():
                    return 1

    cdef int park(self, SlotScan s, int64_t ns) except -1:
        # Park on the wake file for at most ns, then look: 1 if a record became current.
        # The registration comes before the first look: a commit after that look wakes us.
        cdef timespec ts
        cdef uint32_t v
        cdef char *w
        cdef int found
        if self.wake is None or self.wake.base == NULL:
            ts.tv_sec = ns // 1000000000
            ts.tv_nsec = ns % 1000000000
            with nogil:
                nanosleep(&ts, NULL)
            found = scan_next_raising(s)
            wake_backoff_after(&self.backoff, 0, found, monotonic_ns())
            return found
        w = self.wake.base
        v = self.wake.prepare()
        try:
            if scan_next_raising(s):
                return 1
            with nogil:
                wake_wait(w, v, ns)
        finally:
            self.wake.done()
        found = scan_next_raising(s)
        # Announced: seq moved, or a writer took the arming (its bump may precede v).
        wake_backoff_after(&self.backoff, wake_seq(w) != v or not wake_needed(w), found,
                           monotonic_ns())
        return found

    cdef int fileno(self, object path) except -1:
        # The event loops' descriptor, made at the first call (see MappedBusReader.fileno).
        if self.wake is None:
            raise OSError(f"{path!r}: this reader has no wake file (idle={self.idle!r}, "
                          f"or it could not be made): no descriptor to wait on")
        if self.fd is None:
            self.fd = WakeFd(self.wake, self.park_ns, self.park_max_ns)
        return self.fd.fileno()

    cdef bint arm_fd(self, WakeFd fd, SlotScan s, object within) except -1:
        # Arm ``fd`` on the slot s looks at next (past the last slot, on any wake: a rolling
        # reader waiting for the next segment). True if a record may be there now.
        cdef char *watch = NULL
        cdef int64_t within_ns = 0
        if within is not None:
            _check_timeout(within, "within")
            # at least 1 us (0 means no bound down there); a day at most (it only bounds a wait)
            within_ns = max(1000, <int64_t>(min(within, 86400.0) * 1e9))
        if s.pos <= s.last:
            watch = s.base + s.pos
        elif not s.segment:
            return True            # the end of a single-file bus: read() raises it
        return fd.arm(watch, s.aligned, within_ns) == 1
