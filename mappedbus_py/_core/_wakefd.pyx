# cython: language_level=3, embedsignature=True
"""A reader's file descriptor for event loops: readable when a record may be there."""
import enum
import os

from ._wake cimport WakeFile

#: Set to "thread" to make every new descriptor a relay thread's eventfd (the fallback),
#: even where the kernel offers io_uring's FUTEX_WAIT; "ring" (the default) tries that first.
KIND_ENV = "MAPPEDBUS_PY_WAKEFD"


class WakeFdKind(enum.Enum):
    """What a reader's ``fileno()`` is."""
    #: an io_uring whose FUTEX_WAIT a writer's wake completes: one wake-up a record
    RING = "ring"
    #: an eventfd a thread of the reader's process writes once a writer woke it
    THREAD = "thread"


def _kind_from_env():
    value = os.environ.get(KIND_ENV, "ring")
    try:
        return WakeFdKind(value)
    except ValueError:
        raise ValueError(f"{KIND_ENV}={value!r}: expected 'ring' or 'thread'") from None


cdef class WakeFd:
    """WakeFd(wake, park_ns, park_max_ns, kind=None)

    A descriptor readable when a writer wakes the readers parked on ``wake`` (a WakeFile),
    or when the self-look's bound (``park_ns`` doubling to ``park_max_ns``) passes: an
    io_uring (``WakeFdKind.RING``) where the kernel runs FUTEX_WAIT in one, else an eventfd
    and a thread (``WakeFdKind.THREAD``). ``kind``: what to try first (None: the
    MAPPEDBUS_PY_WAKEFD environment variable, else RING). ``arm(watch, within)`` before a
    wait, ``fileno()`` for the event loop."""

    def __cinit__(self, WakeFile wake, int64_t park_ns, int64_t park_max_ns, kind=None):
        self._slot = -1
        self._running = False
        if wake is None or wake.base == NULL:
            raise ValueError("WakeFd needs an open WakeFile")
        want = _kind_from_env() if kind is None else WakeFdKind(kind)
        self._wake = wake
        self._pid = os.getpid()
        self._live = wake.open_live()      # the slot's liveness, a description of its own
        self._slot = wake.hold_slot(self._live)
        if self._slot < 0:
            self._live.close()
            raise OverflowError(f"{wake.path!r}: all parking slots are taken")
        cdef int ckind = WAKEFD_KIND_RING if want is WakeFdKind.RING else WAKEFD_KIND_THREAD
        cdef int rc = wakefd_start(&self._f, wake.base, self._slot, park_ns, park_max_ns, ckind)
        if rc != 0:
            wake.let_go_slot(self._live, self._slot)
            self._live.close()
            self._slot = -1
            raise OSError(rc, f"cannot start the wake-up thread: {os.strerror(rc)}")
        self._running = True

    @property
    def kind(self):
        """The ``WakeFdKind`` this descriptor is."""
        return WakeFdKind.RING if self._f.kind == WAKEFD_KIND_RING else WakeFdKind.THREAD

    def fileno(self):
        """The descriptor: readable once a record may be there (after ``arm``)."""
        if not self._running:
            raise ValueError("the reader's wake-up descriptor is closed")
        return wakefd_fileno(&self._f)

    cdef int arm(self, const char *watch, bint aligned, int64_t within_ns) except -1:
        # 0: armed; 1: a record may be there now (not armed). Clears the readiness;
        # within_ns > 0: readable after that long at the latest.
        if not self._running:
            raise ValueError("the reader's wake-up descriptor is closed")
        cdef int rc = wakefd_arm(&self._f, watch, aligned, within_ns)
        if rc < 0:
            raise OSError(-rc, f"cannot arm the reader's wake-up descriptor: {os.strerror(-rc)}")
        return rc

    cdef disarm(self):
        if self._running:
            with nogil:
                wakefd_disarm(&self._f)

    def stop_watching(self):
        """Disarm and clear the readiness: once this returns, nothing reads the watched slot
        (its mapping may be closed)."""
        self.disarm()

    def drain(self):
        """Consume the readiness: the descriptor is not readable until it fires again."""
        if self._running:
            wakefd_drain(&self._f)

    def close(self):
        """Stop the thread or the ring, close the descriptor, free the slot."""
        if not self._running:
            return
        self._running = False
        if self._pid != os.getpid():
            return          # a forked child: the thread, ring and slot are the parent's
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
