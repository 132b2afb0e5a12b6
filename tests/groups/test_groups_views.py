"""Work groups in ``mappedbus stat``, ``mappedbus top --once`` and the Prometheus exporter
(issue 35, "Seeing it"): a member process holding a record, another (this process) that acked
and rejected some, on a real bus; the commands run as processes."""
import json
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))

from mappedbus_py import MappedBusWriter
from mappedbus_py.groups import GroupReader
from test_cli_consumers import run  # noqa: E402
from test_exporter import Exporter, value  # noqa: E402
from test_groups import start_member  # noqa: E402

RECORD = 16


def _group_on(bus_path, tmp_path):
    # 5 records: one held by a member process, two acked and one rejected here, one left.
    with MappedBusWriter(bus_path, 1 << 16, RECORD) as w:
        for i in range(5):
            w.write(b"%d" % i)
    holder = start_member(bus_path, "resize", tmp_path / "log", "stall", idle=30.0)
    holder.stdout.readline()                      # "got POSITION": it holds one record
    me = GroupReader(bus_path, "resize", name="here")
    a, b, c = me.read(0), me.read(0), me.read(0)
    assert me.ack(a) and me.ack(b) and me.reject(c)
    return holder, me


def _stop(holder, me):
    me.close()
    holder.send_signal(signal.SIGKILL)
    holder.wait(10)


def test_stat_shows_a_line_per_group(bus_path, tmp_path):
    holder, me = _group_on(bus_path, tmp_path)
    try:
        code, out, err = run("stat", bus_path)
        assert code == 0 and err == ""
        assert "1 work groups" in out
        line = next(ln for ln in out.splitlines() if ln.strip().startswith("group resize:"))
        assert "acked 2" in line and "pending 1" in line and "dead-lettered 1" in line
        assert "2 of 2 members alive" in line
        code, out, err = run("stat", bus_path, "--json")
        (g,) = json.loads(out)["groups"]
        assert (g["name"], g["acked"], g["pending"], g["dead_lettered"]) == ("resize", 2, 1, 1)
    finally:
        _stop(holder, me)
    code, out, err = run("stat", bus_path)
    assert "0 of 2 members alive" in out


def test_top_once_has_a_groups_section(bus_path, tmp_path):
    holder, me = _group_on(bus_path, tmp_path)
    try:
        code, out, err = run("top", bus_path, "--once")
        assert code == 0 and err == ""
        header = next(ln for ln in out.splitlines() if ln.startswith("group "))
        assert header.split()[:4] == ["group", "acked", "rate", "pending"]
        row = next(ln for ln in out.splitlines() if ln.startswith("resize"))
        # name, acked, rate, pending, in flight, redelivered, dead, oldest, members
        cols = row.split()
        assert cols[1] == "2" and cols[3] == "1" and cols[4] == "1" and cols[5] == "0"
        assert cols[6] == "1" and row.endswith("2 alive of 2")
    finally:
        _stop(holder, me)


def test_the_exporter_has_group_and_member_gauges(bus_path, tmp_path):
    holder, me = _group_on(bus_path, tmp_path)
    ex = Exporter(bus_path)
    try:
        s = ex.scrape()
        g = {"bus": bus_path, "group": "resize"}
        assert value(s, "mappedbus_group_pending_records", **g) == 1
        assert value(s, "mappedbus_group_in_flight_records", **g) == 1
        assert value(s, "mappedbus_group_acked_total", **g) == 2
        assert value(s, "mappedbus_group_redelivered_total", **g) == 0
        assert value(s, "mappedbus_group_dead_lettered_total", **g) == 1
        assert value(s, "mappedbus_group_oldest_unacked_age_seconds", **g) > 0
        assert value(s, "mappedbus_group_members_alive", **g) == 2
        members = {dict(k[1])["name"]: v for k, v in s.items()
                   if k[0] == "mappedbus_group_member_in_flight_records"}
        assert members == {"": 1, "here": 0}
        # The holder dies: its record is pending still (until a member takes it back), the
        # live members and in-flight figures drop.
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        s = ex.scrape()
        assert value(s, "mappedbus_group_members_alive", **g) == 1
        assert value(s, "mappedbus_group_in_flight_records", **g) == 0
        recs = [me.read(5.0), me.read(5.0)]       # the last new one, the dead one's again
        assert sorted(r.deliveries for r in recs) == [1, 2] and all(me.ack(r) for r in recs)
        s = ex.scrape()
        assert value(s, "mappedbus_group_redelivered_total", **g) == 1
        assert value(s, "mappedbus_group_acked_total", **g) == 4
        assert value(s, "mappedbus_group_pending_records", **g) == 0
    finally:
        _stop(holder, me)
        code, err = ex.stop()
    assert code == 0 and err == ""
