# cython: language_level=3
from libc.stdint cimport int32_t


cdef class MessageBase:
    cdef char *_buf            # the payload bytes, laid out as in the record (owned)
    cdef Py_ssize_t _size      # payload bytes the message uses (<= the bus record_size)
    cdef int32_t _type         # written to the record's metadata field
    cdef Py_ssize_t _len       # _size as the buffer protocol's shape
    cdef Py_ssize_t _exports   # buffers handed out


cdef class Field:
    cdef readonly str name
    """The attribute name the field was declared under."""
    cdef readonly Py_ssize_t offset
    """Byte offset within the payload; -1 until a message class lays the field out."""
    cdef readonly Py_ssize_t size
    """Bytes the field takes."""
    cdef readonly str code
    """numpy-style type code: ``'<i4'``, ``'<f8'``, ``'S16'``..."""
    cdef readonly str owner
    """Name of the message class that laid the field out (named in error messages)."""
    cdef int _kind                     # which C type, for the accessors' switch

    cdef str _what(self)
    cdef char *_at(self, obj) except NULL
    cdef int _store(self, char *payload, object value) except -1
    cdef int _out_of_range(self, object value) except -1
    cdef object _integer(self, object value)


cdef inline int check_message_fits(object message, Py_ssize_t record_size,
                                   str call) except -1:
    # A reader's check of the message it copies a record into (``call``: "read_into()",
    # "read_message()"): a Message whose payload fits a record_size-byte record, else the
    # TypeError or ValueError naming the problem. The caller then casts <MessageBase>.
    if not isinstance(message, MessageBase):
        raise TypeError(f"{call} needs a Message, got {type(message).__name__}")
    if (<MessageBase>message)._size > record_size:
        raise ValueError(f"{type(message).__name__} takes {(<MessageBase>message)._size} "
                         f"bytes, more than record_size {record_size}")
    return 0
