# cython: language_level=3
# A reader's hold on one named consumer of its bus (Java: ConsumerHold).
from libc.stdint cimport int64_t

from ._atomic cimport load_acquire_i64
from ._consumers cimport ConsumerRegistry, consumer_commit


cdef class ConsumerHold:
    cdef ConsumerRegistry registry # the registry holding the entry; None once released
    cdef readonly object name
    """The consumer's name."""
    cdef int index             # its entry's index
    cdef char *entry           # the entry in the registry's mapping; NULL once released
    cdef int *dead             # the registry's truncation flag and the fork counter, checked
    cdef int *fork             # by every commit around its store
    cdef int64_t *clock        # the commits' clock (_consumers_clock.h)
    cdef int gen               # the fork counter when the entry was claimed
    cdef readonly int64_t position
    """The position committed when it was claimed (the start, if ``made``)."""
    cdef readonly bint made
    """The entry was made by this claim (the name was new)."""

    cdef int refused(self) except -1


cdef inline int hold_commit(ConsumerHold h, int64_t pos) except -1:
    # Store pos as h's committed position (consumer_commit: one ordered store, then the
    # time); refused (raises) after a fork or a release, or when the registry shrank under
    # the store (which then went nowhere).
    if h.entry == NULL or h.fork[0] != h.gen:
        h.refused()
    consumer_commit(h.entry, pos, load_acquire_i64(h.clock))
    if h.dead[0]:
        h.refused()
    return 0
