# cython: language_level=3, embedsignature=True
"""The wake file beside a bus: readers park on it, writers wake them (see _wake.h)."""
import os

from ._mapping cimport MappedFile
from ._liveness import LiveFile, Liveness
from ..errors import BusReplacedError, CorruptBusError
from ..formats.files import open_file
from ..formats.layout import WAKE_FILE_SIZE as _LAYOUT_SIZE

cdef extern from "_wake.h" nogil:
    int WAKE_MAGIC_OFFSET, WAKE_VERSION_OFFSET, WAKE_OPEN_LOCK_OFFSET, WAKE_PARKED_OFFSET, WAKE_ARMED_OFFSET, WAKE_SEQ_OFFSET
    int WAKE_SLOTS_OFFSET, WAKE_SLOT_SIZE, WAKE_SLOT_COUNT, WAKE_SLOT_PID_OFFSET
    int WAKE_SLOT_STATE_OFFSET, WAKE_SLOT_START_OFFSET, WAKE_VERSION, WAKE_FUTILE_RECLAIM
    long long WAKE_MAGIC

cdef extern from "_atomic.h" nogil:
    int32_t load_seq_cst_i32(const void *p)

#: The header's constants as compiled, for the test that checks them against layout.py.
C_CONSTANTS = {
    "WAKE_FILE_SIZE": WAKE_FILE_SIZE, "WAKE_MAGIC": WAKE_MAGIC, "WAKE_VERSION": WAKE_VERSION,
    "WAKE_MAGIC_OFFSET": WAKE_MAGIC_OFFSET, "WAKE_VERSION_OFFSET": WAKE_VERSION_OFFSET,
    "WAKE_OPEN_LOCK_OFFSET": WAKE_OPEN_LOCK_OFFSET,
    "WAKE_PARKED_OFFSET": WAKE_PARKED_OFFSET, "WAKE_ARMED_OFFSET": WAKE_ARMED_OFFSET,
    "WAKE_SEQ_OFFSET": WAKE_SEQ_OFFSET,
    "WAKE_SLOTS_OFFSET": WAKE_SLOTS_OFFSET, "WAKE_SLOT_SIZE": WAKE_SLOT_SIZE,
    "WAKE_SLOT_COUNT": WAKE_SLOT_COUNT, "WAKE_SLOT_PID_OFFSET": WAKE_SLOT_PID_OFFSET,
    "WAKE_SLOT_STATE_OFFSET": WAKE_SLOT_STATE_OFFSET,
    "WAKE_SLOT_START_OFFSET": WAKE_SLOT_START_OFFSET,
}


def parked_alive(fd):
    """Readers parked now on the wake file open as ``fd`` (read-only is enough): slots in
    state parked whose liveness byte a live holder keeps, read with ``pread`` and probed,
    so a reader killed while parked (a zombie included) is not counted. Nothing is
    written; a file that is not a wake file of this version counts 0."""
    data = os.pread(fd, WAKE_FILE_SIZE, 0)
    if len(data) < WAKE_FILE_SIZE or int.from_bytes(data[:8], "little") != WAKE_MAGIC \
            or int.from_bytes(data[8:12], "little") != WAKE_VERSION:
        return 0
    look = LiveFile(os.dup(fd))
    n = 0
    try:
        for i in range(WAKE_SLOT_COUNT):
            o = WAKE_SLOTS_OFFSET + i * WAKE_SLOT_SIZE
            if int.from_bytes(data[o + WAKE_SLOT_STATE_OFFSET:o + WAKE_SLOT_STATE_OFFSET + 4],
                              "little") == 1 and look.probe(o) is Liveness.ALIVE:
                n += 1
    finally:
        look.close()
    return n
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
        # create=True also sizes a file left short by an opener that died (under the lock)
        self._file = MappedFile(self.path, WAKE_FILE_SIZE, create=True, init=False,
                                preallocate=True, allow_foreign=allow_foreign, mode=mode,
                                lock_offset=WAKE_OPEN_LOCK_OFFSET)
        self._live = None
        cdef int rc = wake_init(self._file.base)
        if rc != 0:
            version = int.from_bytes((self._file.base + WAKE_VERSION_OFFSET)[:4], "little")
            self._file.close()
            why = {-1: "its magic is not a wake file's",
                   -2: f"its version is {version}, this reads {WAKE_VERSION} (an older one is "
                       f"of a release that told parkers by pid: stop every process of the bus "
                       f"and delete the file)",
                   -3: "its parked count is impossible"}[rc]
            raise CorruptBusError(f"{self.path!r} is not a bus wake file: {why}")
        self.base = self._file.base
        self._reclaimed_ns = wake_now_ns()

    def close(self):
        """Free this object's slot and unmap. Closing twice is harmless."""
        if self.base != NULL and self._slot >= 0 and self._pid == os.getpid():
            self.let_go_slot(self._live, self._slot)
        self._slot = -1
        if self._live is not None:
            self._live.close()
            self._live = None
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
        """Undo the slots whose holders died; returns how many were freed."""
        if self.base == NULL:
            return 0
        return max(0, self.reclaim_dead(False))

    cdef object open_live(self):
        # A description of its own for a holder (or a reclaimer) of this file's slots:
        # liveness is kept per open file description (_liveness.h). The path must still
        # name the mapped file: a lock on another inode would prove nothing here.
        fd, st = open_file(self.path, os.O_RDWR, allow_foreign=True)
        if st.st_ino != self._file.st_ino or st.st_dev != self._file.st_dev:
            os.close(fd)
            raise BusReplacedError(f"{self.path!r}: the wake file was replaced since it was "
                                   f"opened; reopen the bus")
        return LiveFile(fd)

    cdef int hold_slot(self, object live) except -2:
        """A slot held through ``live`` (a LiveFile of this file holding nothing else), or -1
        if all have live holders; OSError where no lock can be taken."""
        cdef int fd = live.fileno()
        cdef int pid = os.getpid()
        cdef int i
        with nogil:
            i = wake_claim(self.base, fd, pid)
        if i == -2:
            raise OSError(f"{self.path!r}: no OFD lock can be taken on the wake file "
                          f"(a file system without them?)")
        return i

    cdef void let_go_slot(self, object live, int i) noexcept:
        if self.base != NULL and live is not None and i >= 0:
            fd = live.fileno()
            if fd >= 0:
                wake_release(self.base, fd, i)

    cdef int reclaim_dead(self, bint parked_only) except -2:
        # Through a description of its own that holds no slot (one that held ours would
        # take our own byte, as locks never conflict within a description).
        look = self.open_live()
        cdef int fd = look.fileno()
        cdef int n
        try:
            with nogil:
                n = wake_reclaim(self.base, fd, parked_only)
        finally:
            look.close()
        return n

    cdef int claim(self) except -2:
        # A slot per parking object; a forked child (another pid) claims its own (the
        # parent's description was closed in it, see _liveness.pyx). -1 without one (all
        # held, no locks on this file system, the file replaced: the bus's own checks say
        # so), tried again a second later.
        cdef int pid = os.getpid()
        if self._slot >= 0 and self._pid == pid:
            return self._slot
        cdef int64_t now = wake_now_ns()
        if self._pid == pid and self._claim_failed_ns != 0 \
                and now - self._claim_failed_ns < RECLAIM_EVERY_NS:
            return -1
        self._pid = pid
        self._slot = -1
        if self._live is not None:
            self._live.close()
            self._live = None
        try:
            self._live = self.open_live()
            self._slot = self.hold_slot(self._live)
        except OSError:
            self._slot = -1
        if self._slot < 0:
            if self._live is not None:
                self._live.close()
            self._live = None
            self._claim_failed_ns = now
        return self._slot

    cdef uint32_t prepare(self) except? 0xFFFFFFFF:
        """Register as parked: the caller then looks at the bus once more, and waits on
        the value returned only if it found nothing."""
        cdef int64_t now = wake_now_ns()
        if now - self._reclaimed_ns > RECLAIM_EVERY_NS:
            self._reclaimed_ns = now
            try:
                self.reclaim_dead(True)
            except OSError:
                pass            # the file replaced, or no locks: nothing to undo from here
        if self.claim() < 0:
            return wake_arm(self.base)      # parks all the same, uncounted
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
                try:
                    self.reclaim_dead(True)
                except OSError:
                    pass        # the writer's wake stands; the next reclaim may do it
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
        # The slot's byte goes with _live's descriptor (its own __dealloc__ closes it); the
        # park it may have left open is undone by the next reclaim.
        if self.base != NULL and self._slot >= 0 and self._pid == os.getpid() \
                and self._live is not None:
            self.let_go_slot(self._live, self._slot)
