# cython: language_level=3, embedsignature=True
"""The writers file beside a bus: who holds an uncommitted slot (see _writers.h).

A writer takes one slot (an OFD lock on its first byte, ``_liveness.h``) and publishes the
claim [begin, end) of each of its reservations there; a reader that finds a slot uncommitted
asks whose claim holds it and whether that holder is alive. The file is opened with the bus
files' safe-open rules (no links, regular files, owner and mode), but never under the bus's
POSIX open lock: POSIX and OFD locks conflict, and the slots' locks are held for a writer's
whole life.
"""
import dataclasses
import os
import time

from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy
from posix.mman cimport mmap, munmap, PROT_READ, PROT_WRITE, MAP_SHARED, MAP_FAILED

from ._atomic cimport load_acquire_i64, load_acquire_i32
from ._liveness cimport live_hold, live_release, LIVE_TAKEN, LIVE_BUSY
from ._guard cimport guard_is_dead
from ._mapping cimport guard_mapping, unguard_mapping

from ._liveness import Hold, LiveFile
from ..errors import CorruptBusError
from ..formats.files import open_file
from ..formats.layout import WRITERS_FILE_SIZE as _LAYOUT_SIZE

__all__ = ("WritersFile", "Claim", "Holder")

#: The header's constants as compiled, for the test that checks them against layout.py.
C_CONSTANTS = {
    "WRITERS_FILE_SIZE": WRITERS_FILE_SIZE, "WRITERS_MAGIC": WRITERS_MAGIC,
    "WRITERS_VERSION": WRITERS_VERSION, "WRITERS_MAGIC_OFFSET": WRITERS_MAGIC_OFFSET,
    "WRITERS_VERSION_OFFSET": WRITERS_VERSION_OFFSET, "WRITERS_SLOTS_OFFSET": WRITERS_SLOTS_OFFSET,
    "WRITER_SLOT_SIZE": WRITER_SLOT_SIZE, "WRITER_SLOT_COUNT": WRITER_SLOT_COUNT,
    "WRITER_BEGIN_OFFSET": WRITER_BEGIN_OFFSET, "WRITER_END_OFFSET": WRITER_END_OFFSET,
    "WRITER_PID_OFFSET": WRITER_PID_OFFSET, "WRITER_TAKEN_NS_OFFSET": WRITER_TAKEN_NS_OFFSET,
}
assert WRITERS_FILE_SIZE == _LAYOUT_SIZE


@dataclasses.dataclass(frozen=True)
class Claim:
    """A writer's claim: the bus positions [begin, end) it reserved and may not have committed."""
    begin: int
    end: int

    @property
    def empty(self):
        return self.begin >= self.end


@dataclasses.dataclass(frozen=True)
class Holder:
    """What the writers file says about one slot (``WritersFile.slots()``, for people)."""
    index: int
    claim: Claim
    pid: int
    taken_ns: int
    alive: object      # Liveness


cdef class WritersFile:
    """WritersFile(path, *, writable=True, allow_foreign=False, mode=0o600)

    The writers file at ``path``, mapped shared. ``writable`` (a writer's): created, all zero,
    if absent, and ``take()`` may hold a slot; otherwise (a reader's) it must exist and is only
    read and probed. Each object opens its own descriptor (its own open file description), as
    liveness needs: see ``_liveness.h``."""

    def __cinit__(self, path, *, bint writable=True, bint allow_foreign=False, mode=0o600):
        self.path = os.fspath(path)
        self.base = NULL
        self.slot = NULL
        self.dead = 0
        self._guard_slot = -1
        self._index = 0
        self._pid = 0
        self.writable = writable
        flags = (os.O_RDWR | os.O_CREAT) if writable else os.O_RDONLY
        fd, st = open_file(self.path, flags, mode, allow_foreign=allow_foreign)
        live = LiveFile(fd)       # owns fd from here: closed in a forked child, and by close()
        try:
            if st.st_size < WRITERS_FILE_SIZE:
                if not writable:
                    # Being made by a writer (created, not yet sized): no claims in it yet.
                    raise FileNotFoundError(f"{self.path!r} is not a writers file yet "
                                            f"({st.st_size} bytes)")
                os.ftruncate(fd, WRITERS_FILE_SIZE)     # only ever grows it: zeros are valid
            prot = PROT_READ | PROT_WRITE if writable else PROT_READ
            p = mmap(NULL, WRITERS_FILE_SIZE, prot, MAP_SHARED, fd, 0)
            if p == MAP_FAILED:
                raise OSError(f"{self.path!r}: cannot map the writers file")
            self.base = <char *>p
            # Truncated under us (by hand, or a hostile hand): zeros, not a SIGBUS that kills
            # this process; holder() then knows nobody (the readers' timeout), as without it.
            self._guard_slot = guard_mapping(p, WRITERS_FILE_SIZE, &self.dead, self.path)
            if writable:
                rc = writers_init(self.base)
            else:
                magic = load_acquire_i64(self.base + WRITERS_MAGIC_OFFSET)
                version = load_acquire_i32(self.base + WRITERS_VERSION_OFFSET)
                rc = 0 if magic in (0, WRITERS_MAGIC) and version in (0, WRITERS_VERSION) else (
                    -1 if magic not in (0, WRITERS_MAGIC) else -2)
            if rc != 0:
                why = {-1: "its magic is not a writers file's", -2: "its version is unknown"}[rc]
                raise CorruptBusError(f"{self.path!r} is not a bus writers file: {why}")
        except BaseException:
            self._unmap()
            live.close()
            raise
        self._live = live
        self.st_ino = st.st_ino
        self.st_dev = st.st_dev

    cdef _unmap(self):
        if self._guard_slot >= 0:
            unguard_mapping(self._guard_slot)     # before the range can be reused
            self._guard_slot = -1
        if self.base != NULL:
            munmap(self.base, WRITERS_FILE_SIZE)
            self.base = NULL

    def take(self):
        """Hold the first free slot: ``Hold.TAKEN`` (``claim_left`` then says what its last
        holder left), ``Hold.BUSY`` when every slot has a live holder, ``Hold.UNKNOWN`` when
        the kernel gives no answer (no OFD locks here). Taking twice keeps the first slot."""
        if self.slot != NULL:
            return Hold.TAKEN
        if self.base == NULL or not self.writable:
            return Hold.UNKNOWN
        cdef int fd = self._live.fileno()
        cdef int i, r
        cdef int32_t pid = os.getpid()
        cdef int64_t now = time.time_ns()
        for i in range(WRITER_SLOT_COUNT):
            r = live_hold(fd, writers_live_byte(i))
            if r == LIVE_BUSY:
                continue
            if r != LIVE_TAKEN:
                return Hold.UNKNOWN
            self._index = i
            self._pid = pid
            self.slot = writers_slot(self.base, i)
            memcpy(self.slot + WRITER_PID_OFFSET, &pid, 4)
            memcpy(self.slot + WRITER_TAKEN_NS_OFFSET, &now, 8)
            return Hold.TAKEN
        return Hold.BUSY

    def clear_dead_claims(self):
        """Clear the claims dead writers left (a new bus at this path: they are of a deleted one),
        each under its slot's lock; this object's own slot must not be held yet. Returns how
        many were cleared."""
        if self.base == NULL or not self.writable or self.slot != NULL:
            return 0
        return writers_clear_dead(self.base, self._live.fileno())

    @property
    def index(self):
        """The slot this object holds, or None."""
        return self._index if self.slot != NULL else None

    @property
    def claim_left(self):
        """The claim in the held slot: right after ``take()``, what its last holder, dead,
        left there (empty: nothing to roll back)."""
        cdef int64_t b = 0, e = 0
        if self.slot != NULL:
            writers_load_claim(self.slot, &b, &e)
        return Claim(b, e)

    def clear(self):
        """Empty the held slot's claim (end, then begin)."""
        if self.slot != NULL:
            writers_clear(self.slot)

    def release(self):
        """Empty the claim and give the slot back. Harmless without one."""
        if self.slot == NULL:
            return
        writers_clear(self.slot)
        self.slot = NULL
        if self._pid == os.getpid() and self._live.fileno() >= 0:
            live_release(self._live.fileno(), writers_live_byte(self._index))

    def close(self):
        """Release the slot (if held) and unmap. Closing twice is harmless."""
        if self.base != NULL and self.writable and self._pid == os.getpid():
            self.release()
        self.slot = NULL
        self._unmap()
        if self._live is not None:
            self._live.close()

    @property
    def closed(self):
        return self.base == NULL

    @property
    def truncated(self):
        """Whether the file shrank under the mapping (a fault in it was caught): it knows no
        holder any more; a reader opens the file again."""
        return guard_is_dead(&self.dead) != 0

    cdef int holder(self, int64_t position, int *index, int64_t *begin, int64_t *end) except -1:
        """WRITER_ALIVE, WRITER_DEAD or WRITER_UNKNOWN for the holder of ``position``."""
        if self.base == NULL or guard_is_dead(&self.dead):
            return WRITER_UNKNOWN
        cdef int fd = self._live.fileno()     # never cached: closed in a forked child
        if fd < 0:
            return WRITER_UNKNOWN
        return writers_holder(self.base, fd, position, index, begin, end)

    def holder_of(self, int64_t position):
        """The ``Liveness`` of the writer whose claim holds ``position`` (UNKNOWN: none does)."""
        from ._liveness import Liveness
        cdef int i = 0
        cdef int64_t b = 0, e = 0
        cdef int r = self.holder(position, &i, &b, &e)
        if r == WRITER_UNKNOWN:
            return Liveness.UNKNOWN
        return Liveness.ALIVE if r == WRITER_ALIVE else Liveness.DEAD

    def pid_of(self, int index):
        """The pid recorded in slot ``index`` (for people: messages, tools)."""
        cdef int32_t pid = 0
        if self.base == NULL or not 0 <= index < WRITER_SLOT_COUNT:
            return 0
        memcpy(&pid, writers_slot(self.base, index) + WRITER_PID_OFFSET, 4)
        return pid

    def slots(self):
        """Every slot with a claim or a recorded pid, as ``Holder`` (for people and tests)."""
        from ._liveness import Liveness
        cdef int i
        cdef int64_t b, e, taken
        cdef int32_t pid
        out = []
        if self.base == NULL:
            return out
        for i in range(WRITER_SLOT_COUNT):
            writers_load_claim(writers_slot(self.base, i), &b, &e)
            memcpy(&pid, writers_slot(self.base, i) + WRITER_PID_OFFSET, 4)
            memcpy(&taken, writers_slot(self.base, i) + WRITER_TAKEN_NS_OFFSET, 8)
            if pid == 0 and b == 0 and e == 0:
                continue
            # this object's own slot reads as dead through its own description: it is alive
            alive = (Liveness.ALIVE if self.slot != NULL and i == self._index
                     else self._live.probe(writers_live_byte(i)))
            out.append(Holder(i, Claim(b, e), pid, taken, alive))
        return out

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __dealloc__(self):
        self._unmap()
