"""The argument checks of the core's classes, in one home: the single-file writer and reader
(``_writer``, ``_reader``), the rolling bus's (``mappedbus_py.rolling``) and the asyncio waits
(``aio``) use them, so none needs another's privates and ``aio`` nothing of the reader it waits
on. Each returns the value checked (as an int or str where it converts) or raises a clear
ValueError or TypeError naming the argument."""
import os
from operator import index

from ..errors import CorruptBusError
from ..formats.busmeta import meta_path, read_meta
from ..formats.layout import FIRST_RECORD_OFFSET, HEADER_SIZE, MAX_RECORD_SIZE, MIN_ROLLBACK_TIMEOUT_MS

__all__ = ("check_timeout", "check_idle", "check_rollback_timeout", "check_stall_limit", "check_start",
           "check_position", "as_size", "check_sizes", "check_path", "resolve_sizes", "check_limit",
           "IDLE_STRATEGIES")

#: The idle strategies a reader's wait can use (Aeron's names: busy spin, backoff, park).
IDLE_STRATEGIES = ("busy_spin", "spin_park", "park")
# The longest wait a reader's clock holds (int64 nanoseconds), in seconds.
_MAX_WAIT_S = 2.0**62 / 1e9



def check_timeout(value, what="timeout"):
    """A read call's timeout: a number of seconds >= 0 (``math.inf`` waits for ever, as
    None does; huge values are clamped when the deadline is computed)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"{what} must be a non-negative number of seconds (or None: no "
                         f"limit), got {value!r}")
    return value


def check_idle(idle, spin, park, park_max):
    if idle not in IDLE_STRATEGIES:
        raise ValueError(f"idle must be one of {', '.join(map(repr, IDLE_STRATEGIES))}, "
                         f"got {idle!r}")
    for name, value, low, high in (("spin", spin, 0.0, 1.0), ("park", park, 10e-6, 60.0),
                                   ("park_max", park_max, 10e-6, 60.0)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not low <= value <= high:
            raise ValueError(f"{name} must be between {low:g} and {high:g} seconds, "
                             f"got {value!r}")
    if park_max < park:
        raise ValueError(f"park_max ({park_max!r} s) must be at least park ({park!r} s)")


def check_rollback_timeout(seconds, what="timeout", given=None):
    """The constructor's ``timeout`` (and ``reader.timeout``): how long a slot may stay
    allocated but uncommitted before readers roll it back. At least MIN_ROLLBACK_TIMEOUT_MS;
    ``math.inf`` never rolls back. Returns nanoseconds (clamped to what an int64 holds)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds != seconds \
            or seconds < MIN_ROLLBACK_TIMEOUT_MS / 1000:
        raise ValueError(
            f"{what} is the rollback timeout: how long a slot may stay allocated but "
            f"uncommitted before readers roll it back; it must be at least "
            f"{MIN_ROLLBACK_TIMEOUT_MS / 1000:g} s ({MIN_ROLLBACK_TIMEOUT_MS} ms), got "
            f"{given or f'{seconds!r} seconds'} "
            f"(a read call's timeout=0, 'do not wait', is an argument of read/wait/records)")
    return int(min(seconds * 1e9, 2.0**62))


def check_stall_limit(seconds):
    """``stall_limit``: None, or a positive number of seconds."""
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                or not 0 < seconds < _MAX_WAIT_S):
        raise ValueError(f"stall_limit is how long to wait for a live writer's record, in "
                         f"seconds (None: no limit); got {seconds!r}")
    return seconds


def check_start(start):
    if start is None or (isinstance(start, str) and start == "end"):
        return start
    if not isinstance(start, bool):
        try:
            start = index(start)
        except TypeError:
            pass
        else:
            return check_position(start)
    raise ValueError(f"start must be None (the first record), 'end' (only new records) or "
                     f"a record position (an int), got {start!r}")


def check_position(position):
    if isinstance(position, bool):
        raise TypeError(f"a position must be an int, got {position!r}")
    position = index(position)
    if not 0 <= position < 2**62:
        raise ValueError(f"position {position} is outside any bus (0 to 2**62)")
    return position


def as_size(value, name):
    # Any integer (numpy's too, through __index__), but not a bool: True is no size.
    if not isinstance(value, bool):
        try:
            return index(value)
        except TypeError:
            pass
    raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")


def check_sizes(file_size, record_size):
    """Shared by writer and reader: the argument errors a caller can make. Returns the
    sizes as ints."""
    file_size = as_size(file_size, "file_size")
    record_size = as_size(record_size, "record_size")
    if record_size <= 0:
        raise ValueError(f"record_size must be positive, got {record_size}")
    if record_size > MAX_RECORD_SIZE:
        raise ValueError(f"record_size must be at most {MAX_RECORD_SIZE}, got {record_size}")
    if file_size <= 0:
        raise ValueError(f"file_size must be positive, got {file_size}")
    need = FIRST_RECORD_OFFSET + HEADER_SIZE + record_size
    if file_size < need:
        raise ValueError(f"file_size {file_size} cannot hold one record of record_size "
                         f"{record_size}: it needs at least {need} bytes")
    if file_size >= 2**62:
        raise ValueError(f"file_size {file_size} is too large")
    return file_size, record_size


def check_path(path):
    """A bus path as str: str, bytes and os.PathLike are taken (bytes decoded as the file
    system does)."""
    try:
        return os.fsdecode(os.fspath(path))
    except TypeError:
        raise TypeError(f"a bus path must be str, bytes or os.PathLike, got "
                        f"{type(path).__name__} {path!r}") from None


def resolve_sizes(path, file_size, record_size, allow_foreign):
    """The sizes to open ``path`` with: those given, the missing ones (None) from the bus's
    metadata file. A given size that disagrees with the metadata fails later, at open, with
    BusMismatchError naming both."""
    if file_size is not None and record_size is not None:
        return file_size, record_size
    meta = read_meta(meta_path(path), allow_foreign=allow_foreign)
    if meta is None or meta.kind != "single":
        missing = " and ".join(n for n, v in (("file_size", file_size), ("record_size", record_size))
                               if v is None)
        why = ("it has no metadata file (" + meta_path(path) + ")" if meta is None else
               f"{meta_path(path)} describes a {meta.kind} bus")
        raise ValueError(f"{path!r}: {missing} not given and {why}: a bus made by the Java "
                         f"original, or not made yet, needs both sizes")
    return (meta.file_size if file_size is None else file_size,
            meta.record_size if record_size is None else record_size)


def check_limit(limit, slot, record_size, path):
    """A limit off the record grid means a wrong record_size or a corrupt file."""
    if limit != 0 and (limit < FIRST_RECORD_OFFSET or (limit - FIRST_RECORD_OFFSET) % slot != 0):
        raise CorruptBusError(
            f"{path!r}: limit {limit} is not a record boundary for record_size "
            f"{record_size} (records start at 8 and take {slot} bytes): the file was "
            f"written with another record_size, or it is corrupt")
