# cython: language_level=3, embedsignature=True
"""The consumer registry beside a bus: named readers' positions (see _consumers.h)."""
import os
import threading
import time
import warnings

from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy

from ._atomic cimport load_acquire_i32, load_acquire_i64
from ._mapping cimport MappedFile
from ._liveness import LiveFile, Liveness
from ..errors import (BusLockTimeoutError, BusMismatchError, BusReplacedError,
                     BusTruncatedError, ConsumerInUseError, CorruptBusError)
from ..formats.files import open_file
from ..formats.layout import CONSUMERS_FILE_SIZE as _LAYOUT_SIZE

cdef extern from "_consumers.h" nogil:
    int CONSUMERS_MAGIC_OFFSET, CONSUMERS_VERSION_OFFSET, CONSUMERS_LOCK_OFFSET
    int CONSUMERS_OPEN_LOCK_OFFSET
    int CONSUMERS_ENTRIES_OFFSET, CONSUMER_ENTRY_SIZE, CONSUMER_ENTRY_COUNT
    int CONSUMER_GEN_OFFSET, CONSUMER_FLAGS_OFFSET, CONSUMER_PID_OFFSET, CONSUMER_START_OFFSET
    int CONSUMER_POSITION_OFFSET, CONSUMER_COMMITTED_NS_OFFSET, CONSUMER_CREATED_NS_OFFSET
    int CONSUMER_BUS_ID_OFFSET, CONSUMER_BUS_ID_SIZE, CONSUMER_NAME_OFFSET, CONSUMER_NAME_MAX
    int CONSUMER_FLAG_EXPIRED, CONSUMERS_VERSION
    long long CONSUMERS_MAGIC
    int consumers_init(char *c)
    int64_t consumer_entry_byte(int i)
    int consumers_lock(char *c, int fd, int pid, int64_t timeout_ns)
    void consumers_unlock(char *c, int fd)
    int consumers_find(char *c, const char *name, int len)
    int consumers_make(char *c, int fd, const char *name, int len, const char *bus_id,
                       int64_t position, int64_t now_ns)
    void consumers_remove(char *c, int i)
    int consumer_claim(char *c, int fd, int i, int pid, int64_t now_ns)
    void consumer_release(char *c, int fd, int i)
    int consumer_holder(int fd, int i)
    void consumer_expire(char *c, int i)

cdef extern from "_liveness.h" nogil:
    int LIVE_TAKEN, LIVE_BUSY, LIVE_ALIVE, LIVE_DEAD, LIVE_ERROR

cdef extern from "_consumers_clock.h" nogil:
    int64_t consumers_clock_now
    int consumers_clock_hold()
    void consumers_clock_let_go()
    void consumers_clock_after_fork()

#: The header's constants as compiled, for the test that checks them against layout.py.
C_CONSTANTS = {
    "CONSUMERS_FILE_SIZE": CONSUMERS_FILE_SIZE, "CONSUMERS_MAGIC": CONSUMERS_MAGIC,
    "CONSUMERS_VERSION": CONSUMERS_VERSION, "CONSUMERS_MAGIC_OFFSET": CONSUMERS_MAGIC_OFFSET,
    "CONSUMERS_VERSION_OFFSET": CONSUMERS_VERSION_OFFSET,
    "CONSUMERS_OPEN_LOCK_OFFSET": CONSUMERS_OPEN_LOCK_OFFSET,
    "CONSUMERS_LOCK_OFFSET": CONSUMERS_LOCK_OFFSET,
    "CONSUMERS_ENTRIES_OFFSET": CONSUMERS_ENTRIES_OFFSET,
    "CONSUMER_ENTRY_SIZE": CONSUMER_ENTRY_SIZE, "CONSUMER_ENTRY_COUNT": CONSUMER_ENTRY_COUNT,
    "CONSUMER_GEN_OFFSET": CONSUMER_GEN_OFFSET, "CONSUMER_FLAGS_OFFSET": CONSUMER_FLAGS_OFFSET,
    "CONSUMER_PID_OFFSET": CONSUMER_PID_OFFSET, "CONSUMER_START_OFFSET": CONSUMER_START_OFFSET,
    "CONSUMER_POSITION_OFFSET": CONSUMER_POSITION_OFFSET,
    "CONSUMER_COMMITTED_NS_OFFSET": CONSUMER_COMMITTED_NS_OFFSET,
    "CONSUMER_CREATED_NS_OFFSET": CONSUMER_CREATED_NS_OFFSET,
    "CONSUMER_BUS_ID_OFFSET": CONSUMER_BUS_ID_OFFSET,
    "CONSUMER_BUS_ID_SIZE": CONSUMER_BUS_ID_SIZE,
    "CONSUMER_NAME_OFFSET": CONSUMER_NAME_OFFSET, "CONSUMER_NAME_MAX": CONSUMER_NAME_MAX,
    "CONSUMER_FLAG_EXPIRED": CONSUMER_FLAG_EXPIRED,
}
assert CONSUMERS_FILE_SIZE == _LAYOUT_SIZE

DEFAULT_LOCK_TIMEOUT = 10.0
cdef bytes _NO_ID = bytes(CONSUMER_BUS_ID_SIZE)

# Bumped in a forked child: a registry entry claimed by the parent is not the child's.
cdef int _fork_gen = 0

def _after_fork():
    global _fork_gen
    _fork_gen += 1
    _HELD.clear()       # the parent's holds stay the parent's (its descriptors keep them)
    consumers_clock_after_fork()

os.register_at_fork(after_in_child=_after_fork)

# Entries held by readers of this process: (st_dev, st_ino, index). Each registry object
# holds through a description of its own, so the locks tell readers apart; this set also
# refuses a second hold through the same object (a lock never conflicts with its own).
_HELD = set()


def check_name(name):
    """The consumer name as UTF-8 bytes; ValueError unless it is 1..64 bytes of text
    without NUL or control characters."""
    if not isinstance(name, str):
        raise TypeError(f"a consumer name is a str, got {type(name).__name__}")
    data = name.encode("utf-8", "surrogatepass")
    if not 1 <= len(data) <= CONSUMER_NAME_MAX:
        raise ValueError(f"a consumer name is 1 to {CONSUMER_NAME_MAX} bytes of UTF-8, got "
                         f"{len(data)} ({name!r})")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise ValueError(f"a consumer name may not hold control characters: {name!r}")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"a consumer name must be valid UTF-8: {name!r}") from None
    return data


def bus_id_bytes(bus_id):
    """16 bytes of a metadata id (32 hex digits); zeros for None (no metadata)."""
    return bytes(16) if bus_id is None else bytes.fromhex(bus_id)


cdef class ConsumerRegistry:
    """ConsumerRegistry(path, *, create=True, read_only=False, allow_foreign=False, mode=0o600, lock_timeout=10.0)

    The registry file at ``path`` (with ``create``, made all zero if absent), mapped shared
    and opened as bus files are (no links, regular files, owner and mode). Entries are
    read lock-free (``entries()``); ``acquire``/``release``/``remove``/``expire`` change
    them under the file's lock word."""

    def __cinit__(self, path, *, bint create=True, bint read_only=False,
                  bint allow_foreign=False, mode=0o600, double lock_timeout=DEFAULT_LOCK_TIMEOUT):
        self.path = os.fspath(path)
        self.base = NULL
        self.lock_timeout = lock_timeout
        self._live = None
        self._empty = False
        self._mutex = threading.Lock()
        if read_only:
            create = False
            if self._short_and_empty(allow_foreign):
                self._empty = True      # never sized by its first opener: no entries
                return
        elif not create:
            os.lstat(self.path)         # FileNotFoundError: nothing registered here
        try:
            # Whoever may write sizes a short file (a first opener killed before it did),
            # under the exclusive open lock: nobody waits on an empty file.
            self._file = MappedFile(self.path, CONSUMERS_FILE_SIZE, create=not read_only,
                                    init=False, read_only=read_only,
                                    preallocate=not read_only, allow_foreign=allow_foreign,
                                    mode=mode, lock_offset=CONSUMERS_OPEN_LOCK_OFFSET)
        except BusMismatchError:
            size = os.lstat(self.path).st_size
            if size >= CONSUMERS_FILE_SIZE:
                raise
            raise CorruptBusError(f"{self.path!r} is not a bus consumer registry: {size} bytes, "
                                  f"shorter than its {CONSUMERS_FILE_SIZE}") from None
        cdef int rc
        if read_only:
            magic = load_acquire_i64(self._file.base + CONSUMERS_MAGIC_OFFSET)
            version = load_acquire_i32(self._file.base + CONSUMERS_VERSION_OFFSET)
            rc = 0 if (magic in (0, CONSUMERS_MAGIC) and version in (0, CONSUMERS_VERSION)) \
                else (-1 if magic not in (0, CONSUMERS_MAGIC) else -2)
        else:
            rc = consumers_init(self._file.base)
        if rc != 0:
            version = load_acquire_i32(self._file.base + CONSUMERS_VERSION_OFFSET)
            self._file.close()
            why = {-1: "its magic is not a consumer registry's",
                   -2: f"its version is {version}, this reads {CONSUMERS_VERSION} (an older one "
                       f"is of a release that told holders by pid)"}[rc]
            raise CorruptBusError(f"{self.path!r} is not a bus consumer registry: {why}")
        self.base = self._file.base
        self._pid = os.getpid()
        try:
            self._live = self._open_live(read_only)
        except BaseException:
            self.close()
            raise

    def _short_and_empty(self, allow_foreign):
        # A read-only look at a file shorter than a registry: all zero (its first opener
        # died before sizing it) is an empty registry, anything else corrupt, at once.
        fd, st = open_file(self.path, os.O_RDONLY, allow_foreign=allow_foreign)
        try:
            if st.st_size >= CONSUMERS_FILE_SIZE:
                return False
            data = os.pread(fd, CONSUMERS_FILE_SIZE, 0)
        finally:
            os.close(fd)
        if data.count(0) == len(data):
            return True
        raise CorruptBusError(f"{self.path!r} is not a bus consumer registry: {len(data)} "
                              f"bytes, shorter than its {CONSUMERS_FILE_SIZE}")

    def _open_live(self, bint read_only):
        # This object's own description of the file: the holds it takes (the lock, the
        # entries it claims) and its probes of others' (_liveness.h). Opened by path, so
        # checked to be the mapped file.
        fd, st = open_file(self.path, os.O_RDONLY if read_only else os.O_RDWR,
                           allow_foreign=True)
        if st.st_ino != self._file.st_ino or st.st_dev != self._file.st_dev:
            os.close(fd)
            raise BusReplacedError(f"{self.path!r}: the consumer registry was replaced while "
                                   f"it was opened")
        return LiveFile(fd)

    def close(self):
        """Unmap, and close this object's description (which lets go of whatever it still
        held). Entries this object claimed are released by their readers first."""
        self.base = NULL
        if self._live is not None:
            self._live.close()
            self._live = None
        if self._file is not None:
            self._file.close()
        self._file = None

    @property
    def closed(self):
        return self.base == NULL

    cdef int *dead_flag(self):
        return &self._file.dead

    cdef int *fork_flag(self):
        return &_fork_gen

    cdef int64_t *clock(self):
        return &consumers_clock_now

    cdef int _check(self) except -1:
        if self.base == NULL:
            raise ValueError(f"{self.path!r}: the consumer registry is closed")
        if self._file.dead:
            raise BusTruncatedError(f"{self.path!r}: the consumer registry was truncated "
                                    f"under its mapping")
        if self._pid != os.getpid() or self._live is None or self._live.fileno() < 0:
            # a forked child: its copy of the parent's description was closed at the fork
            self._pid = os.getpid()
            if self._live is not None:
                self._live.close()
            self._live = None
            self._live = self._open_live(self._file.read_only)
        return 0

    cdef int _lock(self) except -1:
        self._check()
        if self._file.read_only:
            raise PermissionError(f"{self.path!r}: the consumer registry is open read-only")
        # Threads sharing this object share its description, which never conflicts with
        # itself: they take the object's mutex first.
        if not self._mutex.acquire(timeout=self.lock_timeout):
            raise BusLockTimeoutError(f"{self.path!r}: another thread kept this consumer "
                                      f"registry for more than {self.lock_timeout:g} s",
                                      os.getpid())
        cdef int64_t ns = <int64_t>(self.lock_timeout * 1e9)
        cdef int fd = self._live.fileno(), pid = self._pid, rc
        with nogil:
            rc = consumers_lock(self.base, fd, pid, ns)
        if rc != 0:
            self._mutex.release()
            if rc == LIVE_ERROR:
                raise OSError(f"{self.path!r}: no OFD lock can be taken on the consumer "
                              f"registry (a file system without them?)")
            holder = load_acquire_i64(self.base + CONSUMERS_LOCK_OFFSET) & 0xFFFFFFFF
            raise BusLockTimeoutError(
                f"{self.path!r}: a live process (pid {holder} where it runs) held the consumer "
                f"registry's lock for more than {self.lock_timeout:g} s", holder)
        return 0

    cdef void _unlock(self) noexcept:
        consumers_unlock(self.base, self._live.fileno())
        self._mutex.release()

    cdef object _holder(self, int i, int32_t pid):
        # Whether entry i has a live holder (another description than this object's).
        if pid == 0 or self._live is None:
            return Liveness.DEAD if pid == 0 else Liveness.UNKNOWN
        cdef int r = consumer_holder(self._live.fileno(), i)
        return Liveness.ALIVE if r == LIVE_ALIVE else Liveness.DEAD if r == LIVE_DEAD \
            else Liveness.UNKNOWN

    cdef object _entry_fields(self, int i):
        # One entry read lock-free, or None if it is free: a dict of its fields, taken only
        # between two equal odd generations (no make or remove in between).
        cdef char *e = consumer_entry(self.base, i)
        cdef int32_t gen, gen2, pid = 0, flags = 0
        cdef int64_t created = 0, start = 0, position = 0, committed = 0
        cdef int tries, n
        cdef unsigned char c
        cdef bytes raw = None
        for tries in range(1000):
            gen = load_acquire_i32(e + CONSUMER_GEN_OFFSET)
            if not gen & 1:
                return None
            raw = (e + CONSUMER_BUS_ID_OFFSET)[:CONSUMER_BUS_ID_SIZE + CONSUMER_NAME_MAX]
            created = load_acquire_i64(e + CONSUMER_CREATED_NS_OFFSET)
            pid = load_acquire_i32(e + CONSUMER_PID_OFFSET)
            start = load_acquire_i64(e + CONSUMER_START_OFFSET)
            position = load_acquire_i64(e + CONSUMER_POSITION_OFFSET)
            committed = load_acquire_i64(e + CONSUMER_COMMITTED_NS_OFFSET)
            flags = load_acquire_i32(e + CONSUMER_FLAGS_OFFSET)
            gen2 = load_acquire_i32(e + CONSUMER_GEN_OFFSET)
            if gen2 == gen:
                break
        else:
            raise BusLockTimeoutError(f"{self.path!r}: entry {i} kept changing while read")
        name_raw = raw[CONSUMER_BUS_ID_SIZE:].rstrip(b"\0")
        n = len(name_raw)
        bad = n == 0
        for c in name_raw:
            if c < 32 or c == 127:      # a NUL inside, or a control character
                bad = True
                break
        if not bad:
            try:
                name = name_raw.decode("utf-8")
            except UnicodeDecodeError:
                bad = True
        if bad:
            raise CorruptBusError(f"{self.path!r}: entry {i} has no valid consumer name "
                                  f"({name_raw!r}): the registry is corrupt")
        bus_id = raw[:CONSUMER_BUS_ID_SIZE]
        return dict(index=i, name=name, position=position, pid=pid, start=start,
                    committed_ns=committed, created_ns=created, flags=flags,
                    bus_id=None if bus_id == _NO_ID else bus_id.hex(),
                    holder=self._holder(i, pid))

    def entries(self):
        """Every entry in use, read lock-free: a list of dicts (index, name, position, pid,
        start, committed_ns, created_ns, flags, bus_id, holder). ``holder`` is a Liveness:
        whether a live process (other than through this object) holds the name."""
        if self._empty:
            return []
        self._check()
        out = []
        for i in range(CONSUMER_ENTRY_COUNT):
            fields = self._entry_fields(i)
            if fields is not None:
                out.append(fields)
        if self._file.dead:
            raise BusTruncatedError(f"{self.path!r}: the consumer registry was truncated "
                                    f"under its mapping")
        return out

    def acquire(self, name, bus_id, int64_t position):
        """Claim the consumer ``name`` for this process: made at ``position`` if new (or if
        its entry belongs to another bus id: then ``reset`` is True). Returns
        ``(index, position, made, reset)``; ConsumerInUseError if another live holder has it."""
        cdef bytes data = check_name(name)
        cdef bytes bid = bus_id_bytes(bus_id)
        cdef int i, rc, fd
        cdef bint made = False, reset = False
        self._lock()
        try:
            fd = self._live.fileno()
            i = consumers_find(self.base, data, len(data))
            if i >= 0:
                have = bytes((consumer_entry(self.base, i) + CONSUMER_BUS_ID_OFFSET)[:16])
                if have != bid:
                    if consumer_holder(fd, i) == LIVE_ALIVE:
                        holder = self._pid_of(i)
                        raise ConsumerInUseError(
                            f"{self.path!r}: consumer {name!r} (of another bus, {have.hex()}) "
                            f"is held by live process {holder}", holder)
                    consumers_remove(self.base, i)
                    i = -1
                    reset = True
            if i < 0:
                i = consumers_make(self.base, fd, data, len(data), bid, position, time.time_ns())
                if i < 0:
                    raise OverflowError(f"{self.path!r}: all {CONSUMER_ENTRY_COUNT} consumer "
                                        f"entries are in use (remove_consumer frees one)")
                made = True
            key = (self._file.st_dev, self._file.st_ino, i)
            if key in _HELD:
                raise ConsumerInUseError(f"{self.path!r}: consumer {name!r} is held by another "
                                         f"reader of this process; one reader at a time may "
                                         f"hold a name", self._pid)
            rc = consumer_claim(self.base, fd, i, self._pid, time.time_ns())
            if rc == LIVE_BUSY:
                holder = self._pid_of(i)
                raise ConsumerInUseError(f"{self.path!r}: consumer {name!r} is held by live "
                                         f"process {holder}; one reader at a time may hold a "
                                         f"name", holder)
            if rc != LIVE_TAKEN:
                raise OSError(f"{self.path!r}: no OFD lock can be taken on the consumer "
                              f"registry (a file system without them?)")
            _HELD.add(key)
            consumers_clock_hold()
            position = load_acquire_i64(consumer_entry(self.base, i) + CONSUMER_POSITION_OFFSET)
        finally:
            self._unlock()
        self._check()
        return i, position, made, reset

    def ensure_shared(self, name, bus_id, int64_t position):
        """The entry ``name`` of this bus, made at ``position`` if absent, claimed by nobody:
        a work group's (``group:NAME``, mappedbus_py.groups), whose members commit its
        position in turn and none of which holds it (``acquire`` would let one member hold
        it alone). An entry of the name left by another bus id is replaced unless a live
        process holds it (ConsumerInUseError). Returns its index."""
        cdef bytes data = check_name(name)
        cdef bytes bid = bus_id_bytes(bus_id)
        cdef int i, fd
        self._lock()
        try:
            fd = self._live.fileno()
            i = consumers_find(self.base, data, len(data))
            if i >= 0:
                have = bytes((consumer_entry(self.base, i) + CONSUMER_BUS_ID_OFFSET)[:16])
                if have != bid:
                    if consumer_holder(fd, i) == LIVE_ALIVE:
                        raise ConsumerInUseError(
                            f"{self.path!r}: {name!r} (of another bus, {have.hex()}) is held "
                            f"by live process {self._pid_of(i)}", self._pid_of(i))
                    consumers_remove(self.base, i)
                    i = -1
            if i < 0:
                i = consumers_make(self.base, fd, data, len(data), bid, position, time.time_ns())
                if i < 0:
                    raise OverflowError(f"{self.path!r}: all {CONSUMER_ENTRY_COUNT} consumer "
                                        f"entries are in use (remove_consumer frees one)")
        finally:
            self._unlock()
        self._check()
        return i

    def is_entry(self, int i, name):
        """Whether entry ``i`` is (still) the in-use entry named ``name``."""
        cdef bytes data = check_name(name)
        cdef char *e
        if self.base == NULL or not 0 <= i < CONSUMER_ENTRY_COUNT:
            return False
        e = consumer_entry(self.base, i)
        return bool(load_acquire_i32(e + CONSUMER_GEN_OFFSET) & 1) \
            and e[CONSUMER_NAME_OFFSET:CONSUMER_NAME_OFFSET + CONSUMER_NAME_MAX] \
            == data.ljust(CONSUMER_NAME_MAX, b"\0")

    cdef object _pid_of(self, int i):
        # The pid an entry shows (for people: where its holder runs, maybe another pid
        # namespace).
        return load_acquire_i32(consumer_entry(self.base, i) + CONSUMER_PID_OFFSET)

    def claim(self, name, bus_id, int64_t position, bus_path):
        """``acquire`` for a reader of the bus at ``bus_path``: warns when the name's entry
        belonged to a bus since recreated there (it starts anew), and closes this registry
        if the name cannot be held. Returns ``(index, position, made)``."""
        try:
            index, position, made, reset = self.acquire(name, bus_id, position)
        except BaseException:
            self.close()
            raise
        if reset:
            warnings.warn(f"{bus_path!r}: consumer {name!r} was registered for another bus of "
                          f"this path (since deleted and recreated): it starts anew",
                          RuntimeWarning, stacklevel=4)
        return index, position, made

    def release(self, int i):
        """Let go of entry ``i`` (claimed by ``acquire``)."""
        if self._file is None:
            return
        key = (self._file.st_dev, self._file.st_ino, i)
        if key in _HELD:
            _HELD.discard(key)
            consumers_clock_let_go()
        if self.base == NULL or self._file.dead or self._live is None:
            return
        if self._pid != os.getpid():
            return      # a forked child: the parent's claim is not ours to release
        # No lock needed: the pid is cleared before the byte goes, and nobody else takes
        # the entry while this description holds it.
        consumer_release(self.base, self._live.fileno(), i)

    def remove(self, name, *, bint force=False):
        """Remove the consumer ``name``: KeyError if there is none, ConsumerInUseError if a
        live process holds it (unless ``force``)."""
        cdef bytes data = check_name(name)
        cdef int i
        self._lock()
        try:
            i = consumers_find(self.base, data, len(data))
            if i < 0:
                raise KeyError(f"{self.path!r} has no consumer {name!r}")
            holder = None
            if consumer_holder(self._live.fileno(), i) == LIVE_ALIVE:
                holder = self._pid_of(i)
            elif (self._file.st_dev, self._file.st_ino, i) in _HELD:
                holder = self._pid
            if holder is not None and not force:
                raise ConsumerInUseError(f"{self.path!r}: consumer {name!r} is held by live "
                                         f"process {holder}: stop it first", holder)
            consumers_remove(self.base, i)
        finally:
            self._unlock()

    def expire(self, indices_names):
        """Flag entries expired: ``[(index, name), ...]``, each only if it still holds that
        name (checked under the lock)."""
        cdef int i
        cdef bytes data
        self._lock()
        try:
            for i, name in indices_names:
                data = check_name(name)
                if consumers_find(self.base, data, len(data)) == i:
                    consumer_expire(self.base, i)
        finally:
            self._unlock()

    def refuse_commit(self, name, int gen):
        """Raise why a holder's commit was refused: the registry was truncated under its
        mapping (BusTruncatedError), or this is a process forked after the claim under
        fork counter ``gen`` (ConsumerInUseError)."""
        if self._file is not None and self._file.dead and gen == _fork_gen:
            raise BusTruncatedError(f"{self.path!r}: the consumer registry was truncated under "
                                    f"its mapping; consumer {name!r}'s commit was not stored")
        raise ConsumerInUseError(f"consumer {name!r} is held by the process that opened this "
                                 f"reader, not by this forked child: open a reader of its own "
                                 f"here", None)

    def __dealloc__(self):
        self.base = NULL
