# cython: language_level=3, embedsignature=True
"""The wake file beside a bus: readers park on it, writers wake them (see _wake.h)."""
import os

from ._mapping cimport MappedFile
from ..errors import CorruptBusError
from ..formats.layout import WAKE_FILE_SIZE as _LAYOUT_SIZE

cdef extern from "_wake.h" nogil:
    int WAKE_MAGIC_OFFSET, WAKE_VERSION_OFFSET, WAKE_PARKED_OFFSET, WAKE_ARMED_OFFSET, WAKE_SEQ_OFFSET
    int WAKE_SLOTS_OFFSET, WAKE_SLOT_SIZE, WAKE_SLOT_COUNT, WAKE_SLOT_PID_OFFSET
    int WAKE_SLOT_STATE_OFFSET, WAKE_SLOT_START_OFFSET, WAKE_VERSION, WAKE_FUTILE_RECLAIM
    long long WAKE_MAGIC

cdef extern from "_atomic.h" nogil:
    int32_t load_seq_cst_i32(const void *p)

#: The header's constants as compiled, for the test that checks them against layout.py.
C_CONSTANTS = {
    "WAKE_FILE_SIZE": WAKE_FILE_SIZE, "WAKE_MAGIC": WAKE_MAGIC, "WAKE_VERSION": WAKE_VERSION,
    "WAKE_MAGIC_OFFSET": WAKE_MAGIC_OFFSET, "WAKE_VERSION_OFFSET": WAKE_VERSION_OFFSET,
    "WAKE_PARKED_OFFSET": WAKE_PARKED_OFFSET, "WAKE_ARMED_OFFSET": WAKE_ARMED_OFFSET,
    "WAKE_SEQ_OFFSET": WAKE_SEQ_OFFSET,
    "WAKE_SLOTS_OFFSET": WAKE_SLOTS_OFFSET, "WAKE_SLOT_SIZE": WAKE_SLOT_SIZE,
    "WAKE_SLOT_COUNT": WAKE_SLOT_COUNT, "WAKE_SLOT_PID_OFFSET": WAKE_SLOT_PID_OFFSET,
    "WAKE_SLOT_STATE_OFFSET": WAKE_SLOT_STATE_OFFSET,
    "WAKE_SLOT_START_OFFSET": WAKE_SLOT_START_OFFSET,
}
assert WAKE_FILE_SIZE == _LAYOUT_SIZE

cdef int64_t RECLAIM_EVERY_NS = 1000000000   # a parker looks for dead parkers once a second


cdef class WakeFile:
    """WakeFile(path, *, allow_foreign=False, mode=0o600)

    The wake file at ``path`` (created, all zero, if absent), mapped shared. It is opened
    as bus files are (no links, regular files, owner and mode). ``prepare()``, ``wait()``
    and ``done()`` park a reader; ``wake()`` is a writer's call after a commit."""

    def __cinit__(self, path, *, bint allow_foreign=False, mode=0o600):
        self.path = os.fspath(path)
        self.base = NULL
        self._slot = -1
        self._file = MappedFile(self.path, WAKE_FILE_SIZE, create=True, init=False,
                                preallocate=True, allow_foreign=allow_foreign, mode=mode)
        cdef int rc = wake_init(self._file.base)
        if rc != 0:
            self._file.close()
            why = {-1: "its magic is not a wake file's", -2: "its version is unknown",
                   -3: "its parked count is impossible"}[rc]
            raise CorruptBusError(f"{self.path!r} is not a bus wake file: {why}")
        self.base = self._file.base
        self._reclaimed_ns = wake_now_ns()

    def close(self):
        """Free this object's slot and unmap. Closing twice is harmless."""
        if self.base != NULL and self._slot >= 0 and self._pid == os.getpid():
            wake_release(self.base, self._slot, self._pid)
        self._slot = -1
        self.base = NULL
        if self._file is not None:
            self._file.close()
        self._file = None

    @property
    def closed(self):
        return self.base == NULL

    @property
    def parked(self):
        """How many readers are parked on this file now."""
        if self.base == NULL:
            return 0
        return load_seq_cst_i32(self.base + WAKE_PARKED_OFFSET)

    def reclaim(self):
        """Undo the slots of processes that are gone; returns how many were freed."""
        if self.base == NULL:
            return 0
        return wake_reclaim(self.base, os.getpid(), 0)

    cdef int claim(self) except -1:
        # A slot per parking object; a forked child (another pid) claims its own.
        cdef int pid = os.getpid()
        if self._slot >= 0 and self._pid == pid:
            return self._slot
        self._pid = pid
        self._slot = wake_claim(self.base, pid, wake_proc_start(pid))
        return self._slot

    cdef uint32_t prepare(self) except? 0xFFFFFFFF:
        """Register as parked: the caller then looks at the bus once more, and waits on
        the value returned only if it found nothing."""
        if self.claim() < 0:
            raise OverflowError(f"{self.path!r}: all {WAKE_SLOT_COUNT} parking slots are taken")
        cdef int64_t now = wake_now_ns()
        if now - self._reclaimed_ns > RECLAIM_EVERY_NS:
            self._reclaimed_ns = now
            wake_reclaim(self.base, self._pid, 1)
        return wake_prepare(self.base, self._slot)

    cdef void done(self) noexcept:
        if self.base != NULL and self._slot >= 0:
            wake_done(self.base, self._slot)

    cdef int wake(self) except -1:
        # Only called when wake_needed() said a parker armed the file.
        if wake_all(self.base) == 0:
            self._futile += 1
            if self._futile >= WAKE_FUTILE_RECLAIM:
                self._futile = 0
                wake_reclaim(self.base, os.getpid(), 1)
        else:
            self._futile = 0
        return 0

    def wake_all(self):
        """Wake every reader parked on this file (writers do it after their commits, when a
        parker armed it)."""
        if self.base != NULL and wake_needed(self.base):
            self.wake()

    def _prepare(self):
        """``prepare()`` for Python callers (the rolling reader): park, then look again."""
        return self.prepare()

    def _wait(self, uint32_t v, double seconds):
        """Sleep while the wake word holds ``v``, at most ``seconds``, without the GIL."""
        cdef int64_t ns = <int64_t>(seconds * 1e9)
        if self.base != NULL:
            with nogil:
                wake_wait(self.base, v, ns)

    def _done(self):
        self.done()

    def park(self, double seconds):
        """Park for at most ``seconds`` unless woken; tests and the rolling layer's own waits.
        Returns True if woken (the wake word moved)."""
        if self.base == NULL:
            return False
        cdef uint32_t v = self.prepare()
        cdef int64_t ns = <int64_t>(seconds * 1e9)
        try:
            with nogil:
                wake_wait(self.base, v, ns)
        finally:
            self.done()
        return wake_seq(self.base) != v

    def __dealloc__(self):
        if self.base != NULL and self._slot >= 0 and self._pid == os.getpid():
            wake_release(self.base, self._slot, self._pid)
