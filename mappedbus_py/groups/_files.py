"""The group file: where it lives, how it is made (exclusively, all at once) and opened
(the side files' safe-open rules), and its header read back as named fields.

Layout: ``mappedbus_py/formats/layout.py``, GROUP_*; protocol: ``_group.h``.
"""
import dataclasses
import enum
import errno
import mmap
import os
import stat
import struct
import time

from ..errors import BusMismatchError, CorruptBusError, UnsafeBusFileError
from ..formats.files import check_trusted, open_file, write_atomic
from ..formats.layout import (
    FIRST_RECORD_OFFSET, GROUP_BUS_ID_OFFSET, GROUP_BUS_ID_SIZE, GROUP_CREATED_NS_OFFSET,
    GROUP_DEAD_SUFFIX, GROUP_DEFAULT_LEASE_NS, GROUP_DEFAULT_MAX_DELIVERIES,
    GROUP_DEFAULT_WINDOW, GROUP_DIR, GROUP_DIR_SUFFIX, GROUP_EMPTY, GROUP_END_OFFSET,
    GROUP_ENTRIES_OFFSET, GROUP_ENTRY_SIZE, GROUP_LEASE_NS_OFFSET, GROUP_MAGIC,
    GROUP_MAGIC_OFFSET, GROUP_MAX_DELIVERIES_OFFSET, GROUP_MAX_IN_FLIGHT_OFFSET,
    GROUP_MAX_WINDOW, GROUP_NAME_MAX, GROUP_START_OFFSET, GROUP_START_POSITION_OFFSET,
    GROUP_SUFFIX, GROUP_VERSION, GROUP_VERSION_OFFSET, GROUP_WINDOW_OFFSET, group_file_size,
    group_word, slot_size,
)

__all__ = ("BusKind", "GroupOptions", "GroupHeader", "bus_kind", "group_dir", "group_file",
           "dead_letter_path", "check_group_name", "create_group", "open_group", "read_header")


class BusKind(enum.Enum):
    """Which kind of bus a path names."""
    SINGLE = "single"     #: one Mappedbus file
    ROLLING = "rolling"   #: a directory of segments


@dataclasses.dataclass(frozen=True)
class GroupOptions:
    """What a group is made with (stored in its header; fixed for its life)."""
    window: int = GROUP_DEFAULT_WINDOW             #: records in flight at most (power of two)
    lease_ns: int = GROUP_DEFAULT_LEASE_NS         #: a delivery's lease
    max_deliveries: int = GROUP_DEFAULT_MAX_DELIVERIES  #: then the dead-letter bus
    max_in_flight: int = 0                         #: per member; 0: up to the window


@dataclasses.dataclass(frozen=True)
class GroupHeader:
    """A group file's header, read back."""
    options: GroupOptions
    bus_id: bytes          #: the bus's id (16 bytes; zeros: a bus without metadata)
    created_ns: int        #: Unix epoch ns
    start_position: int    #: the ``start=`` it was made with (a bus position)


def bus_kind(path):
    """SINGLE or ROLLING for an existing bus path (never through a symbolic link)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, "no bus at this path (a group needs its bus)",
                                os.fspath(path)) from None
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeBusFileError(f"{path!r} is a symbolic link: bus files are never opened "
                                 f"through links")
    return BusKind.ROLLING if stat.S_ISDIR(st.st_mode) else BusKind.SINGLE


def group_dir(path, kind):
    """The directory of a bus's groups: ``PATH.groups`` or ``DIR/groups``."""
    path = os.fspath(path)
    return os.path.join(path, GROUP_DIR) if kind is BusKind.ROLLING else path + GROUP_DIR_SUFFIX


def group_file(path, kind, name):
    """The group file of group ``name``."""
    return os.path.join(group_dir(path, kind), name + GROUP_SUFFIX)


def dead_letter_path(path, kind, name):
    """The directory of group ``name``'s dead-letter bus (a rolling bus)."""
    return os.path.join(group_dir(path, kind), name + GROUP_DEAD_SUFFIX)


def check_group_name(name):
    """A group name: 1..GROUP_NAME_MAX bytes of UTF-8, letters, digits, ``._-``; not hidden."""
    if not isinstance(name, str):
        raise TypeError(f"a group name is a str, got {type(name).__name__}")
    data = name.encode("utf-8")
    if not 0 < len(data) <= GROUP_NAME_MAX or name.startswith(".") \
            or not all(c.isalnum() or c in "._-" for c in name):
        raise ValueError(f"group name {name!r}: 1 to {GROUP_NAME_MAX} bytes of letters, digits, "
                         f"'.', '_' or '-', not starting with '.'")
    return data


def _check_dir(path, allow_foreign):
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeBusFileError(f"{path!r} is a symbolic link: group files are never opened "
                                 f"through links")
    check_trusted(st, path, allow_foreign, directory=True)


def check_options(window, lease, max_deliveries, max_in_flight):
    """GroupOptions from the constructor's keywords (None: the default), checked."""
    window = GROUP_DEFAULT_WINDOW if window is None else window
    if isinstance(window, bool) or not isinstance(window, int) or window < 1 \
            or window & (window - 1) or window > GROUP_MAX_WINDOW:
        raise ValueError(f"window must be a power of two from 1 to {GROUP_MAX_WINDOW}, "
                         f"got {window!r}")
    lease_ns = GROUP_DEFAULT_LEASE_NS if lease is None else lease
    if lease is not None:
        if isinstance(lease, bool) or not isinstance(lease, (int, float)) or not lease > 0 \
                or lease > 2**62 / 1e9:
            raise ValueError(f"lease is a number of seconds above 0, got {lease!r}")
        lease_ns = int(lease * 1e9)
    max_deliveries = GROUP_DEFAULT_MAX_DELIVERIES if max_deliveries is None else max_deliveries
    if isinstance(max_deliveries, bool) or not isinstance(max_deliveries, int) \
            or not 1 <= max_deliveries <= 254:
        raise ValueError(f"max_deliveries must be from 1 to 254, got {max_deliveries!r}")
    max_in_flight = 0 if max_in_flight is None else max_in_flight
    if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int) \
            or not 0 <= max_in_flight <= window:
        raise ValueError(f"max_in_flight must be from 0 (no limit but the window) to the "
                         f"window {window}, got {max_in_flight!r}")
    return GroupOptions(window, lease_ns, max_deliveries, max_in_flight)


def create_group(path, options, bus_id, start_position, g0, *, allow_foreign=False, mode=0o600):
    """Make the group file at ``path`` unless it exists (a temporary file linked into place,
    so nobody sees it half written). True if this call made it."""
    _check_dir(os.path.dirname(path), allow_foreign)
    window = options.window
    data = bytearray(group_file_size(window))
    struct.pack_into("<qiiiiq", data, GROUP_MAGIC_OFFSET, GROUP_MAGIC, GROUP_VERSION, window,
                     options.max_deliveries, options.max_in_flight, options.lease_ns)
    data[GROUP_BUS_ID_OFFSET:GROUP_BUS_ID_OFFSET + GROUP_BUS_ID_SIZE] = bus_id
    struct.pack_into("<qq", data, GROUP_CREATED_NS_OFFSET, time.time_ns(), start_position)
    struct.pack_into("<q", data, GROUP_START_OFFSET, g0)
    struct.pack_into("<q", data, GROUP_END_OFFSET, g0)
    shift = window.bit_length() - 1
    for g in range(g0, g0 + window):      # every entry EMPTY for its record's lap
        struct.pack_into("<q", data, GROUP_ENTRIES_OFFSET + (g & (window - 1)) * GROUP_ENTRY_SIZE,
                         group_word(g >> shift, GROUP_EMPTY, 0, 0))
    return write_atomic(path, data, mode, exclusive=True)


def read_header(buf, path, size):
    """The header of a group file mapped in ``buf`` (``size`` bytes); CorruptBusError naming
    what is wrong."""
    if size < GROUP_ENTRIES_OFFSET:
        raise CorruptBusError(f"{path!r} is not a group file: {size} bytes, shorter than its "
                              f"header ({GROUP_ENTRIES_OFFSET})")
    magic, version, window, max_deliveries, max_in_flight, lease_ns = struct.unpack_from(
        "<qiiiiq", buf, GROUP_MAGIC_OFFSET)
    if magic != GROUP_MAGIC:
        raise CorruptBusError(f"{path!r} is not a group file: its magic is not a group's")
    if version != GROUP_VERSION:
        raise CorruptBusError(f"{path!r}: group file version {version}, this library reads "
                              f"{GROUP_VERSION}")
    if window < 1 or window & (window - 1) or window > GROUP_MAX_WINDOW \
            or size != group_file_size(window):
        raise CorruptBusError(f"{path!r}: window {window} and size {size} disagree (a window "
                              f"is a power of two; the file takes {GROUP_ENTRIES_OFFSET} + "
                              f"window * {GROUP_ENTRY_SIZE} bytes)")
    if not 1 <= max_deliveries <= 254 or not 0 <= max_in_flight <= window or lease_ns <= 0:
        raise CorruptBusError(f"{path!r}: corrupt group header (max_deliveries "
                              f"{max_deliveries}, max_in_flight {max_in_flight}, lease_ns "
                              f"{lease_ns})")
    start, = struct.unpack_from("<q", buf, GROUP_START_OFFSET)
    end, = struct.unpack_from("<q", buf, GROUP_END_OFFSET)
    if not 0 <= start <= end or end - start > window:
        raise CorruptBusError(f"{path!r}: corrupt group file (start {start}, end {end}, "
                              f"window {window})")
    created_ns, start_position = struct.unpack_from("<qq", buf, GROUP_CREATED_NS_OFFSET)
    return GroupHeader(GroupOptions(window, lease_ns, max_deliveries, max_in_flight),
                       bytes(buf[GROUP_BUS_ID_OFFSET:GROUP_BUS_ID_OFFSET + GROUP_BUS_ID_SIZE]),
                       created_ns, start_position)


def open_group(path, *, read_only=False, allow_foreign=False):
    """Map the group file at ``path``: ``(mmap, header)``. Opened as every side file is (no
    links, a regular file, owner and mode unless ``allow_foreign``)."""
    _check_dir(os.path.dirname(path), allow_foreign) if not read_only else None
    fd, st = open_file(path, os.O_RDONLY if read_only else os.O_RDWR,
                       allow_foreign=allow_foreign)
    try:
        if st.st_size < GROUP_ENTRIES_OFFSET:
            raise CorruptBusError(f"{path!r} is not a group file: {st.st_size} bytes, shorter "
                                  f"than its header ({GROUP_ENTRIES_OFFSET})")
        mm = mmap.mmap(fd, st.st_size, mmap.MAP_SHARED,
                       mmap.PROT_READ if read_only else mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)          # the mapping keeps its own reference; locks go elsewhere
    try:
        return mm, read_header(mm, path, st.st_size)
    except BaseException:
        mm.close()
        raise


def open_live(path, *, allow_foreign=False):
    """A descriptor of the group file of its own (a new open file description) for the
    member's liveness lock, checked to be the same file as ``path`` names."""
    fd, _ = open_file(path, os.O_RDWR, allow_foreign=allow_foreign)
    return fd


def g_of_position(position, kind, record_size, segment_size, sps):
    """The global slot index of a bus position."""
    slot = slot_size(record_size)
    if kind is BusKind.SINGLE:
        return (position - FIRST_RECORD_OFFSET) // slot
    k, off = divmod(position, segment_size)
    return k * sps + (off - FIRST_RECORD_OFFSET) // slot
