"""Real processes on one real file: integrity, total order, crashed and slow writers."""
import signal
import struct
import time

import pytest

from mappedbus_py import MappedBusReader, MappedBusWriter
from support.procs import check_integrity, parse_reader, roll_back_frozen, start


@pytest.mark.slow
def test_nine_writer_processes_ninety_thousand_records_two_readers_agree(bus_path):
    writers, per = 9, 10_000
    total = writers * per
    fsize = 8 + (total + 10) * 16
    MappedBusWriter(bus_path, fsize, 8).open().close()
    readers = [start("read", bus_path, fsize, 8, total, "--idle-exit", 20000) for _ in range(2)]
    ws = [start("write", bus_path, fsize, 8, per, wid) for wid in range(writers)]
    for w in ws:
        out, _ = w.communicate(timeout=120)
        assert w.returncode == 0 and out.strip() == f"wrote {per} committed {per}"
    outs = [r.communicate(timeout=120)[0] for r in readers]
    parsed = [parse_reader(o) for o in outs]
    for recs, end in parsed:
        assert len(recs) == total, end
        check_integrity(recs, range(writers), per)
    assert parsed[0][0] == parsed[1][0]      # the same total order, position by position


@pytest.mark.slow
def test_crashed_writer_costs_one_timeout_and_every_later_record_arrives(bus_path):
    fsize = 1_000_000
    with MappedBusWriter(bus_path, fsize, 8) as w:
        w.write(b"before")
        hang = start("allocate-and-hang", bus_path, fsize, 8)
        assert hang.stdout.readline().startswith("allocated")
        hang.send_signal(signal.SIGKILL)          # dies between allocate and commit
        hang.wait()
        for i in range(100):
            w.write(struct.pack("<ii", 1, i))
    t0 = time.monotonic()
    reader = start("read", bus_path, fsize, 8, 101, "--timeout", 300, "--idle-exit", 5000)
    recs, end = parse_reader(reader.communicate(timeout=30)[0])
    took = time.monotonic() - t0
    assert len(recs) == 101 and recs[0][2].startswith(b"before")
    assert "rollbacks=1" in end and "rolledBackSkipped=1" in end
    assert took < 4.0


@pytest.mark.slow
def test_stopped_writer_resumed_after_the_timeout_gets_false_and_is_never_delivered(bus_path):
    fsize = 100_000
    MappedBusWriter(bus_path, fsize, 8).open().close()
    slow = start("slow-write", bus_path, fsize, 8, 1500)
    roll_back_frozen(slow, bus_path, fsize)
    out, _ = slow.communicate(timeout=10)
    assert out.strip() == "committed false"
    with MappedBusReader(bus_path, fsize, 8, timeout=0.2) as r:
        assert [x.data for x in r.records(timeout=0.1)] == [b"other"]
