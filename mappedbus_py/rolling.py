"""The rolling bus: a directory of numbered segments, each a complete Mappedbus 0.5.1 file.

    with RollingBusWriter("/dev/shm/prices.d", 16 << 20, 12, retain_segments=8) as w:
        w.write(PriceUpdate(source=1, price=100, quantity=5))

    with RollingBusReader("/dev/shm/prices.d") as r:      # sizes from bus.meta
        msg = PriceUpdate()
        while r.read_into(msg):
            ...

The contract is ``docs/files-and-rolling.md`` ("Rolling bus"). Everything inside one segment is
done by the single-file ``MappedBusWriter``/``MappedBusReader`` (opened with ``_segment=True``);
this module adds the directory: ``bus.meta``, segment creation (complete, then ``link``),
rolling, following, retention, gaps and identity.

Choices this implementation makes where the contract leaves room:

- **Spare segment.** The rule is the contract's (the spare trigger, claims, three quarters);
  the writer that took the trigger starts making segment k+1 in that write (``_make_spare``),
  its two slow system calls on a C thread (``BackgroundCall``: the preallocation, then the
  mapping of every page), the rest at look-aheads (``_step``); a writer looks at the limit
  once every ``max(1, min(4096, slots_per_segment // 8))`` writes, every 64 while a call runs.
- **Retention** is applied by the writer that creates a segment, counting the new segment as
  the newest; it never removes the new segment nor the one being written (so
  ``retain_segments=1`` keeps two). Expired ``.tmp-*`` files (older than 60 s) go then too.
- **Age.** A writer that rolls out of segment k (k is full) sets k's mtime to the time of the
  roll (shortly after, at its next look-ahead, to keep the ~60 µs of utime off the write
  that rolls; the time is taken at the roll). Segment k is "older than retain_age" once its
  mtime is that old: all its records are. Anything that writes k later (a reader rolling a
  stalled slot back) only makes its mtime later: retention errs on keeping.
- **Readers at a segment end** look for segment k+1 at most once per ``FOLLOW_MIN_NS``
  (50 µs), backing off to ``FOLLOW_MAX_NS`` (1 ms) while it stays absent (with a spare
  segment it is almost always there already), and look at ``bus.meta`` (an lstat; read
  again for its id only when that changed) every ``ID_CHECK_NS`` (10 ms) while waiting or
  polling, as a single-file reader looks at its file: a bus removed or replaced raises
  BusReplacedError within that. The segment being read is looked at as often (its own
  reader's look): replaced or truncated raises; removed is retention's, and fine, unless no
  later segment exists (retention keeps the newest): then BusReplacedError.
"""
import errno
import fcntl
import os
import secrets
import stat
import struct
import time

from ._reader import (DEFAULT_TIMEOUT, DEFAULT_SPIN, DEFAULT_PARK, DEFAULT_PARK_MAX,
                      _check_idle, MappedBusReader, _check_position, _check_start,
                      _check_rollback_timeout, _check_stall_limit)
from ._record import Record
from ._rolling import BackgroundCall, RollingReaderBase, RollingWriterBase
from ._timeouts import check_timeout as _check_timeout
from ._wake import WakeFile
from ._consumers import ConsumerRegistry, check_name as _check_consumer_name
from ._wakefd import WakeFd
from ._writer import MappedBusWriter, _as_size, _check_sizes, take_writer_slot
from . import aio as _aio
from .busmeta import BusMeta, read_meta, write_meta
from .errors import (BusBackPressureError, BusClosedError, BusFullError, BusGapError,
                     BusMismatchError, BusReplacedError, CorruptBusError,
                     MappedBusError, RecordsRolledBackError, UnsafeBusFileError)
from .files import check_trusted, open_file
from .messages import Message
from .layout import (CONSUMERS_FILE, ON_CONSUMER_LAG, WAKE_FILE, WRITERS_FILE, FIRST_RECORD_OFFSET,
                     SEGMENT_CLAIM_BASE, SEGMENT_CLAIM_WAIT_MS,
                     is_record_boundary, join_position, split_position, HEADER_SIZE, META_FILE, SEGMENT_SUFFIX, TMP_PREFIX,
                     mapped_size, segment_index, segment_name, slot_size)

__all__ = ("RollingBusWriter", "RollingBusReader", "open_dir", "read_bus_meta",
           "create_or_open_meta", "create_segment", "list_segments", "segment_path",
           "segment_limit", "apply_retention", "retention_plan", "remove_stale_tmp", "gap_range",
           "slots_per_segment", "spare_trigger", "end_boundary", "locate", "on_grid", "TMP_MAX_AGE_S", "consumer_segment",
           "records_between", "consumer_retention", "consumer_blockers", "bus_consumer_entries")

#: A temporary file older than this was left by a killed creator and may be removed.
TMP_MAX_AGE_S = 60
# While a spare's background call runs, a writer looks at it every this many writes (else
# every _every): its next step (the link, which the creator's retention follows) comes soon.
SPARE_POLL_WRITES = 64
FOLLOW_MIN_NS = 50_000
FOLLOW_MAX_NS = 1_000_000
ID_CHECK_NS = 10_000_000
_FIRST = FIRST_RECORD_OFFSET
_LIMIT = struct.Struct("<q")
# Test hook: "before-link" / "after-link" make a segment creator stop forever there (the
# tests SIGKILL it), to show that a creator killed mid-roll leaves a bus others continue.
_STALL_ENV = "MAPPEDBUS_TEST_ROLL_STALL"


# -- the directory protocol ---------------------------------------------------------------

def segment_path(path, index):
    """The file of segment ``index`` in the bus directory ``path``."""
    return os.path.join(os.fspath(path), segment_name(index))


def end_boundary(segment_size, record_size):
    """The offset just past the last record that fits in a segment."""
    slot = slot_size(record_size)
    return _FIRST + ((segment_size - _FIRST) // slot) * slot


def locate(position, segment_size, record_size):
    """``(segment, offset)`` of a rolling-bus position, as readers use them: the split of
    ``layout.split_position``, except that the end of a segment that records fill to its
    last byte (offset ``segment_size``) stays in that segment rather than reading as offset
    0 of the next. Whether the offset is on the record grid is not checked here."""
    k, off = split_position(position, segment_size)
    if off == 0 and k > 0 and end_boundary(segment_size, record_size) == segment_size:
        return k - 1, segment_size
    return k, off


def on_grid(offset, segment_size, record_size):
    """True when ``offset`` (in a segment) is where a record starts or the segment's end."""
    return (is_record_boundary(offset, record_size)
            and offset <= end_boundary(segment_size, record_size))


def spare_trigger(segment_size, record_size):
    """The offset of a segment's first slot at or past its middle: the writer whose allocation
    returns it makes the next segment (docs/files-and-rolling.md, "Spare segment")."""
    slot = slot_size(record_size)
    return _FIRST + -(-(segment_size // 2 - _FIRST) // slot) * slot


def slots_per_segment(segment_size, record_size):
    """How many records one segment holds."""
    return (segment_size - _FIRST) // slot_size(record_size)


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
                        allow_foreign=False, consumers=(0, "expire", None)):
    """``bus.meta`` of the directory ``path``: written (exclusively) if absent, else read
    and checked against the sizes (BusMismatchError) and retention (ValueError when both
    sides set it and they differ). ``retention``: (segments, bytes, age_ms);
    ``consumers``: (max_consumer_lag, on_consumer_lag, consumer_block_ms or None), checked
    the same way."""
    mpath = os.path.join(os.fspath(path), META_FILE)
    meta = read_bus_meta(path, allow_foreign=allow_foreign)
    if meta is None:
        extra = {} if consumers[2] is None else {"consumer_block_ms": consumers[2]}
        fresh = BusMeta.create("rolling", record_size, segment_size=segment_size,
                               retain_segments=retention[0], retain_bytes=retention[1],
                               retain_age_ms=retention[2], max_consumer_lag=consumers[0],
                               on_consumer_lag=consumers[1], **extra)
        if write_meta(mpath, fresh, mode=mode, exclusive=True):
            return fresh
        meta = read_bus_meta(path, allow_foreign=allow_foreign)   # lost the race: theirs
    meta.check(record_size, segment_size, mpath)
    stored = (meta.retain_segments, meta.retain_bytes, meta.retain_age_ms)
    if any(given and given != have for given, have in zip(retention, stored)):
        raise ValueError(
            f"{mpath!r} was created with retention retain_segments={stored[0]}, "
            f"retain_bytes={stored[1]}, retain_age_ms={stored[2]}; this writer asked for "
            f"retain_segments={retention[0]}, retain_bytes={retention[1]}, "
            f"retain_age_ms={retention[2]}: retention is fixed when the bus is created")
    lag, policy, block_ms = consumers
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
    if os.environ.get(_STALL_ENV) == where:
        print(f"stalled {where}", flush=True)
        while True:
            time.sleep(3600)


def create_segment(path, index, segment_size, *, mode=0o600):
    """Make segment ``index`` complete before anyone can open it: a temporary file preallocated
    to its mapped size with its limit set to 8, then linked into place. True if this call
    created it, False if it existed (another creator won) or a later segment exists."""
    tmp, fd = _open_temporary(path, index, mode)
    try:
        try:
            size = mapped_size(segment_size)
            try:
                os.posix_fallocate(fd, 0, size)
            except OSError as e:
                _preallocation_failed(e.errno, fd, size, segment_path(path, index))
        finally:
            os.close(fd)
    except BaseException:
        os.unlink(tmp)
        raise
    return _link_temporary(path, index, tmp)


def _open_temporary(path, index, mode):
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


def _preallocation_failed(err, fd, size, final):
    """posix_fallocate of a segment's temporary file failed with ``err``: an error naming the
    segment for a full device, else the file's length set (a file system without it)."""
    if err == errno.ENOSPC:
        raise OSError(errno.ENOSPC, f"no space to reserve {size} bytes for a segment", final)
    if err not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
        raise OSError(err, f"cannot reserve {size} bytes for a segment: "
                           f"{os.strerror(err)}", final)
    os.ftruncate(fd, size)


def _link_temporary(path, index, tmp):
    """Link ``tmp`` (``_open_temporary``, preallocated) as segment ``index`` unless it exists
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


def retention_plan(segments, meta, newest, keep_from, now_ms, full_ms, hold_from=None):
    """Which segments retention removes, oldest first (the decision alone; the arithmetic
    the test vectors in tests/vectors/rolling.json pin for both languages). ``segments``:
    the indices present, ascending; history is those below ``min(keep_from, newest + 1)``;
    ``full_ms(index)``: when the writer rolled out of it (its mtime, Unix ms; None if
    unknown); ``hold_from``: the oldest segment a consumer needs (None: no hold)."""
    if not (meta.retain_segments or meta.retain_bytes or meta.retain_age_ms):
        return []
    history = [i for i in segments if i < min(keep_from, newest + 1)]
    removed = []
    for n, oldest in enumerate(history):
        if hold_from is not None and oldest >= hold_from:
            break
        count = len(history) - n
        drop = bool(meta.retain_segments and count > meta.retain_segments)
        drop |= bool(meta.retain_bytes and count * meta.segment_size > meta.retain_bytes)
        if not drop and meta.retain_age_ms:
            full = full_ms(oldest)
            drop = full is not None and now_ms - full > meta.retain_age_ms
        if not drop:
            break
        removed.append(oldest)
    return removed


def _full_ms(path, index):
    try:
        return os.stat(segment_path(path, index)).st_mtime_ns // 1_000_000
    except FileNotFoundError:
        return None


def apply_retention(path, meta, newest, keep_from, now_ns=None, hold_from=None):
    """Remove the oldest segments of history beyond ``meta``'s retention (``retention_plan``:
    the segments below ``keep_from``, the one being written, and below ``hold_from``, the
    oldest segment a consumer still needs). Returns the removed indices."""
    if not (meta.retain_segments or meta.retain_bytes or meta.retain_age_ms):
        return []
    now_ms = (time.time_ns() if now_ns is None else now_ns) // 1_000_000
    plan = retention_plan(list_segments(path), meta, newest, keep_from, now_ms,
                          lambda i: _full_ms(path, i), hold_from)
    removed = []
    for index in plan:
        try:
            os.unlink(segment_path(path, index))
            removed.append(index)
        except FileNotFoundError:
            pass
    return removed


# -- consumers (docs/files-and-rolling.md, "Retention that holds consumers") ---------------

def consumer_segment(position, segment_size, record_size):
    """The segment a consumer at ``position`` needs next: its own, or the one after when it
    has read all of it (its offset is at the end boundary)."""
    k, off = locate(position, segment_size, record_size)
    return k + 1 if off >= end_boundary(segment_size, record_size) else k


def records_between(position, head_index, head_limit, segment_size, record_size):
    """Record slots from ``position`` to the end of the bus (segment ``head_index``, whose
    limit is ``head_limit``): a consumer's lag in records."""
    slot = slot_size(record_size)
    end = end_boundary(segment_size, record_size)
    k, off = locate(position, segment_size, record_size)
    head = min(max(head_limit, _FIRST), end)
    if k > head_index:
        return 0
    if k == head_index:
        return max(0, (head - off) // slot)
    per = slots_per_segment(segment_size, record_size)
    return (max(0, (end - off) // slot) + (head_index - k - 1) * per + (head - _FIRST) // slot)


def consumer_retention(entries, meta, current):
    """What retention does about consumers when the writers are in segment ``current``:
    ``(hold_from, expire)``: the oldest segment a consumer that is not expired needs (None:
    none holds any), and the entries to flag expired first (policy ``expire``: those more
    than ``max_consumer_lag`` segments behind). Nothing when ``max_consumer_lag`` is 0."""
    if not meta.max_consumer_lag:
        return None, []
    hold, expire = None, []
    for e in entries:
        if e["flags"] & 1:
            continue
        need = consumer_segment(e["position"], meta.segment_size, meta.record_size)
        if meta.on_consumer_lag == "expire" and current - need > meta.max_consumer_lag:
            expire.append(e)
            continue
        hold = need if hold is None else min(hold, need)
    return hold, expire


def consumer_blockers(entries, meta, target):
    """Policy ``block``: the consumers (not expired) that would lag more than
    ``max_consumer_lag`` segments once the writers are in segment ``target``, most behind
    first."""
    if not meta.max_consumer_lag or meta.on_consumer_lag != "block":
        return []
    out = []
    for e in entries:
        if e["flags"] & 1:
            continue
        lag = target - consumer_segment(e["position"], meta.segment_size, meta.record_size)
        if lag > meta.max_consumer_lag:
            out.append((lag, e))
    out.sort(key=lambda le: -le[0])
    return [e for _, e in out]


def bus_consumer_entries(registry, meta):
    """The registry's entries that belong to this bus (its id)."""
    return [e for e in registry.entries() if e["bus_id"] == meta.id]


# _hold_or_defer's outcome when the consumers' holds are not known (the registry cannot be read).
_NO_HOLD_KNOWN = object()


def _open_registry(path, allow_foreign, *, create, mode=0o600):
    """``DIR/bus.consumers`` of the rolling bus ``path``; None if absent and not ``create``."""
    try:
        return ConsumerRegistry(os.path.join(path, CONSUMERS_FILE), create=create, mode=mode,
                                allow_foreign=allow_foreign)
    except FileNotFoundError:
        return None


def gap_range(from_index, from_offset, oldest, segment_size, record_size):
    """``(lost_from, lost_to, lost)`` for a reader at ``from_offset`` of the removed segment
    ``from_index`` whose next retained record is the first of segment ``oldest``."""
    slot = slot_size(record_size)
    per = slots_per_segment(segment_size, record_size)
    first = max(0, (from_offset - _FIRST) // slot)
    lost = max(0, per - first) + (oldest - from_index - 1) * per
    return (join_position(from_index, from_offset, segment_size),
            join_position(oldest, _FIRST, segment_size), lost)


def _choose_current(path, candidates, allow_foreign):
    """The segment a writer (or an "end" reader) starts in: the newest one with records,
    else the oldest candidate (spares have limit 8)."""
    for i in reversed(candidates):
        limit = segment_limit(path, i, allow_foreign=allow_foreign)
        if limit is not None and limit > _FIRST:
            return i, limit
    return candidates[0], _FIRST


def _check_retention_args(retain_segments, retain_bytes, retain_age):
    for name, v in (("retain_segments", retain_segments), ("retain_bytes", retain_bytes)):
        if not isinstance(v, int) or v < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
    if retain_age is not None and (not isinstance(retain_age, (int, float)) or retain_age < 0):
        raise ValueError(f"retain_age must be a non-negative number of seconds, got {retain_age!r}")
    return (retain_segments, retain_bytes, int(round((retain_age or 0) * 1000)))


def _check_consumer_args(max_consumer_lag, on_consumer_lag, block_timeout):
    if isinstance(max_consumer_lag, bool) or not isinstance(max_consumer_lag, int) \
            or max_consumer_lag < 0:
        raise ValueError(f"max_consumer_lag must be a non-negative number of segments, got "
                         f"{max_consumer_lag!r}")
    if on_consumer_lag not in ON_CONSUMER_LAG:
        raise ValueError(f"on_consumer_lag must be one of {', '.join(map(repr, ON_CONSUMER_LAG))}, "
                         f"got {on_consumer_lag!r}")
    if block_timeout is not None and (isinstance(block_timeout, bool)
                                      or not isinstance(block_timeout, (int, float))
                                      or not 0 <= block_timeout < 2**31 / 1000):
        raise ValueError(f"consumer_block_timeout must be a number of seconds, got "
                         f"{block_timeout!r}")
    return (max_consumer_lag, on_consumer_lag,
            None if block_timeout is None else int(round(block_timeout * 1000)))


def _open_wake(path, allow_foreign, mode=0o600):
    """The bus's wake file ``DIR/bus.wake`` (made if absent), or None, with a warning, where
    this process may not make or write it: its readers then poll, its writes wake nobody."""
    try:
        return WakeFile(os.path.join(path, WAKE_FILE), allow_foreign=allow_foreign, mode=mode)
    except OSError as e:
        import warnings
        warnings.warn(f"{path!r}: no wake file ({e}): parked readers are not woken at once "
                      f"but look by themselves", RuntimeWarning, stacklevel=3)
        return None


# -- the writer ---------------------------------------------------------------------------

def _check_segment_sizes(segment_size, record_size):
    """The single-file checks of the sizes (``_check_sizes``), the error naming
    ``segment_size`` where a single file's names ``file_size``."""
    try:
        return _check_sizes(segment_size, record_size)
    except (TypeError, ValueError) as e:
        raise type(e)(str(e).replace("file_size", "segment_size")) from None


def _writer_sizes(path, segment_size, record_size, allow_foreign):
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


class _SpareJob:
    """A writer's spare segment being prepared: its background call (``BackgroundCall``), and
    while being made its temporary file (path, descriptor); while being mapped, its writer and
    a read-only descriptor."""
    __slots__ = ("index", "call", "tmp", "fd", "writer")

    def __init__(self, index, call, tmp, fd):
        self.index, self.call, self.tmp, self.fd = index, call, tmp, fd
        self.writer = None


class RollingBusWriter(RollingWriterBase):
    """Writes records onto a rolling bus; many writers (processes) may share one.

    Same use as ``MappedBusWriter``: ``write(message_or_bytes[, offset, length])`` -> bool,
    ``write_batch(rows, meta=0)`` -> committed count. When a segment is full the writer
    moves to the next one (a record never spans two segments). A writer pickles: the copy
    reopens the bus by path with the same options, open if this one was open.

    ``segment_size`` and ``record_size`` are needed to create a bus; for a bus that exists,
    sizes left out (None) come from its ``bus.meta`` (``RollingBusWriter(path)``), as the
    reader takes them, and a size given that differs from it is a BusMismatchError.
    """

    # No instance __dict__: a per-record call finds its method without a dict lookup.
    # (The public attributes are the base class's, with their docstrings.)
    __slots__ = ('_allow_foreign', '_consumer_policy', '_every', '_fd', '_half', '_job', '_k',
                 '_kwargs', '_mark', '_meta_fd', '_mode', '_prefault', '_registry',
                 '_registry_error', '_retention', '_retired', '_slot', '_spare', '_wake', '_writers')

    def __init__(self, path, segment_size=None, record_size=None, *, retain_segments=0,
                 retain_bytes=0, retain_age=None, max_consumer_lag=0, on_consumer_lag="expire",
                 consumer_block_timeout=None, mode=0o600, allow_foreign=False,
                 prefault=False):
        # The single-file writer checks the sizes the same way; fail here, before any file.
        if segment_size is not None:
            segment_size = _as_size(segment_size, "segment_size")
        if record_size is not None:
            record_size = _as_size(record_size, "record_size")
        segment_size, record_size = _check_segment_sizes(
            *_writer_sizes(os.fspath(path), segment_size, record_size, allow_foreign))
        MappedBusWriter(os.fspath(path), segment_size, record_size, mode=mode)
        self._kwargs = dict(retain_segments=retain_segments, retain_bytes=retain_bytes,
                            retain_age=retain_age, max_consumer_lag=max_consumer_lag,
                            on_consumer_lag=on_consumer_lag,
                            consumer_block_timeout=consumer_block_timeout, mode=mode,
                            allow_foreign=allow_foreign, prefault=prefault)
        self.path = os.fspath(path)
        self.segment_size = segment_size
        self.record_size = record_size
        self._retention = _check_retention_args(retain_segments, retain_bytes, retain_age)
        self._consumer_policy = _check_consumer_args(max_consumer_lag, on_consumer_lag,
                                                     consumer_block_timeout)
        self._registry = None     # DIR/bus.consumers once it exists (retention reads it)
        self._registry_error = None  # why a look-ahead's retention could not read it: raised
                                     # at the next roll (retention waits for it meanwhile)
        self._mode = mode
        self._allow_foreign = allow_foreign
        self._prefault = prefault
        self._slot = slot_size(record_size)
        self._half = segment_size // 2
        self._every = max(1, min(4096, slots_per_segment(segment_size, record_size) // 8))
        self.meta = None
        self._w = None
        self._k = -1
        self._spare = None        # (index, open MappedBusWriter, fd) of the segment after _k
        self._job = None          # _SpareJob: the spare being made or mapped in the background
        self._fd = -1             # the current segment, read-only: to look at its limit
        self._retired = []        # (writer, fd) of segments left behind, closed later
        self._mark = None         # (fd, time) of a roll into a spare, to set as its mtime
        self._countdown = 0
        self._wake = None         # DIR/bus.wake, shared by this writer's segment writers
        self._writers = None      # DIR/bus.writers with this writer's slot, shared likewise
        self._meta_fd = None      # DIR/bus.meta, write-only, for the segments' claims (-1: none)

    @property
    def bus_id(self):
        """The bus's random id from ``bus.meta`` (new for every bus created at this path);
        None until opened."""
        return self.meta.id if self.meta is not None else None

    @property
    def segment(self):
        """The index of the segment this writer writes into."""
        return self._k

    @property
    def closed(self):
        """True until ``open()``, and again after ``close()``."""
        return self._w is None

    def open(self):
        """Create the bus (directory, ``bus.meta``, segment 0) if it does not exist, else
        check it (BusMismatchError on other sizes), and enter its newest segment with
        records. Returns the writer; opening an open writer does nothing."""
        if self._w is not None:
            return self
        open_dir(self.path, create=True, allow_foreign=self._allow_foreign)
        self.meta = create_or_open_meta(self.path, self.segment_size, self.record_size,
                                        self._retention, mode=self._mode,
                                        allow_foreign=self._allow_foreign,
                                        consumers=self._consumer_policy)
        segs = list_segments(self.path)
        if not segs:
            create_segment(self.path, 0, self.segment_size, mode=self._mode)
            segs = list_segments(self.path)
        k, _ = _choose_current(self.path, segs, self._allow_foreign)
        if self._consumers_matter():
            # A registry that cannot be read (corrupt, a link, another owner's) is an error
            # now, not a writer whose retention or back-pressure fails later.
            self._consumer_entries()
        self._wake = _open_wake(self.path, self._allow_foreign, self._mode)
        self._writers = take_writer_slot(os.path.join(self.path, WRITERS_FILE),
                                         self._allow_foreign, self._mode)
        self._enter(k, None)
        if self._writers is not None:
            self._take_over()
        self._countdown = 1      # look at the limit on the first write
        return self

    def close(self):
        """Unmap every segment this writer holds; the bus stays. Closing twice is harmless.
        It always closes: every step runs, then the first error (if any) is raised (the last
        roll's retention when the consumer registry cannot be read, for one)."""
        errors = []

        def attempt(step, *args):
            try:
                step(*args)
            except BaseException as e:      # released below in any case, raised after
                errors.append(e)

        if self._job is not None:
            attempt(self._step, True)
        if self._mark is not None:
            attempt(self._apply_mark)
            if self._mark is not None and self._registry_error is not None:
                errors.append(self._registry_error)     # that retention did not run
        self._mark = None
        if self._spare is not None:
            self._retired.append(self._spare[1:])
        if self._w is not None:
            self._retired.append((self._w, self._fd))
        retired, self._retired = self._retired, []
        for w, fd in retired:
            attempt(w.close)
            if fd >= 0:
                attempt(os.close, fd)
        self._w, self._spare, self._fd = None, None, -1
        if self._wake is not None:
            attempt(self._wake.close)
            self._wake = None
        if self._writers is not None:
            self._writers.close()     # clears this writer's claim, gives its slot back
            self._writers = None
        if self._registry is not None:
            attempt(self._registry.close)
            self._registry = None
        if self._meta_fd is not None and self._meta_fd >= 0:
            attempt(os.close, self._meta_fd)
        self._meta_fd = None
        self._registry_error = None
        if errors:
            raise errors[0]

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()

    def __reduce__(self):
        return (_reopen_rolling, (RollingBusWriter, self.path, self.segment_size,
                                  self.record_size, self._kwargs, self._w is not None))

    def __repr__(self):
        state = "closed" if self._w is None else f"open in segment {self._k}"
        return (f"<RollingBusWriter {state} path={self.path!r} segment_size="
                f"{self.segment_size} record_size={self.record_size}>")

    def _segment_writer(self, index):
        p = segment_path(self.path, index)
        # Segments are made by create_segment only: never let an open create one.
        os.lstat(p)
        # No preallocate: create_segment preallocated the blocks already, and fallocate would
        # touch the mtime that records when the segment was first rolled into.
        return MappedBusWriter(p, self.segment_size, self.record_size, mode=self._mode,
                               preallocate=False, prefault=self._prefault,
                               allow_foreign=self._allow_foreign, _segment=True,
                               _wake=self._wake, _writers=self._writers,
                               _position_base=join_position(index, 0, self.segment_size)).open()

    def _take_over(self):
        """Our slot's last holder died with a claim: roll back its uncommitted slots in the
        segment the claim lies in (if retention left it), then clear the claim."""
        claim = self._writers.claim_left
        if claim.empty:
            return
        index = claim.begin // self.segment_size
        if index == self._k:
            self._w._take_over(self._writers)
            return
        try:
            w = self._segment_writer(index)
        except (FileNotFoundError, ValueError):
            self._writers.clear()      # its segment is gone: nothing left to roll back
            return
        try:
            w._take_over(self._writers)
        finally:
            w.close()
        self._writers.clear()

    def _enter(self, index, writer, fd=-1):
        """Make segment ``index`` current (opening it unless ``writer`` is given). The old
        segment's mapping is closed later, at the next look-ahead (unmapping a populated
        16 MiB mapping takes a few hundred µs: not on the write that rolls)."""
        if writer is None:
            writer = self._segment_writer(index)
        if fd < 0:
            fd, _ = open_file(segment_path(self.path, index), os.O_RDONLY,
                              allow_foreign=self._allow_foreign)
        if self._w is not None:
            self._retired.append((self._w, self._fd))
        self._w, self._k, self._fd = writer, index, fd
        self._countdown = self._every
        self._trigger = spare_trigger(self.segment_size, self.record_size)

    def _close_retired(self):
        for w, fd in self._retired:
            w.close()
            if fd >= 0:
                os.close(fd)
        self._retired = []

    def _roll(self):
        """Segment ``_k`` is full: move to the next one that exists or can be created."""
        if self._w is None:
            raise BusClosedError("write to a closed RollingBusWriter (call open() first)")
        target = self._k + 1
        if self._job is not None:
            self._step(wait=True)
        if self._consumers_matter() and (self._registry is None
                                         or self._registry_error is not None):
            # Where the user acts: a registry that cannot be read (opened now, or found
            # unreadable by a look-ahead's retention) fails the write that rolls (nothing
            # written), at every roll until it can be; retention waits meanwhile.
            self._consumer_entries()
            self._registry_error = None
        self._wait_for_consumers(target)
        if self._spare is not None and self._spare[0] == target:
            self._mark_full()
            _, spare, fd = self._spare
            self._spare = None
            self._enter(target, spare, fd)
            return
        if self._spare is not None:
            self._retired.append(self._spare[1:])
            self._spare = None
        while True:
            try:
                w = self._segment_writer(target)
                break
            except FileNotFoundError:
                pass
            later = [i for i in list_segments(self.path) if i > target]
            if later:
                # Retention removed it: the writers are further on.
                target, _ = _choose_current(self.path, later, self._allow_foreign)
                continue
            self._make(target, wait=True)
        if target == self._k + 1:
            self._mark_full()
        self._enter(target, w)

    def _mark_full(self):
        # Only the time is taken here: the utime (~60 µs on tmpfs) is done by the next
        # look-ahead, off the write that rolls, with this time.
        self._mark = (self._k, time.time_ns())

    def _apply_mark(self):
        # A roll's deferred work: the full segment's mtime, then retention, which now counts
        # that segment as history (the creation of the one rolled into counted it as current).
        index, when = self._mark
        try:
            os.utime(segment_path(self.path, index), ns=(when, when), follow_symlinks=False)
        except FileNotFoundError:
            pass
        hold = self._hold_or_defer(self._k)
        if hold is _NO_HOLD_KNOWN:
            return      # kept: retried at the next look-ahead; the next roll raises why
        self._mark = None
        apply_retention(self.path, self.meta, self._k, self._k, hold_from=hold)

    def _claim(self, index):
        """Segment ``index``'s claim (layout.SEGMENT_CLAIM_BASE): True if this writer took it,
        False if another process holds it, None where there are no claims (bus.meta not
        writable here, or no locks)."""
        if self._meta_fd is None:
            try:
                self._meta_fd, _ = open_file(os.path.join(self.path, META_FILE),
                                             os.O_WRONLY, allow_foreign=self._allow_foreign)
            except OSError:
                self._meta_fd = -1
        if self._meta_fd < 0:
            return None
        try:
            fcntl.lockf(self._meta_fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1,
                        SEGMENT_CLAIM_BASE + index)
            return True
        except (BlockingIOError, PermissionError):
            return False
        except OSError:
            return None

    def _unclaim(self, index):
        fcntl.lockf(self._meta_fd, fcntl.LOCK_UN, 1, SEGMENT_CLAIM_BASE + index)

    def _make(self, index, wait):
        """Make segment ``index`` (absent) holding its claim. When another writer holds it:
        with ``wait`` (a roll), wait for the segment while it does (at most
        SEGMENT_CLAIM_WAIT_MS), then make it if it is still missing; else leave it to them."""
        deadline = time.monotonic() + SEGMENT_CLAIM_WAIT_MS / 1000
        while True:
            claim = self._claim(index)
            if claim is not False:
                break
            if not wait or os.path.lexists(segment_path(self.path, index)):
                return
            if time.monotonic() >= deadline:
                claim = None
                break
            time.sleep(0.001)
        try:
            if not os.path.lexists(segment_path(self.path, index)):
                self._create(index, current=self._k)
        finally:
            if claim:
                self._unclaim(index)

    def _create(self, index, current):
        created = create_segment(self.path, index, self.segment_size, mode=self._mode)
        if created:
            self._after_create(index, current)
        return created

    def _after_create(self, index, current):
        # The creator's retention, with the new segment counted as the newest (none while
        # the consumers' holds cannot be read: the roll's retention runs once they can).
        hold = self._hold_or_defer(current)
        if hold is not _NO_HOLD_KNOWN:
            apply_retention(self.path, self.meta, index, min(current, index), hold_from=hold)
        remove_stale_tmp(self.path)

    def _consumers_matter(self):
        """Whether this bus's consumers hold its retention or block its writers."""
        meta = self.meta
        return bool(meta.max_consumer_lag) and (
            meta.on_consumer_lag == "block" or bool(meta.retain_segments or meta.retain_bytes
                                                    or meta.retain_age_ms))

    def _hold_or_defer(self, current):
        """``_consumer_hold(current)``, or _NO_HOLD_KNOWN when the registry cannot be read:
        retention then removes nothing (a consumer's position is never lost to a registry
        fault), and the error is kept for the next roll to raise."""
        try:
            return self._consumer_hold(current)
        except (MappedBusError, OSError) as e:
            self._registry_error = e
            return _NO_HOLD_KNOWN

    def _consumer_entries(self):
        # The registry is made by the first consumer; until then there is nothing to hold.
        if self._registry is None:
            self._registry = _open_registry(self.path, self._allow_foreign, create=False)
            if self._registry is None:
                return []
        return bus_consumer_entries(self._registry, self.meta)

    def _consumer_hold(self, current):
        """Expire (policy ``expire``) the consumers too far behind ``current``; the oldest
        segment the others need, which retention keeps (None: no hold)."""
        meta = self.meta
        if not meta.max_consumer_lag or not (meta.retain_segments or meta.retain_bytes
                                             or meta.retain_age_ms):
            return None         # retention removes nothing: nothing to hold, nobody expires
        hold, expire = consumer_retention(self._consumer_entries(), self.meta, current)
        if expire:
            self._registry.expire([(e["index"], e["name"]) for e in expire])
        return hold

    def _wait_for_consumers(self, target):
        """Policy ``block``: before rolling into ``target``, wait while a consumer would lag
        more than ``max_consumer_lag`` segments; BusBackPressureError after
        ``consumer_block_ms``."""
        meta = self.meta
        if not meta.max_consumer_lag or meta.on_consumer_lag != "block":
            return
        deadline = None
        while True:
            blockers = consumer_blockers(self._consumer_entries(), meta, target)
            if not blockers:
                return
            now = time.monotonic()
            if deadline is None:
                deadline = now + meta.consumer_block_ms / 1000
            elif now >= deadline:
                e = blockers[0]
                lag = target - consumer_segment(e["position"], meta.segment_size,
                                                meta.record_size)
                raise BusBackPressureError(
                    f"{self.path!r}: consumer {e['name']!r} (position {e['position']}) would "
                    f"lag {lag} segments behind segment {target}, more than max_consumer_lag="
                    f"{meta.max_consumer_lag}; waited {meta.consumer_block_ms} ms for it "
                    f"(on_consumer_lag=block): nothing was written", e["name"], e["position"],
                    lag)
            time.sleep(0.001)

    def _look_ahead(self):
        """Past the middle of the segment: map the next one (made by the writer that took the
        slot past the middle, ``_make_spare``); past three quarters, make it if nobody did
        (that writer is gone, or wrote a batch over the slot, or is not of this project).
        A spare being prepared moves on to its next step once its background call is done."""
        self._countdown = self._every
        if self._mark is not None:
            self._apply_mark()
        if self._job is not None:
            self._step(wait=False)
            return
        if self._spare is not None:
            return
        limit = _LIMIT.unpack(os.pread(self._fd, 8, 0))[0]
        if limit < self._half:
            return
        self._start_spare(create=limit >= self._half + self._half // 2)

    def _make_spare(self):
        """This writer allocated the slot past the middle: make and map the next segment."""
        if self._spare is None and self._job is None:
            self._start_spare(create=True)

    def _start_spare(self, create):
        """Segment _k + 1 as the spare, prepared beside the writes (as the Java writer's
        helper thread does): if it exists, opened and its pages mapped in the background;
        else, with ``create``, made under its claim, its temporary file preallocated in the
        background, then linked (and the creator's retention run) at a look-ahead, then
        mapped. Only the two slow system calls run off this thread (BackgroundCall: 64 MiB,
        fallocate about 14 ms, mapping 7-19 ms); nothing else is shared with it."""
        self._close_retired()
        nxt = self._k + 1
        if os.path.lexists(segment_path(self.path, nxt)):
            self._start_mapping(nxt, made=False)
            return
        if not create or any(i > nxt for i in list_segments(self.path)):
            return      # not yet, or this writer is behind: it jumps ahead when it rolls
        claim = self._claim(nxt)
        if claim is False:
            return      # another writer makes it: a look-ahead maps it
        try:
            if os.path.lexists(segment_path(self.path, nxt)):
                self._start_mapping(nxt, made=False)
                return
            tmp, fd = _open_temporary(self.path, nxt, self._mode)
        except BaseException:
            if claim:
                self._unclaim(nxt)
            raise
        size = mapped_size(self.segment_size)
        call = BackgroundCall.fallocate(fd, size, self._meta_fd if claim else -1,
                                        SEGMENT_CLAIM_BASE + nxt)
        self._job = _SpareJob(nxt, call, tmp, fd)
        self._countdown = min(self._every, SPARE_POLL_WRITES)

    def _start_mapping(self, index, made):
        try:
            w = self._segment_writer(index)
        except FileNotFoundError:
            return      # removed at once by retention: the writers are further on
        fd, _ = open_file(segment_path(self.path, index), os.O_RDONLY,
                          allow_foreign=self._allow_foreign)
        call = BackgroundCall.populate(w, made)
        if call is None:        # nothing to map ahead (prefault mapped it at open)
            self._spare = (index, w, fd)
            return
        job = _SpareJob(index, call, None, fd)
        job.writer = w
        self._job = job
        self._countdown = min(self._every, SPARE_POLL_WRITES)

    def _step(self, wait):
        """The spare's background call is done (``wait``: wait for it): its next step. A roll
        waits, and then maps no pages ahead (its writes map them as they go)."""
        job = self._job
        if not wait and not job.call.done:
            self._countdown = min(self._every, SPARE_POLL_WRITES)
            return
        rc = job.call.wait()
        self._job = None
        if job.writer is not None:              # mapped (or not: rc says, the writes do it)
            if rc == -1:
                job.writer.close()              # mapped in the parent of this forked child
                os.close(job.fd)
            elif job.index == self._k + 1 and self._spare is None:
                self._spare = (job.index, job.writer, job.fd)
            else:
                self._retired.append((job.writer, job.fd))
            return
        # The temporary file's preallocation is over (and the claim released with it): linked,
        # unless it failed (the roll then makes the segment itself, and reports why), or it
        # ran in the parent of this forked child.
        if rc == -1:
            os.close(job.fd)
            return
        try:
            if rc != 0:
                _preallocation_failed(rc, job.fd, mapped_size(self.segment_size),
                                      segment_path(self.path, job.index))
        except OSError:
            os.unlink(job.tmp)
            return
        finally:
            os.close(job.fd)
        linked = _link_temporary(self.path, job.index, job.tmp)
        if linked:
            self._after_create(job.index, self._k)
        if job.index == self._k + 1 and not wait:
            self._start_mapping(job.index, made=linked)

    def write_batch(self, rows, meta=0):
        """Write every row of a C-contiguous array as one record each (see
        ``MappedBusWriter.write_batch``), rolling between rows as segments fill up."""
        import numpy
        if self._w is None:
            raise BusClosedError("write to a closed RollingBusWriter (call open() first)")
        rows = numpy.ascontiguousarray(rows)
        if rows.ndim == 0:
            rows = rows.reshape(1)
        n = len(rows)
        metas = None if isinstance(meta, int) else numpy.ascontiguousarray(meta, dtype="<i4")
        if metas is not None and metas.shape != (n,):
            raise ValueError(f"meta has shape {metas.shape}, expected ({n},)")
        done = committed = 0
        rolled_back = []
        self._countdown -= n
        while done < n:
            if self._countdown <= 0:
                self._look_ahead()
            part_meta = meta if metas is None else metas[done:]
            try:
                committed += self._w.write_batch(rows[done:], part_meta)
                break
            except BusFullError as e:
                # A batch that starts exactly at the segment's end allocates nothing: the
                # error then carries no counts.
                fit = getattr(e, "committed", 0) + len(getattr(e, "rolled_back", ()))
                committed += getattr(e, "committed", 0)
                rolled_back += [done + i for i in getattr(e, "rolled_back", ())]
                done += fit
                try:
                    self._roll()
                except BusBackPressureError as bp:
                    bp.committed, bp.rolled_back = committed, rolled_back
                    raise
            except RecordsRolledBackError as e:
                committed += e.committed
                rolled_back += [done + i for i in e.rolled_back]
                break
        if rolled_back:
            raise RecordsRolledBackError(
                f"{len(rolled_back)} of {n} rows were rolled back by a reader before this "
                f"writer committed them", committed, rolled_back)
        return committed


# -- the reader ---------------------------------------------------------------------------

class RollingBusReader(RollingReaderBase):
    """Reads every record of a rolling bus in the one order all readers share.

    The read API of ``MappedBusReader``; ``position``/``seek``/``start=`` use positions
    across segments (``segment * segment_size + offset``). When the segment a reader needs
    was removed by retention: ``on_gap="raise"`` raises BusGapError (the lost range),
    ``"skip"`` continues at the oldest retained record and adds the slots to ``lost``.

    Times are in seconds, as for ``MappedBusReader``: ``timeout`` (default 2.0) is how long
    a slot no live writer claims (``DIR/bus.writers``) may stay uncommitted before it is rolled
    back, ``stall_limit`` (default None) how long to wait for a live writer's; every call that can wait takes
    ``timeout=None`` (the default: wait until a record comes), ``0`` (do not wait) or
    seconds. ``read_async``/``records_async`` wait without blocking an asyncio loop. A
    reader pickles: the copy reopens the bus by path at this reader's position.

    ``consumer="name"`` holds that name in the bus's consumer registry (``DIR/bus.consumers``):
    the reader opens at its committed position (the first time at ``start``), ``commit()``
    stores the reader's position and ``close()`` lets the name go (see ``MappedBusReader``).
    A consumer whose position retention removed (it lagged past ``max_consumer_lag`` and
    expired) opens, and its first read raises ``BusGapError`` naming the range lost.

    ``group="name"`` makes a member of that work group instead: each record goes to one
    member, which acks it (``mappedbus_py.groups.GroupReader``; docs/groups.md).
    """

    # No instance __dict__: a per-record call finds its method without a dict lookup.
    # (The public attributes are the base class's, with their docstrings.)
    __slots__ = ('_allow_foreign', '_at_end', '_cindex', '_creg', '_done_rollbacks',
                 '_done_skipped', '_end', '_follow_at', '_follow_wait', '_id_at', '_idle_kw',
                 '_initial_end', '_k', '_meta_st', '_on_gap', '_park', '_raw', '_slot',
                 '_stall_limit', '_start', '_timeout', '_wake', '_wakefd')

    def __new__(cls, *args, group=None, **kwargs):
        # group="name": a member of that work group instead (mappedbus_py.groups.GroupReader;
        # its keywords: start, lease, max_deliveries, max_in_flight, window, timeout, ...)
        if group is None:
            return super().__new__(cls)
        from .groups import GroupReader
        if len(args) != 1:
            raise TypeError("RollingBusReader(path, group=...) takes the bus's path alone: a "
                            "group reads its sizes from bus.meta")
        return GroupReader(args[0], group, **kwargs)

    def __init__(self, path, segment_size=None, record_size=None, *, timeout=DEFAULT_TIMEOUT,
                 start=None, read_only=False, on_gap="raise", allow_foreign=False,
                 idle="spin_park", spin=DEFAULT_SPIN, park=DEFAULT_PARK,
                 park_max=DEFAULT_PARK_MAX, consumer=None, group=None, stall_limit=None):
        if consumer is not None:
            _check_consumer_name(consumer)
        if on_gap not in ("raise", "skip"):
            raise ValueError(f"on_gap must be 'raise' or 'skip', got {on_gap!r}")
        if segment_size is not None or record_size is not None:
            s, r = _check_segment_sizes(1 << 20 if segment_size is None else segment_size,
                                        8 if record_size is None else record_size)
            segment_size = None if segment_size is None else s
            record_size = None if record_size is None else r
            MappedBusReader(os.fspath(path), s, r)
        _check_stall_limit(stall_limit)
        _check_rollback_timeout(timeout)
        start = _check_start(start)
        _check_idle(idle, spin, park, park_max)
        self.idle = idle
        self._idle_kw = dict(idle=idle, spin=spin, park=park, park_max=park_max)
        self._wake = None        # DIR/bus.wake, shared by the segment readers
        self._wakefd = None      # fileno()'s watcher
        self._park = park
        self.path = os.fspath(path)
        self.segment_size = segment_size
        self.record_size = record_size
        self.read_only = read_only
        self._timeout = timeout
        self._stall_limit = stall_limit
        self._start = start
        self._on_gap = on_gap
        self._allow_foreign = allow_foreign
        self.meta = None
        self._r = None
        self._k = -1
        self._base_pos = 0
        self._done_skipped = 0
        self._done_rollbacks = 0
        self.lost = 0
        self._at_end = False
        self._follow_at = 0
        self._follow_wait = FOLLOW_MIN_NS
        self._id_at = 0
        self._meta_st = None      # bus.meta's (dev, ino, size, mtime) when its id last matched
        self._idle = 0
        self._initial_end = 0
        self.consumer = consumer
        self._creg = None         # DIR/bus.consumers while the consumer name is held
        self._cindex = -1
        self._pending_gap = None  # (segment, offset): a consumer's position lost to retention

    # -- opening and placing ---------------------------------------------------------

    def open(self):
        """Open the bus (FileNotFoundError if there is none yet), taking the sizes from its
        ``bus.meta`` (BusMismatchError if given ones differ), and place the reader at
        ``start``: the oldest retained record, ``"end"``, or a position. Returns the reader;
        opening an open reader does nothing."""
        if self._r is not None:
            return self
        open_dir(self.path, create=False, allow_foreign=self._allow_foreign)
        meta = read_bus_meta(self.path, allow_foreign=self._allow_foreign)
        mpath = os.path.join(self.path, META_FILE)
        if meta is None:
            raise FileNotFoundError(errno.ENOENT, "no bus.meta: not a rolling bus (or not "
                                    "created yet)", mpath)
        meta.check(self.record_size, self.segment_size, mpath)
        self.meta = meta
        self.segment_size, self.record_size = meta.segment_size, meta.record_size
        if self.idle != "busy_spin" and self._wake is None:
            self._wake = _open_wake(self.path, self._allow_foreign)
        self._slot = slot_size(meta.record_size)
        self._end = end_boundary(meta.segment_size, meta.record_size)
        self._raw = _raw_message(meta.record_size)
        segs = self._segments()
        k, limit = _choose_current(self.path, segs, self._allow_foreign)
        self._initial_end = join_position(k, min(limit, self._end), self.segment_size)
        start = self._start
        if start is None:
            self._place_oldest()
        elif isinstance(start, str) and start == "end":
            self.seek_end()
        else:
            self.seek(start)
        if self.consumer is not None:
            try:
                self._claim_consumer()
            except BaseException:
                self.close()
                raise
        return self

    def _claim_consumer(self):
        # Hold the name; go on from its committed position (the first time: from here).
        reg = _open_registry(self.path, self._allow_foreign, create=True)
        index, position, made = reg.claim(self.consumer, self.meta.id, self.position, self.path)
        self._creg, self._cindex = reg, index
        self._set_consumer_entry(reg, index)
        if made:
            return
        k, off = locate(position, self.segment_size, self.record_size)
        segs = self._segments()
        if not on_grid(off, self.segment_size, self.record_size) or k > segs[-1]:
            raise CorruptBusError(
                f"{reg.path!r}: consumer {self.consumer!r} has position {position}, not a "
                f"position of this bus (segment {k}, offset {off}; newest segment "
                f"{segs[-1]})")
        if k >= segs[0] and os.path.lexists(segment_path(self.path, k)):
            self.seek(position)
            return
        # Its segment is gone (retention expired it): the next read reports the gap. Until
        # then the reader waits at the end of the oldest segment, where reading calls
        # _follow(), which raises it (or skips, with on_gap="skip").
        self._open_segment(segs[0], self._end)
        self._pending_gap = (k, off)

    def _release_consumer(self):
        if self._creg is not None:
            reg, self._creg = self._creg, None
            self._drop_consumer_entry()
            try:
                reg.release(self._cindex)
            finally:
                reg.close()

    def _commit_position(self, position):
        # commit()'s slow path (RollingReaderBase.commit): checks, a given position, a
        # position lost to retention; the store is the caller's.
        if self._creg is None:
            if self.consumer is None:
                raise ValueError("commit() needs a consumer: open the reader with "
                                 "consumer=\"name\"")
            raise BusClosedError(f"the RollingBusReader of consumer {self.consumer!r} is closed")
        if position is None:
            return self.position
        position = _check_position(position)
        k, off = locate(position, self.segment_size, self.record_size)
        if position < 0 or not on_grid(off, self.segment_size, self.record_size):
            raise ValueError(f"commit({position!r}): not a record position of this bus")
        return position

    def _commit_refused(self):
        # RollingReaderBase.commit found the registry truncated, or a forked child.
        self._creg.refuse_commit(self.consumer, self._cgen)

    def _segments(self):
        segs = list_segments(self.path)
        if not segs:
            raise FileNotFoundError(errno.ENOENT, "rolling bus has no segment", self.path)
        return segs

    def _open_segment(self, index, offset):
        """Make segment ``index`` current at ``offset``; FileNotFoundError if it is gone."""
        r = MappedBusReader(segment_path(self.path, index), self.segment_size, self.record_size,
                            timeout=self._timeout, start=offset, read_only=self.read_only,
                            allow_foreign=self._allow_foreign, _segment=True,
                            _wake=self._wake, stall_limit=self._stall_limit,
                            _writers_path=os.path.join(self.path, WRITERS_FILE),
                            _position_base=join_position(index, 0, self.segment_size),
                            **self._idle_kw)
        os.lstat(segment_path(self.path, index))     # never let an open create a segment
        r.open()
        self._drop_current()
        self._r, self._k = r, index
        self._base_pos = join_position(index, 0, self.segment_size)
        self._at_end = False
        self._follow_wait = FOLLOW_MIN_NS

    def _drop_current(self):
        if self._wakefd is not None:
            self._wakefd.stop_watching()     # its thread may read the segment's mapping
        if self._r is not None:
            self._done_skipped += self._r.skipped
            self._done_rollbacks += self._r.rollbacks
            self._r.close()
            self._r = None

    def _place_oldest(self):
        while True:
            oldest = self._segments()[0]
            try:
                return self._open_segment(oldest, _FIRST)
            except FileNotFoundError:
                continue        # removed meanwhile: the next one is the oldest now

    def _gap(self, from_index, from_offset):
        """The segment ``from_index`` is gone: raise or skip to the oldest retained."""
        while True:
            segs = self._segments()
            oldest = segs[0]
            lost_from, lost_to, lost = gap_range(from_index, from_offset, oldest,
                                                 self.segment_size, self.record_size)
            if self._on_gap == "raise":
                raise BusGapError(
                    f"{self.path!r}: positions {lost_from} to {lost_to} (segments {from_index} "
                    f"to {oldest - 1}, {lost} record slots) were removed by retention before "
                    f"this reader read them", lost_from, lost_to, lost)
            try:
                self._open_segment(oldest, _FIRST)
            except FileNotFoundError:
                continue
            self.lost += lost
            return

    def seek(self, position):
        """Continue from the record at ``position`` (a position across segments)."""
        if self.meta is None:
            raise BusClosedError("the RollingBusReader is not open")
        position = _check_position(position)
        if position < 0:
            raise ValueError(f"position must be a non-negative int, got {position!r}")
        self._pending_gap = None
        k, off = locate(position, self.segment_size, self.record_size)
        if not on_grid(off, self.segment_size, self.record_size):
            raise ValueError(f"position {position} is not a record boundary (offset {off} in "
                             f"segment {k}; records start at {_FIRST} and take {self._slot} "
                             f"bytes)")
        if k == self._k and self._r is not None:
            self._r.seek(off)
            self._at_end = False
            return
        segs = self._segments()
        if k > segs[-1]:
            raise ValueError(f"position {position} is in segment {k}, past the newest "
                             f"segment {segs[-1]}")
        try:
            self._open_segment(k, off)
        except FileNotFoundError:
            if k > self._segments()[0]:
                raise
            self._gap(k, off)

    def seek_end(self):
        """Skip to the current end of the bus: only records allocated from now on."""
        if self.meta is None:
            raise BusClosedError("the RollingBusReader is not open")
        self._pending_gap = None
        while True:
            k, limit = _choose_current(self.path, self._segments(), self._allow_foreign)
            try:
                return self._open_segment(k, min(max(limit, _FIRST), self._end))
            except FileNotFoundError:
                continue

    def close(self):
        """Unmap the segment the reader is in; ``skipped``, ``rollbacks`` and ``lost`` keep
        their counts; the consumer name is let go. Closing twice is harmless."""
        self._release_consumer()
        self._pending_gap = None
        self._drop_current()
        if self._wakefd is not None:
            self._wakefd.close()
            self._wakefd = None
        if self._wake is not None:
            self._wake.close()
            self._wake = None

    def __reduce__(self):
        opened = self._r is not None
        kwargs = dict(timeout=self._timeout, start=self.position if opened else self._start,
                      read_only=self.read_only, on_gap=self._on_gap,
                      allow_foreign=self._allow_foreign, consumer=self.consumer,
                      stall_limit=self._stall_limit, **self._idle_kw)
        return (_reopen_rolling, (RollingBusReader, self.path, self.segment_size,
                                  self.record_size, kwargs, opened))

    @property
    def closed(self):
        """True until ``open()``, and again after ``close()``."""
        return self._r is None

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self._r is None else f"open at {self.position}"
        return (f"<RollingBusReader {state} path={self.path!r} segment_size="
                f"{self.segment_size} record_size={self.record_size}>")

    # -- figures ----------------------------------------------------------------------

    @property
    def bus_id(self):
        """The bus's random id from ``bus.meta``; None until opened. A bus deleted and
        recreated at the same path has another (the reader then raises BusReplacedError)."""
        return self.meta.id if self.meta is not None else None

    @property
    def segment(self):
        """The index of the segment the reader is in (-1 before ``open()``)."""
        return self._k

    @property
    def position(self):
        """The position of the next slot this reader will look at."""
        if self._pending_gap is not None:
            return join_position(*self._pending_gap, self.segment_size)
        return self._base_pos + self._live().position

    @property
    def limit(self):
        """The limit of the segment the reader is in, as a position."""
        return self._base_pos + self._live().limit

    @property
    def skipped(self):
        """Records lost to writers that stalled: rolled-back or timed-out slots passed over,
        in every segment read so far (records lost to retention are counted in ``lost``)."""
        return self._done_skipped + (self._r.skipped if self._r is not None else 0)

    @property
    def rollbacks(self):
        """Slots this reader itself rolled back (their writer stalled past ``timeout``)."""
        return self._done_rollbacks + (self._r.rollbacks if self._r is not None else 0)

    @property
    def timeout(self):
        """Seconds a slot may stay uncommitted before this reader rolls it back."""
        return self._timeout

    @timeout.setter
    def timeout(self, seconds):
        _check_rollback_timeout(seconds)
        self._timeout = seconds
        if self._r is not None:
            self._r.timeout = seconds

    def set_timeout(self, milliseconds):
        """Java's ``setTimeout(int)``: the rollback timeout in **milliseconds**."""
        if isinstance(milliseconds, bool) or not isinstance(milliseconds, (int, float)):
            raise ValueError(f"set_timeout() takes a number of milliseconds, got {milliseconds!r}")
        _check_rollback_timeout(milliseconds / 1000, "set_timeout(ms)",
                                f"{milliseconds!r} milliseconds")
        self.timeout = milliseconds / 1000

    set_timeout_ms = set_timeout

    def has_recovered(self):
        """True once every record present when the reader opened has been read."""
        return self.position >= self._initial_end

    def _live(self):
        if self._r is None:
            raise BusClosedError("the RollingBusReader is closed (call open() first)")
        return self._r

    # -- following segments ------------------------------------------------------------

    def _check_id(self, now):
        # An lstat of bus.meta; its id is read again only when the file looks changed.
        self._id_at = now + ID_CHECK_NS
        try:
            st = os.lstat(os.path.join(self.path, META_FILE))
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        except (FileNotFoundError, NotADirectoryError):
            key = None
        if key is not None and key == self._meta_st:
            return self._check_newest()
        try:
            meta = read_bus_meta(self.path, allow_foreign=self._allow_foreign)
        except (FileNotFoundError, NotADirectoryError):
            meta = None
        if meta is not None and meta.id == self.meta.id:
            self._meta_st = key
            return self._check_newest()
        if meta is None or meta.id != self.meta.id:
            what = "is gone" if meta is None else f"now holds bus {meta.id}"
            raise BusReplacedError(f"{self.path!r}: the rolling bus {self.meta.id} was "
                                   f"replaced: its {META_FILE} {what}")

    def _check_newest(self):
        # Retention removes a segment only once later ones exist: the segment being read gone
        # with none after it means the bus lost its newest segment (its writers raise), and
        # no record can come. One lstat; the listing only then.
        if self._r is None or self._at_end:
            return
        try:
            os.lstat(segment_path(self.path, self._k))
            return
        except FileNotFoundError:
            pass
        if not any(i > self._k for i in list_segments(self.path)):
            raise BusReplacedError(f"{self.path!r}: its newest segment {self._k} was removed "
                                   f"(not by retention, which keeps the newest): no record can "
                                   f"come to this reader")

    def _follow(self):
        """At the end of segment ``_k``: move on if the next segment is there (throttled).
        True when the reader moved (to k+1 or, skipping a gap, further)."""
        if self._pending_gap is not None:
            k, off = self._pending_gap
            self._gap(k, off)
            self._pending_gap = None
            return True
        now = time.monotonic_ns()
        if not self._at_end:
            self._at_end = True
            self._follow_at = 0
        if now < self._follow_at:
            return False
        if now >= self._id_at:
            self._check_id(now)
        nxt = self._k + 1
        while True:
            try:
                self._open_segment(nxt, _FIRST)
                return True
            except FileNotFoundError:
                pass
            segs = list_segments(self.path)
            if nxt in segs:
                continue        # made since the look (and a later one too): open it
            if any(i > nxt for i in segs):
                self._gap(nxt, _FIRST)
                return True
            break
        self._follow_at = now + self._follow_wait
        self._follow_wait = min(self._follow_wait * 2, FOLLOW_MAX_NS)
        return False

    # -- the read API ----------------------------------------------------------------------

    def wait(self, timeout=None):
        """Like ``next()``, but wait up to ``timeout`` seconds (None: until a record
        comes, 0: not at all); True if a record became current."""
        if self.next():
            return True
        if timeout is not None and _check_timeout(timeout) <= 0:
            return self._look()
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 20e-6
        while True:
            if deadline is None:
                remaining = 0.1
            else:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
            if self._at_end:
                # Waiting for the next segment: park; the first commit in it wakes us.
                if self._wake is None:
                    time.sleep(min(pause, remaining))
                    pause = min(pause * 2, self._park)
                else:
                    v = self._wake._prepare()
                    try:
                        self._follow_at = 0
                        if self.next():
                            return True
                        self._wake._wait(v, min(remaining, pause))
                    finally:
                        self._wake._done()
                    pause = min(pause * 2, self._park)
                self._follow_at = 0
                if self.next():
                    return True
                continue
            try:
                # The segment's reader looks at its file every 10 ms as it waits; the bus's
                # id is looked at between its waits, as often.
                if self._r.wait(min(remaining, ID_CHECK_NS / 1e9)):
                    return True
                self._check_id(time.monotonic_ns())
            except BusFullError:
                if self._follow() and self.next():
                    return True

    def _look(self):
        # An empty poll's looks when due (read(0), read_async): the bus's id, and the
        # segment's file (True if it was replaced with a record left, now current).
        now = time.monotonic_ns()
        if now >= self._id_at:
            self._check_id(now)
        r = self._r
        return r is not None and not self._at_end and r._look()

    def fileno(self):
        """A file descriptor for event loops, as ``MappedBusReader.fileno()``: after
        ``arm()`` it becomes readable when a record may be there (in this segment or the
        next). OSError for a ``busy_spin`` reader or one without a wake file."""
        self._live()
        if self._wake is None:
            raise OSError(f"{self.path!r}: this reader has no wake file (idle={self.idle!r}, "
                          f"or it could not be made): no descriptor to wait on")
        if self._wakefd is None:
            kw = self._idle_kw
            self._wakefd = WakeFd(self._wake, int(kw["park"] * 1e9), int(kw["park_max"] * 1e9))
        return self._wakefd.fileno()

    def arm(self, within=None):
        """Make ``fileno()`` fire once the next record may be there; ``within`` as for
        ``MappedBusReader.arm()``. Returns False, without arming, if one may be ready now
        (then call ``next()``/``read(0)``)."""
        self.fileno()
        return not self._r._arm_fd(self._wakefd, within)

    def disarm(self):
        """Stop watching for ``fileno()`` (a wait that ended by timeout or cancellation)."""
        if self._wakefd is not None:
            self._wakefd.stop_watching()

    def _record(self):
        r = self._r
        off = r.position - self._slot
        # The whole payload, as the single-file reader's Record has it (read_bytes would
        # check the stored length, which an object message's type id is not).
        meta = r.read_type()
        r.read_message(self._raw)
        return Record(self._base_pos + off, meta, self._raw.to_bytes())

    def records(self, timeout=None):
        """Yield records until none arrives for ``timeout`` seconds (None: never stop)."""
        while True:
            if not self.wait(timeout):
                return
            yield self._record()

    def __iter__(self):
        return self.records(None)

    def read_async(self, timeout=None):
        """``read(timeout)`` to ``await``: polls without blocking the event loop."""
        return _aio.read_async(self, timeout)

    def records_async(self, timeout=None):
        """``records(timeout)`` for ``async for``."""
        return _aio.records_async(self, timeout)

    def read_type(self):
        """The current record's metadata field: its type id (or a byte array's length)."""
        return self._live().read_type()

    def read_message(self, message):
        """Fill ``message`` from the current record's payload, in place; returns it."""
        return self._live().read_message(message)

    def read_buffer(self, buffer, offset=0):
        """Copy the current byte-array record into ``buffer`` at ``offset``; returns its
        length (Java ``readBuffer``)."""
        return self._live().read_buffer(buffer, offset)

    def read_bytes(self):
        """The current byte-array record's bytes."""
        return self._live().read_bytes()

    def read_batch(self, out, meta=None, timeout=None):
        """Copy up to ``len(out)`` committed records into ``out`` (see
        ``MappedBusReader.read_batch``), across segments; returns how many."""
        n = 0
        total = len(out)
        if total == 0:
            return 0
        if not self.wait(timeout):
            return 0
        # The first record is current: copy it, then take what is ready.
        while n < total:
            if n == 0:
                row = out[0:1]
                self._copy_current(row, None if meta is None else meta[0:1])
                n = 1
                continue
            try:
                got = self._r.read_batch(out[n:], None if meta is None else meta[n:], 0.0)
            except BusFullError:
                if not self._follow_keeping(n):
                    break
                continue
            if got == 0:
                if self._r.position > self._r_last():
                    if self._follow_keeping(n):
                        continue
                break
            n += got
        return n

    def _follow_keeping(self, n):
        """``_follow`` for a batch that already holds ``n`` rows: a gap or a replaced bus
        found now is left for the next call, so the rows copied so far are delivered."""
        try:
            return self._follow()
        except (BusGapError, BusReplacedError):
            if n == 0:
                raise
            return False

    def _r_last(self):
        return self._end - self._slot

    def _copy_current(self, row, meta_row):
        import numpy
        view = numpy.frombuffer(memoryview(row).cast("B"), dtype=numpy.uint8)
        rowlen = view.nbytes
        if rowlen > self.record_size:
            raise ValueError(f"rows of {rowlen} bytes are longer than record_size "
                             f"{self.record_size}")
        self._r.read_message(self._raw)
        view[:] = numpy.frombuffer(self._raw.to_bytes(), dtype=numpy.uint8)[:rowlen]
        if meta_row is not None:
            meta_row[0] = self._r.read_type()


def _reopen_rolling(cls, path, segment_size, record_size, kwargs, opened):
    """Unpickling a rolling writer or reader: a new one on the same path, opened if it was."""
    obj = cls(path, segment_size, record_size, **kwargs)
    if opened:
        obj.open()
    return obj


def _raw_message(record_size):
    """A message of exactly ``record_size`` payload bytes, to copy whole payloads."""
    class RawPayload(Message, size=record_size):
        pass
    return RawPayload()
