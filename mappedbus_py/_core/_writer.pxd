# cython: language_level=3
cimport cython
from libc.stdint cimport int32_t, int64_t

from ._mapping cimport MappedFile
from ._wake cimport WakeFile
from ._writers cimport WritersFile


cdef class MappedBusWriter:
    cdef MappedFile _file      # the mapping; None until open()
    cdef char *_base           # _file.base, cached for the hot path; NULL when closed
    cdef int *_dead            # &_file.dead (set by the SIGBUS guard), or a constant 0
    cdef readonly object path
    """The bus file's path."""
    cdef readonly int64_t file_size
    """The bus's logical size in bytes: every record ends at or before it."""
    cdef readonly int32_t record_size
    """Payload bytes per record (not stored in the file; ``PATH.meta`` records it)."""
    cdef int64_t _slot         # header + record_size
    cdef int64_t _last         # the last offset a record may start at
    cdef bint _aligned         # statuses are 4-byte aligned (record_size % 4 == 0)
    cdef int _mode             # permissions of a file this writer creates
    cdef bint _preallocate     # reserve the file's blocks at open
    cdef bint _prefault        # map every page at open (MAP_POPULATE)
    cdef bint _allow_foreign   # accept a file of another owner, or group/other-writable
    cdef double _lock_timeout  # seconds to wait for the open lock
    cdef bint _segment         # a rolling bus's segment: exists already, no sidecar
                               # metadata, may be unlinked by retention while mapped
    cdef int64_t _populated    # without prefault: pages below this offset are mapped by
                               # MADV_POPULATE_WRITE, one chunk ahead of the records; -1: off
    cdef int64_t _mapped       # bytes mapped (file_size rounded up to a page)
    cdef WakeFile _wake        # the bus's wake file: parked readers are woken through it
    cdef char *_wake_base      # _wake.base for the commit path; NULL: wake nobody
    cdef bint _own_wake        # this writer opened _wake (a rolling writer shares its own)
    cdef bint _wakes           # wake=True: open the wake file at open()
    cdef int64_t _last_off     # the offset of this writer's last allocation (-1: none yet)
    cdef WritersFile _writers  # the bus's writers file, where this writer holds a slot
    cdef char *_claim          # that slot's line: each reservation's claim is published
                               # there; NULL: none held (readers then time our stalls out)
    cdef int64_t _claim_base   # the bus position of this file's offset 0 (a rolling bus's
                               # segment: index * segment_size)
    cdef bint _own_writers     # this writer opened _writers (a rolling writer shares its own)
    cdef bint _liveness        # liveness=True: take a slot in the writers file at open()
    cdef readonly bint frames
    """True: a framed bus (messages of any size and topics, docs/messages.md)."""
    cdef object _topics        # the bus's TopicsFile once a topic was named (or shared by a
                               # rolling writer); None before
    cdef dict _topic_ids       # topic name -> id, learned once per name
    cdef object _serializer    # write_object's serializer (dumps/loads); None: pickle
    cdef int64_t _max_message  # the largest message a file holds (framed buses)
    cdef readonly int64_t _last_span  # bytes of the last framed reservation (from _last_off)

    cdef int _truncated(self) except -1
    # final: called directly (inlinable), not through the vtable, on every write
    @cython.final
    cdef char *_alloc(self, int64_t count) except NULL
    @cython.final
    cdef bint _commit(self, char *rec) except -1
    @cython.final
    cdef void _populate(self, int64_t pos, int64_t end) noexcept
    cdef bint _write(self, object data, Py_ssize_t offset, Py_ssize_t length) except -1
    cdef bint _write_bytes(self, const char *src, Py_ssize_t n, Py_ssize_t offset,
                           Py_ssize_t length) except -1
    # frames (_frames.h): a message of any size over the slots of one reservation
    cdef int32_t _topic_id(self, object topic) except -1
    cdef char *_alloc_frame(self, int64_t length) except NULL
    cdef bint _write_framed(self, object data, Py_ssize_t offset, Py_ssize_t length,
                            int32_t topic) except -1
    cdef bint _write_frame(self, const char *src, Py_ssize_t n, int32_t topic,
                           int32_t flags) except -1
    cdef bint _write_parts(self, object encoded, int32_t topic) except -1
