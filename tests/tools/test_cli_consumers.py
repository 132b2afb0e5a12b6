"""``mappedbus consumers``, the consumers in ``mappedbus stat`` and ``mappedbus top --once``:
real consumer processes (one alive, one gone) on real buses, the CLI run as a process."""
import json
import os
import select
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from conftest import SHM
from mappedbus_py import MappedBusWriter, RollingBusWriter
from mappedbus_py.consumers import registry_path

RECORD = 12

# A consumer process: reads N records as consumer NAME, commits, prints "ready POSITION",
# then holds the name until its stdin closes ("stay") or exits at once ("go").
CONSUMER = r"""
import os, sys
from mappedbus_py import MappedBusReader, RollingBusReader
path, name, n, how = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
reader = (RollingBusReader(path, consumer=name) if os.path.isdir(path)
          else MappedBusReader(path, consumer=name))
with reader:
    for _ in range(n):
        assert reader.read(10) is not None
    reader.commit()
    print("ready", reader.position, flush=True)
    if how == "stay":
        sys.stdin.read()
"""


def run(*args, timeout=60):
    p = subprocess.run([sys.executable, "-m", "mappedbus_py", *map(str, args)],
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def one_line(err):
    return err.startswith("mappedbus: ") and err.count("\n") == 1 and "Traceback" not in err


class Consumer:
    """A consumer process (see CONSUMER); ``position`` is what it committed."""

    def __init__(self, path, name, n, stay=True):
        self.proc = subprocess.Popen([sys.executable, "-c", CONSUMER, str(path), name, str(n),
                                      "stay" if stay else "go"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().split()
        assert line[:1] == ["ready"], line
        self.position = int(line[1])
        if not stay:
            assert self.proc.wait(30) == 0

    def stop(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(30)


@pytest.fixture
def rolling_path():
    path = SHM / f"mbtest-{os.getpid()}-{uuid.uuid4().hex[:12]}.d"
    yield str(path)
    shutil.rmtree(path, ignore_errors=True)


def single_bus(path, n):
    with MappedBusWriter(path, 100_000, RECORD) as w:
        for i in range(n):
            w.write(i.to_bytes(RECORD, "little"))


def rolling_bus(path, n):
    with RollingBusWriter(path, 4096, RECORD) as w:      # 204 records a segment
        for i in range(n):
            w.write(i.to_bytes(RECORD, "little"))


@pytest.mark.parametrize("kind", ["single", "rolling"])
def test_consumers_json_shows_a_live_and_a_stopped_consumer(kind, bus_path, rolling_path):
    path = bus_path if kind == "single" else rolling_path
    (single_bus if kind == "single" else rolling_bus)(path, 500 if kind == "rolling" else 50)
    gone = Consumer(path, "archiver", 5, stay=False)
    live = Consumer(path, "billing", 300 if kind == "rolling" else 30)
    try:
        code, out, err = run("consumers", path, "--json")
        assert code == 0, err
        d = json.loads(out)
        assert d["path"] == path
        rows = {c["name"]: c for c in d["consumers"]}
        assert list(rows) == ["archiver", "billing"]            # by name
        b, a = rows["billing"], rows["archiver"]
        assert b["position"] == live.position and a["position"] == gone.position
        total = 500 if kind == "rolling" else 50
        assert b["lag"] == total - (300 if kind == "rolling" else 30)
        assert a["lag"] == total - 5
        assert b["alive"] is True and b["pid"] == live.proc.pid
        assert a["alive"] is False and a["pid"] is None
        assert not a["expired"] and not b["expired"]
        assert time.time() - 60 < b["committed_at"] <= time.time()
        assert b["created_at"] <= b["committed_at"] + 1

        code, out, err = run("consumers", path)
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0].split()[:4] == ["consumer", "position", "lag", "state"]
        assert lines[1].split()[:5] == ["archiver", str(gone.position), str(total - 5),
                                        "stopped", "-"]
        assert lines[2].split()[:5] == ["billing", str(live.position), str(b["lag"]), "alive",
                                        str(live.proc.pid)]
    finally:
        live.stop()


@pytest.mark.parametrize("kind", ["single", "rolling"])
def test_stat_shows_consumers_in_text_and_json(kind, bus_path, rolling_path):
    path = bus_path if kind == "single" else rolling_path
    (single_bus if kind == "single" else rolling_bus)(path, 20)
    live = Consumer(path, "billing", 7)
    try:
        code, out, err = run("stat", path, "--json")
        assert code == 0, err
        d = json.loads(out)
        assert [c["name"] for c in d["consumers"]] == ["billing"]
        c = d["consumers"][0]
        assert (c["position"], c["lag"], c["alive"], c["pid"]) == \
            (live.position, 13, True, live.proc.pid)
        assert set(c) == {"name", "position", "lag", "alive", "pid", "expired",
                          "committed_at", "created_at"}
        code, out, err = run("stat", path)
        assert code == 0, err
        assert "consumers   1 registered, 1 alive" in out
        row = next(ln for ln in out.splitlines() if ln.strip().startswith("billing"))
        assert row.split()[:4] == ["billing", str(live.position), "13", "alive"]
    finally:
        live.stop()


def test_no_registry_means_no_consumers(bus_path):
    single_bus(bus_path, 3)
    assert not os.path.exists(registry_path(bus_path))
    code, out, _ = run("consumers", bus_path, "--json")
    assert code == 0 and json.loads(out) == {"path": bus_path, "consumers": []}
    code, out, _ = run("consumers", bus_path)
    assert code == 0 and out == "no consumers registered\n"
    code, out, _ = run("stat", bus_path, "--json")
    assert code == 0 and json.loads(out)["consumers"] == []
    assert not os.path.exists(registry_path(bus_path))        # looking creates nothing


@pytest.mark.parametrize("damage", ["magic", "truncated"])
def test_a_corrupt_registry_is_one_line_and_exit_2(damage, bus_path):
    single_bus(bus_path, 5)
    Consumer(bus_path, "billing", 2, stay=False)
    reg = registry_path(bus_path)
    if damage == "magic":
        with open(reg, "r+b") as f:
            f.write(b"garbage!")
    else:
        os.truncate(reg, 100)
    for command in ("consumers", "top"):
        code, out, err = run(command, bus_path, *(["--once"] if command == "top" else []))
        assert code == 2 and out == "" and one_line(err), (code, out, err)
        assert err.startswith(f"mappedbus: {reg}: ")
    # stat reports a corrupt bus's figures with notes; a corrupt registry likewise
    code, out, err = run("stat", bus_path, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["consumers"] is None and any(p.startswith(f"{reg}: ") for p in d["problems"])
    code, out, err = run("stat", bus_path)
    assert code == 0 and f"note        {reg}: " in out


def test_consumers_errors_follow_the_cli_convention(tmp_path):
    code, out, err = run("consumers", "/dev/shm/nope-no-such-bus")
    assert code == 2 and one_line(err) and "no such file or directory" in err and out == ""
    code, out, err = run("consumers", tmp_path)
    assert code == 2 and one_line(err) and "without bus.meta" in err


@pytest.mark.parametrize("kind", ["single", "rolling"])
def test_top_once_shows_rates_and_each_consumers_lag(kind, bus_path, rolling_path):
    path = bus_path if kind == "single" else rolling_path
    (single_bus if kind == "single" else rolling_bus)(path, 30)
    live = Consumer(path, "billing", 10)
    # A writer keeps writing while top measures its interval: from before top starts (it says
    # so) until told to stop (its stdin closed), however long either process takes to start.
    writer = subprocess.Popen([sys.executable, "-c", f"""
import os, sys, threading, time
from mappedbus_py import MappedBusWriter, RollingBusWriter
path = {path!r}
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
w = RollingBusWriter(path) if os.path.isdir(path) else MappedBusWriter(path)
with w:
    for i in range(4000):                   # 20 s at most; the single bus holds 5,000
        w.write(bytes({RECORD}))
        if i == 0:
            print("writing", flush=True)
        if stop.is_set():
            break
        time.sleep(0.005)
"""], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "writing"
        code, out, err = run("top", path, "--once", "--interval", "0.5")
        assert code == 0, err
        assert "\x1b" not in out                                  # --once: no escape sequences
        lines = out.splitlines()
        assert lines[0].startswith(f"mappedbus top  {path}  ({kind}, record_size {RECORD}")
        written = next(ln for ln in lines if ln.startswith("written"))
        rate = int(written.split()[1].rstrip("/s").replace(",", ""))
        assert 20 < rate < 1000, written                          # ~200/s
        assert next(ln for ln in lines if ln.startswith("parked readers"))
        row = next(ln for ln in lines if ln.startswith("billing")).split()
        assert row[1] == str(live.position) and int(row[2].replace(",", "")) >= 20
        assert row[3] == "0/s" and row[4] == "alive" and row[5] == str(live.proc.pid)
    finally:
        writer.stdin.close()
        writer.wait(30)
        writer.stdout.close()
        live.stop()


def test_top_redraws_until_ctrl_c_and_restores_the_cursor(bus_path):
    single_bus(bus_path, 5)
    p = subprocess.Popen([sys.executable, "-m", "mappedbus_py", "top", bus_path,
                          "--interval", "0.1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Three screens drawn (not a fixed sleep, which a loaded machine's slow start could
    # outlast), then Ctrl-C.
    out, deadline = b"", time.monotonic() + 60
    while out.count(b"\x1b[H") < 3:
        assert time.monotonic() < deadline and p.poll() is None, (out, p.poll())
        if select.select([p.stdout], [], [], 1.0)[0]:
            out += os.read(p.stdout.fileno(), 65536)
    p.send_signal(2)                                              # SIGINT, as Ctrl-C
    rest, err = p.communicate(timeout=30)
    out += rest
    assert p.returncode == 130 and err == b"", err
    assert out.startswith(b"\x1b[?25l") and out.endswith(b"\x1b[?25h")
    assert out.count(b"\x1b[H") >= 3 and b"no consumers registered" in out
