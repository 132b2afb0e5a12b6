"""How a framed bus carries a Python object (docs/design/frames.md, "Objects"; layout.py
OBJECT_*): pickle protocol 5 with its out-of-band buffers laid out after the pickle, so
numpy arrays and other buffers are copied once, from the object straight into the bus.

    enc = encode(obj)                 # Encoded(flags, length, parts): no copy of the buffers
    obj = decode(payload, enc.flags)  # buffers are slices of ``payload`` (a bytearray:
                                      # writable arrays, a bytes: read-only ones)

``serializer`` (any object with ``dumps(obj) -> bytes`` and ``loads(bytes) -> obj``, e.g.
the ``msgpack`` module for a Java reader) writes its bytes as they are, flagged
FRAME_ENCODING_SERIALIZED. Unpickling runs code the writer chose: read objects only from
buses whose writers you trust, as with any pickle.
"""
import dataclasses
import pickle
import struct

from ..errors import CorruptBusError
from .layout import (FRAME_ENCODING_BYTES, FRAME_ENCODING_MASK, FRAME_ENCODING_PICKLE,
                     FRAME_ENCODING_SERIALIZED, OBJECT_BUFFER_ALIGN, OBJECT_LENGTHS_OFFSET)

__all__ = ("Encoded", "Part", "encode", "decode", "check_serializer")

_HEAD = struct.Struct("<IIQ")     # buffers u32, zero u32, pickle length u64


@dataclasses.dataclass(frozen=True)
class Part:
    """``data`` (any buffer) goes at ``offset`` bytes into the message's payload."""
    offset: int
    data: object


@dataclasses.dataclass(frozen=True)
class Encoded:
    """An object ready to write: its frame flags, payload length and parts (in order, not
    overlapping; the bytes between them are zero, as a bus's fresh slots are)."""
    flags: int
    length: int
    parts: tuple


def check_serializer(serializer):
    """``serializer`` itself if it has callable ``dumps`` and ``loads``; TypeError if not."""
    if serializer is not None and not (callable(getattr(serializer, "dumps", None))
                                       and callable(getattr(serializer, "loads", None))):
        raise TypeError(f"serializer must have dumps() and loads() (e.g. the msgpack module), "
                        f"got {serializer!r}")
    return serializer


def _align(n):
    return -(-n // OBJECT_BUFFER_ALIGN) * OBJECT_BUFFER_ALIGN


def encode(obj, serializer=None):
    """``obj`` as an ``Encoded`` message (pickle 5 with out-of-band buffers, or
    ``serializer.dumps``)."""
    if serializer is not None:
        data = serializer.dumps(obj)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"serializer.dumps() returned {type(data).__name__}, not bytes")
        return Encoded(FRAME_ENCODING_SERIALIZED, memoryview(data).nbytes, (Part(0, data),))
    buffers = []
    data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    views = []
    for b in buffers:
        try:
            views.append(b.raw())
        except BufferError:             # not contiguous: pickled in-band, one copy more
            data = pickle.dumps(obj, protocol=5)
            views = []
            break
    k = len(views)
    head = _HEAD.pack(k, 0, len(data)) + struct.pack(f"<{k}Q", *(v.nbytes for v in views))
    parts = [Part(0, head), Part(OBJECT_LENGTHS_OFFSET + 8 * k, data)]
    end = OBJECT_LENGTHS_OFFSET + 8 * k + len(data)
    for v in views:
        end = _align(end)
        parts.append(Part(end, v))
        end += v.nbytes
    return Encoded(FRAME_ENCODING_PICKLE, end, tuple(parts))


def decode(payload, flags, serializer=None, where="message"):
    """The object in ``payload`` (bytes, bytearray or memoryview of one message) written with
    ``flags``. A raw-bytes message raises TypeError; a malformed one CorruptBusError."""
    encoding = flags & FRAME_ENCODING_MASK
    if encoding == FRAME_ENCODING_SERIALIZED:
        if serializer is None:
            raise TypeError(f"{where} was written with another serializer (flags "
                            f"FRAME_ENCODING_SERIALIZED): open the reader with serializer=")
        return serializer.loads(bytes(payload))
    if encoding == FRAME_ENCODING_BYTES:
        raise TypeError(f"{where} holds bytes, not an object: read its payload")
    if encoding != FRAME_ENCODING_PICKLE:
        raise CorruptBusError(f"{where}: unknown encoding {encoding} in its flags")
    mv = memoryview(payload).cast("B")
    size = mv.nbytes
    if size < OBJECT_LENGTHS_OFFSET:
        raise CorruptBusError(f"{where}: {size} bytes, too short for an object header")
    k, zero, plen = _HEAD.unpack_from(mv, 0)
    if zero != 0 or k > (size - OBJECT_LENGTHS_OFFSET) // 8:
        raise CorruptBusError(f"{where}: an object header of {k} buffers does not fit {size} bytes")
    lengths = struct.unpack_from(f"<{k}Q", mv, OBJECT_LENGTHS_OFFSET)
    off = OBJECT_LENGTHS_OFFSET + 8 * k
    if plen > size - off:
        raise CorruptBusError(f"{where}: a pickle of {plen} bytes does not fit {size} bytes")
    pick = mv[off:off + plen]
    off += plen
    bufs = []
    for n in lengths:
        off = _align(off)
        if n > size - off:
            raise CorruptBusError(f"{where}: a buffer of {n} bytes does not fit {size} bytes")
        bufs.append(mv[off:off + n])
        off += n
    return pickle.loads(pick, buffers=bufs)
