# cython: language_level=3, embedsignature=True
from .errors import CorruptBusError


cdef class Record:
    """One committed record, as returned by ``MappedBusReader.read()``."""

    def __init__(self, int64_t position, int32_t meta, bytes payload):
        self.position = position
        self.meta = meta
        self.payload = payload

    @property
    def type(self):
        """The metadata read as an object message's type id."""
        return self.meta

    @property
    def length(self):
        """The metadata read as a byte-array record's length."""
        return self.meta

    @property
    def data(self):
        """The first ``length`` payload bytes: what a byte-array writer wrote."""
        if self.meta < 0 or self.meta > len(self.payload):
            raise CorruptBusError(f"record at {self.position} stores length {self.meta}, "
                                  f"outside 0..{len(self.payload)}")
        return self.payload[:self.meta]

    def __repr__(self):
        return f"Record(position={self.position}, meta={self.meta}, payload={self.payload.hex()})"

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        cdef Record o = <Record>other
        return o.position == self.position and o.meta == self.meta and o.payload == self.payload

    __hash__ = None

    def __reduce__(self):
        return (Record, (self.position, self.meta, self.payload))
