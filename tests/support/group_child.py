"""A work-group member in a process of its own, for tests/groups/test_groups.py and
tests/reliability/test_groups_kill.py.

    python group_child.py BUS GROUP LOG MODE [OPTIONS_JSON]

Prints "ready MEMBER" once it is a member. For each record it appends to LOG
"T POSITION DELIVERIES PID" before its ack, and "A POSITION DELIVERIES PID" after a successful
one (a member killed between the two leaves a T line alone: that record may be acked). It stops when no record comes for ``idle``
seconds (option; default 1.0; with ``total``: and the group has done that many records)
or at the end of the bus. MODE:
  work    ack every record (``work``: seconds of sleep before each ack)
  poison  as work, but SIGKILL itself on a record whose payload starts with b"poison"
  zygote  fork a "work" member for each line on stdin, printing its pid
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
    if mode == "zygote":
        zygote(bus, group, log, opts)
    else:
        serve(bus, group, log, mode, opts)


def zygote(bus, group, log, opts):
    # Members forked from here start in a millisecond (no interpreter start, no imports), so
    # a test can kill and restart them many times a second: a line on stdin forks one
    # ("work" mode), whose pid is printed. Killed children are reaped by the kernel.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for _ in sys.stdin:
        pid = os.fork()
        if pid == 0:
            try:
                sys.stdout = open(os.devnull, "w")
                serve(bus, group, log, "work", dict(opts))
            finally:
                os._exit(0)
        print(pid, flush=True)


def serve(bus, group, log, mode, opts):
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
        out.write(f"T {rec.position} {rec.deliveries} {os.getpid()}\n")
        if member.ack(rec):
            out.write(f"A {rec.position} {rec.deliveries} {os.getpid()}\n")
    member.close()


if __name__ == "__main__":
    main()
