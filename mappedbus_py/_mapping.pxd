# cython: language_level=3
from libc.stdint cimport int64_t


cdef class MappedFile:
    cdef char *base            # start of the shared mapping; NULL once closed
    cdef readonly int64_t mapped_size   # bytes mapped: file_size rounded up to a page
    cdef readonly int64_t file_size     # the logical size that end-of-file checks use
    cdef readonly object path
    cdef readonly bint read_only        # mapped PROT_READ: nothing may be stored
    cdef Py_ssize_t _len       # mapped_size as the buffer protocol's shape
    cdef Py_ssize_t _exports   # buffers handed out; unmapping waits until they are gone

    cpdef close(self)
    cdef _grow(self, int fd, int64_t size, bint preallocate)
    cdef _map(self, int fd, int64_t size, bint prefault)
