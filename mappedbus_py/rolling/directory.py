"""A rolling bus's directory (docs/files-and-rolling.md, "Rolling bus"): the directory itself,
``bus.meta``, the segments (made complete in a temporary file, then linked into place), the
segments present and their limits, the wake file and the consumers' registry beside them."""
import errno
import os
import secrets
import stat
import struct
import time
import warnings

from .._core._consumers import ConsumerRegistry
from .._core._wake import WakeFile
from ..errors import BusMismatchError, BusReplacedError, UnsafeBusFileError
from ..formats.busmeta import BusMeta, read_meta, write_meta
from ..formats.files import check_trusted, open_file
from ..formats.layout import (CONSUMERS_FILE, FIRST_RECORD_OFFSET, META_FILE, SEGMENT_SUFFIX,
                              TMP_PREFIX, WAKE_FILE, mapped_size, segment_index, segment_name)
from .options import ConsumerPolicy

__all__ = ("TMP_MAX_AGE_S", "STALL_ENV", "segment_path", "open_dir", "read_bus_meta",
           "create_or_open_meta", "list_segments", "segment_limit", "create_segment",
           "open_temporary", "preallocation_failed", "link_temporary", "remove_stale_tmp",
           "choose_current", "open_wake", "open_registry", "read_limit", "writer_sizes")

#: A temporary file older than this was left by a killed creator and may be removed.
TMP_MAX_AGE_S = 60
_FIRST = FIRST_RECORD_OFFSET
_LIMIT = struct.Struct("<q")
# Test hook: "before-link" / "after-link" make a segment creator stop forever there (the
# tests SIGKILL it), to show that a creator killed mid-roll leaves a bus others continue.
STALL_ENV = "MAPPEDBUS_TEST_ROLL_STALL"


def read_limit(fd):
    """The limit stored at the start of the segment open as ``fd``."""
    return _LIMIT.unpack(os.pread(fd, 8, 0))[0]


def segment_path(path, index):
    """The file of segment ``index`` in the bus directory ``path``."""
    return os.path.join(os.fspath(path), segment_name(index))


def open_dir(path, *, create, allow_foreign=False):
    """Check (and with ``create``, make: mode 0700) a rolling bus's directory. A symbolic
    link is refused; a missing directory is FileNotFoundError when not creating."""
    path = os.fspath(path)
    if create:
        try:
            os.mkdir(path, 0o700)
            os.chmod(path, 0o700, follow_symlinks=False)   # whatever the umask
        except FileExistsError:
            pass
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, "no rolling bus here", path) from None
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeBusFileError(f"{path!r} is a symbolic link: a rolling bus directory is "
                                 f"never used through links")
    check_trusted(st, path, allow_foreign, directory=True)
    return st


def read_bus_meta(path, *, allow_foreign=False):
    """The BusMeta of the rolling bus in directory ``path``, or None if it has none."""
    meta = read_meta(os.path.join(os.fspath(path), META_FILE), allow_foreign=allow_foreign)
    if meta is not None and meta.kind != "rolling":
        raise BusMismatchError(f"{os.path.join(os.fspath(path), META_FILE)!r} describes a "
                               f"{meta.kind} bus, not a rolling bus")
    return meta


def create_or_open_meta(path, segment_size, record_size, retention, *, mode=0o600,
                        allow_foreign=False, consumers=ConsumerPolicy(), frames=False):
    """``bus.meta`` of the directory ``path``: written (exclusively) if absent, else read
    and checked against the sizes (BusMismatchError) and ``retention``, a ``Retention``
    (ValueError when both sides set it and they differ); ``consumers``, a ``ConsumerPolicy``,
    is checked the same way."""
    mpath = os.path.join(os.fspath(path), META_FILE)
    meta = read_bus_meta(path, allow_foreign=allow_foreign)
    if meta is None:
        extra = {} if consumers.block_ms is None else {"consumer_block_ms": consumers.block_ms}
        fresh = BusMeta.create("rolling", record_size, segment_size=segment_size,
                               retain_segments=retention.segments, retain_bytes=retention.bytes,
                               retain_age_ms=retention.age_ms, max_consumer_lag=consumers.max_lag,
                               on_consumer_lag=consumers.on_lag, frames=int(frames), **extra)
        if write_meta(mpath, fresh, mode=mode, exclusive=True):
            return fresh
        meta = read_bus_meta(path, allow_foreign=allow_foreign)   # lost the race: theirs
    meta.check(record_size, segment_size, mpath)
    meta.check_frames(frames, path)
    stored = (meta.retain_segments, meta.retain_bytes, meta.retain_age_ms)
    asked = (retention.segments, retention.bytes, retention.age_ms)
    if any(given and given != have for given, have in zip(asked, stored)):
        raise ValueError(
            f"{mpath!r} was created with retention retain_segments={stored[0]}, "
            f"retain_bytes={stored[1]}, retain_age_ms={stored[2]}; this writer asked for "
            f"retain_segments={asked[0]}, retain_bytes={asked[1]}, "
            f"retain_age_ms={asked[2]}: retention is fixed when the bus is created")
    lag, policy, block_ms = consumers.max_lag, consumers.on_lag, consumers.block_ms
    if (lag and lag != meta.max_consumer_lag) or (lag and policy != meta.on_consumer_lag) \
            or (block_ms is not None and block_ms != meta.consumer_block_ms):
        raise ValueError(
            f"{mpath!r} was created with max_consumer_lag={meta.max_consumer_lag}, "
            f"on_consumer_lag={meta.on_consumer_lag!r}, consumer_block_ms="
            f"{meta.consumer_block_ms}; this writer asked for max_consumer_lag={lag}, "
            f"on_consumer_lag={policy!r}, consumer_block_ms={block_ms}: the consumer policy "
            f"is fixed when the bus is created")
    return meta


def list_segments(path):
    """The indices of the segments in directory ``path``, oldest first."""
    out = []
    with os.scandir(os.fspath(path)) as it:
        for entry in it:
            if entry.name.endswith(SEGMENT_SUFFIX):
                i = segment_index(entry.name)
                if i is not None:
                    out.append(i)
    out.sort()
    return out


def open_bus_segments(path, bus_id):
    """``list_segments`` for a bus already open (``bus_id``, from its bus.meta): its directory
    gone means the bus was removed under the caller, ``BusReplacedError``, not the
    ``FileNotFoundError`` of a bus that never was. A reader between its bus.meta check and this
    listing, while another process removes and recreates the directory, sees exactly that."""
    try:
        return list_segments(path)
    except (FileNotFoundError, NotADirectoryError):
        raise BusReplacedError(f"{os.fspath(path)!r}: the rolling bus {bus_id} was removed: "
                               f"its directory is gone") from None


def segment_limit(path, index, *, allow_foreign=False):
    """The limit stored in segment ``index`` (None if it does not exist)."""
    try:
        fd, _ = open_file(segment_path(path, index), os.O_RDONLY, allow_foreign=allow_foreign)
    except FileNotFoundError:
        return None
    try:
        data = os.pread(fd, 8, 0)
    finally:
        os.close(fd)
    return _LIMIT.unpack(data)[0] if len(data) == 8 else 0


def _stall(where):
    if os.environ.get(STALL_ENV) == where:
        print(f"stalled {where}", flush=True)
        while True:
            time.sleep(3600)


def create_segment(path, index, segment_size, *, mode=0o600):
    """Make segment ``index`` complete before anyone can open it: a temporary file preallocated
    to its mapped size with its limit set to 8, then linked into place. True if this call
    created it, False if it existed (another creator won) or a later segment exists."""
    tmp, fd = open_temporary(path, index, mode)
    try:
        try:
            size = mapped_size(segment_size)
            try:
                os.posix_fallocate(fd, 0, size)
            except OSError as e:
                preallocation_failed(e.errno, fd, size, segment_path(path, index))
        finally:
            os.close(fd)
    except BaseException:
        os.unlink(tmp)
        raise
    return link_temporary(path, index, tmp)


def open_temporary(path, index, mode):
    """The temporary file segment ``index`` is made in (``create_segment``; a writer's spare,
    preallocated in the background): created exclusively, its limit set to 8. Returns
    (its path, a read-write descriptor)."""
    tmp = os.path.join(os.fspath(path), f"{TMP_PREFIX}{segment_name(index)}-{os.getpid()}-"
                                        f"{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        os.fchmod(fd, mode)
        os.pwrite(fd, _LIMIT.pack(_FIRST), 0)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    return tmp, fd


def preallocation_failed(err, fd, size, final):
    """posix_fallocate of a segment's temporary file failed with ``err``: an error naming the
    segment for a full device, else the file's length set (a file system without it)."""
    if err == errno.ENOSPC:
        raise OSError(errno.ENOSPC, f"no space to reserve {size} bytes for a segment", final)
    if err not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
        raise OSError(err, f"cannot reserve {size} bytes for a segment: "
                           f"{os.strerror(err)}", final)
    os.ftruncate(fd, size)


def link_temporary(path, index, tmp):
    """Link ``tmp`` (``open_temporary``, preallocated) as segment ``index`` unless it exists
    (another creator won) or a later one does, then remove the temporary name. True if
    linked."""
    path = os.fspath(path)
    try:
        _stall("before-link")
        if any(i > index for i in list_segments(path)):
            # A later segment exists: ``index`` was filled and removed by retention while this
            # file was being made. Linked now it would come back, empty, below newer ones.
            return False
        try:
            os.link(tmp, segment_path(path, index))
        except FileExistsError:
            return False
        _stall("after-link")
        return True
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def temporary_exists(path, index):
    """Whether a temporary file of segment ``index`` (``open_temporary``) is in the
    directory: being made by some writer, or left by a killed one."""
    prefix = f"{TMP_PREFIX}{segment_name(index)}-"
    with os.scandir(os.fspath(path)) as it:
        return any(entry.name.startswith(prefix) for entry in it)


def remove_stale_tmp(path, max_age_s=TMP_MAX_AGE_S):
    """Remove temporary files older than ``max_age_s`` (left by killed creators)."""
    now = time.time()
    with os.scandir(os.fspath(path)) as it:
        for entry in it:
            if entry.name.startswith(TMP_PREFIX):
                try:
                    if now - entry.stat(follow_symlinks=False).st_mtime > max_age_s:
                        os.unlink(entry.path)
                except FileNotFoundError:
                    pass


def choose_current(path, candidates, allow_foreign):
    """The segment a writer (or an "end" reader) starts in: the newest one with records,
    else the oldest candidate (spares have limit 8)."""
    for i in reversed(candidates):
        limit = segment_limit(path, i, allow_foreign=allow_foreign)
        if limit is not None and limit > _FIRST:
            return i, limit
    return candidates[0], _FIRST


def open_wake(path, allow_foreign, mode=0o600):
    """The bus's wake file ``DIR/bus.wake`` (made if absent), or None, with a warning, where
    this process may not make or write it: its readers then poll, its writes wake nobody."""
    try:
        return WakeFile(os.path.join(path, WAKE_FILE), allow_foreign=allow_foreign, mode=mode)
    except OSError as e:
        warnings.warn(f"{path!r}: no wake file ({e}): parked readers are not woken at once "
                      f"but look by themselves", RuntimeWarning, stacklevel=3)
        return None


def open_registry(path, allow_foreign, *, create, mode=0o600):
    """``DIR/bus.consumers`` of the rolling bus ``path``; None if absent and not ``create``."""
    try:
        return ConsumerRegistry(os.path.join(path, CONSUMERS_FILE), create=create, mode=mode,
                                allow_foreign=allow_foreign)
    except FileNotFoundError:
        return None


def writer_sizes(path, segment_size, record_size, allow_foreign):
    """The sizes a writer opens ``path`` with: those given, the missing ones (None) from its
    ``bus.meta``; a given size that disagrees with it is a BusMismatchError naming both."""
    if segment_size is not None and record_size is not None:
        return segment_size, record_size
    try:
        open_dir(path, create=False, allow_foreign=allow_foreign)
        meta = read_bus_meta(path, allow_foreign=allow_foreign)
    except FileNotFoundError:
        meta = None
    if meta is None:
        missing = " and ".join(n for n, v in (("segment_size", segment_size),
                                              ("record_size", record_size)) if v is None)
        raise ValueError(f"{path!r}: {missing} not given and there is no rolling bus here "
                         f"(no {META_FILE}) to take them from: a new rolling bus needs both "
                         f"sizes, RollingBusWriter(path, segment_size, record_size)")
    meta.check(record_size, segment_size, os.path.join(path, META_FILE))
    return meta.segment_size, meta.record_size
