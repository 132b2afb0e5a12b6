# cython: language_level=3, embedsignature=True
cimport cython
from ..errors import CorruptBusError


@cython.embedsignature(False)     # the docstring carries the signature
cdef class Record:
    """Record(position, meta, payload, topic=None, flags=0, framed=False, serializer=None)
--

    One committed record, as returned by ``MappedBusReader.read()``. On a framed bus: one
    message, ``payload`` all of it, ``topic`` its topic name, ``object()`` the object
    ``write_object`` wrote."""

    def __init__(self, int64_t position, int32_t meta, bytes payload, topic=None,
                 int32_t flags=0, bint framed=False, serializer=None):
        self.position = position
        self.meta = meta
        self.payload = payload
        self.topic = topic
        self.flags = flags
        self.framed = framed
        self._serializer = serializer

    def object(self):
        """The object of a framed bus's message written by ``write_object`` (pickle 5: numpy
        arrays come back as read-only views of ``payload``; a reader's ``read_object()``
        gives writable ones), or by the writer's ``serializer`` (the reader's decodes it).
        TypeError for a message of raw bytes."""
        if not self.framed:
            raise TypeError("object() reads a framed bus's message (frames=True)")
        from ..formats.objects import decode
        return decode(self.payload, self.flags, self._serializer,
                      where=f"the message at {self.position}")

    @property
    def type(self):
        """The metadata read as an object message's type id."""
        return self.meta

    @property
    def length(self):
        """The metadata read as a byte-array record's length (a framed bus's message: its
        length)."""
        if self.framed:
            return len(self.payload)
        return self.meta

    @property
    def data(self):
        """The first ``length`` payload bytes: what a byte-array writer wrote (a framed bus's
        message: all of ``payload``)."""
        if self.framed:
            return self.payload
        if self.meta < 0 or self.meta > len(self.payload):
            raise CorruptBusError(f"record at {self.position} stores length {self.meta}, "
                                  f"outside 0..{len(self.payload)}")
        return self.payload[:self.meta]

    def decode(self, types):
        """This record as the message class its type id names, or as bytes.

        ``types`` maps type ids to ``Message`` classes (``{0: PriceUpdate, 2: Trade}``), or
        is a sequence of classes keyed by their ``type_id``. A record whose metadata is one
        of those ids comes back as a new instance of that class, filled from the payload;
        any other record is taken for a byte-array record and comes back as ``data`` (its
        bytes). The metadata field holds either a type id or a length, so on a bus that
        mixes both, pick type ids no byte-array record length can be (negative ones, or
        above ``record_size``).
        """
        if isinstance(types, dict):
            cls = types.get(self.meta)
        else:
            cls = None
            for c in types:
                if c.type_id == self.meta:
                    cls = c
                    break
        if cls is None:
            return self.data
        return cls.from_bytes(self.payload)

    def __repr__(self):
        if self.framed:
            head = self.payload[:32].hex() + ("..." if len(self.payload) > 32 else "")
            return (f"Record(position={self.position}, topic={self.topic!r}, "
                    f"length={len(self.payload)}, payload={head})")
        return f"Record(position={self.position}, meta={self.meta}, payload={self.payload.hex()})"

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        cdef Record o = <Record>other
        return (o.position == self.position and o.meta == self.meta and o.payload == self.payload
                and o.topic == self.topic and o.flags == self.flags and o.framed == self.framed)

    __hash__ = None

    def __reduce__(self):
        if self.framed:
            return (Record, (self.position, self.meta, self.payload, self.topic, self.flags,
                             True))
        return (Record, (self.position, self.meta, self.payload))
