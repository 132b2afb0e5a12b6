"""A bus's metadata file: its kind, sizes, identity and creation time, which the Mappedbus
0.5.1 format never stores (the file format is in ``layout``'s docstring).

    meta = BusMeta.create("single", record_size=12, file_size=10_000_000, inode=st.st_ino)
    write_meta(meta_path(path), meta, exclusive=False)
    read_meta(meta_path(path)).check(record_size=12, size=10_000_000, path=path)

``interop/.../BusMeta.java`` reads and writes the same files.
"""
import dataclasses
import os
import secrets
import time

from ..errors import BusMismatchError, CorruptBusError
from .files import open_file, write_atomic
from .layout import (DEFAULT_CONSUMER_BLOCK_MS, META_FORMAT, META_FRAMES_KEY, META_MAGIC,
                     META_MAX_BYTES, META_SUFFIX, ON_CONSUMER_LAG)

__all__ = ("BusMeta", "meta_path", "read_meta", "write_meta")

KINDS = ("single", "rolling")
# Integer keys in the order they are written; ``kind`` and ``id`` come first.
_INT_KEYS = ("format", "created_ns", "record_size", "file_size", "inode", "segment_size",
             "retain_segments", "retain_bytes", "retain_age_ms", "max_consumer_lag",
             "consumer_block_ms")


@dataclasses.dataclass(frozen=True)
class BusMeta:
    """What a bus records about itself (``PATH.meta`` beside a single file, ``bus.meta`` in a
    rolling bus's directory). Sizes that do not apply to its kind are 0.

    Fields: ``kind`` ("single" or "rolling"), ``id`` (32 hex digits, new for every bus
    created), ``created_ns`` (Unix time of creation), ``record_size``, ``file_size`` and
    ``inode`` (single: the logical size and the file described), ``segment_size`` (rolling),
    ``retain_segments``, ``retain_bytes``, ``retain_age_ms`` (rolling retention; 0: no
    limit), ``max_consumer_lag`` (rolling: how many segments a registered consumer may lag
    behind the writers and still keep them from retention; 0: consumers keep nothing),
    ``on_consumer_lag`` (past it: ``"expire"`` the consumer, or ``"block"`` writers for up
    to ``consumer_block_ms``), ``frames`` (1: a framed bus, docs/design/frames.md; the key
    is written only then, so an unframed bus's file is as before), ``format`` (of the metadata file) and ``extra`` (``(key, value)`` pairs of keys
    this version does not know, written back by ``encode``).
    """
    kind: str                 # "single" or "rolling"
    id: str                   # 32 hex digits, new for every bus created
    created_ns: int           # Unix time of creation, nanoseconds
    record_size: int          # payload bytes per record
    file_size: int = 0        # single: the logical size of the file
    inode: int = 0            # single: st_ino of the file this describes
    segment_size: int = 0     # rolling: the logical size of every segment
    retain_segments: int = 0  # rolling retention; 0 means no limit
    retain_bytes: int = 0
    retain_age_ms: int = 0
    max_consumer_lag: int = 0     # rolling: segments a consumer may lag and still hold; 0: none
    consumer_block_ms: int = DEFAULT_CONSUMER_BLOCK_MS   # on_consumer_lag="block": the wait
    on_consumer_lag: str = "expire"                      # "expire" or "block"
    frames: int = 0           # 1: a framed bus (messages of any size, topics); written only then
    format: int = META_FORMAT
    extra: tuple = ()         # (key, value) pairs of keys this version does not know

    @classmethod
    def create(cls, kind, record_size, **sizes):
        """A new bus's metadata: a fresh random id and the time now."""
        return cls(kind=kind, id=secrets.token_hex(16), created_ns=time.time_ns(),
                   record_size=record_size, **sizes)

    @property
    def size(self):
        """The size every file of the bus has: ``file_size`` or ``segment_size``."""
        return self.file_size if self.kind == "single" else self.segment_size

    def encode(self):
        """The metadata file's bytes (``key=value`` lines; ``decode`` reads them back)."""
        lines = [META_MAGIC, f"format={self.format}", f"kind={self.kind}", f"id={self.id}"]
        lines += [f"{k}={getattr(self, k)}" for k in _INT_KEYS[1:]]
        lines += [f"on_consumer_lag={self.on_consumer_lag}"]
        if self.frames:
            lines += [f"{META_FRAMES_KEY}={self.frames}"]
        lines += [f"{k}={v}" for k, v in self.extra]
        return ("\n".join(lines) + "\n").encode()

    @classmethod
    def decode(cls, data, path="<metadata>"):
        """Parse a metadata file's bytes; CorruptBusError naming ``path`` if they are not one."""
        def bad(why):
            return CorruptBusError(f"{path!r} is not a bus metadata file: {why}")
        if len(data) > META_MAX_BYTES:
            raise bad(f"{len(data)} bytes, more than {META_MAX_BYTES}")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise bad("not UTF-8 text") from None
        lines = text.splitlines()
        if not lines or lines[0] != META_MAGIC:
            raise bad(f"the first line is not {META_MAGIC!r}")
        values, extra = {}, []
        for line in lines[1:]:
            if not line or line.startswith("#"):
                continue
            key, sep, value = line.partition("=")
            if not sep:
                raise bad(f"line {line!r} is not key=value")
            if key in values:
                raise bad(f"key {key!r} appears twice")
            if key in _INT_KEYS or key == META_FRAMES_KEY:
                if not (value.isascii() and value.isdigit()):
                    raise bad(f"{key}={value!r} is not a non-negative integer")
                values[key] = int(value)
            elif key in ("kind", "id", "on_consumer_lag"):
                values[key] = value
            else:
                extra.append((key, value))
        for key in ("format", "kind", "id", "created_ns", "record_size"):
            if key not in values:
                raise bad(f"no {key}")
        if values.get(META_FRAMES_KEY, 0) not in (0, 1):
            raise bad(f"{META_FRAMES_KEY}={values[META_FRAMES_KEY]} (known: 0, 1)")
        if values["format"] != META_FORMAT:
            raise bad(f"format {values['format']}, this version reads {META_FORMAT}")
        if values["kind"] not in KINDS:
            raise bad(f"kind {values['kind']!r} (known: {', '.join(KINDS)})")
        if values.get("on_consumer_lag", "expire") not in ON_CONSUMER_LAG:
            raise bad(f"on_consumer_lag {values['on_consumer_lag']!r} (known: "
                      f"{', '.join(ON_CONSUMER_LAG)})")
        if len(values["id"]) != 32 or any(c not in "0123456789abcdef" for c in values["id"]):
            raise bad(f"id {values['id']!r} is not 32 lowercase hex digits")
        size_key = "file_size" if values["kind"] == "single" else "segment_size"
        if values["record_size"] <= 0 or values.get(size_key, 0) <= 0:
            raise bad(f"record_size and {size_key} must be positive")
        return cls(extra=tuple(extra), **values)

    def check(self, record_size, size, path):
        """BusMismatchError unless this bus was created with ``record_size`` and ``size``
        (its file size, or its segment size); None for either means "whatever it has"."""
        what = "file_size" if self.kind == "single" else "segment_size"
        for name, given, recorded in (("record_size", record_size, self.record_size),
                                      (what, size, self.size)):
            if given is not None and given != recorded:
                raise BusMismatchError(
                    f"{path!r} was created with {name} {recorded}, not {given} (bus {self.id}, "
                    f"record_size {self.record_size}, {what} {self.size}): every process must "
                    f"open a bus with the sizes it was created with")

    def check_frames(self, frames, path):
        """BusMismatchError unless this bus is framed exactly when ``frames`` says so."""
        if bool(frames) != bool(self.frames):
            if self.frames:
                raise BusMismatchError(
                    f"{path!r} is a framed bus (messages of any size; metadata frames=1): "
                    f"open it with frames=True")
            raise BusMismatchError(
                f"{path!r} was created without frames (fixed-size records): frames=True "
                f"applies to a new bus only; write frames to a new bus")


def meta_path(bus_path):
    """The metadata file of a single-file bus: the bus path and ``.meta``."""
    return os.fspath(bus_path) + META_SUFFIX


def read_meta(path, *, allow_foreign=False):
    """The BusMeta in the file ``path``, or None if there is none. The file is opened as bus
    files are (no links, regular files only, owner and mode checked)."""
    try:
        fd, st = open_file(path, os.O_RDONLY, allow_foreign=allow_foreign)
    except FileNotFoundError:
        return None
    try:
        data = os.read(fd, META_MAX_BYTES + 1)
    finally:
        os.close(fd)
    return BusMeta.decode(data, path)


def write_meta(path, meta, *, mode=0o600, exclusive):
    """Write ``meta`` atomically: ``exclusive`` creates it only if absent (False when another
    process got there first), otherwise it replaces what is there."""
    return write_atomic(path, meta.encode(), mode, exclusive=exclusive)
