"""A rolling bus's archive directory (the layout is in ``layout``, "the journal"): its
settings as ``bus.meta`` keeps them (``ArchiveConfig``), the names of archived segments,
and their bytes: kept as they were, zstd frames of them in zstd's seekable format (a frame
per ``ARCHIVE_ZSTD_FRAME_BYTES`` and a seek table: ``ZstdSeekTable``; layout.py, "ZSTD
SEEKABLE"), or one LZ4 frame of them (the lz4 library's standard frame, content size in the
header). A .zst file of one frame, as the first archivers wrote, reads too.

``interop/.../ArchiveFiles.java`` reads the same files (``ZstdSeekTable.java`` the table).
"""
import dataclasses
import os
import struct

from ..errors import CorruptBusError
from .files import open_file, read_to_end
from .layout import (ARCHIVE_COMPRESS, ARCHIVE_ZSTD_FRAME_BYTES, ARCHIVE_ZSTD_LEVEL,
                     ARCHIVE_ZSTD_MAX_FRAMES, ARCHIVE_ZSTD_SEEK_DESCRIPTOR,
                     ARCHIVE_ZSTD_SEEK_ENTRY_SIZE, ARCHIVE_ZSTD_SEEK_FOOTER_SIZE,
                     ARCHIVE_ZSTD_SEEKABLE_MAGIC, ARCHIVE_ZSTD_SKIPPABLE_MAGIC, FIRST_RECORD_OFFSET,
                     archive_index, archive_name, mapped_size)

__all__ = ("ArchiveConfig", "archive_config", "list_archived", "find_archived", "archived_path", "compress",
           "decompress", "decompress_into", "read_archived", "ZstdFrame", "ZstdSeekTable")

_SKIPPABLE_HEADER = 8       # u32 magic, u32 the frame's size after these 8 bytes


@dataclasses.dataclass(frozen=True)
class ZstdFrame:
    """One zstd frame of an archived segment: ``src_size`` bytes at ``src_offset`` of the
    file, decompressing to ``dst_size`` bytes at ``dst_offset`` of the segment."""
    src_offset: int
    src_size: int
    dst_offset: int
    dst_size: int


@dataclasses.dataclass(frozen=True)
class ZstdSeekTable:
    """The seek table of a seekable .zst segment (layout.py, "ZSTD SEEKABLE"): its frames in
    order. ``read`` parses and checks one at the end of a file's bytes; ``encode`` makes the
    table's skippable frame."""
    frames: tuple

    @classmethod
    def of_sizes(cls, sizes):
        """The table of frames of ``sizes``: (compressed, decompressed) pairs, in order."""
        frames, src, dst = [], 0, 0
        for c, d in sizes:
            frames.append(ZstdFrame(src, c, dst, d))
            src, dst = src + c, dst + d
        return cls(tuple(frames))

    def encode(self):
        """The seek table's bytes: the skippable frame that ends the file."""
        n = len(self.frames)
        body = b"".join(struct.pack("<II", f.src_size, f.dst_size) for f in self.frames)
        return (struct.pack("<II", ARCHIVE_ZSTD_SKIPPABLE_MAGIC,
                            n * ARCHIVE_ZSTD_SEEK_ENTRY_SIZE + ARCHIVE_ZSTD_SEEK_FOOTER_SIZE)
                + body + struct.pack("<IBI", n, ARCHIVE_ZSTD_SEEK_DESCRIPTOR,
                                     ARCHIVE_ZSTD_SEEKABLE_MAGIC))

    @classmethod
    def read(cls, data, expected, path):
        """The table at the end of ``data`` (a .zst segment's bytes), or None when they do not
        end in the seekable magic (one frame, as the first archivers wrote);
        CorruptBusError naming ``path`` and the rule when the table is not one of a segment
        of ``expected`` bytes."""
        end = len(data)
        footer = ARCHIVE_ZSTD_SEEK_FOOTER_SIZE
        if end < footer or struct.unpack_from("<I", data, end - 4)[0] != ARCHIVE_ZSTD_SEEKABLE_MAGIC:
            return None

        def bad(why):
            return CorruptBusError(f"{path!r}: its zstd seek table {why} (truncated, corrupt, "
                                   f"or not a segment's; layout.py, ZSTD SEEKABLE)")

        n, descriptor = struct.unpack_from("<IB", data, end - footer)
        if descriptor != ARCHIVE_ZSTD_SEEK_DESCRIPTOR:
            raise bad(f"has descriptor {descriptor:#x}, not {ARCHIVE_ZSTD_SEEK_DESCRIPTOR} "
                      f"(no checksums)")
        if not 1 <= n <= ARCHIVE_ZSTD_MAX_FRAMES:
            raise bad(f"lists {n} frames, not 1 to {ARCHIVE_ZSTD_MAX_FRAMES}")
        size = n * ARCHIVE_ZSTD_SEEK_ENTRY_SIZE + footer
        start = end - size - _SKIPPABLE_HEADER
        if start < 0:
            raise bad(f"of {n} frames needs {size + _SKIPPABLE_HEADER} bytes, the file has {end}")
        magic, said = struct.unpack_from("<II", data, start)
        if magic != ARCHIVE_ZSTD_SKIPPABLE_MAGIC:
            raise bad(f"starts with {magic:#010x}, not the skippable magic "
                      f"{ARCHIVE_ZSTD_SKIPPABLE_MAGIC:#010x}")
        if said != size:
            raise bad(f"says it is {said} bytes long, not {size} for {n} frames")
        sizes = list(struct.iter_unpack("<II", bytes(data[start + _SKIPPABLE_HEADER:
                                                          start + _SKIPPABLE_HEADER + size - footer])))
        for i, (c, d) in enumerate(sizes):
            if c == 0 or d == 0:
                raise bad(f"gives frame {i} a size of 0 ({c} compressed, {d} decompressed)")
        table = cls.of_sizes(sizes)
        last = table.frames[-1]
        if last.src_offset + last.src_size != start:
            raise bad(f"lists {last.src_offset + last.src_size} bytes of frames, the file has "
                      f"{start} before the table")
        if last.dst_offset + last.dst_size != expected:
            raise bad(f"decompresses to {last.dst_offset + last.dst_size} bytes, not a "
                      f"segment's {expected} (mapped_size(segment_size))")
        return table


@dataclasses.dataclass(frozen=True)
class ArchiveConfig:
    """A bus's archive tier as ``bus.meta`` stores it: ``dir`` (absolute), ``after`` (full
    segments kept hot), ``age_ms`` (a full segment older than this moves even within
    ``after``; 0: no age), ``compress`` ("none", "zstd", "lz4"), and the archive's own
    retention ``retain_segments``, ``retain_bytes``, ``retain_age_ms`` (0: no limit)."""
    dir: str
    after: int = 1
    age_ms: int = 0
    compress: str = "none"
    retain_segments: int = 0
    retain_bytes: int = 0
    retain_age_ms: int = 0

    def to_extra(self):
        """The ``bus.meta`` key/value pairs (``layout.ARCHIVE_META_KEYS``)."""
        return (("archive_dir", self.dir), ("archive_after", str(self.after)),
                ("archive_age_ms", str(self.age_ms)), ("archive_compress", self.compress),
                ("archive_retain_segments", str(self.retain_segments)),
                ("archive_retain_bytes", str(self.retain_bytes)),
                ("archive_retain_age_ms", str(self.retain_age_ms)))


def archive_config(meta, path="<bus.meta>"):
    """The ``ArchiveConfig`` of a ``BusMeta``, or None for a bus without an archive;
    CorruptBusError naming ``path`` for keys that do not make one."""
    extra = dict(meta.extra)
    if "archive_dir" not in extra:
        return None
    try:
        cfg = ArchiveConfig(
            dir=extra["archive_dir"], after=int(extra.get("archive_after", "1")),
            age_ms=int(extra.get("archive_age_ms", "0")),
            compress=extra.get("archive_compress", "none"),
            retain_segments=int(extra.get("archive_retain_segments", "0")),
            retain_bytes=int(extra.get("archive_retain_bytes", "0")),
            retain_age_ms=int(extra.get("archive_retain_age_ms", "0")))
    except ValueError as e:
        raise CorruptBusError(f"{path!r}: archive keys are not numbers: {e}") from None
    if not os.path.isabs(cfg.dir) or cfg.compress not in ARCHIVE_COMPRESS or min(
            cfg.after, cfg.age_ms, cfg.retain_segments, cfg.retain_bytes, cfg.retain_age_ms) < 0:
        raise CorruptBusError(f"{path!r}: archive settings {cfg} are not valid (an absolute "
                              f"archive_dir, archive_compress one of {ARCHIVE_COMPRESS}, "
                              f"no negative number)")
    return cfg


def list_archived(directory):
    """``{segment index: file name}`` of the archived segments in ``directory`` (empty if it
    does not exist); CorruptBusError if one segment is there in two forms."""
    out = {}
    try:
        it = os.scandir(os.fspath(directory))
    except FileNotFoundError:
        return out
    with it:
        for entry in it:
            found = archive_index(entry.name)
            if found is None:
                continue
            i = found[0]
            if i in out:
                raise CorruptBusError(
                    f"{os.fspath(directory)!r} holds segment {i} twice ({out[i]!r} and "
                    f"{entry.name!r}): an archive holds one form of each segment")
            out[i] = entry.name
    return out


def find_archived(directory, index):
    """The file name of segment ``index`` in the archive ``directory``, in whichever form it is
    there, or None (a look at each form's name, not a listing: Java's ``ArchiveFiles.find``);
    CorruptBusError if it is there in two forms."""
    found = None
    for how in ARCHIVE_COMPRESS:
        name = archive_name(index, how)
        if os.path.lexists(os.path.join(os.fspath(directory), name)):
            if found is not None:
                raise CorruptBusError(
                    f"{os.fspath(directory)!r} holds segment {index} twice ({found!r} and "
                    f"{name!r}): an archive holds one form of each segment")
            found = name
    return found


def archived_path(directory, index, compress):
    """The path of segment ``index`` in the archive ``directory`` for ``compress``."""
    return os.path.join(os.fspath(directory), archive_name(index, compress))


def compress(data, how, *, frame_bytes=ARCHIVE_ZSTD_FRAME_BYTES):
    """``data`` (a segment's bytes) as stored for ``how``: itself; zstd frames of
    ``frame_bytes`` pieces (the last the rest), each with its content size and checksum, and
    their seek table (``ZstdSeekTable``); or one LZ4 frame with the content size in its
    header."""
    if how == "none":
        return bytes(data)
    if how == "zstd":
        import zstandard
        if frame_bytes < 1:
            raise ValueError(f"frame_bytes must be positive, got {frame_bytes}")
        cctx = zstandard.ZstdCompressor(level=ARCHIVE_ZSTD_LEVEL, write_content_size=True,
                                        write_checksum=True)
        view = memoryview(data)
        frames = [cctx.compress(view[i:i + frame_bytes])
                  for i in range(0, max(len(view), 1), frame_bytes)]
        table = ZstdSeekTable.of_sizes(
            (len(f), len(view[i * frame_bytes:(i + 1) * frame_bytes])) for i, f in enumerate(frames))
        return b"".join(frames) + table.encode()
    if how == "lz4":
        import lz4.frame
        # Independent blocks: lz4-java (the Java readers') refuses linked ones, which lz4 makes
        # by default for data of more than one block.
        return lz4.frame.compress(data, store_size=True, block_linked=False)
    raise ValueError(f"compress must be one of {ARCHIVE_COMPRESS}, got {how!r}")


def _zstd_frames_into(data, table, out, path, threads):
    # The table's frames into their places of `out`: each frame's header checked to say its
    # entry's size (no frame allocates more than its entry says), then one call of the
    # library that lets the GIL go for all of them (on `threads` threads of its own), then
    # the copies, with the GIL held: a read-ahead thread waits for the GIL at most twice.
    import zstandard
    view = memoryview(data)
    srcs = [view[f.src_offset:f.src_offset + f.src_size] for f in table.frames]
    n = len(srcs)
    for i, (f, src) in enumerate(zip(table.frames, srcs)):
        try:
            said = zstandard.frame_content_size(src)
        except zstandard.ZstdError as e:
            raise CorruptBusError(f"{path!r}: zstd frame {i} of {n} has no frame header "
                                  f"(corrupt, or its seek table is): {e}") from None
        if said != f.dst_size:
            raise CorruptBusError(f"{path!r}: zstd frame {i} of {n} holds {said} bytes, its "
                                  f"seek table says {f.dst_size} (corrupt, or not a segment's)")
    sizes = struct.pack(f"<{n}Q", *(f.dst_size for f in table.frames))
    try:
        got = zstandard.ZstdDecompressor().multi_decompress_to_buffer(
            srcs, decompressed_sizes=sizes, threads=threads)
    except zstandard.ZstdError as e:
        raise CorruptBusError(f"{path!r}: its {n} zstd frames do not decompress to their seek "
                              f"table's sizes (truncated or corrupt): {e}") from None
    for i, f in enumerate(table.frames):
        piece = got[i]
        if len(piece) != f.dst_size:
            raise CorruptBusError(f"{path!r}: zstd frame {i} of {n} decompresses to "
                                  f"{len(piece)} bytes, not {f.dst_size} (corrupt)")
        out[f.dst_offset:f.dst_offset + f.dst_size] = piece


def decompress_into(data, how, expected, path, out, *, threads=1):
    """The segment bytes stored in ``data`` (``how`` from the file's name) written into
    ``out`` (a writable buffer of ``expected`` bytes: a mapping), checked to be
    ``expected`` bytes long with a limit on the record grid's side of the file;
    CorruptBusError naming ``path`` otherwise (a truncated or foreign file). The frames of a
    seekable .zst are decompressed on ``threads`` threads (-1: one per CPU)."""
    table = ZstdSeekTable.read(data, expected, path) if how == "zstd" else None
    if table is None:
        out[:] = _decompress_whole(data, how, expected, path)
    else:
        _zstd_frames_into(data, table, out, path, threads)
    _check_limit(out, path)


def decompress(data, how, expected, path):
    """The segment bytes stored in ``data`` (``decompress_into``'s checks), as bytes (or
    ``data`` itself when stored as it was)."""
    table = ZstdSeekTable.read(data, expected, path) if how == "zstd" else None
    if table is None:
        out = _decompress_whole(data, how, expected, path)
    else:
        frames = bytearray(expected)
        _zstd_frames_into(data, table, frames, path, 1)
        out = bytes(frames)
    _check_limit(out, path)
    return out


def _decompress_whole(data, how, expected, path):
    # One frame (zstd without a seek table; LZ4) or the bytes as they were, of `expected` bytes.
    try:
        if how == "none":
            out = data
        elif how == "zstd":
            import zstandard
            out = zstandard.ZstdDecompressor().decompress(data, max_output_size=expected)
        elif how == "lz4":
            import lz4.frame
            out = lz4.frame.decompress(data)
        else:
            raise ValueError(how)
    except Exception as e:     # the libraries' own error types
        raise CorruptBusError(f"{path!r} is not a {how} frame of a segment: {e}") from None
    if len(out) != expected:
        raise CorruptBusError(f"{path!r} holds {len(out)} bytes of segment, not {expected} "
                              f"(mapped_size(segment_size)): truncated, or another bus's")
    return out


def _check_limit(out, path):
    limit = int.from_bytes(out[:8], "little", signed=True)
    if limit not in (0,) and limit < FIRST_RECORD_OFFSET:
        raise CorruptBusError(f"{path!r}: its limit {limit} is not a segment's")


def read_archived(directory, index, name, segment_size, *, allow_foreign=False):
    """The bytes of archived segment ``index`` (file ``name`` in ``directory``), whole and
    decompressed (``decompress``'s checks)."""
    path = os.path.join(os.fspath(directory), name)
    found = archive_index(name)
    if found is None or found[0] != index:
        raise ValueError(f"{name!r} is not an archive name of segment {index}")
    fd, st = open_file(path, os.O_RDONLY, allow_foreign=allow_foreign)
    try:
        data = read_to_end(fd)
    finally:
        os.close(fd)
    return decompress(data, found[1], mapped_size(segment_size), path)
