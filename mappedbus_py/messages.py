"""Declaring object messages, and the messages the samples use.

A message is a class with a type id and fixed fields, laid out in declaration order with
no padding (or at explicit offsets), little-endian: the same bytes the Java
``MappedBusMessage`` classes put into a record::

    class PriceUpdate(Message, type_id=0):
        source = int32()
        price = int32()
        quantity = int32()
"""
from ._core._message import Field, MessageBase

__all__ = (
    "Message", "Field", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
    "uint64", "float32", "float64", "fixed_bytes", "PriceUpdate", "Token", "Trade",
)


def int8(offset=-1):
    """A field holding a signed 8-bit integer (Java ``byte``), little-endian, at ``offset``
    (default: after the previous field)."""
    return Field("<i1", offset)


def int16(offset=-1):
    """A field holding a signed 16-bit integer (Java ``short``), little-endian, at ``offset``
    (default: after the previous field)."""
    return Field("<i2", offset)


def int32(offset=-1):
    """A field holding a signed 32-bit integer (Java ``int``), little-endian, at ``offset``
    (default: after the previous field)."""
    return Field("<i4", offset)


def int64(offset=-1):
    """A field holding a signed 64-bit integer (Java ``long``), little-endian, at ``offset``
    (default: after the previous field)."""
    return Field("<i8", offset)


def uint8(offset=-1):
    """A field holding an unsigned 8-bit integer, little-endian, at ``offset`` (default: after
    the previous field)."""
    return Field("<u1", offset)


def uint16(offset=-1):
    """A field holding an unsigned 16-bit integer (Java ``char``), little-endian, at ``offset``
    (default: after the previous field)."""
    return Field("<u2", offset)


def uint32(offset=-1):
    """A field holding an unsigned 32-bit integer, little-endian, at ``offset`` (default: after
    the previous field)."""
    return Field("<u4", offset)


def uint64(offset=-1):
    """A field holding an unsigned 64-bit integer, little-endian, at ``offset`` (default: after
    the previous field)."""
    return Field("<u8", offset)


def float32(offset=-1):
    """A field holding an IEEE 754 single (Java ``float``), little-endian, at ``offset``
    (default: after the previous field)."""
    return Field("<f4", offset)


def float64(offset=-1):
    """A field holding an IEEE 754 double (Java ``double``), little-endian, at ``offset``
    (default: after the previous field)."""
    return Field("<f8", offset)



def fixed_bytes(size, offset=-1):
    """``size`` raw bytes; shorter values are zero-padded on write."""
    return Field(f"S{int(size)}", offset)


# Names a field may not take: they are the Message API (or Python's). ``size`` and ``type``
# are allowed: the Java-style ``size()`` and ``type()`` methods give way to such a field, and
# ``payload_size`` / ``type_id`` (class attributes) always give the same figures.
RESERVED = frozenset({"fields", "type_id", "payload_size", "to_bytes", "load_bytes",
                      "from_bytes", "as_dict", "numpy_dtype"})


class Message(MessageBase):
    """Base class of object messages. Subclass it with ``type_id=`` and field attributes.

    ``size=`` pads the payload to a given length. Instances are built with the fields as
    positional or keyword arguments; unset fields are zero. ``repr`` matches the Java
    samples' ``toString`` (``PriceUpdate [source=0, price=20, quantity=40]``).

    Field values are checked strictly: an integer field takes ints (and numpy integers), never
    a float (``PriceUpdate(price=1.7)`` raises TypeError instead of storing 1) nor a bool;
    a float field takes ints and floats, not bools. Messages compare equal when their class
    and payload bytes are equal; they pickle and copy; being mutable, they are not hashable.

    Field names are checked when the class is defined: the Message API's names (``fields``,
    ``type_id``, ``payload_size``, ``to_bytes``, ``load_bytes``, ``from_bytes``, ``as_dict``,
    ``numpy_dtype``) and names starting with ``_`` are refused. A field may be called
    ``size`` or ``type``: it then hides the Java-style ``size()`` / ``type()`` methods on that
    class, whose values stay available as ``payload_size`` and ``type_id``.

    Class attributes: ``type_id`` (written to each record's metadata field), ``fields``
    (the ``Field`` descriptors in layout order) and ``payload_size`` (payload bytes).

    ``MappedBusWriter.fields_writer(cls)`` returns a function taking the field values in
    order and writing one record with no message object: the fastest per-message form for
    up to four fields (see its docstring); with more, it pays when most fields change from
    record to record, else set the changing fields and ``write(message)``.
    """

    type_id = 0
    fields = ()
    payload_size = 0
    _payload_size_ = None

    def __init_subclass__(cls, type_id=None, size=None, **kwargs):
        super().__init_subclass__(**kwargs)
        if type_id is not None:
            if not isinstance(type_id, int) or not -2**31 <= type_id < 2**31:
                raise ValueError(f"type_id must be an int32, got {type_id!r}")
            cls.type_id = type_id
        for name, value in vars(cls).items():
            if isinstance(value, Field) and (name in RESERVED or name.startswith("_")):
                raise ValueError(f"{cls.__name__}.{name}: a field cannot be called {name!r}, "
                                 f"the Message API uses that name (reserved: "
                                 f"{', '.join(sorted(RESERVED))}, and names starting with _)")
        placed = list(getattr(cls, "fields", ()))
        end = max((f.offset + f.size for f in placed), default=0)
        for name, value in list(vars(cls).items()):
            if isinstance(value, Field):
                off = value.offset if value.offset >= 0 else end
                f = value._placed(off, cls.__name__)
                for other in placed:
                    if off < other.offset + other.size and other.offset < off + f.size:
                        raise ValueError(f"{cls.__name__}.{name} overlaps {other.name}")
                setattr(cls, name, f)
                placed.append(f)
                end = max(end, off + f.size)
        if size is not None:
            if size < end:
                raise ValueError(f"{cls.__name__}: size {size} is smaller than its fields ({end})")
            end = size
        cls.fields = tuple(placed)
        cls._payload_size_ = end
        cls.payload_size = end
        cls._dtype = None

    def __init__(self, *args, **kwargs):
        fields = type(self).fields
        if len(args) > len(fields):
            raise TypeError(f"{type(self).__name__} takes at most {len(fields)} field values")
        for f, v in zip(fields, args):
            f.__set__(self, v)
        cls = type(self)
        for name, v in kwargs.items():
            f = getattr(cls, name, None)
            if not isinstance(f, Field):
                raise TypeError(f"{cls.__name__} has no field {name!r}")
            f.__set__(self, v)

    def __repr__(self):
        # A trailing underscore only dodges a Python keyword (Token.from_): Java says "from".
        body = ", ".join(f"{f.name.rstrip('_')}={self._java_str(f.__get__(self))}"
                         for f in self.fields)
        return f"{type(self).__name__} [{body}]"

    @staticmethod
    def _java_str(v):
        if isinstance(v, bytes):
            return v.hex()
        return repr(v) if isinstance(v, float) else str(v)

    def as_dict(self):
        """The fields' values by name, in declaration order."""
        return {f.name: f.__get__(self) for f in self.fields}

    @classmethod
    def from_bytes(cls, data):
        """A new message of this class with its fields read from payload bytes (at least
        ``payload_size`` long): ``PriceUpdate.from_bytes(record.payload)``."""
        return cls().load_bytes(data)

    @classmethod
    def numpy_dtype(cls):
        """A numpy structured dtype with this message's fields at their offsets, for
        ``MappedBusReader.read_batch`` and ``MappedBusWriter.write_batch``."""
        if cls.__dict__.get("_dtype") is None:
            import numpy
            cls._dtype = numpy.dtype({
                "names": [f.name.rstrip("_") for f in cls.fields],
                "formats": [f.code for f in cls.fields],
                "offsets": [f.offset for f in cls.fields],
                "itemsize": cls._payload_size_,
            })
        return cls._dtype


class PriceUpdate(Message, type_id=0):
    """The Java samples' price update: ``source``, ``price`` and ``quantity``, three int32
    (type id 0)."""
    source = int32()
    price = int32()
    quantity = int32()


class Token(Message, type_id=0):
    """The Java token-ring sample's token: who sent it (``from_``: ``from`` is a Python keyword)
    and to whom (``to``), two int32 (type id 0)."""
    from_ = int32()
    to = int32()


class Trade(Message, type_id=2):
    """A message with wider fields, mirrored by the Java side's ``Trade``: ``id`` (int64),
    ``price`` (float64), ``quantity`` (int32); type id 2."""
    id = int64()
    price = float64()
    quantity = int32()
