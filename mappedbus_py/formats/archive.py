"""A rolling bus's archive directory (the layout is in ``layout``, "the journal"): its
settings as ``bus.meta`` keeps them (``ArchiveConfig``), the names of archived segments,
and their bytes: kept as they were, or one zstd or LZ4 frame of them (the zstandard and lz4
libraries' standard frames, content size in the header).

``interop/.../ArchiveFiles.java`` reads the same files.
"""
import dataclasses
import os

from ..errors import CorruptBusError
from .files import open_file, read_to_end
from .layout import (ARCHIVE_COMPRESS, ARCHIVE_ZSTD_LEVEL, FIRST_RECORD_OFFSET, archive_index,
                     archive_name, mapped_size)

__all__ = ("ArchiveConfig", "archive_config", "list_archived", "find_archived", "archived_path", "compress",
           "decompress", "read_archived")


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


def compress(data, how):
    """``data`` (a segment's bytes) as stored for ``how``: itself, one zstd frame or one LZ4
    frame, each with the content size in its header."""
    if how == "none":
        return bytes(data)
    if how == "zstd":
        import zstandard
        return zstandard.ZstdCompressor(level=ARCHIVE_ZSTD_LEVEL,
                                        write_content_size=True).compress(data)
    if how == "lz4":
        import lz4.frame
        # Independent blocks: lz4-java (the Java readers') refuses linked ones, which lz4 makes
        # by default for data of more than one block.
        return lz4.frame.compress(data, store_size=True, block_linked=False)
    raise ValueError(f"compress must be one of {ARCHIVE_COMPRESS}, got {how!r}")


def decompress(data, how, expected, path):
    """The segment bytes stored in ``data`` (``how`` from the file's name), checked to be
    ``expected`` bytes long with a limit on the record grid's side of the file;
    CorruptBusError naming ``path`` otherwise (a truncated or foreign file)."""
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
    limit = int.from_bytes(out[:8], "little", signed=True)
    if limit not in (0,) and limit < FIRST_RECORD_OFFSET:
        raise CorruptBusError(f"{path!r}: its limit {limit} is not a segment's")
    return out


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
