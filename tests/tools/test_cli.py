"""The ``mappedbus`` command: what a user runs when a reader seems stuck."""
import json
import os
import pathlib
import re
import subprocess
import shutil
import sys
import uuid

import pytest

from conftest import GOLDEN, SHM
from mappedbus_py import MappedBusWriter, PriceUpdate, RollingBusWriter, Trade
from mappedbus_py.formats.busmeta import meta_path
from mappedbus_py.tools.cli import main
from mappedbus_py.rolling import list_segments


def run(*args):
    p = subprocess.run([sys.executable, "-m", "mappedbus_py", *map(str, args)],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def one_line(err):
    """An error as the CLI promises it: one line naming the problem, no traceback."""
    return err.startswith("mappedbus: ") and err.count("\n") == 1 and "Traceback" not in err


def test_stat_shows_limit_capacity_and_counts_by_status():
    code, out, _ = run("stat", GOLDEN / "uncommitted-r12.bus", "--record-size", 12)
    assert code == 0
    assert "limit       68   allocated 3 slots" in out
    assert "records     committed 2, rolled back 0, pending 1" in out
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
    assert rows[2] == {"position": 56, "segment": None, "status": 1, "meta": 2, "payload": "2021"}


def test_stat_json_notes_a_limit_past_the_end():
    code, out, _ = run("stat", GOLDEN / "full-r16.bus", "-r", 16, "-f", 80, "--json")
    s = json.loads(out)
    assert s["positions"] == {"first": 8, "limit": 104, "end": 80}
    assert (s["capacity"], s["full"]) == (3, True)
    assert s["records"] == {"allocated": 3, "committed": 3, "rolled_back": 0, "pending": 0,
                            "corrupt": 0}
    assert any("the bus is full" in p for p in s["problems"])


def test_a_wrong_record_size_on_a_file_without_metadata_is_an_error_not_a_report():
    code, out, err = run("dump", GOLDEN / "objects-r12.bus", "-r", 13)
    assert (code, out) == (2, "")
    assert one_line(err) and "limit 1028 is not a record boundary for record_size 13" in err


def test_missing_file_and_bad_layout_exit_2_with_a_message(tmp_path):
    code, _, err = run("stat", tmp_path / "nope", "-r", 8)
    assert code == 2 and err == f"mappedbus: {tmp_path / 'nope'}: no such file or directory\n"
    code, _, err = run("dump", GOLDEN / "objects-r12.bus", "-r", 12, "-l", "a:int33")
    assert code == 2 and "unknown type 'int33'" in err


def test_garbage_file_dumps_without_crashing(tmp_path):
    path = tmp_path / "garbage"
    path.write_bytes(os.urandom(5000))
    for rsize in (1, 7, 12, 4096, 10_000):
        code, out, err = run("dump", path, "-r", rsize)
        assert (code, out) == (2, ""), err
        assert one_line(err) and "not a bus" in err


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
    assert out == "" and one_line(err)
    assert says in err.lower()


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


# -- sizes from the metadata; errors as one line ------------------------------------------

@pytest.fixture
def bus_dir():
    base = SHM if SHM.is_dir() else pathlib.Path("/tmp")
    path = base / f"mbcli-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    yield str(path)
    shutil.rmtree(path, ignore_errors=True)


def fill(path, file_size, record_size=12):
    """A bus made with ``file_size``, written until full: how many records it took."""
    n = 0
    with MappedBusWriter(path, file_size, record_size) as w:
        while True:
            try:
                w.write(PriceUpdate(source=n, price=n, quantity=n))
            except EOFError:
                return n
            n += 1


def test_stat_takes_the_sizes_from_the_metadata_and_capacity_from_its_file_size(bus_path):
    assert fill(bus_path, 1000) == 49          # the file is 4096 bytes on disk: a page
    code, out, err = run("stat", bus_path)
    assert code == 0, err
    assert "file_size 1000   record_size 12   capacity 49 records" in out
    assert "(full)" in out and "the bus is full" in out
    s = json.loads(run("stat", bus_path, "--json")[1])
    assert (s["capacity"], s["file_size"], s["file_bytes"], s["full"]) == (49, 1000, 4096, True)
    assert s["records"]["committed"] == 49 and s["metadata"] == meta_path(bus_path)


@pytest.mark.parametrize("args, says", [
    (("-r", 16), "--record-size 16 given, but its metadata ({meta}) says record_size 12"),
    (("-f", 4096), "--file-size 4096 given, but its metadata ({meta}) says file_size 1000"),
])
def test_a_size_that_disagrees_with_the_metadata_names_both(bus_path, args, says):
    fill(bus_path, 1000)
    code, out, err = run("stat", bus_path, *args)
    assert (code, out) == (2, "") and one_line(err)
    assert err == f"mappedbus: {bus_path}: {says.format(meta=meta_path(bus_path))}\n"


def test_a_text_file_a_missing_path_and_a_file_without_sizes_are_one_line_errors(tmp_path):
    text = tmp_path / "big.txt"
    text.write_text("The quick brown fox jumps over the lazy dog.\n" * 2000)
    for args, says in (((text, "-r", 12), "not a bus, or not one of record_size 12"),
                       ((text,), "no metadata"),
                       ((tmp_path / "nope.d",), "no such file or directory")):
        code, out, err = run("stat", *args)
        assert (code, out) == (2, ""), err
        assert one_line(err) and says in err, err


def test_a_status_no_writer_leaves_is_an_error_on_a_file_without_metadata(tmp_path):
    path = tmp_path / "java.bus"
    data = bytearray(4096)
    data[0:8] = (8 + 2 * 20).to_bytes(8, "little")       # two slots of record_size 12
    data[8] = 1
    data[28:32] = (7).to_bytes(4, "little")              # status 7
    path.write_bytes(bytes(data))
    code, out, err = run("stat", path, "-r", 12)
    assert (code, out) == (2, "") and one_line(err)
    assert "the slot at offset 28 has status 7, not 0, 1 or 2" in err


def test_metadata_of_an_earlier_file_is_ignored_and_the_sizes_are_then_needed(bus_path):
    fill(bus_path, 1000)
    data = open(bus_path, "rb").read()
    os.unlink(bus_path)
    with open(bus_path, "wb") as f:           # another inode: as the Java original recreates it
        f.write(data)
    code, _, err = run("stat", bus_path)
    assert code == 2 and one_line(err) and "--record-size" in err
    code, out, err = run("stat", bus_path, "-r", 12)
    assert code == 0, err
    assert "describes another file" in out and "capacity 204 records" in out


def test_options_that_do_not_apply_and_invalid_statuses_are_refused(bus_path, bus_dir):
    with RollingBusWriter(bus_dir, 4096, 12) as w:
        w.write(PriceUpdate(source=1))
    fill(bus_path, 1000)
    for args, says in ((("stat", bus_dir, "-f", 4096), "--file-size does not apply to a rolling"),
                       (("dump", bus_path, "--status", "7"), "7: not a status"),
                       (("dump", bus_path, "--status", "1,3"), "3: not a status"),
                       (("dump", bus_path, "--type-id", "2"), "--type-id: only with --layout"),
                       (("dump", bus_path, "--bytes", "-l", "Token"), "not allowed with")):
        code, out, err = run(*args)
        assert (code, out) == (2, "") and one_line(err), err
        assert says in err, err


# -- layouts -----------------------------------------------------------------------------

def test_a_layout_wider_than_the_record_is_an_error(bus_path):
    fill(bus_path, 1000)
    code, out, err = run("dump", bus_path, "--layout", "Trade")
    assert (code, out) == (2, "") and one_line(err)
    assert "--layout Trade is 20 bytes wide, wider than the records" in err
    assert "record_size 12" in err


def test_a_shipped_layout_decodes_only_records_of_its_type_id(bus_path):
    with MappedBusWriter(bus_path, 10_000, 24) as w:
        w.write(PriceUpdate(source=1, price=2, quantity=3))        # type id 0
        w.write(Trade(id=5, price=1.5, quantity=7))                # type id 2
    code, out, err = run("dump", bus_path, "--layout", "Trade", "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["meta"] for r in rows] == [0, 2]
    raw = PriceUpdate(source=1, price=2, quantity=3).to_bytes() + bytes(12)
    assert rows[0]["payload"] == raw.hex()          # shown raw: not a Trade
    assert rows[1]["payload"] == {"id": 5, "price": 1.5, "quantity": 7}
    # A field list has no type id: it decodes every record, unless given one.
    spec = "a:int32,b:int32"
    rows = [json.loads(x) for x in run("dump", bus_path, "-l", spec, "--json")[1].splitlines()]
    assert [type(r["payload"]) for r in rows] == [dict, dict]
    rows = [json.loads(x) for x in
            run("dump", bus_path, "-l", spec, "--type-id", 0, "--json")[1].splitlines()]
    assert [type(r["payload"]) for r in rows] == [dict, str]


# -- rolling buses: --start, one schema ----------------------------------------------------

SEG, PER = 4096, (4096 - 8) // 20


def write_rolling(path, n, **kw):
    with RollingBusWriter(path, SEG, 12, **kw) as w:
        for i in range(n):
            w.write(PriceUpdate(source=i, price=i, quantity=i))


def test_dump_start_on_a_rolling_bus_is_a_position_across_segments(bus_dir):
    write_rolling(bus_dir, 3 * PER)
    start = 1 * SEG + 8 + 5 * 20                  # the 6th record of segment 1
    code, out, err = run("dump", bus_dir, "--start", start, "-l", "PriceUpdate", "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows[0]["position"] == start and rows[0]["segment"] == 1
    assert [r["payload"]["source"] for r in rows] == list(range(PER + 5, 3 * PER))
    for bad, says in ((start + 1, "not a record boundary"), (9 * SEG + 8, "past the newest")):
        code, out, err = run("dump", bus_dir, "--start", bad)
        assert (code, out) == (2, "") and one_line(err) and says in err, err


def test_dump_start_before_the_oldest_retained_segment_is_an_error(bus_dir):
    write_rolling(bus_dir, 8 * PER, retain_segments=1)
    oldest = list_segments(bus_dir)[0]
    assert oldest > 0
    code, out, err = run("dump", bus_dir, "--start", 8)
    assert (code, out) == (2, "") and one_line(err)
    assert f"removed by retention: the oldest retained record is at position " \
           f"{oldest * SEG + 8}" in err
    code, out, _ = run("dump", bus_dir, "--json", "--max", 1)
    assert json.loads(out)["position"] == oldest * SEG + 8


def test_stat_and_dump_json_have_the_same_fields_for_both_kinds_of_bus(bus_path, bus_dir):
    fill(bus_path, 1000)
    write_rolling(bus_dir, PER + 3)
    single = json.loads(run("stat", bus_path, "--json")[1])
    rolling = json.loads(run("stat", bus_dir, "--json")[1])
    assert list(single) == list(rolling)
    assert (single["kind"], rolling["kind"]) == ("single", "rolling")
    for key in ("positions", "records"):
        assert list(single[key]) == list(rolling[key])
    assert list(rolling["segments"][0]["records"]) == list(single["records"])
    assert rolling["records"]["committed"] == PER + 3 and rolling["capacity"] == PER
    one = json.loads(run("dump", bus_path, "--json", "--max", 1)[1])
    two = json.loads(run("dump", bus_dir, "--json", "--max", 1)[1])
    assert list(one) == list(two) == ["position", "segment", "status", "meta", "payload"]


def test_rolling_bus_paths_are_printed_escaped(tmp_path):
    path = str(tmp_path / "roll\x1b[31m.d")
    write_rolling(path, 2)
    for cmd in (("stat", path), ("dump", path)):
        code, out, err = run(*cmd)
        assert code == 0, err
        assert "\x1b" not in out and "roll\\x1b[31m.d" in out


# -- dump --follow --------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["single", "rolling"])
def test_dump_follow_prints_each_record_as_it_comes_then_stops_when_idle(bus_path, kind):
    def writer():
        return (RollingBusWriter(bus_path, 4096, 12) if kind == "rolling"
                else MappedBusWriter(bus_path, 100_000, 12))
    with writer() as w:
        w.write(PriceUpdate(source=1, price=10, quantity=1))
    p = subprocess.Popen([sys.executable, "-m", "mappedbus_py", "dump", bus_path, "-l",
                          "PriceUpdate", "--json", "--follow", "--idle-exit", "2"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = json.loads(p.stdout.readline())
    assert first["payload"]["source"] == 1
    with writer() as w:
        # 300 records: a rolling bus of 4096-byte segments rolls once under the follower
        for i in range(2, 302):
            w.write(PriceUpdate(source=i, price=10, quantity=1))
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["payload"]["source"] for r in rows] == list(range(2, 302))
    assert all(r["status"] == 1 for r in rows)
    if kind == "rolling":
        assert {r["segment"] for r in rows} == {0, 1}


def test_idle_exit_needs_follow():
    code, out, err = run("dump", "/dev/shm/nope", "--idle-exit", "1")
    assert code == 2 and "only with --follow" in err


def test_every_command_the_parser_knows_has_one_entry_in_the_table(capsys):
    from mappedbus_py.tools import cli
    assert main(["--help"]) == 0
    choices = re.search(r"\{([\w,]+)\}", capsys.readouterr().out).group(1).split(",")
    assert sorted(choices) == sorted(cli.COMMANDS) == ["consumers", "dump", "exporter",
                                                       "groups", "stat", "top"]
