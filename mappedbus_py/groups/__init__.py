"""Work groups: each record of a bus goes to one member of a group at a time, is acked once,
and comes back to another member if its holder dies, gives it back or lets its lease pass
(docs/groups.md).

    from mappedbus_py.groups import GroupReader

    with GroupReader("/dev/shm/jobs", "resize") as member:
        for rec in member:
            handle(rec.payload)
            member.ack(rec)

``mappedbus_py.groups(path)`` (this module, called) lists a bus's groups.
"""
import sys
import types

from ._group import GroupFullError, GroupReader, GroupRecord
from ._info import GroupInfo, MemberInfo, groups
from .._core._reader import GROUP_READER

# MappedBusReader(path, group=...) and RollingBusReader(path, group=...) make a GroupReader: the
# core and the rolling bus, layers below, cannot import this package, so this package tells them.
GROUP_READER.make = GroupReader

__all__ = ("GroupReader", "GroupRecord", "GroupFullError", "GroupInfo", "MemberInfo", "groups")


class _GroupsModule(types.ModuleType):
    # ``mappedbus_py.groups`` is both this package and the function that lists a bus's
    # groups (as ``mappedbus_py.consumers(path)`` lists consumers).
    def __call__(self, path, *, allow_foreign=False):
        return groups(path, allow_foreign=allow_foreign)


sys.modules[__name__].__class__ = _GroupsModule
