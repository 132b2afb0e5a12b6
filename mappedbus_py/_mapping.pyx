# cython: language_level=3, embedsignature=True
"""The shared mapping of a bus file: create, grow (never shrink), map, unmap."""
import errno
import fcntl
import os
import stat

from cpython.buffer cimport PyBUF_WRITABLE
from libc.stdint cimport int64_t
from posix.mman cimport mmap, munmap, PROT_READ, PROT_WRITE, MAP_SHARED, MAP_FAILED, MAP_POPULATE

from .layout import PAGE_SIZE


cdef class MappedFile:
    """A bus file mapped shared, ``mapped_size(file_size)`` bytes long.

    The file is created if absent (unless ``read_only``) with permissions ``mode``, grown
    if shorter than the mapping, never shrunk: shrinking would pull pages from under the
    processes that still map it (SIGBUS in them). With ``preallocate`` the blocks are
    reserved up front (``posix_fallocate``), so a full disk or tmpfs fails here with
    ENOSPC instead of killing a process with SIGBUS on its first store. With ``prefault``
    every page is mapped at open (MAP_POPULATE): no page faults later, at the price of
    touching the whole file up front.
    """

    def __cinit__(self, path, int64_t file_size, *, bint read_only=False, int mode=0o600,
                  bint preallocate=True, bint prefault=False):
        self.base = NULL
        self.path = os.fspath(path)
        self.file_size = file_size
        self.read_only = read_only
        if file_size <= 0:
            raise ValueError(f"file_size must be positive, got {file_size}")
        cdef int64_t size = -(-file_size // PAGE_SIZE) * PAGE_SIZE
        self.mapped_size = size
        self._len = <Py_ssize_t>size
        flags = (os.O_RDONLY if read_only else os.O_RDWR | os.O_CREAT) | os.O_CLOEXEC
        fd = os.open(self.path, flags, mode)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ValueError(f"{self.path!r} is not a regular file")
            if read_only:
                if st.st_size < size:
                    raise ValueError(
                        f"{self.path!r} is {st.st_size} bytes, shorter than the {size} bytes "
                        f"file_size={file_size} maps; a read-only reader cannot grow it "
                        f"(wrong file_size, or no writer has opened the bus yet)")
            else:
                self._grow(fd, size, preallocate)
            self._map(fd, size, prefault)
        finally:
            os.close(fd)   # the mapping keeps the file; no descriptor held per bus

    cdef _grow(self, int fd, int64_t size, bint preallocate):
        # A POSIX record lock (what Java's FileChannel.lock takes too): two processes
        # growing at once must not let the later, smaller ftruncate cut what the other grew.
        fcntl.lockf(fd, fcntl.LOCK_EX)
        try:
            current = os.fstat(fd).st_size
            if preallocate:
                try:
                    # Never shrinks, keeps existing data, reserves holes a Java process
                    # may have left sparse.
                    os.posix_fallocate(fd, 0, size)
                    return
                except OSError as e:
                    if e.errno == errno.ENOSPC:
                        raise OSError(errno.ENOSPC,
                                      f"no space to reserve {size} bytes for the bus file "
                                      f"(the device is full or too small)", self.path) from None
                    if e.errno == errno.EFBIG:
                        raise OSError(errno.EFBIG,
                                      f"the bus file cannot grow to {size} bytes (a file size "
                                      f"limit: ulimit -f, or the file system's)", self.path) from None
                    if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                        raise
            if current < size:
                os.ftruncate(fd, size)
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN)

    cdef _map(self, int fd, int64_t size, bint prefault):
        cdef int prot = PROT_READ if self.read_only else PROT_READ | PROT_WRITE
        # prefault: map every page now, so the first record on each page does not pay a
        # page fault (microseconds) on the hot path.
        cdef int flags = MAP_SHARED | (MAP_POPULATE if prefault else 0)
        cdef void *p = mmap(NULL, <size_t>size, prot, flags, fd, 0)
        if p == MAP_FAILED:
            e = os.strerror(errno_value())
            raise OSError(errno_value(), f"cannot map {size} bytes: {e}", self.path)
        self.base = <char *>p

    @property
    def closed(self):
        return self.base == NULL

    cpdef close(self):
        """Unmap. Refused while a buffer exported from the mapping is still alive."""
        if self.base == NULL:
            return
        if self._exports > 0:
            raise BufferError(f"cannot close {self.path!r}: {self._exports} exported "
                              f"buffer(s) still point into the mapping")
        munmap(self.base, <size_t>self.mapped_size)
        self.base = NULL

    def __dealloc__(self):
        if self.base != NULL:
            munmap(self.base, <size_t>self.mapped_size)
            self.base = NULL

    def __getbuffer__(self, Py_buffer *view, int flags):
        # The whole mapping as bytes; used by the inspector and zero-copy numpy views.
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


cdef Py_ssize_t _ONE = 1

from libc.errno cimport errno as c_errno

cdef inline int errno_value():
    return c_errno
