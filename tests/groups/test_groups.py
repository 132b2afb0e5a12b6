"""Work groups (issue 35; docs/groups.md): each record to one member at a time, acked once,
taken back from dead, late or releasing members, dead-lettered after max_deliveries; the group
file's layout, its safe opening, and ``mappedbus_py.groups(path)``. Members run as real
processes where the property is about processes (tests/support/group_child.py)."""
import json
import os
import re
import signal
import struct
import subprocess
import sys
import time

import pytest

import mappedbus_py
from mappedbus_py import MappedBusWriter, RollingBusReader, RollingBusWriter
from mappedbus_py.formats import layout
from mappedbus_py._core._liveness import Liveness
from mappedbus_py.errors import (BusFullError, BusMismatchError, CorruptBusError,
                                 UnsafeBusFileError)
from mappedbus_py.groups import GroupFullError, GroupReader, GroupRecord

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = [sys.executable, os.path.join(HERE, "..", "support", "group_child.py")]
HEADER = os.path.join(HERE, "..", "..", "mappedbus_py", "groups", "_group.h")
RECORD = 16


def _bus(tmp_path, n, *, file_size=1 << 20, payload=lambda i: b"%d" % i):
    path = str(tmp_path / "bus")
    with MappedBusWriter(path, file_size, RECORD) as w:
        for i in range(n):
            w.write(payload(i))
    return path


def _pos(i):
    return layout.record_offset(i, RECORD)


def start_member(bus, group, log, mode="work", **opts):
    p = subprocess.Popen(CHILD + [bus, group, str(log), mode, json.dumps(opts)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    assert line.startswith("ready"), line
    return p


LOG_RECORD = re.compile(r"([AT]) (\d+) (\d+) (\d+)")


def read_log(log, kind="A"):
    """(position, deliveries, pid) of every successful ack the members logged ("A"), or of
    every ack they were about to try ("T")."""
    if not os.path.exists(log):
        return []
    with open(log) as f:
        text = f.read()
    # A member SIGKILLed inside its write may leave a torn record ("A 123 1 45" with no newline,
    # the next member's "T ..." right after it): records are found by their shape, not by lines.
    # A record torn before its third number is no record: for an "A", the same as a kill between
    # the ack and its log line (the "T" stays unresolved, within the kills).
    return [tuple(map(int, m.groups()[1:])) for m in LOG_RECORD.finditer(text)
            if m.group(1) == kind]


def dead_letters(bus, group):
    """(position, deliveries, meta, group, payload) of each record of the dead-letter bus."""
    path = os.fspath(bus) + layout.GROUP_DIR_SUFFIX + "/" + group + layout.GROUP_DEAD_SUFFIX
    if not os.path.isdir(path):
        return []
    out = []
    with RollingBusReader(path) as r:
        while True:
            rec = r.read(0)
            if rec is None:
                return out
            data = rec.data
            pos, deliveries, meta = struct.unpack_from("<qii", data)
            name = data[16:16 + layout.GROUP_NAME_MAX].rstrip(b"\0").decode()
            out.append((pos, deliveries, meta, name, data[layout.GROUP_DEAD_HEADER_SIZE:]))


# -- the layout ------------------------------------------------------------------------

def test_group_h_offsets_equal_layout_py():
    defines = dict(re.findall(r"#define (GROUP_[A-Z_]+) (-?\d+)\b", open(HEADER).read()))
    checked = 0
    for name, value in defines.items():
        if hasattr(layout, name):
            assert getattr(layout, name) == int(value), name
            checked += 1
    assert checked >= 30
    assert layout.GROUP_ENTRIES_OFFSET == 8448 == layout.group_file_size(0)
    assert layout.group_word(7, layout.GROUP_ACQUIRED, 2, 5) == 7 | 1 << 32 | 2 << 40 | 5 << 48


# -- one process -----------------------------------------------------------------------

def test_members_get_distinct_records_and_ack_once(tmp_path):
    bus = _bus(tmp_path, 10)
    with GroupReader(bus, "g") as a, GroupReader(bus, "g") as b:
        assert (a.member, b.member) == (0, 1)
        ra, rb = a.read(0), b.read(0)
        assert isinstance(ra, GroupRecord) and (ra.position, rb.position) == (_pos(0), _pos(1))
        assert ra.payload.rstrip(b"\0") == b"0" and ra.deliveries == 1 and ra.meta == 1
        assert a.ack(ra) and not a.ack(ra)         # once
        assert not a.ack(rb)                       # not a's record
        assert b.ack(rb.position)                  # by position
        got = a.read_batch(100, 0)
        assert [r.position for r in got] == [_pos(i) for i in range(2, 10)]
        assert b.read(0) is None
        assert a.ack_batch(got) == 8
        info, = mappedbus_py.groups(bus)
        assert (info.name, info.start, info.end, info.acked, info.pending) == ("g", 10, 10, 10, 0)
        assert [m.alive for m in info.members] == [Liveness.ALIVE, Liveness.ALIVE]


def test_release_gives_the_record_back_with_one_more_delivery(tmp_path):
    bus = _bus(tmp_path, 3)
    with GroupReader(bus, "g") as a, GroupReader(bus, "g") as b:
        r = a.read(0)
        assert a.release(r) and not a.release(r)
        again = b.read(0)
        assert (again.position, again.deliveries) == (r.position, 2)
        assert not a.ack(r)                        # its delivery was given back
        assert b.ack(again)
        assert mappedbus_py.groups(bus)[0].redelivered == 1


def test_read_into_then_ack_settles_the_record_read_last(tmp_path):
    msg = mappedbus_py.PriceUpdate()
    raw = _raw(tmp_path)
    with GroupReader(raw, "g") as a:
        assert a.read_into(msg) and a.ack()
        assert a.read_into(msg) and a.ack()
        with pytest.raises(BusFullError):           # every record done, the bus full
            a.read_into(msg)
        with pytest.raises(BusFullError):   # a full single-file bus, every record done
            GroupReader(raw, "h", start="end").read(0)


def _raw(tmp_path):
    # a bus exactly two PriceUpdates long
    path = str(tmp_path / "prices")
    slot = layout.slot_size(20)
    with MappedBusWriter(path, layout.FIRST_RECORD_OFFSET + 2 * slot, 20) as w:
        w.write(mappedbus_py.PriceUpdate(source=1, price=2, quantity=3))
        w.write(mappedbus_py.PriceUpdate(source=4, price=5, quantity=6))
    return path


def test_a_closed_member_gives_back_what_it_holds(tmp_path):
    bus = _bus(tmp_path, 2)
    a = GroupReader(bus, "g")
    r = a.read(0)
    a.close()
    with GroupReader(bus, "g") as b:
        assert b.read(0).position == r.position


def test_lease_expiry_redelivers_and_the_late_ack_fails(tmp_path):
    bus = _bus(tmp_path, 1)
    with GroupReader(bus, "g", lease=0.05) as a, GroupReader(bus, "g") as b:
        r = a.read(0)
        assert b.read(0) is None
        again = b.read(2.0)
        assert again is not None and again.position == r.position and again.deliveries == 2
        assert not a.ack(r) and b.ack(again)


def test_max_deliveries_sends_the_record_to_the_dead_letter_bus(tmp_path):
    bus = _bus(tmp_path, 2, payload=lambda i: b"poison" if i == 0 else b"fine")
    with GroupReader(bus, "g", max_deliveries=2) as a:
        first = a.read(0)
        assert first.payload.startswith(b"poison") and a.release(first)
        second = a.read(0)
        assert (second.position, second.deliveries) == (first.position, 2)
        assert a.release(second)
        third = a.read(0)                           # the poison is dead-lettered, not given
        assert third.payload.startswith(b"fine") and a.ack(third)
    (pos, deliveries, meta, group, payload), = dead_letters(bus, "g")
    assert (pos, deliveries, meta, group) == (_pos(0), 2, 6, "g")
    assert payload.rstrip(b"\0") == b"poison"
    info, = mappedbus_py.groups(bus)
    assert (info.dead_lettered, info.start, info.pending) == (1, 2, 0)


def test_reject_dead_letters_at_once(tmp_path):
    bus = _bus(tmp_path, 1)
    with GroupReader(bus, "g") as a:
        r = a.read(0)
        assert a.reject(r) and not a.ack(r)
    assert [d[:2] for d in dead_letters(bus, "g")] == [(_pos(0), 1)]
    info, = mappedbus_py.groups(bus)
    assert (info.rejected, info.dead_lettered) == (1, 1)


def test_start_end_and_a_position(tmp_path):
    bus = _bus(tmp_path, 5)
    with GroupReader(bus, "late", start="end") as a:
        assert a.read(0) is None
        with MappedBusWriter(bus, 1 << 20, RECORD) as w:
            w.write(b"new")
        assert a.read(0).position == _pos(5)
    with GroupReader(bus, "mid", start=_pos(3)) as a:
        assert a.read(0).position == _pos(3)
    with pytest.raises(ValueError, match="record boundary"):
        GroupReader(bus, "bad", start=_pos(3) + 1)


def test_the_window_bounds_records_in_flight_and_moves_on_acks(tmp_path):
    bus = _bus(tmp_path, 8)
    with GroupReader(bus, "g", window=4) as a:
        got = a.read_batch(8, 0)
        assert len(got) == 4
        assert a.ack(got[1]) and a.read(0) is None   # the oldest is not done: no room
        assert a.ack(got[0])
        assert [r.position for r in a.read_batch(8, 0)] == [_pos(4), _pos(5)]


def test_max_in_flight_per_member(tmp_path):
    bus = _bus(tmp_path, 8)
    with GroupReader(bus, "g", max_in_flight=2) as a, GroupReader(bus, "g") as b:
        assert len(a.read_batch(8, 0)) == 2
        assert len(b.read_batch(8, 0)) == 2


def test_rolling_bus_group_crosses_segments(tmp_path):
    path = str(tmp_path / "roll")
    slot = layout.slot_size(RECORD)
    with RollingBusWriter(path, layout.FIRST_RECORD_OFFSET + 4 * slot, RECORD) as w:
        for i in range(10):
            w.write(b"%d" % i)
    with RollingBusReader(path) as r:
        positions = [rec.position for rec in r.records(0)]
    with GroupReader(path, "g") as a, GroupReader(path, "g") as b:
        got = []
        while True:
            rec = (a if len(got) % 2 else b).read(0)
            if rec is None:
                break
            got.append(rec.position)
            assert (a if len(got) % 2 == 0 else b).ack(rec)
        assert got == positions
    assert os.path.isfile(os.path.join(path, "groups", "g.group"))
    assert mappedbus_py.groups(path)[0].acked == 10


def test_options_of_an_existing_group_must_agree(tmp_path):
    bus = _bus(tmp_path, 1)
    with GroupReader(bus, "g", lease=3):
        with GroupReader(bus, "g") as b:
            assert b.member == 1
        with pytest.raises(BusMismatchError, match="lease"):
            GroupReader(bus, "g", lease=4)
    for bad in (dict(window=3), dict(lease=0), dict(max_deliveries=0), dict(max_in_flight=-1)):
        with pytest.raises(ValueError):
            GroupReader(bus, "x", **bad)
    for name in ("", ".hidden", "a/b", "x" * 65):
        with pytest.raises(ValueError, match="group name"):
            GroupReader(bus, name)


# -- hostile files ---------------------------------------------------------------------

def test_corrupt_foreign_and_symlinked_group_files_are_refused_at_once(tmp_path):
    bus = _bus(tmp_path, 1)
    GroupReader(bus, "g").close()
    path = bus + ".groups/g.group"
    good = open(path, "rb").read()
    open(path, "r+b").write(b"NOTAGRP!")
    with pytest.raises(CorruptBusError, match="magic"):
        GroupReader(bus, "g")
    with open(path, "wb") as f:
        f.write(good[:100])
    with pytest.raises(CorruptBusError, match="shorter"):
        GroupReader(bus, "g")
    os.unlink(path)
    other = tmp_path / "elsewhere"
    other.write_bytes(good)
    os.symlink(other, path)
    with pytest.raises(UnsafeBusFileError, match="symbolic link"):
        GroupReader(bus, "g")
    with pytest.raises(UnsafeBusFileError, match="symbolic link"):
        mappedbus_py.groups(bus)
    os.unlink(path)
    with open(path, "wb") as f:
        f.write(good)
    os.chmod(path, 0o666)
    with pytest.raises(UnsafeBusFileError, match="writable by group or others"):
        GroupReader(bus, "g")
    os.chmod(path, 0o600)
    if os.geteuid() == 0:                          # a file of another user (root can make one)
        os.chown(path, 12345, -1)
        with pytest.raises(UnsafeBusFileError, match="owned by uid 12345"):
            GroupReader(bus, "g")


def test_a_group_of_another_bus_is_refused(tmp_path):
    bus = _bus(tmp_path, 1)
    GroupReader(bus, "g").close()
    for p in (bus, bus + ".meta"):
        os.unlink(p)
    _bus(tmp_path, 1)                              # a new bus, a new id, same path
    with pytest.raises(BusMismatchError, match="bus id"):
        GroupReader(bus, "g")


def test_group_full(tmp_path, monkeypatch):
    bus = _bus(tmp_path, 1)
    members = [GroupReader(bus, "g") for _ in range(layout.GROUP_MEMBER_COUNT)]
    try:
        with pytest.raises(GroupFullError):
            GroupReader(bus, "g")
    finally:
        for m in members:
            m.close()


# -- processes -------------------------------------------------------------------------

def check_exactly_once(bus, group, n, log, kills=0):
    """Every record of ``range(n)`` acked once or dead-lettered, none lost; returns the acked
    and the dead-lettered positions. A member killed between its ack and its log line leaves
    an attempt ("T") unresolved: at most ``kills`` of those, each counted by the group."""
    acked = [p for p, _, _ in read_log(log)]
    dead = [d[0] for d in dead_letters(bus, group)]
    assert len(acked) == len(set(acked)), "a record acked twice"
    resolved = set(acked) | set(dead)
    unresolved = {p for p, _, _ in read_log(log, "T")} - resolved
    assert len(unresolved) <= kills
    assert resolved | unresolved == {_pos(i) for i in range(n)}, "a record lost"
    assert not set(acked) & set(dead), "a record acked and dead-lettered"
    info, = mappedbus_py.groups(bus)
    assert (info.start, info.end, info.pending) == (n, n, 0)     # every record settled
    # the group's own count of successful acks (member slots): never more than one a record
    assert len(acked) <= info.acked <= n - len(set(dead))
    return acked, dead


def _write(bus, n, file_size=1 << 20):
    # in bursts, so that every member gets to run while records come
    with MappedBusWriter(bus, file_size, RECORD) as w:
        for i in range(n):
            w.write(b"%d" % i)
            if i % 200 == 199:
                time.sleep(0.002)


def test_four_member_processes_share_the_records_each_acked_once(tmp_path):
    n = 20000
    bus = _bus(tmp_path, 0)
    log = tmp_path / "acks"
    # total=n: a member stays until the group has done every record. With the 1 s idle alone,
    # the first member could give up while the other three start (0.2 s each on an idle
    # machine, seconds on a loaded one), leaving the records to fewer members, maybe one.
    procs = [start_member(bus, "g", log, idle=1.0, total=n) for _ in range(4)]
    _write(bus, n)                                 # once all four are members
    for p in procs:
        assert p.wait(60) == 0
    acked, dead = check_exactly_once(bus, "g", n, log)
    assert not dead
    pids = {pid for _, _, pid in read_log(log)}
    assert len(pids) >= 2                      # shared, not all taken by one


def test_a_killed_members_records_go_to_the_others(tmp_path):
    bus = _bus(tmp_path, 3)
    log = tmp_path / "acks"
    holder = start_member(bus, "g", log, "stall", idle=5.0)
    got = int(holder.stdout.readline().split()[1])
    with GroupReader(bus, "g") as b:
        others = [b.read(0), b.read(0)]
        assert b.read(0) is None                   # the third is the holder's, alive
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        rec = b.read(5.0)                          # within ~1 ms of the kill, in practice
        assert rec is not None and rec.position == got and rec.deliveries == 2
        assert all(b.ack(r) for r in others + [rec])


def test_a_stopped_member_loses_its_record_after_the_lease_and_its_ack_is_refused(tmp_path):
    bus = _bus(tmp_path, 1)
    log = tmp_path / "acks"
    holder = start_member(bus, "g", log, "stall", lease=0.2, idle=5.0)
    got = int(holder.stdout.readline().split()[1])
    try:
        holder.send_signal(signal.SIGSTOP)
        with GroupReader(bus, "g") as b:
            assert b.read(0.05) is None            # stopped is alive: its lease still runs
            rec = b.read(5.0)
            assert rec is not None and rec.position == got and rec.deliveries == 2
            holder.send_signal(signal.SIGCONT)
            holder.stdin.write("\n")
            holder.stdin.flush()
            assert holder.stdout.readline().split() == ["ack", "False"]
            assert b.ack(rec)
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(10)


def test_a_poison_record_is_dead_lettered_after_max_deliveries(tmp_path):
    n = 50
    bus = _bus(tmp_path, n, payload=lambda i: b"poison" if i == 20 else b"ok %d" % i)
    log = tmp_path / "acks"
    deaths = 0
    for _ in range(20):
        procs = [start_member(bus, "g", log, "poison", max_deliveries=3, idle=0.3)
                 for _ in range(2)]
        codes = [p.wait(30) for p in procs]
        deaths += codes.count(-signal.SIGKILL)
        info, = mappedbus_py.groups(bus)
        if info.start == n:
            break
    acked, dead = check_exactly_once(bus, "g", n, log)
    assert dead == [_pos(20)] and _pos(20) not in acked
    assert deaths == 3                             # each delivery killed its member
    assert dead_letters(bus, "g")[0][1] == 3


@pytest.mark.slow
def test_sixty_four_members(tmp_path):
    n = 20000
    bus = _bus(tmp_path, 0)
    log = tmp_path / "acks"
    procs = [start_member(bus, "g", log, idle=0.5, total=n) for _ in range(64)]
    _write(bus, n)
    for p in procs:
        assert p.wait(120) == 0
    check_exactly_once(bus, "g", n, log)
    info, = mappedbus_py.groups(bus)
    assert len(info.members) == 64


def test_members_in_two_pid_namespaces(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("unshare --pid needs root")
    if subprocess.run(["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "true"],
                      capture_output=True).returncode != 0:
        pytest.skip("unshare --pid does not work here")
    bus = _bus(tmp_path, 3)
    log = tmp_path / "acks"
    holder = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]
                              + CHILD + [bus, "g", str(log), "stall", json.dumps({"idle": 5.0})],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().startswith("ready")
    got = int(holder.stdout.readline().split()[1])
    info, = mappedbus_py.groups(bus)
    assert info.members[0].pid == 1                # its pid in its own namespace
    with GroupReader(bus, "g") as b:
        others = [b.read(0), b.read(0)]
        assert b.read(0.05) is None                # pid 1 here is not it: alive by its lock
        holder.send_signal(signal.SIGKILL)         # unshare --kill-child takes the member
        holder.wait(10)
        rec = b.read(5.0)
        assert rec is not None and rec.position == got
        assert all(b.ack(r) for r in others + [rec])


def test_rolling_bus_reader_with_group_is_a_member(tmp_path):
    path = str(tmp_path / "roll")
    with RollingBusWriter(path, 1 << 16, RECORD) as w:
        w.write(b"a")
        w.write(b"b")
    with RollingBusReader(path, group="resize", lease=5) as a, \
            RollingBusReader(path, group="resize") as b:
        assert isinstance(a, GroupReader) and a.group == "resize"
        ra, rb = a.read(0), b.read(0)
        assert (ra.payload[:1], rb.payload[:1]) == (b"a", b"b")
        assert a.ack(ra) and b.ack(rb)
    with RollingBusReader(path) as plain:             # group=None: a plain reader
        assert plain.read(0).payload[:1] == b"a"
    with pytest.raises(TypeError, match="path alone"):
        RollingBusReader(path, 1 << 16, RECORD, group="resize")


def test_cli_groups_lists_members_and_counts(tmp_path, capsys):
    from mappedbus_py.tools import cli
    bus = _bus(tmp_path, 3)
    assert cli.main(["groups", bus]) == 0
    assert capsys.readouterr().out.strip() == "no work groups"
    with GroupReader(bus, "resize", name="worker-a") as a:
        a.ack(a.read(0))
        a.read(0)
        assert cli.main(["groups", bus, "--json"]) == 0
        d = json.loads(capsys.readouterr().out)
        g, = d["groups"]
        assert (g["name"], g["acked"], g["pending"], g["start"], g["end"]) == ("resize", 1, 1, 1, 2)
        m, = g["members"]
        assert (m["pid"], m["alive"], m["in_flight"], m["name"]) == (os.getpid(), "alive", 1,
                                                                    "worker-a")
        assert cli.main(["groups", bus]) == 0
        text = capsys.readouterr().out
        assert "group resize: acked 1, pending 1" in text and "worker-a" in text
    open(bus + ".groups/resize.group", "r+b").write(b"garbage!")
    assert cli.main(["groups", bus]) == 2
    assert "not a group file" in capsys.readouterr().err


def test_a_member_inherited_through_fork_refuses_to_work_in_the_child(tmp_path):
    bus = _bus(tmp_path, 2)
    with GroupReader(bus, "g") as a:
        held = a.read(0)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                a.read(0)
            except mappedbus_py.BusClosedError as e:
                code = 0 if "fork" in str(e) else 2
            try:
                a.ack(held)
                code = 3
            except mappedbus_py.BusClosedError:
                pass
            a.close()                    # must not give back the parent's records
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert a.ack(held)               # still the parent's


def test_mapped_bus_reader_with_group_is_a_member(tmp_path):
    from mappedbus_py import MappedBusReader
    from mappedbus_py._core._reader import MappedBusReader as CythonReader
    bus = _bus(tmp_path, 2)
    with MappedBusReader(bus, 1 << 20, RECORD, group="resize", lease=5) as a, \
            MappedBusReader(bus, group="resize") as b:
        assert isinstance(a, GroupReader) and a.group == "resize"
        ra, rb = a.read(0), b.read(0)
        assert (ra.payload[:1], rb.payload[:1]) == (b"0", b"1")
        assert a.ack(ra) and b.ack(rb)
    # Sizes given are the bus's: one that disagrees is refused, as for a plain reader.
    with pytest.raises(BusMismatchError):
        MappedBusReader(bus, 1 << 20, RECORD + 8, group="resize")
    with pytest.raises(TypeError, match="at most 3 positional"):
        MappedBusReader(bus, 1 << 20, RECORD, 5, group="resize")
    # group=None (explicitly or left out): the plain reader, still the class users subclass.
    with MappedBusReader(bus, group=None) as plain:
        assert type(plain) is MappedBusReader and isinstance(plain, CythonReader)
        assert plain.read(0).payload[:1] == b"0"

    class Mine(MappedBusReader):
        def __init__(self, path):
            super().__init__(path, 1 << 20, RECORD)
            self.tag = "mine"      # a subclass may have a __dict__; the base has none

    with Mine(bus) as m:
        assert m.tag == "mine" and m.read(0).payload[:1] == b"0"
    assert not hasattr(MappedBusReader(bus), "__dict__")
    # The bare Cython type does not route: it says which class does.
    with pytest.raises(TypeError, match="mappedbus_py.MappedBusReader"):
        CythonReader(bus, group="resize")


def test_mapped_bus_reader_class_pickles_and_signs_as_before(tmp_path):
    import inspect
    import pickle
    from mappedbus_py import MappedBusReader
    bus = _bus(tmp_path, 2)
    assert MappedBusReader.__name__ == MappedBusReader.__qualname__ == "MappedBusReader"
    sig = inspect.signature(MappedBusReader)
    assert list(sig.parameters)[:3] == ["path", "file_size", "record_size"]
    assert sig.parameters["group"].default is None
    with MappedBusReader(bus) as r:
        r.read(0)
        copy = pickle.loads(pickle.dumps(r))
    assert type(copy) is MappedBusReader
    with copy:
        assert copy.read(0).payload[:1] == b"1"


def _stopped_holder(path, log, lease):
    # A member (a process of its own) that took the group's first record, then SIGSTOPped:
    # alive, its record unacked.
    holder = start_member(path, "g", log, "stall", lease=lease, idle=30.0)
    got = int(holder.stdout.readline().split()[1])
    holder.send_signal(signal.SIGSTOP)
    return holder, got


def _finish_holder(holder):
    holder.send_signal(signal.SIGCONT)
    holder.stdin.write("\n")
    holder.stdin.flush()
    return holder.stdout.readline().split()


def _fill_segments(w, count):
    # Write until the writers are ``count`` segments further on.
    from mappedbus_py.rolling import list_segments
    first = list_segments(w.path)[-1]
    n = 0
    while list_segments(w.path)[-1] < first + count:
        for _ in range(256):
            w.write(b"x%d" % n)
            n += 1
    return n


def test_rolling_group_with_a_stopped_member_holds_segments_from_retention(tmp_path):
    from mappedbus_py.rolling import segment_path
    path = str(tmp_path / "roll")
    log = tmp_path / "acks"
    with RollingBusWriter(path, 1 << 16, RECORD, retain_segments=1, max_consumer_lag=100) as w:
        w.write(b"first")
        holder, got = _stopped_holder(path, log, lease=60)
        try:
            _fill_segments(w, 4)
            # The group's oldest unacked record (the stopped member's) holds segment 0, as a
            # named consumer at that position would; retain_segments=1 alone removes it.
            assert os.path.exists(segment_path(path, 0))
            entry = {c.name: c for c in mappedbus_py.consumers(path)}["group:g"]
            assert entry.position == got and not entry.alive and not entry.expired
        finally:
            holder.send_signal(signal.SIGKILL)
            holder.wait(10)
        # Its death gives the record back: once every record is acked the group's start
        # (committed when a member waits) no longer holds, and the next roll removes it.
        with GroupReader(path, "g") as b:
            while (rec := b.read(0.2)) is not None:
                assert b.ack(rec)
        entry = {c.name: c for c in mappedbus_py.consumers(path)}["group:g"]
        assert entry.position > got + (1 << 16) * 3
        _fill_segments(w, 1)
        assert not os.path.exists(segment_path(path, 0))


def test_rolling_group_past_max_consumer_lag_expires_and_its_members_read_a_gap(tmp_path):
    from mappedbus_py.errors import BusGapError
    from mappedbus_py.rolling import list_segments
    path = str(tmp_path / "roll")
    log = tmp_path / "acks"
    with RollingBusWriter(path, 1 << 16, RECORD, retain_segments=1, max_consumer_lag=2,
                          on_consumer_lag="expire") as w:
        w.write(b"first")
        holder, got = _stopped_holder(path, log, lease=0.3)
        try:
            _fill_segments(w, 5)
            # Lagging more than max_consumer_lag segments, the group expired as a consumer
            # does: retention removed what it held.
            assert 0 not in list_segments(path)
            entry = {c.name: c for c in mappedbus_py.consumers(path)}["group:g"]
            assert entry.expired
            oldest = list_segments(path)[0]
            with RollingBusReader(path, start=oldest * (1 << 16) + layout.FIRST_RECORD_OFFSET) \
                    as plain:
                kept = [r.position for r in plain.records(0)]
            gaps, got_positions = [], []
            with GroupReader(path, "g") as b:
                while True:
                    try:
                        rec = b.read(1.0)
                    except BusGapError as e:
                        gaps.append(e)
                        continue
                    if rec is None:
                        break
                    got_positions.append(rec.position)
                    assert b.ack(rec)
            # A member sees the lost records as BusGapError (the stopped member's record too,
            # once its lease passed), then the retained records, each once.
            assert sorted(got_positions) == kept
            assert any(e.lost_from <= got < e.lost_to for e in gaps)
            assert all(e.lost_to <= kept[0] for e in gaps)
            assert _finish_holder(holder) == ["ack", "False"]    # its late ack is refused
        finally:
            holder.send_signal(signal.SIGKILL)
            holder.wait(10)


def test_rolling_groups_retention_entry_names_and_comes_back_after_removal(tmp_path):
    from mappedbus_py.groups._group import hold_name
    path = str(tmp_path / "roll")
    long = "g" * 64
    assert hold_name("resize") == "group:resize"
    assert len(hold_name(long).encode()) == 64 and hold_name(long) != hold_name("g" * 63 + "h")
    with RollingBusWriter(path, 1 << 16, RECORD) as w:
        for i in range(3):
            w.write(b"%d" % i)
    with GroupReader(path, long) as m:
        names = [c.name for c in mappedbus_py.consumers(path)]
        assert names == [hold_name(long)]
        mappedbus_py.remove_consumer(path, hold_name(long))     # nobody holds it: removable
        assert mappedbus_py.consumers(path) == []
        recs = [m.read(0) for _ in range(3)]
        assert all(m.ack(r) for r in recs)
        assert m.read(0.05) is None                  # a waiting member commits at once
        (entry,) = mappedbus_py.consumers(path)
        assert entry.name == hold_name(long)
        assert entry.position == recs[-1].position + layout.HEADER_SIZE + RECORD
