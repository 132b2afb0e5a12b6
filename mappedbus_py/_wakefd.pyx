# cython: language_level=3, embedsignature=True
"""A reader's file descriptor for event loops: readable when a record may be there."""
import os

from ._wake cimport WakeFile


cdef class WakeFd:
    """WakeFd(wake, park_ns, park_max_ns)

    An eventfd and a thread parked on ``wake`` (a WakeFile) for a reader: ``arm(watch)``
    before a wait, ``fileno()`` for the event loop, ``drain()`` once it was readable."""

    def __cinit__(self, WakeFile wake, int64_t park_ns, int64_t park_max_ns):
        self._slot = -1
        self._running = False
        if wake is None or wake.base == NULL:
            raise ValueError("WakeFd needs an open WakeFile")
        self._wake = wake
        self._pid = os.getpid()
        self._live = wake.open_live()      # the slot's liveness, a description of its own
        self._slot = wake.hold_slot(self._live)
        if self._slot < 0:
            self._live.close()
            raise OverflowError(f"{wake.path!r}: all parking slots are taken")
        cdef int rc = wakefd_start(&self._f, wake.base, self._slot, park_ns, park_max_ns)
        if rc != 0:
            wake.let_go_slot(self._live, self._slot)
            self._live.close()
            self._slot = -1
            raise OSError(rc, f"cannot start the wake-up thread: {os.strerror(rc)}")
        self._running = True

    def fileno(self):
        """The eventfd: readable once a record may be there (after ``arm``)."""
        if not self._running:
            raise ValueError("the reader's wake-up descriptor is closed")
        return self._f.efd

    cdef int arm(self, const char *watch, bint aligned) except -1:
        # 0: armed; 1: a record may be there now (not armed).
        if not self._running:
            raise ValueError("the reader's wake-up descriptor is closed")
        return wakefd_arm(&self._f, watch, aligned)

    cdef disarm(self):
        if self._running:
            with nogil:
                wakefd_disarm(&self._f)

    def stop_watching(self):
        """Disarm: once this returns, the thread no longer reads the watched slot (its
        mapping may be closed)."""
        self.disarm()

    def drain(self):
        """Consume the readiness: the descriptor is not readable until it fires again."""
        if self._running:
            wakefd_drain(&self._f)

    def close(self):
        """Stop the thread, close the descriptor, free the slot."""
        if not self._running:
            return
        self._running = False
        if self._pid != os.getpid():
            return          # a forked child: the thread and the slot are the parent's
        with nogil:
            wakefd_stop(&self._f)
        self._wake.let_go_slot(self._live, self._slot)
        self._live.close()
        self._slot = -1

    def __dealloc__(self):
        if self._running and self._pid == os.getpid():
            wakefd_stop(&self._f)
            if self._wake is not None and self._live is not None:
                self._wake.let_go_slot(self._live, self._slot)
