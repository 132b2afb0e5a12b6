# cython: language_level=3
cimport cython
from libc.stdint cimport int32_t, int64_t

from ._mapping cimport MappedFile
from ._record cimport Record
from ._slotscan cimport SlotScan, END
from ._waiter cimport Waiter
from ._consumerhold cimport ConsumerHold
from ._frames cimport TopicNames


cdef class MappedBusReader:
    cdef SlotScan _scan        # the slots: the mapping, position, current record, stalls
    cdef Waiter _waiter        # how it waits: idle strategy, wake file, event-loop fd
    cdef ConsumerHold _hold    # the consumer name held while open; None otherwise
    cdef readonly object path
    """The bus file's path."""
    cdef readonly int64_t file_size
    """The bus's logical size in bytes: no record ends past it."""
    cdef readonly int32_t record_size
    """Payload bytes per record (not stored in the file; ``PATH.meta`` records it)."""
    cdef int64_t _initial_limit  # the limit at open(), for has_recovered()
    cdef object _start         # where open() puts the reader: None, "end" or a position
    cdef bint _prefault        # map every page at open (MAP_POPULATE)
    cdef bint _allow_foreign   # accept a file of another owner, or group/other-writable
    cdef double _lock_timeout  # seconds to wait for the open lock
    cdef bint _segment         # a rolling bus's segment: exists already, no sidecar
    cdef int _fd               # a descriptor to map instead of opening path (an archived
                               # segment's memory file), or -1
                               # metadata, may be unlinked by retention while mapped
    cdef readonly object consumer
    """The name this reader holds in the bus's consumer registry, or None."""
    cdef object _frames_opt    # frames= as given: None (from the metadata), True or False
    cdef readonly bint frames
    """True once open on a framed bus (messages of any size and topics, docs/messages.md)."""
    cdef object _topics_opt    # topics= as given (a frozenset of names), or None
    cdef object _serializer    # the serializer for objects (dumps/loads); None: pickle
    cdef TopicNames _names     # framed: topic names and filter (a rolling reader shares its own)
    cdef object _view          # framed: the memoryview read_view() handed out last, or None

    cdef int _truncated(self) except -1
    # final: called directly (inlinable), not through the vtable, on every read
    @cython.final
    cdef int _next(self) except -1
    @cython.final
    cdef int _next_code(self) except -1
    @cython.final
    cdef int _read_into_code(self, object message) except -1
    cdef int _raise_end(self) except -1
    cdef int _wait(self, object timeout) except -1
    cdef int64_t _current(self) except -1
    cdef Record _record(self)
    cdef MappedFile _open_mapping(self)
    cdef _place(self, MappedFile f)
    cdef bint _read_into(self, object message) except -1
    cdef int _frame_next(self, object timeout) except -1
    cdef int _release_view(self) except -1
