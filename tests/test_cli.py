"""The ``mappedbus`` command: what a user runs when a reader seems stuck."""
import json
import os
import subprocess
import sys

from conftest import GOLDEN
from mappedbus_py import MappedBusWriter, PriceUpdate
from mappedbus_py.cli import main


def run(*args):
    p = subprocess.run([sys.executable, "-m", "mappedbus_py", *map(str, args)],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def test_stat_shows_limit_capacity_and_counts_by_status():
    code, out, _ = run("stat", GOLDEN / "uncommitted-r12.bus", "--record-size", 12)
    assert code == 0
    assert "limit       68   allocated 3 slots" in out
    assert "records     not set: 1, committed: 2" in out
    assert "not committed: a writer is mid-write, or crashed" in out


def test_dump_decodes_payloads_with_a_named_layout():
    code, out, _ = run("dump", GOLDEN / "rollback-r12.bus", "-r", 12, "--layout", "PriceUpdate")
    assert code == 0
    rows = [line.split(None, 2) for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert rows[1][0] == "28" and "rolled back" in out
    assert "[source=2, price=2, quantity=2]" in out


def test_dump_with_a_field_list_layout_and_a_status_filter(bus_path, capsys):
    with MappedBusWriter(bus_path, 10_000, 16) as w:
        w.write(b"\x01\0\0\0\0\0\0\0" + b"\0\0\0\0\0\0\xf8\x3f")
        w._allocate_only(b"")
    assert main(["dump", bus_path, "-r", "16", "-l", "id:int64,price:float64", "--status", "0,1"]) == 0
    out = capsys.readouterr().out
    assert "[id=1, price=1.5]" in out and "not set" in out


def test_dump_json_lines_and_byte_array_mode():
    code, out, _ = run("dump", GOLDEN / "bytearray-r16.bus", "-r", 16, "--bytes", "--json", "--max", 3)
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["payload"] for r in rows] == ["", "10", "2021"]
    assert rows[2] == {"offset": 56, "status": 1, "meta": 2, "payload": "2021"}


def test_stat_json_notes_a_limit_past_the_end():
    code, out, _ = run("stat", GOLDEN / "full-r16.bus", "-r", 16, "-f", 80, "--json")
    s = json.loads(out)
    assert (s["limit"], s["capacity"], s["by_status"]) == (104, 3, {"1": 3})
    assert any("past the end" in p for p in s["problems"])


def test_wrong_record_size_is_pointed_out_not_crashed_on():
    code, out, _ = run("dump", GOLDEN / "objects-r12.bus", "-r", 13)
    assert code == 0
    assert "not a record boundary for record_size 13" in out


def test_missing_file_and_bad_layout_exit_2_with_a_message(tmp_path):
    code, _, err = run("stat", tmp_path / "nope", "-r", 8)
    assert code == 2 and "No such file" in err
    code, _, err = run("dump", GOLDEN / "objects-r12.bus", "-r", 12, "-l", "a:int33")
    assert code == 2 and "unknown type 'int33'" in err


def test_garbage_file_dumps_without_crashing(tmp_path):
    path = tmp_path / "garbage"
    path.write_bytes(os.urandom(5000))
    for rsize in (1, 7, 12, 4096, 10_000):
        code, _, err = run("dump", path, "-r", rsize)
        assert code == 0, err


import pytest  # noqa: E402


@pytest.mark.parametrize("args, says", [
    (("-r", "-8"), "record"), (("-r", "0"), "record"), (("-r", "16", "--status", "x"), "status"),
    (("-r", "16", "-l", "__init__:int32"), "__init__"), (("-r", "16", "-l", "a:int99"), "int99"),
    (("-r", "16", "--max", "-1"), "max"), (("-r", "16", "--start", "3"), "start"),
])
def test_bad_arguments_are_a_usage_error_with_exit_code_2(bus_path, args, says):
    with MappedBusWriter(bus_path, 10_000, 16) as w:
        w.write(b"x")
    code, out, err = run("dump", bus_path, *args)
    assert code == 2, (code, err)
    assert "Traceback" not in err and out == ""
    assert "error:" in err and says in err.lower()


def test_names_and_payloads_are_printed_escaped(tmp_path):
    path = str(tmp_path / "bus\x1b[31mred")
    with MappedBusWriter(path, 10_000, 16) as w:
        w.write(b"a\x00\x1b[2Jzz\n")
    for cmd in (("stat", path, "-r", 16), ("dump", path, "-r", 16, "--bytes")):
        code, out, err = run(*cmd)
        assert code == 0, err
        assert "\x1b" not in out and "\x00" not in out      # no raw control characters
        assert "bus\\x1b[31mred" in out or "1b5b324a" in out


def test_a_fifo_is_refused_at_once_instead_of_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    code, _, err = run("stat", fifo, "-r", 16)      # run() has a 60 s timeout
    assert code == 2 and "FIFO" in err
