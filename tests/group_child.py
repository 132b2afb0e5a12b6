"""A work-group member in a process of its own, for tests/test_groups.py and
tests/reliability/test_groups_kill.py.

    python group_child.py BUS GROUP LOG MODE [OPTIONS_JSON]

Prints "ready MEMBER" once it is a member. Each record it acks successfully is appended to LOG
as "POSITION DELIVERIES PID" (after the ack). It stops when no record comes for ``idle``
seconds (option; default 1.0; with ``total``: and the group has done that many records)
or at the end of the bus. MODE:
  work    ack every record (``work``: seconds of sleep before each ack)
  poison  as work, but SIGKILL itself on a record whose payload starts with b"poison"
  stall   print "got POSITION" for the first record, wait for a line on stdin, then try to
          ack it and print "ack True|False"
"""
import json
import os
import signal
import sys
import time

from mappedbus_py.errors import BusFullError
from mappedbus_py.groups import GroupReader


def _done(bus, group):
    from mappedbus_py.groups import groups
    return {g.name: g.start for g in groups(bus)}[group]


def main():
    bus, group, log, mode = sys.argv[1:5]
    opts = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
    idle = opts.pop("idle", 1.0)
    work = opts.pop("work", 0.0)
    total = opts.pop("total", 0)
    member = GroupReader(bus, group, **opts)
    out = open(log, "a", buffering=1)
    print("ready", member.member, flush=True)
    while True:
        try:
            rec = member.read(idle)
        except BusFullError:
            break
        if rec is None:
            if total and _done(bus, group) < total:
                continue
            break
        if mode == "poison" and rec.payload.startswith(b"poison"):
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "stall":
            print("got", rec.position, flush=True)
            sys.stdin.readline()
            print("ack", member.ack(rec), flush=True)
            sys.stdin.readline()
            break
        if work:
            time.sleep(work)
        if member.ack(rec):
            out.write(f"{rec.position} {rec.deliveries} {os.getpid()}\n")
    member.close()


if __name__ == "__main__":
    main()
