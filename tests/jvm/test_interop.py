"""Python and JVM processes on one bus: shared writing, total order, messages decoded the same on
both sides, and records rolled back by a reader of the other language."""
import os
import re
import signal
import struct
import time

import pytest

from mappedbus_py import MappedBusReader, MappedBusWriter, PriceUpdate, Token, Trade
from mappedbus_py.formats.layout import STATUS_NOT_SET, STATUS_ROLLED_BACK
from support.procs import (check_integrity, end_counts, java_or_skip, open_gate, parse_reader,
                           roll_back_frozen, start, start_java)

pytestmark = pytest.mark.java

KINDS = {"price": PriceUpdate, "token": Token, "trade": Trade}
TO_STRING = re.compile(r"(\w+) \[(.*)\]")


@pytest.fixture(scope="module", autouse=True)
def jar():
    return java_or_skip()


def finish(proc, timeout=120):
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, (proc.args, out[-2000:])
    return out


def status_at(path, position):
    with open(path, "rb") as f:
        f.seek(position)
        return struct.unpack("<i", f.read(4))[0]


def wait_for_limit(path, minimum, timeout):
    fd = os.open(path, os.O_RDONLY)
    try:
        deadline = time.monotonic() + timeout
        while struct.unpack("<q", os.pread(fd, 8, 0))[0] < minimum:
            assert time.monotonic() < deadline, f"limit of {path} stayed below {minimum}"
            time.sleep(0.0005)
    finally:
        os.close(fd)


def parse_objects(out):
    """read-objects output -> ([(position, meta, class name, {field: value string})], END line)."""
    lines = out.strip().splitlines()
    assert lines and lines[-1].startswith("END "), lines[-1:]
    recs = []
    for line in lines[:-1]:
        position, meta, text = line.split(" ", 2)
        name, body = TO_STRING.fullmatch(text).groups()
        fields = dict(kv.split("=") for kv in body.split(", "))
        recs.append((int(position), int(meta), name, fields, text))
    return recs, lines[-1]


# --- many writers of both languages at once ----------------------------------------------------

@pytest.mark.slow
def test_python_and_java_writer_processes_share_a_bus_and_both_readers_see_one_order(
        bus_path, tmp_path):
    # Every race must give both readers one order, whole and intact; the writers must also have
    # overlapped in one of them (the two languages' records not two solid blocks): the Python
    # writers are paced so that they are still writing when the Java ones start, and a race is
    # run up to three times, each on a fresh bus, should a loaded machine still separate them.
    switches = []
    for attempt in range(3):
        path = f"{bus_path}-{attempt}"
        try:
            switches.append(_race_python_and_java_writers(path, tmp_path / f"race{attempt}"))
        finally:
            if os.path.exists(path):
                os.unlink(path)
        if switches[-1] >= 2:
            break
    assert switches[-1] >= 2, f"Python and Java writers did not run at the same time: {switches}"


def _race_python_and_java_writers(bus_path, gates):
    """Four Python and four Java writer processes race on a new bus, read by a Python and a
    Java reader; asserts one order and intact records. Returns how often the records switch
    language along the bus."""
    gates.mkdir()
    per, py_ids, java_ids = 10_000, range(0, 4), range(4, 8)
    total = per * (len(py_ids) + len(java_ids))
    fsize = 8 + (total + 10) * 16
    MappedBusWriter(bus_path, fsize, 8).open().close()
    readers = [start("read", bus_path, fsize, 8, total, "--idle-exit", 60000),
               start_java("read", bus_path, fsize, 8, total, "--idle-exit", 60000)]
    # Overlap by design: the Python writers pace themselves (2 ms every 10 records: two seconds
    # or more for their 10,000, longer than a JVM takes from its gate to its first record), and
    # the Java writers, started and waiting at their gate, are let go once Python records are
    # arriving. (Java first, then Python, left a loaded machine's warm
    # JVMs done before the Python processes saw their gate: two solid blocks in three races.)
    go_java, go_py = str(gates / "go-java"), str(gates / "go-py")
    java_writers = [start_java("write-bytes", bus_path, fsize, 8, per, wid, go=go_java)
                    for wid in java_ids]
    py_writers = [start("stream", bus_path, fsize, 8, per, wid, "--progress", 10, "--pause-ms", 2,
                        go=go_py) for wid in py_ids]
    writers = java_writers + py_writers
    for w in java_writers:
        line = w.stdout.readline()
        assert line.strip() == "ready", f"{w.args}: {line!r}"
    open_gate(go_py, py_writers)
    wait_for_limit(bus_path, 8 + 100 * 16, timeout=60)
    with open(go_java, "w"):
        pass
    for w in writers:
        assert finish(w, 300).strip().splitlines()[-1] == f"wrote {per} committed {per}"
    (py_recs, py_end), (java_recs, java_end) = [parse_reader(finish(r, 300)) for r in readers]
    for recs, end in ((py_recs, py_end), (java_recs, java_end)):
        assert end_counts(end) == (total, 0, 0)
        check_integrity(recs, list(py_ids) + list(java_ids), per)
    assert py_recs == java_recs           # position, meta and payload, record by record
    lang = [struct.unpack_from("<i", p)[0] in java_ids for _, _, p in py_recs]
    return sum(a != b for a, b in zip(lang, lang[1:]))


# --- byte arrays ------------------------------------------------------------------------------

def test_bytes_written_by_python_read_by_java_identically(bus_path):
    fsize, rsize = 100_000, 16
    sent = [bytes((i * 7 + j) & 0xFF for j in range(i % (rsize + 1))) for i in range(300)]
    with MappedBusWriter(bus_path, fsize, rsize) as w:
        for data in sent:
            assert w.write(data)
    java_recs, end = parse_reader(finish(start_java("read", bus_path, fsize, rsize, 10_000,
                                                    "--idle-exit", 500)))
    assert end_counts(end) == (len(sent), 0, 0)
    assert [payload[:meta] for _, meta, payload in java_recs] == sent
    with MappedBusReader(bus_path, fsize, rsize) as r:
        py_recs = [(rec.position, rec.meta, rec.payload) for rec in r.records(timeout=0.2)]
    assert py_recs == java_recs


def test_bytes_written_by_java_read_by_python(bus_path):
    fsize, count = 100_000, 2_000
    assert finish(start_java("write-bytes", bus_path, fsize, 8, count, 42)).strip() == \
        f"wrote {count} committed {count}"
    with MappedBusReader(bus_path, fsize, 8) as r:
        got = [rec.data for rec in r.records(timeout=0.2)]
    assert got == [struct.pack("<ii", 42, i) for i in range(count)]


# --- object messages --------------------------------------------------------------------------

def python_messages(kind):
    """Messages with edge values: int32/int64 extremes, negative, inexact and huge doubles."""
    i32 = [0, 1, -1, 2**31 - 1, -2**31, 123456]
    if kind == "price":
        return [PriceUpdate(a, b, c) for a in i32 for b in i32[:3] for c in i32[::-2]]
    if kind == "token":
        return [Token(a, b) for a in i32 for b in i32]
    ids = [0, -1, 2**63 - 1, -2**63, 1234567890123456789]
    prices = [0.0, 0.1, -1 / 3, 1e300, -2.5e-300, 12345.678, 5e-324, 2.0**53 + 2]
    return [Trade(a, p, q) for a in ids for p in prices for q in i32[:2]]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_messages_written_by_python_decode_identically_in_java(bus_path, kind):
    cls, fsize = KINDS[kind], 1_000_000
    sent = python_messages(kind)
    with MappedBusWriter(bus_path, fsize, 20) as w:
        for m in sent:
            assert w.write(m)
    recs, end = parse_objects(finish(start_java("read-objects", bus_path, fsize, 20, 10_000, kind,
                                                "--idle-exit", 500)))
    assert end_counts(end)[0] == len(sent)
    for m, (_, meta, name, fields, text) in zip(sent, recs):
        assert (meta, name) == (cls.type_id, cls.__name__)
        if kind != "trade":
            assert text == repr(m)        # Python's repr follows Java's toString
        else:
            assert int(fields["id"]) == m.id and int(fields["quantity"]) == m.quantity
            assert float(fields["price"]) == m.price     # Double.toString round-trips exactly


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_messages_written_by_java_decode_identically_in_python(bus_path, kind):
    cls, fsize, count, wid = KINDS[kind], 1_000_000, 1_000, 5
    assert finish(start_java("write-objects", bus_path, fsize, 20, count, kind, wid)).strip() == \
        f"wrote {count} committed {count}"
    java_view, _ = parse_objects(finish(start_java("read-objects", bus_path, fsize, 20, count, kind,
                                                   "--idle-exit", 500)))
    msg, got = cls(), []
    with MappedBusReader(bus_path, fsize, 20) as r:
        while r.read_into(msg):
            got.append((r.read_type(), msg.as_dict(), repr(msg)))
    assert len(got) == count == len(java_view)
    for i, ((meta, fields, text), (_, jmeta, _, _, jtext)) in enumerate(zip(got, java_view)):
        expected = {"price": {"source": wid, "price": i, "quantity": 2 * i},
                    "token": {"from_": wid, "to": i},
                    "trade": {"id": wid * 10**9 + i, "price": i + 0.5, "quantity": wid}}[kind]
        assert fields == expected and meta == jmeta == cls.type_id
        assert text == jtext


# --- records rolled back by a reader of the other language ------------------------------------

def test_crashed_python_writer_is_skipped_by_java_readers(bus_path):
    fsize = 100_000
    with MappedBusWriter(bus_path, fsize, 8) as w:
        w.write(b"before")
        hang = start("allocate-and-hang", bus_path, fsize, 8)
        slot = int(hang.stdout.readline().split()[1])
        hang.send_signal(signal.SIGKILL)          # dies between allocate and commit
        hang.wait()
        for i in range(100):
            w.write(struct.pack("<ii", 1, i))
    expected = [b"before"] + [struct.pack("<ii", 1, i) for i in range(100)]
    # A read-only Java reader skips the record locally: a lost record, not a rollback.
    recs, end = parse_reader(finish(start_java("read", bus_path, fsize, 8, 101, "--timeout", 300,
                                               "--read-only")))
    assert [p[:m] for _, m, p in recs] == expected and end_counts(end) == (101, 1, 0)
    assert status_at(bus_path, slot) == STATUS_NOT_SET
    recs, end = parse_reader(finish(start_java("read", bus_path, fsize, 8, 101, "--timeout", 300)))
    assert [p[:m] for _, m, p in recs] == expected and end_counts(end) == (101, 1, 1)
    assert status_at(bus_path, slot) == STATUS_ROLLED_BACK


def test_crashed_java_writer_is_rolled_back_by_a_python_reader(bus_path):
    fsize = 100_000
    hang = start_java("allocate-and-hang", bus_path, fsize, 8)
    try:
        slot = int(hang.stdout.readline().split()[1])
        assert finish(start_java("write-bytes", bus_path, fsize, 8, 100, 3)).strip() == \
            "wrote 100 committed 100"
        with MappedBusReader(bus_path, fsize, 8, timeout=0.3) as r:
            got = [r.read(timeout=10).data for _ in range(100)]
            assert (r.rollbacks, r.skipped) == (1, 1)
        assert got == [struct.pack("<ii", 3, i) for i in range(100)]
        assert status_at(bus_path, slot) == STATUS_ROLLED_BACK
    finally:
        hang.kill()
        hang.wait()


def test_stopped_java_writer_rolled_back_by_python_gets_false(bus_path):
    fsize = 100_000
    MappedBusWriter(bus_path, fsize, 8).open().close()
    slow = start_java("slow-write", bus_path, fsize, 8, 2000)
    roll_back_frozen(slow, bus_path, fsize)
    assert finish(slow, 30).strip() == "committed false"
    with MappedBusReader(bus_path, fsize, 8, timeout=0.2) as r:
        assert [x.data for x in r.records(timeout=0.1)] == [b"other"]


def test_stopped_python_writer_rolled_back_by_java_gets_false(bus_path):
    fsize = 100_000
    MappedBusWriter(bus_path, fsize, 8).open().close()
    slow = start("slow-write", bus_path, fsize, 8, 4000)
    assert slow.stdout.readline().startswith("allocated")
    # Frozen before its commit until the reader has rolled its slot back: its sleep only has to
    # outlast this SIGSTOP, not the reader (a JVM's start alone can take seconds under load).
    slow.send_signal(signal.SIGSTOP)
    try:
        with MappedBusWriter(bus_path, fsize, 8) as w:
            w.write(b"other")
        recs, end = parse_reader(finish(start_java("read", bus_path, fsize, 8, 1, "--timeout", 200)))
    finally:
        slow.send_signal(signal.SIGCONT)
    assert [p[:m] for _, m, p in recs] == [b"other"] and end_counts(end) == (1, 1, 1)
    assert finish(slow, 30).strip() == "committed false"
    with MappedBusReader(bus_path, fsize, 8) as r:
        assert [x.data for x in r.records(timeout=0.1)] == [b"other"]
