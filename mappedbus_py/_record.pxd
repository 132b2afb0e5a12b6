# cython: language_level=3
from libc.stdint cimport int32_t, int64_t


cdef class Record:
    cdef readonly int64_t position   # offset of the record in the file
    cdef readonly int32_t meta       # the metadata field: a type id or a byte length
    cdef readonly bytes payload      # all record_size payload bytes of the slot
