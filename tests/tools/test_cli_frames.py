"""``mappedbus stat|dump`` on a framed bus: framed, its topics, and its frames."""
import json
import subprocess
import sys

from mappedbus_py import MappedBusWriter, RollingBusWriter


def cli(*args):
    p = subprocess.run([sys.executable, "-m", "mappedbus_py", *args], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_stat_and_dump_show_frames_and_topics(bus_path):
    with MappedBusWriter(bus_path, 1 << 16, 56, frames=True) as w:
        w.write(b"q" * 500, topic="quotes")
        w.write(b"hello")
        w._frame_allocate_only(300, 10, publish=False)
    out = cli("stat", bus_path)
    assert "framed" in out and "quotes [1]" in out
    d = json.loads(cli("stat", "--json", bus_path))
    assert d["frames"] and d["topics"] == {"quotes": [1]}
    assert d["records"]["committed"] == 2 and d["records"]["pending"] == 1
    rows = [json.loads(line) for line in cli("dump", "--json", bus_path).splitlines()]
    assert [(r["position"], r["status"], r["slots"], r["topic"], r["length"]) for r in rows] == \
        [(8, 1, 9, "quotes", 500), (584, 1, 1, None, 5), (648, 0, 6, None, None)]
    assert rows[1]["preview"] == b"hello".hex()
    text = cli("dump", bus_path)
    assert "quotes" in text and "68656c6c6f" in text


def test_dump_of_a_framed_rolling_bus(tmp_path):
    path = str(tmp_path / "r")
    with RollingBusWriter(path, 1 << 14, 56, frames=True) as w:
        for i in range(10):
            w.write(bytes([i]) * 5000, topic="big")
    rows = [json.loads(line) for line in cli("dump", "--json", path).splitlines()]
    assert [r["length"] for r in rows if r["status"] == 1] == [5000] * 10
    assert {r["segment"] for r in rows} == set(range(4))
