# cython: language_level=3
# Declarations of _writers.h (the writers file's protocol) and the class that maps it.
from libc.stdint cimport int32_t, int64_t

cdef extern from "_writers.h" nogil:
    int WRITERS_FILE_SIZE, WRITERS_VERSION, WRITERS_MAGIC_OFFSET, WRITERS_VERSION_OFFSET
    int WRITERS_SLOTS_OFFSET, WRITER_SLOT_SIZE, WRITER_SLOT_COUNT, WRITER_BEGIN_OFFSET
    int WRITER_END_OFFSET, WRITER_PID_OFFSET, WRITER_TAKEN_NS_OFFSET
    long long WRITERS_MAGIC
    int WRITER_UNKNOWN, WRITER_ALIVE, WRITER_DEAD
    char *writers_slot(char *w, int i)
    int64_t writers_live_byte(int i)
    int writers_init(char *w)
    void writers_publish(char *slot, int64_t begin, int64_t end)
    void writers_clear(char *slot)
    void writers_load_claim(char *slot, int64_t *begin, int64_t *end)
    int writers_holder(char *w, int fd, int64_t p, int *slot_out, int64_t *begin, int64_t *end)
    int writers_clear_dead(char *w, int fd)
    int64_t writers_roll_back(char *base, int64_t base_position, int64_t start, int64_t stop,
                              int64_t first, int64_t last, int64_t slot_size, int aligned)


cdef class WritersFile:
    cdef char *base            # the shared mapping (WRITERS_FILE_SIZE bytes); NULL once closed
    cdef readonly object path
    """The writers file's path."""
    cdef readonly bint writable  # opened read-write (a writer's); a reader's maps it read-only
    cdef object _live          # LiveFile: this object's own open file description, whose
                               # descriptor holds (writer) or probes (reader) liveness bytes
    cdef readonly object st_ino  # identity of the mapped file, to notice it was replaced
    cdef readonly object st_dev
    cdef char *slot            # the slot this object holds: the line its writer publishes
                               # claims to; NULL while it holds none
    cdef int _index            # that slot's index (meaningful while slot != NULL)
    cdef int _pid              # the process that took it: a forked child holds nothing
    cdef int dead              # 1: the file shrank under the mapping (the SIGBUS guard mapped
                               # zeros over it): it says nothing any more
    cdef int _guard_slot       # the mapping's entry in the SIGBUS guard (_mapping), or -1

    cdef _unmap(self)
    cdef int holder(self, int64_t position, int *index, int64_t *begin, int64_t *end) except -1
