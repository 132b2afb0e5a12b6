# cython: language_level=3
from libc.stdint cimport int32_t, int64_t


cdef class Record:
    cdef readonly int64_t position
    """Where the record is: its offset in the file (a rolling bus: the position across
    segments, ``segment * segment_size + offset``); ``seek(position)`` comes back to it."""
    cdef readonly int32_t meta
    """The record's metadata field: an object message's type id, or a byte array's length."""
    cdef readonly bytes payload
    """All ``record_size`` payload bytes of the slot (``data`` is the written part of a
    byte array)."""
    cdef readonly object topic
    """A framed bus's message: its topic name, or None (also on a bus without frames)."""
    cdef readonly int32_t flags
    """A framed bus's message: its frame flags (the encoding in bits 0..7); 0 otherwise."""
    cdef readonly bint framed
    """True: a framed bus's message (``payload`` is the whole message, ``meta`` its first
    slot's metadata)."""
    cdef object _serializer    # the reader's serializer for object(); None: pickle
