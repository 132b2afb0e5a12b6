# cython: language_level=3
cimport cython
from libc.stdint cimport int64_t

from .._core._reader cimport MappedBusReader
from .._core._writer cimport MappedBusWriter
from .._core._consumerhold cimport ConsumerHold


cdef extern from "_background.h" nogil:
    ctypedef struct mb_bg:
        int pid
        int kind
        int fd
        int unlock_fd
        long long unlock_at
        void *addr
        size_t len
        int advice
        int prefault
        int rc
    int MB_BG_FALLOCATE
    int MB_BG_MADVISE
    int MB_BG_MUNMAP
    int MADV_POPULATE_READ
    int MADV_POPULATE_WRITE
    void *mb_bg_run(void *arg)
    int mb_bg_start(mb_bg *j)
    int mb_bg_done(mb_bg *j)
    int mb_bg_join(mb_bg *j)


cdef class BackgroundCall:
    cdef mb_bg _job                   # the call, written by its thread until joined
    cdef bint _joined                 # nothing left to join (or it never had a thread)
    cdef int _rc                      # its result once joined
    cdef MappedBusWriter _writer      # populate: the writer whose mapping it maps

    cdef int _start(self) except -1
    cdef _finish(self, int rc)


# The per-record bases of RollingBusWriter and RollingBusReader. The contract with their Python
# subclasses (rolling/writer.py, rolling/reader.py) is in _rolling.pyx's docstring: the subclass
# sets these fields and defines the methods the base calls back (declared there, raising
# NotImplementedError in the base).
cdef class RollingWriterBase:
    cdef public MappedBusWriter _w    # the segment being written; None while closed
    cdef public long _countdown       # writes until the next look at the limit
    cdef public int64_t _trigger      # the offset of the first slot past the segment's
                                      # middle: the writer that allocates it makes the spare
    cdef public bint _tix_on          # append to the time index (layout, "the journal")
    cdef public int64_t _tix_next     # the end (Unix ns) of the millisecond of this writer's
                                      # last time-index entry in the current segment; 0: none
    cdef public object path
    """The bus directory."""
    cdef public object segment_size
    """The logical size of every segment (from ``bus.meta`` once opened)."""
    cdef public object record_size
    """Payload bytes per record (from ``bus.meta`` once opened)."""
    cdef public object meta
    """The bus's ``BusMeta`` (its ``bus.meta``); None until opened."""


cdef class RollingReaderBase:
    cdef public MappedBusReader _r    # the segment being read; None while closed
    cdef public int64_t _base_pos     # the position of the segment's offset 0
    cdef public unsigned long _idle   # empty polls: the bus id's look is timed on 1 in 16
    cdef public int64_t _id_at        # monotonic ns when the bus id's next look is due (the
                                      # subclass's _check_id moves it)
    cdef public object _pending_gap   # (segment, offset): a consumer's position lost to
                                      # retention, reported by the next read; or None
    cdef public ConsumerHold _hold    # the consumer name held while open; None otherwise
    cdef public object path
    """The bus directory."""
    cdef public object segment_size
    """The logical size of every segment (from ``bus.meta`` once opened)."""
    cdef public object record_size
    """Payload bytes per record (from ``bus.meta`` once opened)."""
    cdef public object meta
    """The bus's ``BusMeta`` (its ``bus.meta``); None until opened."""
    cdef public object consumer
    """The consumer name this reader holds in the bus's registry, or None."""
    cdef public object idle
    """How this reader waits when there is nothing to read: "busy_spin", "spin_park" or
    "park"."""
    cdef public object read_only
    """True: the reader never writes the segments (a stalled slot is skipped after the
    timeout, not rolled back)."""
    cdef public object lost
    """Record slots skipped at gaps (``on_gap="skip"``): records lost to retention."""
    cdef public bint _frames          # a framed bus (set by the subclass at open)
    cdef public object _names         # framed: the TopicNames its segment readers share
    cdef public object _serializer    # framed: the serializer for objects; None: pickle

    cdef int _empty(self) except -1
    @cython.final
    cdef inline int _advance(self, object message) except -1
    cdef int _follow_on(self, object message) except -1