"""Work groups: each record of a bus goes to one member of a group at a time (docs/groups.md).

    from mappedbus_py.groups import GroupReader

    with GroupReader("/dev/shm/jobs", "resize") as member:
        for rec in member:
            handle(rec.payload)
            member.ack(rec)
"""
from ._group import GroupFullError, GroupReader, GroupRecord

__all__ = ("GroupReader", "GroupRecord", "GroupFullError")
