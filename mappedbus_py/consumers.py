"""Named consumers seen from outside: who reads a bus, where, how far behind, alive or not.

    for c in mappedbus_py.consumers("/dev/shm/prices"):
        print(c.name, c.position, c.lag, c.alive)
    mappedbus_py.remove_consumer("/dev/shm/prices", "billing")

A reader becomes a consumer with ``consumer="name"`` (``MappedBusReader``,
``RollingBusReader``) and stores its position with ``commit()``. The registry file and its
protocol: ``docs/files-and-rolling.md`` ("Consumers: the registry file"), ``_consumers.h``.
"""
import os
import stat
from typing import List, NamedTuple, Optional

from ._core._consumers import ConsumerRegistry
from ._core._liveness import Liveness
from .formats.busmeta import meta_path, read_meta
from .formats.files import open_file
from .formats.layout import CONSUMERS_FILE, CONSUMERS_SUFFIX, CONSUMER_FLAG_EXPIRED, slot_size
from .formats.positions import end_boundary, records_between
from .rolling.directory import choose_current, list_segments, read_bus_meta

__all__ = ("ConsumerInfo", "consumers", "remove_consumer", "registry_path")


class ConsumerInfo(NamedTuple):
    """One named consumer of a bus, as ``consumers(path)`` found it.

    ``name``; ``position`` (where it goes on reading: the slot after the last record it
    committed); ``lag`` (record slots from there to the bus's end now; None when the bus
    has no metadata to size records by); ``alive`` (a live process holds the name now, in
    any pid namespace: the kernel's lock on the entry, never its pid); ``pid`` (that
    process, as its own pid namespace numbers it; 0 if none); ``committed_at`` and ``created_at`` (Unix seconds);
    ``expired`` (a rolling bus's retention stopped holding segments for it: it lagged more
    than ``max_consumer_lag``); ``bus_id`` (the bus it was registered for; another id than
    the bus's own means the bus was recreated since, and the entry starts anew when opened).
    """
    name: str
    position: int
    lag: Optional[int]
    alive: bool
    pid: int
    committed_at: float
    expired: bool
    created_at: float
    bus_id: Optional[str]


def registry_path(path):
    """The consumer registry of the bus at ``path``: ``DIR/bus.consumers`` for a rolling
    bus (a directory), ``PATH.consumers`` for a single file."""
    path = os.fspath(path)
    try:
        is_dir = stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        is_dir = False
    return os.path.join(path, CONSUMERS_FILE) if is_dir else path + CONSUMERS_SUFFIX


def _single_head(path, allow_foreign):
    """``(meta, limit, end boundary)`` of a single-file bus; meta None without metadata."""
    meta = read_meta(meta_path(path), allow_foreign=allow_foreign)
    fd, _ = open_file(path, os.O_RDONLY, allow_foreign=allow_foreign)
    try:
        data = os.pread(fd, 8, 0)
    finally:
        os.close(fd)
    limit = int.from_bytes(data, "little", signed=True) if len(data) == 8 else 0
    if meta is None:
        return None, limit, None
    return meta, limit, end_boundary(meta.file_size, meta.record_size)


def _lags(path, entries, allow_foreign):
    """``(lag for each entry, the bus's id)``."""
    path = os.fspath(path)
    if os.path.isdir(path):
        meta = read_bus_meta(path, allow_foreign=allow_foreign)
        segs = list_segments(path) if meta is not None else []
        if meta is None or not segs:
            return [None] * len(entries), None if meta is None else meta.id
        k, limit = choose_current(path, segs, allow_foreign)
        return [records_between(e["position"], k, limit, meta.segment_size, meta.record_size)
                for e in entries], meta.id
    try:
        meta, limit, end = _single_head(path, allow_foreign)
    except FileNotFoundError:
        return [None] * len(entries), None
    if meta is None:
        return [None] * len(entries), None
    slot = slot_size(meta.record_size)
    head = min(max(limit, 8), end)
    return [max(0, (head - e["position"]) // slot) for e in entries], meta.id


def consumers(path, *, allow_foreign=False) -> List[ConsumerInfo]:
    """Every consumer registered on the bus at ``path`` (a single file, or a rolling bus's
    directory), in registry order; [] if none ever registered. A corrupt registry is
    CorruptBusError; nothing is written."""
    try:
        reg = ConsumerRegistry(registry_path(path), read_only=True, allow_foreign=allow_foreign)
    except FileNotFoundError:
        return []
    try:
        entries = reg.entries()
    finally:
        reg.close()
    lags, bus_id = _lags(path, entries, allow_foreign)
    out = []
    for e, lag in zip(entries, lags):
        stale = bus_id is not None and e["bus_id"] != bus_id
        alive = e["holder"] is Liveness.ALIVE
        out.append(ConsumerInfo(
            name=e["name"], position=e["position"], lag=None if stale else lag,
            alive=alive, pid=e["pid"] if alive else 0, committed_at=e["committed_ns"] / 1e9,
            expired=bool(e["flags"] & CONSUMER_FLAG_EXPIRED),
            created_at=e["created_ns"] / 1e9, bus_id=e["bus_id"]))
    return out


def remove_consumer(path, name, *, allow_foreign=False):
    """Forget the consumer ``name`` of the bus at ``path``: its position, and the segments
    it held from retention. KeyError if there is none; ConsumerInUseError if a live reader
    holds it (close that reader first)."""
    try:
        reg = ConsumerRegistry(registry_path(path), create=False, allow_foreign=allow_foreign)
    except FileNotFoundError:
        raise KeyError(f"{os.fspath(path)!r} has no consumer {name!r} (no registry)") from None
    try:
        reg.remove(name)
    finally:
        reg.close()
