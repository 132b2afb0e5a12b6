"""``mappedbus_py.groups(path)``: the work groups of a bus and their members, read from the
group files without joining (no member slot is taken; liveness is probed, never a pid)."""
import dataclasses
import os
import struct
import time

from .._core._liveness import LiveFile, Liveness
from ..formats.files import open_file
from ..formats.layout import (GROUP_ACQUIRED, GROUP_DEAD_LETTERED_OFFSET,
                      GROUP_END_OFFSET, GROUP_ENTRIES_OFFSET, GROUP_ENTRY_SIZE,
                      GROUP_MEMBER_COUNT, GROUP_MEMBER_NAME_MAX, GROUP_MEMBER_SIZE,
                      GROUP_MEMBERS_OFFSET, GROUP_REDELIVERED_OFFSET, GROUP_REJECTED_OFFSET,
                      GROUP_RELEASED, GROUP_RELEASED_OFFSET, GROUP_START_OFFSET,
                      GROUP_SUFFIX)
from ._files import bus_kind, group_dir, open_group

__all__ = ("GroupInfo", "MemberInfo", "groups")


@dataclasses.dataclass(frozen=True)
class MemberInfo:
    """One member slot of a group that some member has held."""
    index: int              #: the slot (owner number in the entries)
    pid: int                #: its last holder's pid, for people (another namespace's, maybe)
    alive: Liveness         #: whether a live member holds the slot now (its lock)
    name: str               #: the name its holder gave, or ""
    in_flight: int          #: records the holder had unsettled when it last published
    delivered: int          #: deliveries to this slot, all holders
    acked: int              #: successful acks from this slot, all holders
    taken_ns: int           #: when the last holder took it (Unix epoch ns)


@dataclasses.dataclass(frozen=True)
class GroupInfo:
    """A work group of a bus, as its file says now."""
    name: str
    path: str                    #: the group file
    window: int
    lease: float                 #: seconds
    max_deliveries: int
    max_in_flight: int           #: per member; 0: the window
    start: int                   #: the oldest record (global slot index) not yet done
    end: int                     #: one past the newest handed out
    acked: int                   #: records acked (sum over member slots)
    delivered: int               #: deliveries (redeliveries included)
    pending: int                 #: handed out and not settled (in flight or released)
    redelivered: int
    released: int
    rejected: int
    dead_lettered: int           #: rejected included
    oldest_unacked_age: float    #: seconds since the oldest pending record was delivered (0: none)
    members: tuple               #: MemberInfo of every slot ever held

    @property
    def live_members(self):
        """The members alive now."""
        return tuple(m for m in self.members if m.alive is Liveness.ALIVE)


def _monotonic_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def read_group(path, name, *, allow_foreign=False):
    """The GroupInfo of the group file at ``path``."""
    mm, header = open_group(path, read_only=True, allow_foreign=allow_foreign)
    try:
        fd, _ = open_file(path, os.O_RDONLY, allow_foreign=allow_foreign)
        with LiveFile(fd) as live:
            buf = memoryview(mm)
            try:
                return _info(buf, live, header, path, name)
            finally:
                buf.release()
    finally:
        mm.close()


def _info(buf, live, header, path, name):
    opts = header.options
    q = lambda off: struct.unpack_from("<q", buf, off)[0]
    members = []
    for i in range(GROUP_MEMBER_COUNT):
        off = GROUP_MEMBERS_OFFSET + i * GROUP_MEMBER_SIZE
        pid, in_flight, acked, taken_ns, delivered = struct.unpack_from("<iiqqq", buf, off)
        if not taken_ns:
            continue
        raw = bytes(buf[off + 32:off + 32 + GROUP_MEMBER_NAME_MAX]).rstrip(b"\0")
        members.append(MemberInfo(i, pid, live.probe(off), raw.decode("utf-8", "replace"),
                                  in_flight, delivered, acked, taken_ns))
    start, end = q(GROUP_START_OFFSET), q(GROUP_END_OFFSET)
    window = opts.window
    pending, oldest = 0, None
    now = _monotonic_ns()
    for g in range(start, min(end, start + window)):
        e = GROUP_ENTRIES_OFFSET + (g & (window - 1)) * GROUP_ENTRY_SIZE
        word, lease = struct.unpack_from("<qq", buf, e)
        state = (word >> 32) & 0xFF
        if word & 0xFFFFFFFF != (g >> (window.bit_length() - 1)) & 0xFFFFFFFF:
            continue
        if state in (GROUP_ACQUIRED, GROUP_RELEASED):
            pending += 1
            if oldest is None:
                oldest = max(0, now - (lease - opts.lease_ns))
    return GroupInfo(
        name=name, path=path, window=window, lease=opts.lease_ns / 1e9,
        max_deliveries=opts.max_deliveries, max_in_flight=opts.max_in_flight,
        start=start, end=end, acked=sum(m.acked for m in members),
        delivered=sum(m.delivered for m in members), pending=pending,
        redelivered=q(GROUP_REDELIVERED_OFFSET), released=q(GROUP_RELEASED_OFFSET),
        rejected=q(GROUP_REJECTED_OFFSET), dead_lettered=q(GROUP_DEAD_LETTERED_OFFSET),
        oldest_unacked_age=(oldest or 0) / 1e9, members=tuple(members))


def groups(path, *, allow_foreign=False):
    """The work groups of the bus at ``path`` (a single file or a rolling bus's directory),
    by name: a list of GroupInfo (members with pid, liveness and in-flight counts; acked,
    pending, redelivered and dead-lettered counts; the oldest unacked record's age)."""
    kind = bus_kind(path)
    folder = group_dir(path, kind)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(GROUP_SUFFIX)
                       and not n.startswith("."))
    except FileNotFoundError:
        return []
    return [read_group(os.path.join(folder, n), n[:-len(GROUP_SUFFIX)],
                       allow_foreign=allow_foreign) for n in names]
