# cython: language_level=3, embedsignature=True
"""Fixed-layout object messages: a payload buffer plus typed field descriptors.

A message owns one small buffer laid out exactly as its payload sits in a record, so a
writer copies it with one memcpy and a reader fills it with one memcpy, allocating
nothing per message. Fields are little-endian, at fixed offsets, like the fields the Java
``MappedBusMessage`` samples put with ``MemoryMappedFile.putInt`` and friends.
"""
from cpython.buffer cimport PyBUF_WRITABLE, PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.mem cimport PyMem_Calloc, PyMem_Free
from cpython.number cimport PyNumber_Index
from cpython.long cimport PyLong_CheckExact
from cpython.exc cimport PyErr_Occurred, PyErr_Clear

cdef extern from "Python.h":
    # An out-of-range value sets the flag, not an exception: the range check below costs a
    # compare, where catching Cython's own OverflowError would save and restore the
    # exception state on every store (+100 instructions a three-field record, callgrind).
    long long PyLong_AsLongLongAndOverflow(object, int *overflow) except? -1
    # Declared without an exception value: its -1 is checked by hand, to raise our message.
    unsigned long long PyLong_AsUnsignedLongLong(object)
from cpython.float cimport PyFloat_CheckExact
from libc.stdint cimport (INT8_MIN, INT8_MAX, INT16_MIN, INT16_MAX, INT32_MIN, INT32_MAX,
                          UINT8_MAX, UINT16_MAX, UINT32_MAX)
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset, memcmp

cdef enum:
    K_I8, K_I16, K_I32, K_I64, K_U8, K_U16, K_U32, K_U64, K_F32, K_F64, K_BYTES

_KINDS = {
    "<i1": (K_I8, 1), "<i2": (K_I16, 2), "<i4": (K_I32, 4), "<i8": (K_I64, 8),
    "<u1": (K_U8, 1), "<u2": (K_U16, 2), "<u4": (K_U32, 4), "<u8": (K_U64, 8),
    "<f4": (K_F32, 4), "<f8": (K_F64, 8),
}
# The declaring function's name of each type code, for error messages.
_TYPE_NAMES = {
    "<i1": "int8", "<i2": "int16", "<i4": "int32", "<i8": "int64",
    "<u1": "uint8", "<u2": "uint16", "<u4": "uint32", "<u8": "uint64",
    "<f4": "float32", "<f8": "float64",
}


cdef class MessageBase:
    """Base of every object message; see ``mappedbus_py.Message`` for declaring one."""

    def __cinit__(self, *args, **kwargs):
        cls = type(self)
        size = getattr(cls, "_payload_size_", None)
        if size is None:
            raise TypeError(f"{cls.__name__} declares no fields: subclass mappedbus_py.Message")
        self._size = size
        self._len = size
        self._type = cls.type_id
        self._buf = <char *>PyMem_Calloc(max(<Py_ssize_t>size, 1), 1)
        if self._buf == NULL:
            raise MemoryError()

    def __dealloc__(self):
        PyMem_Free(self._buf)

    def type(self):
        """The type id written to the metadata field (Java ``MappedBusMessage.type()``)."""
        return self._type

    def size(self):
        """Payload bytes this message takes (Java ``MappedBusMessage.size()``)."""
        return self._size

    def to_bytes(self):
        """The payload bytes, as they sit in a record."""
        return self._buf[:self._size]

    def load_bytes(self, data):
        """Set every field from payload bytes (at least ``size()`` long)."""
        cdef Py_buffer view
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            if view.len < self._size:
                raise ValueError(f"{type(self).__name__} needs {self._size} bytes, got {view.len}")
            memcpy(self._buf, view.buf, self._size)
        finally:
            PyBuffer_Release(&view)
        return self

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        cdef MessageBase o = <MessageBase>other
        return o._type == self._type and memcmp(o._buf, self._buf, self._size) == 0

    # Messages are mutable (fields are set in place, buffers are handed out), so they are not
    # hashable: equal messages may stop being equal.
    __hash__ = None

    def __reduce__(self):
        # By class and payload bytes: unpickling needs the class importable, as for any object.
        return _rebuild, (type(self), self._buf[:self._size])

    def __copy__(self):
        cdef MessageBase c = type(self).__new__(type(self))
        memcpy(c._buf, self._buf, self._size)
        return c

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __getbuffer__(self, Py_buffer *view, int flags):
        view.buf = self._buf
        view.obj = self
        view.len = self._size
        view.readonly = 0
        view.itemsize = 1
        view.format = "B"
        view.ndim = 1
        view.shape = &self._len
        view.strides = &_ONE
        view.suboffsets = NULL
        view.internal = NULL
        self._exports += 1

    def __releasebuffer__(self, Py_buffer *view):
        self._exports -= 1


cdef Py_ssize_t _ONE = 1


def _rebuild(cls, data):
    """Unpickling: a ``cls`` message holding the payload ``data``."""
    cdef MessageBase m = cls.__new__(cls)
    return m.load_bytes(data)


cdef class Field:
    """A fixed-size field of a message: a descriptor reading and writing its bytes.

    Made by ``int32()``, ``float64()``, ``fixed_bytes(n)`` and the like in a ``Message``
    class body; ``name``, ``offset`` (in the payload), ``size`` (bytes), ``code`` (numpy-style
    type code) and ``owner`` (the name of the message class that laid it out) describe it.
    """

    def __init__(self, str code, Py_ssize_t offset=-1):
        if code in _KINDS:
            self._kind, self.size = _KINDS[code]
        elif code.startswith("S") and code[1:].isdigit() and int(code[1:]) > 0:
            self._kind, self.size = K_BYTES, int(code[1:])
        else:
            raise ValueError(f"unknown field type {code!r}")
        self.code = code
        self.offset = offset
        self.name = None
        self.owner = None

    def __set_name__(self, owner, name):
        """Record the attribute name (and the class) this field was declared under."""
        self.name = name
        self.owner = owner.__name__

    def _placed(self, Py_ssize_t offset, owner=None):
        """A copy of this field at ``offset`` (used when a message class is laid out)."""
        f = Field(self.code, offset)
        f.name = self.name
        f.owner = self.owner if owner is None else owner
        return f

    @property
    def type_name(self):
        """The field's type as it is declared: ``int32``, ``float64``, ``fixed_bytes(8)``..."""
        return _TYPE_NAMES.get(self.code) or f"fixed_bytes({self.size})"

    @property
    def value_range(self):
        """``(lowest, highest)`` value of an integer field; None for float and bytes fields."""
        if self._kind > K_U64:
            return None
        bits = self.size * 8
        if self.code[1] == "u":
            return (0, (1 << bits) - 1)
        return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)

    cdef str _what(self):
        # "PriceUpdate.price (int32)": the class, the field and its type, for error messages.
        return f"{self.owner or 'message'}.{self.name} ({self.type_name})"

    def __repr__(self):
        return f"Field({self.name!r}, {self.code!r}, offset={self.offset})"

    cdef char *_at(self, obj) except NULL:
        if not isinstance(obj, MessageBase):
            raise TypeError(f"field {self.name!r} belongs to a message, not {type(obj).__name__}")
        cdef MessageBase m = <MessageBase>obj
        if self.offset < 0 or self.offset + self.size > m._size:
            raise TypeError(f"field {self.name!r} is not part of {type(obj).__name__}'s layout")
        return m._buf + self.offset

    def __get__(self, obj, objtype):
        """The field's value in message ``obj`` (the field itself on the class)."""
        if obj is None:
            return self
        cdef char *p = self._at(obj)
        cdef int8_t i8
        cdef int16_t i16
        cdef int32_t i32
        cdef int64_t i64
        cdef uint8_t u8
        cdef uint16_t u16
        cdef uint32_t u32
        cdef uint64_t u64
        cdef float f32
        cdef double f64
        if self._kind == K_I32:
            memcpy(&i32, p, 4); return i32
        elif self._kind == K_I64:
            memcpy(&i64, p, 8); return i64
        elif self._kind == K_F64:
            memcpy(&f64, p, 8); return f64
        elif self._kind == K_I8:
            memcpy(&i8, p, 1); return i8
        elif self._kind == K_I16:
            memcpy(&i16, p, 2); return i16
        elif self._kind == K_U8:
            memcpy(&u8, p, 1); return u8
        elif self._kind == K_U16:
            memcpy(&u16, p, 2); return u16
        elif self._kind == K_U32:
            memcpy(&u32, p, 4); return u32
        elif self._kind == K_U64:
            memcpy(&u64, p, 8); return u64
        elif self._kind == K_F32:
            memcpy(&f32, p, 4); return f32
        return p[:self.size]

    def __set__(self, obj, value):
        """Store ``value`` into message ``obj``, checked (see ``Message``); nothing is
        written when it does not fit."""
        self._store(self._at(obj) - self.offset, value)

    cdef int _store(self, char *payload, object value) except -1:
        # Strict conversions: a float is never truncated into an integer field (1.7 would
        # store 1), and a bool is refused in any numeric field (True would store 1 silently).
        # Integers convert through __index__ (numpy integers work), floats through
        # __float__. A value that does not fit raises before anything is written: an
        # OverflowError naming the class, the field, its type and its range.
        cdef char *p = payload + self.offset
        cdef int8_t i8
        cdef int16_t i16
        cdef int32_t i32
        cdef int64_t i64
        cdef uint8_t u8
        cdef uint16_t u16
        cdef uint32_t u32
        cdef uint64_t u64
        cdef float f32
        cdef double f64
        cdef Py_buffer view
        cdef int kind = self._kind
        cdef long long x
        cdef int ovf
        if kind <= K_U64:
            if not PyLong_CheckExact(value):
                value = self._integer(value)
            x = PyLong_AsLongLongAndOverflow(value, &ovf)
            if kind == K_I32:
                if ovf or x < INT32_MIN or x > INT32_MAX:
                    return self._out_of_range(value)
                i32 = <int32_t>x; memcpy(p, &i32, 4)
            elif kind == K_I64:
                if ovf:
                    return self._out_of_range(value)
                i64 = <int64_t>x; memcpy(p, &i64, 8)
            elif kind == K_I8:
                if ovf or x < INT8_MIN or x > INT8_MAX:
                    return self._out_of_range(value)
                i8 = <int8_t>x; memcpy(p, &i8, 1)
            elif kind == K_I16:
                if ovf or x < INT16_MIN or x > INT16_MAX:
                    return self._out_of_range(value)
                i16 = <int16_t>x; memcpy(p, &i16, 2)
            elif kind == K_U8:
                if ovf or x < 0 or x > UINT8_MAX:
                    return self._out_of_range(value)
                u8 = <uint8_t>x; memcpy(p, &u8, 1)
            elif kind == K_U16:
                if ovf or x < 0 or x > UINT16_MAX:
                    return self._out_of_range(value)
                u16 = <uint16_t>x; memcpy(p, &u16, 2)
            elif kind == K_U32:
                if ovf or x < 0 or x > UINT32_MAX:
                    return self._out_of_range(value)
                u32 = <uint32_t>x; memcpy(p, &u32, 4)
            else:
                if ovf > 0:
                    u64 = PyLong_AsUnsignedLongLong(value)
                    if u64 == <uint64_t>-1 and PyErr_Occurred():
                        PyErr_Clear()
                        return self._out_of_range(value)
                elif ovf < 0 or x < 0:
                    return self._out_of_range(value)
                else:
                    u64 = <uint64_t>x
                memcpy(p, &u64, 8)
        elif kind == K_F64 or kind == K_F32:
            if not PyFloat_CheckExact(value) and (
                    isinstance(value, (bool, str, bytes, bytearray))):
                raise TypeError(f"{self._what()} holds a float, not "
                                f"{type(value).__name__} {value!r}")
            f64 = value
            if kind == K_F64:
                memcpy(p, &f64, 8)
            else:
                f32 = <float>f64; memcpy(p, &f32, 4)
        else:
            if isinstance(value, str):
                raise TypeError(f"{self._what()} holds bytes, not str (encode it first)")
            PyObject_GetBuffer(value, &view, PyBUF_SIMPLE)
            try:
                if view.len > self.size:
                    raise ValueError(f"{self._what()} holds {self.size} bytes, got {view.len}")
                memcpy(p, view.buf, view.len)
                memset(p + view.len, 0, self.size - view.len)
            finally:
                PyBuffer_Release(&view)
        return 0

    cdef int _out_of_range(self, object value) except -1:
        lo, hi = self.value_range
        raise OverflowError(f"{self._what()} holds {lo} to {hi}, got {value}")

    cdef object _integer(self, object value):
        if isinstance(value, bool):
            raise TypeError(f"{self._what()} holds an integer, not bool {value!r} "
                            f"(write int({value!r}) if you mean it)")
        if isinstance(value, float):
            raise TypeError(f"{self._what()} holds an integer, not float {value!r} "
                            f"(a float is never truncated: round it first)")
        try:
            return PyNumber_Index(value)
        except TypeError:
            raise TypeError(f"{self._what()} holds an integer, not "
                            f"{type(value).__name__} {value!r}") from None

    def __delete__(self, obj):
        """Refused: a message always has every field."""
        raise AttributeError(f"message fields cannot be deleted")
