# cython: language_level=3, embedsignature=True
"""The shared mapping of a bus file: open it safely, create, grow (never shrink), check its
metadata, map, unmap; guard the mapping against SIGBUS when the file shrinks under it.

The rules are those of docs/files-and-rolling.md ("Opening a file", "Metadata of a
single-file bus", "While mapped").
"""
import errno
import fcntl
import os
import struct
import threading
import time

from cpython.buffer cimport PyBUF_WRITABLE
from libc.stdint cimport int32_t, int64_t
from posix.mman cimport mmap, munmap, PROT_READ, PROT_WRITE, MAP_SHARED, MAP_FAILED, MAP_POPULATE

from ._atomic cimport load_acquire_i64, cas_i64, status_load_acquire
from ._guard cimport guard_install, guard_register, guard_unregister

cdef extern from "_watch.h" nogil:
    int WATCH_REPLACED
    int WATCH_SHRUNK
    int WATCH_INTERVAL_NS
    int watch_register(const char *path, unsigned long dev, unsigned long ino, int64_t size,
                       const char *base, int64_t last, int *flag)
    void watch_unregister(int slot)

from ..formats.busmeta import BusMeta, meta_path, read_meta, write_meta
from ..errors import (BusLockTimeoutError, BusMismatchError, BusReplacedError,
                     BusTruncatedError, CorruptBusError)
from ..formats.files import open_file
from ..formats.layout import FIRST_RECORD_OFFSET, HEADER_SIZE, PAGE_SIZE

DEFAULT_LOCK_TIMEOUT = 10.0
#: Seconds between the writers' watch's looks at their paths (_watch.h): a write that
#: starts later than this (plus one round of lstat()s) after its file was removed,
#: replaced or truncated raises.
WATCH_INTERVAL = WATCH_INTERVAL_NS / 1e9

# POSIX record locks belong to the process, not the descriptor: two threads of one process
# would both get them, and closing any descriptor of the file drops them. Threads of this
# process therefore open bus files one at a time.
_THREAD_LOCK = threading.Lock()
# struct flock on Linux (x86-64, aarch64): l_type, l_whence, l_start, l_len, l_pid.
_FLOCK = "hhqqi4x"
_REOPEN_ATTEMPTS = 100
#: Slots whose statuses a file without metadata has checked at open (check_slots).
CHECKED_SLOTS = 4096


class _NotYet(Exception):
    """An empty file found by an open that may not grow it: a bus being created."""


def check_mode(mode):
    """The permissions a writer creates a file with: an int within 0o777."""
    if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o777:
        raise ValueError(f"mode must be permission bits between 0o000 and 0o777, got {mode!r}")


def check_lock_timeout(timeout):
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
        raise ValueError(f"lock_timeout must be a non-negative number of seconds, got {timeout!r}")


def _lock_holder(fd, exclusive, start=0, length=0):
    """The pid of a process holding a lock that conflicts with ours, or None."""
    want = fcntl.F_WRLCK if exclusive else fcntl.F_RDLCK
    try:
        res = fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack(_FLOCK, want, os.SEEK_SET, start,
                                                         length, 0))
    except OSError:
        return None
    l_type, _, _, _, pid = struct.unpack(_FLOCK, res)
    return pid if l_type != fcntl.F_UNLCK and pid > 0 else None


def _lock(fd, exclusive, double timeout, path, int64_t lock_offset=-1):
    """Take the open lock, polling until ``timeout`` seconds have passed: the whole file, or
    with ``lock_offset`` >= 0 the one byte there (a side file whose other bytes carry
    liveness locks, which a whole-file lock would wait on)."""
    kind = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    start, length = (0, 0) if lock_offset < 0 else (int(lock_offset), 1)
    deadline = time.monotonic() + timeout
    delay = 0.0005
    while True:
        try:
            fcntl.lockf(fd, kind | fcntl.LOCK_NB, length, start)
            return
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EAGAIN):
                raise OSError(e.errno, f"cannot lock the bus file: {e.strerror}", path) from None
        if time.monotonic() >= deadline:
            pid = _lock_holder(fd, exclusive, start, length)
            who = f"process {pid}" if pid is not None else "another process"
            raise BusLockTimeoutError(
                f"{path!r}: {who} held the bus file's open lock for more than {timeout:g} s "
                f"(a process stopped or hung while creating or growing it?)", pid)
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _same_file(path, st):
    try:
        now = os.lstat(path)
    except FileNotFoundError:
        return False
    return now.st_dev == st.st_dev and now.st_ino == st.st_ino


def _remove_created(path, st, bint meta_written):
    """Undo a failed creation: the file (if the path still names it) and its metadata."""
    if _same_file(path, st):
        try:
            os.unlink(path)
        except OSError:
            pass
    if meta_written:
        try:
            os.unlink(meta_path(path))
        except OSError:
            pass


cdef class MappedFile:
    """A bus file mapped shared, ``mapped_size(file_size)`` bytes long.

    Opened as the contract says: never through a symbolic link, only a regular file,
    owned by this user and not writable by group or others (``allow_foreign`` accepts
    those two), under the POSIX open lock (exclusive with ``create``, shared otherwise),
    polled for at most ``lock_timeout`` seconds.

    With ``create`` (writers) a missing file is created (``O_EXCL``, exactly ``mode``) and a
    short one grown, never shrunk; with ``preallocate`` its blocks are allocated up front
    (``posix_fallocate``) so a full device fails here with ENOSPC, not with SIGBUS later.
    Without it (readers) a missing file is FileNotFoundError and a short one is refused.
    ``record_size`` > 0 turns on the metadata file ``PATH.meta`` (checked; written by an
    initialising writer); ``init`` sets the limit 0 -> 8 under the lock. ``segment`` (a
    rolling bus's segment): the file must exist, is never grown, has no metadata file.
    Whatever a failed open created, it removes. ``prefault`` maps every page at open.
    ``lock_offset`` >= 0 takes the open lock on that one byte instead of the whole file (the
    side files whose slots carry OFD liveness locks: a whole-file lock would wait on them).
    ``watch`` (writers): the writers' watch (_watch.h) looks at the path every
    ``WATCH_INTERVAL`` seconds and marks the mapping dead once the path names no file or
    another one, or the file is shorter than the mapping; ``raise_dead`` then says which.
    """

    def __cinit__(self, path, int64_t file_size, *, bint read_only=False, mode=0o600,
                  bint preallocate=True, bint prefault=False, create=None,
                  int64_t record_size=0, bint init=False, bint allow_foreign=False,
                  lock_timeout=DEFAULT_LOCK_TIMEOUT, bint segment=False,
                  int64_t lock_offset=-1, bint watch=False, bint frames=False, int fd=-1):
        # fd: map this open descriptor (duplicated; the caller keeps its own) instead of
        # opening ``path``, which then only names it in messages: a segment decompressed into
        # a memory file (os.memfd_create) that the kernel frees with its last user.
        self.base = NULL
        self.from_fd = fd >= 0
        if self.from_fd and (create or watch or not segment):
            raise ValueError("fd= maps an existing segment read as it is (segment=True, "
                             "create=False, no watch)")
        self.dead = 0
        self._guard_slot = -1
        self._watch_slot = -1
        self.path = os.fspath(path)
        self.file_size = file_size
        self.read_only = read_only
        if file_size <= 0:
            raise ValueError(f"file_size must be positive, got {file_size}")
        check_mode(mode)
        check_lock_timeout(lock_timeout)
        cdef int64_t size = -(-file_size // PAGE_SIZE) * PAGE_SIZE
        self.mapped_size = size
        self._len = <Py_ssize_t>size
        if create is None:
            create = not read_only
        if create and read_only:
            raise ValueError("a read-only mapping cannot create or grow the file")
        empty_deadline = None
        while True:
            if not _THREAD_LOCK.acquire(timeout=lock_timeout):
                raise BusLockTimeoutError(
                    f"{self.path!r}: another thread of this process kept opening a bus for "
                    f"more than {lock_timeout:g} s", os.getpid())
            try:
                self._open(record_size, create, init, mode, preallocate, prefault,
                           allow_foreign, lock_timeout, segment, lock_offset, frames, fd)
                if watch:
                    self._watch(record_size, segment)
                return
            except _NotYet:
                pass
            finally:
                _THREAD_LOCK.release()
            # An empty file: a writer created it and has not sized it yet (it creates, then
            # takes the lock). Wait for it, bounded like the lock, with no lock held, so the
            # writer may be a thread of this process.
            now = time.monotonic()
            if empty_deadline is None:
                empty_deadline = now + lock_timeout
            if now >= empty_deadline:
                raise FileNotFoundError(
                    errno.ENOENT, f"an empty file, still not made a bus by any writer after "
                    f"{lock_timeout:g} s (a reader never creates one)", self.path)
            time.sleep(0.001)

    cdef _open(self, int64_t record_size, bint create, bint init, int mode, bint preallocate,
               bint prefault, bint allow_foreign, double lock_timeout, bint segment,
               int64_t lock_offset, bint frames, int given_fd):
        path = self.path
        cdef int64_t size = self.mapped_size
        cdef bint created, meta_written
        cdef int fd
        flags = os.O_RDONLY if self.read_only else os.O_RDWR
        for _ in range(_REOPEN_ATTEMPTS):
            created = meta_written = False
            try:
                if given_fd >= 0:
                    fd = os.dup(given_fd)
                    st = os.fstat(fd)
                else:
                    fd, st = open_file(path, flags, allow_foreign=allow_foreign)
            except FileNotFoundError:
                if segment:
                    raise FileNotFoundError(errno.ENOENT, "no such segment file (segments are "
                                            "created by the rolling bus, never here)", path) from None
                if not create:
                    raise FileNotFoundError(errno.ENOENT, "no bus file here (a reader never "
                                            "creates one: open a writer first)", path) from None
                try:
                    fd, st = open_file(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, mode,
                                       allow_foreign=allow_foreign)
                except FileExistsError:
                    continue    # another process created it first: open theirs
                created = True
            try:
                _lock(fd, create, lock_timeout, path, lock_offset)
                if given_fd < 0 and not _same_file(path, st):
                    # Its creator removed it after a failed open, or it was replaced.
                    created = False
                    continue
                meta = None
                if record_size > 0 and not segment:
                    # Read (and so checked: no link, owner, mode) even by the creator,
                    # which would otherwise write over whatever is there.
                    found = read_meta(meta_path(path), allow_foreign=allow_foreign)
                    if found is not None and not created and found.kind == "single" \
                            and found.inode == st.st_ino:
                        found.check(record_size, self.file_size, path)
                        meta = found
                length = os.fstat(fd).st_size
                if length == 0 and meta is None and not create and not segment:
                    raise _NotYet()     # a bus being created: __cinit__ waits for it
                if length < size:
                    if not create or segment:
                        raise BusMismatchError(
                            f"{path!r} is {length} bytes, shorter than the {size} bytes that "
                            f"file_size={self.file_size} maps: not a bus of that size (wrong "
                            f"file_size, or not a bus file); it is never grown here")
                if create and not segment:
                    self._grow(fd, size, preallocate)
                head = os.pread(fd, 8, 0)
                limit = int.from_bytes(head, "little", signed=True) if len(head) == 8 else 0
                if create and record_size > 0 and not segment and meta is None and limit == 0:
                    meta = BusMeta.create("single", record_size, file_size=self.file_size,
                                          inode=st.st_ino, frames=int(frames))
                    meta_written = True
                    write_meta(meta_path(path), meta, mode=mode, exclusive=False)
                self._map(fd, size, prefault)
                self.limit_at_open = cas_i64(self.base, 0, FIRST_RECORD_OFFSET) if init \
                    else load_acquire_i64(self.base)
                self.bus_id = meta.id if meta is not None else None
                self.meta = meta
                self.st_dev = st.st_dev
                self.st_ino = st.st_ino
                return
            except BaseException:
                self._unmap()
                if created:
                    _remove_created(path, st, meta_written)
                raise
            finally:
                os.close(fd)     # drops the lock; the mapping keeps the file
        raise OSError(errno.EAGAIN, f"the bus file was replaced {_REOPEN_ATTEMPTS} times "
                      f"while this process opened it", path)

    cdef _grow(self, int fd, int64_t size, bint preallocate):
        # Under the exclusive open lock: two processes growing at once must not let the
        # later, smaller ftruncate cut what the other grew.
        current = os.fstat(fd).st_size
        try:
            if preallocate:
                try:
                    # Never shrinks, keeps existing data, fills holes a Java process
                    # may have left sparse.
                    os.posix_fallocate(fd, 0, size)
                    return
                except OSError as e:
                    if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                        raise
            if current < size:
                os.ftruncate(fd, size)
        except OSError as e:
            if e.errno == errno.ENOSPC:
                raise OSError(e.errno, f"no space to reserve {size} bytes for the bus file "
                              f"(the device is full or too small)", self.path) from None
            elif e.errno == errno.EFBIG:
                why = "a file size limit: ulimit -f, or the file system's"
            elif e.errno in (errno.ESPIPE, errno.EINVAL, errno.EPERM, errno.EOPNOTSUPP):
                why = "the file cannot be resized: not a file that can hold a bus (a /proc or " \
                      "/sys file?)"
            else:
                why = e.strerror
            raise OSError(e.errno, f"cannot grow the bus file to {size} bytes ({why})",
                          self.path) from None

    cdef _map(self, int fd, int64_t size, bint prefault):
        cdef int prot = PROT_READ if self.read_only else PROT_READ | PROT_WRITE
        # prefault: map every page now, so the first record on each page does not pay a
        # page fault (microseconds) on the hot path.
        cdef int flags = MAP_SHARED | (MAP_POPULATE if prefault else 0)
        cdef void *p = mmap(NULL, <size_t>size, prot, flags, fd, 0)
        if p == MAP_FAILED:
            code = errno_value()
            raise OSError(code, f"cannot map {size} bytes: {os.strerror(code)}", self.path)
        self.base = <char *>p
        if guard_install() != 0:
            code = errno_value()
            raise OSError(code, f"cannot install the SIGBUS guard: {os.strerror(code)}", self.path)
        self._guard_slot = guard_register(p, <size_t>size, &self.dead)
        if self._guard_slot < 0:
            raise OSError(errno.EMFILE, "too many bus mappings in this process for the "
                          "SIGBUS guard", self.path)

    cdef _watch(self, int64_t record_size, bint segment):
        # A segment is watched only while it has room: past `last` its writers roll.
        cdef bytes path = os.fsencode(os.path.abspath(self.path))   # a later chdir changes nothing
        cdef int64_t last = self.file_size - (HEADER_SIZE + record_size) if segment else 0
        self._watch_slot = watch_register(path, self.st_dev, self.st_ino, self.mapped_size,
                                          self.base if segment else NULL, last, &self.dead)
        if self._watch_slot < 0:
            code = errno_value()
            self._unmap()
            raise OSError(code, f"cannot watch the bus file for removal or replacement: "
                          f"{os.strerror(code)}", self.path)

    cdef _unmap(self):
        if self._watch_slot >= 0:
            watch_unregister(self._watch_slot)    # before the mapping goes: it reads the limit
            self._watch_slot = -1
        if self.base != NULL:
            guard_unregister(self._guard_slot)   # before the range can be reused
            self._guard_slot = -1
            munmap(self.base, <size_t>self.mapped_size)
            self.base = NULL

    cdef char *_detach(self):
        # _unmap's bookkeeping without the munmap: the range, returned (NULL if none), is
        # the caller's to unmap (a rolling writer's retired segment, unmapped off its
        # writing thread: rolling/_rolling.pyx, BackgroundCall.unmap). Never with exports.
        cdef char *base = self.base
        if self._watch_slot >= 0:
            watch_unregister(self._watch_slot)
            self._watch_slot = -1
        if base != NULL:
            guard_unregister(self._guard_slot)
            self._guard_slot = -1
            self.base = NULL
        return base

    @property
    def closed(self):
        return self.base == NULL

    @property
    def is_dead(self):
        """True once the file shrank under the mapping (it now holds zeros)."""
        return self.dead != 0

    cdef int raise_dead(self) except -1:
        if self.dead == WATCH_REPLACED:
            raise BusReplacedError(
                f"{self.path!r} was removed or replaced while this process wrote to it (its "
                f"path names no file or another one): records written to the old file would "
                f"reach no reader, so nothing more is written")
        if self.dead == WATCH_SHRUNK:
            raise BusTruncatedError(
                f"{self.path!r} is shorter than this process's mapping (truncated while in "
                f"use): the bus is gone, nothing more is written to it")
        raise BusTruncatedError(
            f"{self.path!r} shrank under this process's mapping (truncated or overwritten "
            f"while in use): the bus is gone, nothing more is read from or written to it")

    cpdef check_path(self):
        """BusReplacedError if the path no longer names the mapped file."""
        if self.from_fd:
            return
        try:
            now = os.lstat(self.path)
        except FileNotFoundError:
            raise BusReplacedError(f"{self.path!r} was removed while this process used it: "
                                   f"the bus is gone") from None
        if now.st_dev != self.st_dev or now.st_ino != self.st_ino:
            raise BusReplacedError(f"{self.path!r} now names another file than the bus this "
                                   f"process mapped (replaced, or deleted and recreated)")

    cpdef int check_file(self, bint removal_ok=False) except -1:
        """A waiting reader's look, one lstat(): BusReplacedError if the path names another
        file, or no file unless ``removal_ok`` (a rolling bus's segment, which retention may
        remove while it is read); BusTruncatedError (the mapping marked dead) if the file
        is shorter than the mapping, even with the pages read so far still in it."""
        if self.from_fd:
            return 0            # a memory file of this process's own: nobody changes it
        try:
            now = os.lstat(self.path)
        except FileNotFoundError:
            if removal_ok:
                return 0
            raise BusReplacedError(f"{self.path!r} was removed while this process used it: "
                                   f"the bus is gone") from None
        if now.st_dev != self.st_dev or now.st_ino != self.st_ino:
            raise BusReplacedError(f"{self.path!r} now names another file than the bus this "
                                   f"process mapped (replaced, or deleted and recreated)")
        if now.st_size < self.mapped_size:
            self.dead = 1
            self.raise_dead()
        return 0

    cpdef int check_slots(self, int64_t record_size) except -1:
        """A file without metadata (the Java original's) does not say its record_size: check
        the one given against what the file shows, before anything is read or written.
        Every slot on its grid below the limit (the first CHECKED_SLOTS of them) must hold
        a status of 0, 1 or 2: with another record_size those words fall inside other
        records' payloads, which rarely look like statuses. CorruptBusError otherwise.

        What cannot be told: a record_size whose slot is a multiple of the true one (its
        grid lands on true slot starts only, and the limit is on it when the record count
        suits), and payload bytes that happen to read 0, 1 or 2 where a status would be
        (zeros read as an uncommitted slot; a reader then waits for it, and rolls it back
        after its timeout). The limit's place on the grid is checked by the caller; a bus
        with metadata has its record_size checked exactly, and needs none of this."""
        cdef int64_t slot = record_size + HEADER_SIZE
        cdef int64_t limit = load_acquire_i64(self.base)
        cdef int64_t end = min(limit, FIRST_RECORD_OFFSET + CHECKED_SLOTS * slot,
                               self.file_size - slot + 1)
        cdef int64_t pos = FIRST_RECORD_OFFSET
        cdef bint aligned = record_size % 4 == 0
        cdef int32_t status
        while pos < end:
            status = status_load_acquire(self.base + pos, aligned)
            if status < 0 or status > 2:
                self.check_intact()
                raise CorruptBusError(
                    f"{self.path!r}: with record_size {record_size} the record at {pos} has "
                    f"status {status} (valid: 0, 1, 2): the file was written with another "
                    f"record_size (it has no metadata file to say which), or it is corrupt")
            pos += slot
        return 0

    cpdef check_intact(self):
        """Called before reporting corruption: if the file shrank under the mapping (and
        new bytes were written over its first pages, so no SIGBUS told us), that is the
        real story: mark the mapping dead and raise BusTruncatedError; if the path names
        another file now, BusReplacedError. Otherwise return, and the caller reports."""
        if self.from_fd:
            return
        try:
            now = os.lstat(self.path)
        except OSError:
            return
        if now.st_dev != self.st_dev or now.st_ino != self.st_ino:
            self.check_path()
        elif now.st_size < self.mapped_size:
            self.dead = 1
            self.raise_dead()

    cpdef close(self):
        """Unmap. Refused while a buffer exported from the mapping is still alive."""
        if self.base == NULL:
            return
        if self._exports > 0:
            raise BufferError(f"cannot close {self.path!r}: {self._exports} exported "
                              f"buffer(s) still point into the mapping")
        self._unmap()

    def __dealloc__(self):
        self._unmap()

    def __getbuffer__(self, Py_buffer *view, int flags):
        # The whole mapping as bytes; used by zero-copy numpy views.
        if self.base == NULL:
            raise ValueError("the mapping is closed")
        if (flags & PyBUF_WRITABLE) and self.read_only:
            raise BufferError("the mapping is read-only")
        view.buf = self.base
        view.obj = self
        view.len = self.mapped_size
        view.readonly = self.read_only
        view.itemsize = 1
        view.format = "B"
        view.ndim = 1
        view.shape = &self._len
        view.strides = &_ONE
        view.suboffsets = NULL
        view.internal = NULL
        self._exports += 1

    def __releasebuffer__(self, Py_buffer *view):
        self._exports -= 1


cdef int guard_mapping(void *base, size_t size, int *dead, path) except -1:
    """Guard a side file's mapping as MappedFile guards a bus's: a fault in it after the file
    shrank maps zeros there and sets ``*dead``, instead of killing the process."""
    if guard_install() != 0:
        code = errno_value()
        raise OSError(code, f"cannot install the SIGBUS guard: {os.strerror(code)}", path)
    cdef int slot = guard_register(base, size, dead)
    if slot < 0:
        raise OSError(errno.EMFILE, "too many mappings in this process for the SIGBUS guard", path)
    return slot


cdef void unguard_mapping(int slot) noexcept:
    guard_unregister(slot)


cdef Py_ssize_t _ONE = 1

from libc.errno cimport errno as c_errno

cdef inline int errno_value():
    return c_errno
