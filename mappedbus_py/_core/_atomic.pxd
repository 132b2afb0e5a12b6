# cython: language_level=3
# Declarations of _atomic.h (the only place that spells __atomic_), plus the two status
# accessors every reader and writer uses.
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memcpy

cdef extern from "_atomic.h" nogil:
    int64_t load_acquire_i64(const void *p)
    int32_t load_acquire_i32(const void *p)
    uint8_t load_acquire_u8(const void *p)
    void store_release_i64(void *p, int64_t v)
    void store_release_i32(void *p, int32_t v)
    int64_t fetch_add_i64(void *p, int64_t v)
    int64_t cas_i64(void *p, int64_t expected, int64_t desired)
    int32_t cas_i32(void *p, int32_t expected, int32_t desired)
    uint8_t cas_u8(void *p, uint8_t expected, uint8_t desired)
    void cpu_relax()


cdef inline int32_t status_load_acquire(char *p, bint aligned) noexcept nogil:
    # A misaligned status is read as its low byte (acquire) plus the three upper bytes,
    # which valid files keep at zero; a nonzero upper byte shows as a corrupt status.
    cdef uint8_t upper[4]
    cdef int32_t rest
    if aligned:
        return load_acquire_i32(p)
    upper[0] = load_acquire_u8(p)
    memcpy(&upper[1], p + 1, 3)
    memcpy(&rest, upper, 4)
    return rest


cdef inline int32_t status_cas(char *p, bint aligned, int32_t expected, int32_t desired) noexcept nogil:
    # Returns the old status; equal to ``expected`` when the swap happened. Only 0/1/2 are
    # ever swapped, so on a misaligned status the low byte carries the whole value.
    cdef int32_t old
    if aligned:
        return cas_i32(p, expected, desired)
    old = status_load_acquire(p, False)
    if old & ~0xFF:
        return old
    return cas_u8(p, <uint8_t>expected, <uint8_t>desired)
