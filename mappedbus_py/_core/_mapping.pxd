# cython: language_level=3
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.string cimport memcpy


cdef inline void copy_payload(char *dst, const char *src, Py_ssize_t n) noexcept nogil:
    # A record's payload is usually a few bytes: two fixed-size moves (overlapping when n is
    # not 8 or 16) instead of a call into memcpy for each message. All loads come before the
    # stores, so the copy is the same as memcpy's for any n.
    cdef uint64_t a, b
    cdef uint32_t c, d
    if 8 <= n <= 16:
        memcpy(&a, src, 8)
        memcpy(&b, src + n - 8, 8)
        memcpy(dst, &a, 8)
        memcpy(dst + n - 8, &b, 8)
    elif 4 <= n < 8:
        memcpy(&c, src, 4)
        memcpy(&d, src + n - 4, 4)
        memcpy(dst, &c, 4)
        memcpy(dst + n - 4, &d, 4)
    else:
        memcpy(dst, src, n)


cdef class MappedFile:
    cdef char *base            # start of the shared mapping; NULL once closed
    cdef int dead              # 1: the SIGBUS guard found the file shrank under us; the
                               # writers' watch: WATCH_REPLACED, WATCH_SHRUNK (_watch.h)
    cdef int _guard_slot       # this mapping's entry in the guard's registry, or -1
    cdef int _watch_slot       # its entry in the writers' watch (_watch.h), or -1
    cdef readonly int64_t mapped_size   # bytes mapped: file_size rounded up to a page
    cdef readonly int64_t file_size     # the logical size that end-of-file checks use
    cdef readonly object path
    cdef readonly bint from_fd          # mapped from a descriptor given (a memory file with
                                        # no path: an archived segment): no path to check
    cdef readonly bint read_only        # mapped PROT_READ: nothing may be stored
    cdef readonly object bus_id         # the metadata's id; None for a file without one
    cdef readonly object meta           # the metadata (BusMeta) found or written; None without
    cdef readonly object st_dev         # identity of the mapped file, for replacement checks
    cdef readonly object st_ino
    cdef readonly int64_t limit_at_open # the limit found under the open lock (before init)
    cdef Py_ssize_t _len       # mapped_size as the buffer protocol's shape
    cdef Py_ssize_t _exports   # buffers handed out; unmapping waits until they are gone

    cpdef close(self)
    cdef _open(self, int64_t record_size, bint create, bint init, int mode, bint preallocate,
               bint prefault, bint allow_foreign, double lock_timeout, bint segment,
               int64_t lock_offset, bint frames, int given_fd)
    cdef _grow(self, int fd, int64_t size, bint preallocate)
    cdef _map(self, int fd, int64_t size, bint prefault)
    cdef _unmap(self)
    cdef char *_detach(self)
    cdef _watch(self, int64_t record_size, bint segment)
    cpdef int check_file(self, bint removal_ok=*) except -1
    cdef int raise_dead(self) except -1
    cpdef check_path(self)
    cpdef check_intact(self)
    cpdef int check_slots(self, int64_t record_size) except -1


# The SIGBUS guard for a side file's own mapping (the writers file): its registry lives in this
# module, whose handler is the one installed. guard_mapping returns the entry (for
# unguard_mapping, before the unmap); the handler sets *dead when the file shrank under it.
cdef int guard_mapping(void *base, size_t size, int *dead, path) except -1
cdef void unguard_mapping(int slot) noexcept
