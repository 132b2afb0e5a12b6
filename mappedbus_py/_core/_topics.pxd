# cython: language_level=3
# The topics file beside a framed bus (_frames.h, layout.py TOPICS_*): names of topic ids.
from libc.stdint cimport int32_t, int64_t

cdef class TopicsFile:
    cdef char *base            # the shared mapping (TOPICS_FILE_SIZE bytes); NULL once closed
    cdef readonly object path
    """The topics file's path."""
    cdef readonly bint writable  # opened read-write (a writer's, which may name topics)
    cdef readonly object st_ino  # identity of the mapped file, to notice it was replaced
    cdef readonly object st_dev
    cdef dict _ids             # name -> the lowest published id (what writers use)
    cdef dict _names           # id -> name, of the published entries seen so far
    cdef int32_t _scanned      # entries below this were seen published (or counted as lost)

    cdef _unmap(self)
    cdef int32_t _load_count(self) except -1
    cdef object _entry_name(self, int32_t i)
    cdef int _scan(self) except -1
