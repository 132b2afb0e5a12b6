"""BusTool ``dump`` and ``stat`` (interop/src/tools, BusDump) on framed buses: the same frames,
in the same order, with the same positions, slots, topics, lengths and payload previews as the
Python CLI's ``mappedbus dump --json`` (a contract between the two tools)."""
import json
import subprocess
import sys

import pytest

from mappedbus_py import MappedBusWriter, RollingBusWriter
from support import procs

pytestmark = pytest.mark.java


def bus_tool(*args):
    p = procs.start_java(*args)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0, out
    return out


def python_rows(path):
    p = subprocess.run([sys.executable, "-m", "mappedbus_py", "dump", "--json", path],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    status = {0: "not set", 1: "committed", 2: "rolled back"}
    return [(r["position"], status[r["status"]], r["slots"], r["topic"] or "-",
             str(r["length"]) if r["length"] is not None else "-", r["preview"]) for r in rows]


def java_rows(path):
    lines = bus_tool("dump", path).splitlines()
    assert lines[0].split() == ["position", "status", "slots", "topic", "length", "payload"]
    rows = []
    for line in lines[1:]:
        # '<position>  <status (may hold a space)>  <slots>  <topic>  <length>  <hex>[...]'
        cols = [c.strip() for c in line.split("  ") if c.strip()]
        assert len(cols) in (5, 6), line
        preview = cols[5].removesuffix("...") if len(cols) == 6 else ""
        rows.append((int(cols[0]), cols[1], int(cols[2]), cols[3], cols[4], preview))
    return rows


@pytest.fixture(scope="module")
def java():
    procs.java_or_skip()


def test_dump_and_stat_of_a_framed_bus_match_the_python_cli(java, bus_path):
    with MappedBusWriter(bus_path, 1 << 16, 56, frames=True) as w:
        w.write(b"q" * 500, topic="quotes")
        w.write(b"hello")
        w.write(b"", topic="orders")
        w._frame_allocate_only(300, 10, publish=False)       # a message never committed
    rows = java_rows(bus_path)
    assert rows == python_rows(bus_path)
    assert [r[:5] for r in rows] == [(8, "committed", 9, "quotes", "500"), (584, "committed", 1, "-", "5"),
                                     (648, "committed", 1, "orders", "0"), (712, "not set", 6, "-", "-")]
    assert rows[1][5] == b"hello".hex() and rows[0][5] == (b"q" * 32).hex()
    stat = bus_tool("stat", bus_path)
    assert "framed" in stat and "quotes [1], orders [2]" in stat
    assert "3 committed, 0 rolled back, 1 not set (messages)" in stat
    assert len(bus_tool("dump", bus_path, "--max", "2").splitlines()) == 3


def test_dump_of_a_framed_rolling_bus_matches_the_python_cli(java, tmp_path):
    path = str(tmp_path / "r")
    with RollingBusWriter(path, 1 << 14, 56, frames=True) as w:
        for i in range(10):
            w.write(bytes([i]) * 5000, topic="big")
    rows = java_rows(path)
    assert rows == python_rows(path)
    assert [r[4] for r in rows if r[1] == "committed"] == ["5000"] * 10
    assert len({r[0] >> 14 for r in rows}) > 1                 # several segments, global positions
    stat = bus_tool("stat", path)
    assert "rolling" in stat and "big [1]" in stat
