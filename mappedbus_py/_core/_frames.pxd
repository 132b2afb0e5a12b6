# cython: language_level=3
# Declarations of _frames.h (frames over consecutive slots: docs/design/frames.md).
from libc.stdint cimport int32_t, int64_t

cdef extern from "_frames.h" nogil:
    int FRAME_LENGTH_OFFSET, FRAME_TOPIC_OFFSET, FRAME_FLAGS_OFFSET, FRAME_HEADER_SIZE
    int FRAME_PAYLOAD_OFFSET, FRAME_RECORD_ALIGN, FRAME_MIN_RECORD_SIZE, FRAME_TOPIC_NONE
    int FRAME_ENCODING_MASK, FRAME_ENCODING_BYTES, FRAME_ENCODING_PICKLE, FRAME_ENCODING_SERIALIZED
    int32_t FRAME_META_FLAG
    int FRAME_META_COUNT_MASK, FRAME_MAX_SLOTS
    int TOPICS_MAX
    int FRAME_TOPIC_UNKNOWN, FRAME_TOPIC_WANTED, FRAME_TOPIC_UNWANTED
    int64_t frame_slots(int64_t length, int64_t slot)
    int64_t frame_meta_slots(int32_t meta)
    int32_t frame_meta_load(const char *rec)
    int frame_set_slots(char *rec, int64_t n)
    void frame_set_header(char *rec, int64_t length, int32_t topic, int32_t flags)
    int64_t frame_length(const char *rec)
    int32_t frame_topic(const char *rec)
    int32_t frame_flags(const char *rec)
    int64_t frame_check(const char *rec, int64_t pos, int64_t slot, int64_t file_size)
    int64_t frame_skip(const char *rec)
    int32_t frame_roll_back(char *rec, int64_t k, int64_t *slots_out)
    int64_t frame_slots_left(int64_t pos, int64_t last, int64_t slot)


cdef class TopicNames:
    # A reader's view of its bus's topics file: id -> name for rec.topic and, given a
    # filter, one byte per id (FRAME_TOPIC_*) that the compiled scan reads.
    cdef object path            # the topics file (PATH.topics or DIR/bus.topics)
    cdef bint allow_foreign
    cdef object _file           # TopicsFile once it exists; None before
    cdef dict _names            # id -> name, learned
    cdef object wanted          # frozenset of names a filter wants (None in it: untagged
                                # messages too); None: no filter
    cdef unsigned char want[256]  # FRAME_TOPIC_UNKNOWN / _WANTED / _UNWANTED per id
    cdef unsigned char *filter  # &want[0] with a filter; NULL without

    cdef object name_of(self, int32_t t)
    cdef int learn(self, int32_t t) except -1


from ._record cimport Record

# A committed message at offset rec of the mapping at base, as the readers hand it out.
cdef bytes frame_bytes(char *base, int64_t rec)
cdef Record frame_record(char *base, int64_t rec, int64_t position, TopicNames names,
                         object serializer)
cdef object frame_object(char *base, int64_t rec, int64_t position, object serializer)
cdef object frame_view(object mapping, char *base, int64_t rec)
cdef int64_t frame_into(char *base, int64_t rec, object buffer) except -1
cdef int check_into_buffer(object buffer) except -1
