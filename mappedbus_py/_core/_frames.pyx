# cython: language_level=3, embedsignature=True
"""A reader's side of frames (docs/design/frames.md): the topic names and filter the scan
consults, and a message as a ``Record``. The scan's steps over frames are _frames.h's."""
import os

from libc.stdint cimport int32_t, int64_t, uintptr_t
from libc.string cimport memset

from ..errors import CorruptBusError
from ..formats.layout import TOPICS_MAX as _TOPICS_MAX

from ._atomic cimport load_acquire_i32, status_load_acquire
from ._layout cimport FIRST_RECORD_OFFSET

__all__ = ("TopicNames", "C_CONSTANTS", "frames_settled")

#: The header's constants as compiled, for the test that checks them against layout.py.
C_CONSTANTS = {
    "FRAME_META_FLAG": FRAME_META_FLAG, "FRAME_META_COUNT_MASK": FRAME_META_COUNT_MASK,
    "FRAME_MAX_SLOTS": FRAME_MAX_SLOTS, "FRAME_LENGTH_OFFSET": FRAME_LENGTH_OFFSET,
    "FRAME_TOPIC_OFFSET": FRAME_TOPIC_OFFSET, "FRAME_FLAGS_OFFSET": FRAME_FLAGS_OFFSET,
    "FRAME_HEADER_SIZE": FRAME_HEADER_SIZE, "FRAME_PAYLOAD_OFFSET": FRAME_PAYLOAD_OFFSET,
    "FRAME_RECORD_ALIGN": FRAME_RECORD_ALIGN, "FRAME_MIN_RECORD_SIZE": FRAME_MIN_RECORD_SIZE,
    "FRAME_TOPIC_NONE": FRAME_TOPIC_NONE, "FRAME_ENCODING_MASK": FRAME_ENCODING_MASK,
    "FRAME_ENCODING_BYTES": FRAME_ENCODING_BYTES, "FRAME_ENCODING_PICKLE": FRAME_ENCODING_PICKLE,
    "FRAME_ENCODING_SERIALIZED": FRAME_ENCODING_SERIALIZED, "TOPICS_MAX": TOPICS_MAX,
}
assert TOPICS_MAX == _TOPICS_MAX and TOPICS_MAX < 256


def slots_settled(const unsigned char[::1] mapping, int64_t end, int64_t slot):
    """Whether every slot of a full segment of fixed-size records is settled: each status
    word, from FIRST_RECORD_OFFSET while a slot fits below ``end``, loaded with acquire
    ordering and not 0 (committed or rolled back), so that what the caller reads of the
    records afterwards is what was committed. ``frames_settled``'s counterpart for a bus
    without frames (there every slot has a status); the archiver's check before it copies
    a segment (about 1 ms for a 16 MiB segment of 20-byte slots, its pages mapped)."""
    cdef char *base
    cdef int64_t pos = FIRST_RECORD_OFFSET
    cdef bint aligned = slot % 4 == 0, ok = True
    if slot <= 0 or end > <int64_t>mapping.shape[0]:
        raise ValueError(f"slots_settled: end {end} past the mapping "
                         f"({mapping.shape[0]} bytes) or slot {slot} not positive")
    base = <char *>&mapping[0]        # read only: the status is loaded, never stored
    with nogil:
        while pos + slot <= end:
            if status_load_acquire(base + pos, aligned) == 0:
                ok = False
                break
            pos += slot
    return ok


def frames_settled(const unsigned char[::1] mapping, int64_t end, int64_t slot, path=None):
    """Whether every frame of a full framed segment is settled: its first slots, from
    FIRST_RECORD_OFFSET while a slot fits below ``end`` (the segment's end boundary), each
    committed (status 1, a frame whose header fits) or rolled back / padding (status 2,
    frame_skip slots passed); False at the first message not committed yet. Continuation
    slots are never read as statuses (they hold payload). ``mapping``: the segment's bytes
    (read-only is fine). CorruptBusError naming ``path`` and the position for any other
    status or an impossible committed frame. The archiver's check before a move."""
    cdef const char *base
    cdef int64_t pos = FIRST_RECORD_OFFSET, n
    cdef int32_t status
    if slot <= 0 or end > <int64_t>mapping.shape[0]:
        raise ValueError(f"frames_settled: end {end} past the mapping "
                         f"({mapping.shape[0]} bytes) or slot {slot} not positive")
    base = <const char *>&mapping[0]
    while pos + slot <= end:
        status = load_acquire_i32(base + pos)
        if status == 0:
            return False
        if status == 1:
            n = frame_check(base + pos, pos, slot, end)
            if n == 0:
                raise CorruptBusError(f"{path!r}: the committed frame at offset {pos} has an "
                                      f"impossible header (slot count, length or topic)")
        elif status == 2:
            n = frame_skip(base + pos)
        else:
            raise CorruptBusError(f"{path!r}: the frame at offset {pos} has status {status} "
                                  f"(0, 1 or 2 expected)")
        pos += n * slot
    return True


def check_topics(topics):
    """A reader's ``topics=`` as a frozenset of names (None in it: untagged messages too),
    or None (no filter). TypeError / ValueError at once for a bad one."""
    from ._topics import check_topic_name
    if topics is None:
        return None
    if isinstance(topics, (str, bytes)):
        raise TypeError(f"topics= takes a list of topic names, not one {type(topics).__name__}"
                        f" ({topics!r}): write topics=[{topics!r}]")
    try:
        names = list(topics)
    except TypeError:
        raise TypeError(f"topics= takes a list of topic names, not {type(topics).__name__}") \
            from None
    for n in names:
        if n is not None:
            check_topic_name(n)
    return frozenset(names)


cdef class TopicNames:
    """TopicNames(path, wanted=None, allow_foreign=False)

    The topic names of the bus whose topics file is ``path``, as a reader learns them (once
    per id), and the filter ``wanted`` (names; None: every message)."""

    def __cinit__(self, path, wanted=None, bint allow_foreign=False):
        self.path = os.fspath(path)
        self.allow_foreign = allow_foreign
        self._file = None
        self._names = {}
        self.wanted = check_topics(wanted)
        memset(self.want, FRAME_TOPIC_UNKNOWN, 256)
        self.want[0] = FRAME_TOPIC_UNKNOWN
        if self.wanted is not None:
            self.filter = &self.want[0]
            self.want[0] = FRAME_TOPIC_WANTED if None in self.wanted else FRAME_TOPIC_UNWANTED
        else:
            self.filter = NULL

    @property
    def topics(self):
        """The filter's names (a frozenset), or None."""
        return self.wanted

    cdef object name_of(self, int32_t t):
        if t == 0:
            return None
        name = self._names.get(t)
        if name is None:
            self.learn(t)
            name = self._names[t]
        return name

    cdef int learn(self, int32_t t) except -1:
        # A committed message carries id t: its entry is published (the writer published it
        # before it wrote the message). Read it; mark the filter's byte.
        from ._topics import TopicsFile
        if not 1 <= t <= TOPICS_MAX:
            raise CorruptBusError(f"{self.path!r}: a message carries topic id {t}, outside "
                                  f"1..{TOPICS_MAX}")
        if self._file is None:
            try:
                self._file = TopicsFile(self.path, writable=False,
                                        allow_foreign=self.allow_foreign)
            except FileNotFoundError:
                raise CorruptBusError(f"a message carries topic id {t} but the bus has no "
                                      f"topics file {self.path!r}") from None
        name = self._file.name_of(t)
        if name is None:
            raise CorruptBusError(f"{self.path!r}: a committed message carries topic id {t}, "
                                  f"whose entry is not published: a corrupt topics file")
        self._names[t] = name
        if self.wanted is not None:
            self.want[t] = FRAME_TOPIC_WANTED if name in self.wanted else FRAME_TOPIC_UNWANTED
        return 0

    def name(self, int32_t t):
        """The name of topic id ``t`` (None for 0)."""
        return self.name_of(t)

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None


from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_WRITABLE, PyBUF_C_CONTIGUOUS
from cpython.bytearray cimport PyByteArray_FromStringAndSize
from libc.string cimport memcpy

from ..errors import MessageTooSmallBufferError


cdef extern from *:
    """
    #include <sys/mman.h>
    #ifndef MADV_POPULATE_READ
    #define MADV_POPULATE_READ 22   /* Linux 5.14; older kernels refuse it with EINVAL */
    #endif
    """
    int MADV_POPULATE_READ
    int madvise(void *addr, size_t length, int advice) nogil

# A message at least this long has its pages mapped with one madvise before it is copied
# (MADV_POPULATE_READ), not one fault a page: 1 MiB is 256 faults.
cdef int64_t POPULATE_FROM = 256 * 1024


cdef inline void _map_ahead(char *base, int64_t p, int64_t n) noexcept:
    cdef uintptr_t a, e
    if n >= POPULATE_FROM:
        a = (<uintptr_t>(base + p)) & ~(<uintptr_t>4095)
        e = (<uintptr_t>(base + p + n) + 4095) & ~(<uintptr_t>4095)
        madvise(<void *>a, e - a, MADV_POPULATE_READ)     # a hint: errors change nothing


cdef bytes frame_bytes(char *base, int64_t rec):
    cdef int64_t n = frame_length(base + rec)
    cdef int64_t p = rec + FRAME_PAYLOAD_OFFSET
    _map_ahead(base, p, n)
    return base[p:p + n]


cdef Record frame_record(char *base, int64_t rec, int64_t position, TopicNames names,
                         object serializer):
    cdef Record r = Record.__new__(Record)
    cdef int32_t t = frame_topic(base + rec)
    r.position = position
    r.meta = frame_meta_load(base + rec)
    r.payload = frame_bytes(base, rec)
    r.topic = names.name_of(t) if t != 0 else None
    r.flags = frame_flags(base + rec)
    r.framed = True
    r._serializer = serializer
    return r


cdef object frame_object(char *base, int64_t rec, int64_t position, object serializer):
    # The message copied once into a bytearray of its own, then decoded: numpy arrays come
    # back as writable views of it.
    from ..formats.objects import decode
    cdef int64_t n = frame_length(base + rec)
    data = PyByteArray_FromStringAndSize(base + rec + FRAME_PAYLOAD_OFFSET, n)
    return decode(data, frame_flags(base + rec), serializer,
                  where=f"the message at {position}")


cdef object frame_view(object mapping, char *base, int64_t rec):
    # The message as a read-only memoryview of ``mapping`` (the MappedFile at ``base``): no
    # copy. The view holds one of the mapping's exports, so the mapping cannot be unmapped
    # under it (MappedFile.close refuses while it lives); frame_check bounded the span.
    cdef int64_t n = frame_length(base + rec)
    cdef int64_t p = rec + FRAME_PAYLOAD_OFFSET
    _map_ahead(base, p, n)
    return memoryview(mapping)[p:p + n].toreadonly()


cdef int64_t frame_into(char *base, int64_t rec, object buffer) except -1:
    # Copy the message into ``buffer`` (writable, C-contiguous): its length.
    # MessageTooSmallBufferError (nothing copied) if it does not fit.
    cdef Py_buffer view
    cdef int64_t n = frame_length(base + rec)
    PyObject_GetBuffer(buffer, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS)
    try:
        if n > view.len:
            raise MessageTooSmallBufferError(
                f"the next message is {n} bytes, longer than the {view.len}-byte buffer "
                f"given to read_into (it is still the next message)", n)
        _map_ahead(base, rec + FRAME_PAYLOAD_OFFSET, n)
        memcpy(view.buf, base + rec + FRAME_PAYLOAD_OFFSET, n)
    finally:
        PyBuffer_Release(&view)
    return n


cdef int check_into_buffer(object buffer) except -1:
    # TypeError at once for what read_into cannot copy a message into.
    cdef Py_buffer view
    try:
        PyObject_GetBuffer(buffer, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS)
    except (TypeError, BufferError, ValueError) as e:
        raise TypeError(f"read_into() on a framed bus copies into a writable, C-contiguous "
                        f"buffer (bytearray, numpy array), not {type(buffer).__name__} ({e})") \
            from None
    PyBuffer_Release(&view)
    return 0
