"""Named consumers: the registry beside a bus, resuming by name, one holder per name, lag,
retention that holds consumers (expire and block), and a registry in hostile hands."""
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import pytest

import mappedbus_py as mb
from mappedbus_py import (BusBackPressureError, BusGapError, BusTruncatedError, ConsumerInUseError,
                          CorruptBusError, MappedBusReader, MappedBusWriter, RollingBusReader,
                          RollingBusWriter, UnsafeBusFileError)
from mappedbus_py.formats import layout
from mappedbus_py._core._consumers import C_CONSTANTS, ConsumerRegistry
from mappedbus_py.rolling import (consumer_blockers, consumer_retention, consumer_segment,
                                  list_segments, records_between)

REC = 8          # payload bytes: one int64 sequence number per record
SLOT = layout.HEADER_SIZE + REC


def write_seq(w, start, n):
    for i in range(start, start + n):
        assert w.write(i.to_bytes(8, "little"))


def read_seq(r, timeout=0):
    rec = r.read(timeout)
    return None if rec is None else int.from_bytes(rec.data, "little")


def run_py(code, *args, timeout=60):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def bus(bus_path):
    with MappedBusWriter(bus_path, 1 << 20, REC) as w:
        write_seq(w, 0, 100)
    yield bus_path


@pytest.fixture
def rolling_dir(tmp_path_factory):
    base = "/dev/shm" if os.path.isdir("/dev/shm") else str(tmp_path_factory.getbasetemp())
    path = os.path.join(base, f"mbcons-{os.getpid()}-{random.randrange(1 << 40):x}.d")
    yield path
    shutil.rmtree(path, ignore_errors=True)


# -- the layout ----------------------------------------------------------------------------

def test_c_constants_match_the_layout():
    assert C_CONSTANTS == {k: layout.CONSTANTS[k] for k in C_CONSTANTS}
    assert layout.CONSUMERS_ENTRIES_OFFSET + layout.CONSUMER_ENTRY_COUNT * \
        layout.CONSUMER_ENTRY_SIZE <= layout.CONSUMERS_FILE_SIZE
    assert layout.CONSUMER_NAME_OFFSET + layout.CONSUMER_NAME_MAX == layout.CONSUMER_ENTRY_SIZE


def test_registry_lives_beside_the_bus_and_the_bus_file_is_unchanged(bus):
    before = open(bus, "rb").read()
    with MappedBusReader(bus, consumer="billing") as r:
        assert read_seq(r) == 0
        r.commit()
    assert open(bus, "rb").read() == before
    assert os.path.getsize(bus + ".consumers") == layout.CONSUMERS_FILE_SIZE


# -- resuming by name ----------------------------------------------------------------------

def test_a_consumer_resumes_at_its_committed_position(bus):
    with MappedBusReader(bus, consumer="billing") as r:
        assert [read_seq(r) for _ in range(10)] == list(range(10))
        r.commit()
        assert read_seq(r) == 10          # read, not committed
    with MappedBusReader(bus, consumer="billing") as r:
        assert read_seq(r) == 10
        r.commit(r.position - SLOT)        # commit a given position
    with MappedBusReader(bus, consumer="billing") as r:
        assert read_seq(r) == 10


def test_the_first_open_stores_the_start_position(bus):
    with MappedBusReader(bus, consumer="tail", start="end") as r:
        assert r.position == 8 + 100 * SLOT
    with MappedBusWriter(bus) as w:
        write_seq(w, 100, 1)
    with MappedBusReader(bus, consumer="tail") as r:   # start not needed any more
        assert read_seq(r) == 100
    (c,) = mb.consumers(bus)
    assert (c.name, c.position, c.lag) == ("tail", 8 + 100 * SLOT, 1)


def test_consumers_lists_positions_lag_liveness(bus):
    with MappedBusReader(bus, consumer="a") as r:
        for _ in range(30):
            read_seq(r)
        r.commit()
        before = time.time()
        (c,) = mb.consumers(bus)
        assert c.name == "a" and c.position == 8 + 30 * SLOT and c.lag == 70
        assert c.alive and c.pid == os.getpid() and not c.expired
        assert before - 1 < c.committed_at <= time.time() + 0.1
        assert c.created_at <= c.committed_at + 0.01
    (c,) = mb.consumers(bus)
    assert not c.alive and c.pid == 0 and c.lag == 70
    assert mb.consumers(bus + "-none") == []


def test_commit_without_a_consumer_or_after_close_is_refused(bus):
    with MappedBusReader(bus) as r:
        with pytest.raises(ValueError, match="consumer"):
            r.commit()
    r = MappedBusReader(bus, consumer="x").open()
    with pytest.raises(ValueError, match="not a record position"):
        r.commit(9)
    r.close()
    with pytest.raises(mb.BusClosedError):
        r.commit()


@pytest.mark.parametrize("name", ["", "x" * 65, "a\nb", "nul\0"])
def test_bad_consumer_names_are_refused(bus, name):
    with pytest.raises(ValueError, match="consumer name"):
        MappedBusReader(bus, consumer=name)


# -- one holder per name -------------------------------------------------------------------

HOLD = """
import sys, time
from mappedbus_py import MappedBusReader, RollingBusReader
cls = RollingBusReader if sys.argv[3] == "rolling" else MappedBusReader
r = cls(sys.argv[1], consumer=sys.argv[2]).open()
print("held", flush=True)
time.sleep(60)
"""


def test_a_second_live_holder_is_refused_and_a_dead_one_replaced(bus):
    p = subprocess.Popen([sys.executable, "-c", HOLD, bus, "billing", "single"],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        with pytest.raises(ConsumerInUseError, match=f"live process {p.pid}") as e:
            MappedBusReader(bus, consumer="billing").open()
        assert e.value.holder_pid == p.pid
        with pytest.raises(ConsumerInUseError):
            mb.remove_consumer(bus, "billing")
        (c,) = mb.consumers(bus)
        assert c.alive and c.pid == p.pid
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    with MappedBusReader(bus, consumer="billing") as r:      # the dead holder is replaced
        assert read_seq(r) == 0


def test_two_readers_of_one_process_cannot_hold_one_name(bus):
    with MappedBusReader(bus, consumer="billing"):
        with pytest.raises(ConsumerInUseError, match="another reader of this process"):
            MappedBusReader(bus, consumer="billing").open()
        with MappedBusReader(bus, consumer="other"):
            pass
    with MappedBusReader(bus, consumer="billing"):
        pass


def test_a_forked_child_cannot_commit_its_parents_consumer(bus):
    r = MappedBusReader(bus, consumer="billing").open()
    read_seq(r)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            r.commit()
        except ConsumerInUseError:
            code = 0
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    r.commit()
    r.close()
    assert mb.consumers(bus)[0].position == 8 + SLOT


REGISTER = """
import sys
from mappedbus_py import MappedBusReader
MappedBusReader(sys.argv[1], consumer=sys.argv[2]).open().close()
"""


def test_entries_made_by_32_processes_at_once_are_all_there(bus):
    procs = [subprocess.Popen([sys.executable, "-c", REGISTER, bus, f"c{i:02d}"])
             for i in range(32)]
    assert [p.wait(60) for p in procs] == [0] * 32
    names = sorted(c.name for c in mb.consumers(bus))
    assert names == [f"c{i:02d}" for i in range(32)]


RACE = """
import sys, time
from mappedbus_py import MappedBusReader, ConsumerInUseError
while not __import__("os").path.exists(sys.argv[2]):
    time.sleep(0.001)
try:
    r = MappedBusReader(sys.argv[1], consumer="one").open()
except ConsumerInUseError:
    print("refused", flush=True)
else:
    print("held", flush=True)
    while not __import__("os").path.exists(sys.argv[2] + ".stop"):
        time.sleep(0.01)
    r.close()
"""


def test_of_16_processes_claiming_one_name_at_once_one_holds_it(bus, tmp_path):
    go = str(tmp_path / "go")
    procs = [subprocess.Popen([sys.executable, "-c", RACE, bus, go], stdout=subprocess.PIPE,
                              text=True) for _ in range(16)]
    time.sleep(0.5)
    open(go, "w").close()
    outs = [p.stdout.readline().strip() for p in procs]
    open(go + ".stop", "w").close()
    assert [p.wait(60) for p in procs] == [0] * 16
    assert sorted(outs) == ["held"] + ["refused"] * 15
    assert len(mb.consumers(bus)) == 1


# -- crash and resume: SIGKILL 100 times ---------------------------------------------------

# Log lines of 16 bytes: an append never straddles a page, so a SIGKILL cannot tear one (the
# kernel stops a killed writer between pages: a line across a boundary was once cut in two).
CONSUME = """
import os, sys
from mappedbus_py import MappedBusReader
bus, log = sys.argv[1], sys.argv[2]
fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
r = MappedBusReader(bus, consumer="crashy").open()
os.write(fd, b"S %13d\\n" % r.position)
print("reading", flush=True)
while True:
    rec = r.read(5.0)
    if rec is None:
        os.write(fd, b"E%14s\\n" % b"")
        break
    os.write(fd, b"R %13d\\n" % int.from_bytes(rec.data, "little"))
    r.commit()
"""


def test_a_consumer_killed_100_times_reads_every_record_and_commits_exactly_once(bus_path,
                                                                                 tmp_path):
    n = 200_000
    with MappedBusWriter(bus_path, 8 + n * SLOT + 4096, REC) as w:
        write_seq(w, 0, n)
    log = str(tmp_path / "log")
    rng = random.Random(7)
    kills = 0
    while kills < 100:
        p = subprocess.Popen([sys.executable, "-c", CONSUME, bus_path, log],
                             stdout=subprocess.PIPE, text=True)
        if p.stdout.readline() != "reading\n":     # the stream is over
            p.wait()
            break
        time.sleep(rng.random() * 0.004)          # a random point of the reading
        p.send_signal(signal.SIGKILL)
        p.wait()
        p.stdout.close()
        kills += 1
    run = subprocess.run([sys.executable, "-c", CONSUME, bus_path, log], timeout=120,
                         stdout=subprocess.DEVNULL)
    assert run.returncode == 0
    lines = open(log).read().split("\n")
    # Each incarnation starts exactly where the last commit left off: at the record after
    # the last one logged, or at that record again if the kill fell between log and commit.
    delivered, last, dups, starts = [], None, 0, 0
    for line in lines:
        if line.startswith("S "):
            starts += 1
            pos = int(line[2:])
            nxt = (pos - 8) // SLOT
            assert last is None and nxt == 0 or nxt in (last, last + 1), (line, last)
            dups += last is not None and nxt == last
        elif line.startswith("R "):
            seq = int(line[2:])
            assert last is None or seq in (last, last + 1)
            delivered.append(seq)
            last = seq
    assert lines[-2].rstrip() == "E"
    assert sorted(set(delivered)) == list(range(n))          # at least once
    assert len(delivered) - n == dups <= starts               # again only the one in flight
    assert kills == 100 and starts == 101
    (c,) = mb.consumers(bus_path)
    assert c.position == 8 + n * SLOT and c.lag == 0


# -- rolling buses: lag, and retention that holds consumers ---------------------------------

SEG = 4096
PER = (SEG - 8) // SLOT     # records per segment (255)


def fill(w, start, segments):
    write_seq(w, start, segments * PER)
    return start + segments * PER


def test_rolling_consumer_resumes_across_segments_with_lag(rolling_dir):
    with RollingBusWriter(rolling_dir, SEG, REC) as w:
        fill(w, 0, 3)
    with RollingBusReader(rolling_dir, consumer="r") as r:
        got = [read_seq(r) for _ in range(PER + 5)]
        assert got == list(range(PER + 5))
        r.commit()
    (c,) = mb.consumers(rolling_dir)
    assert c.position == SEG + 8 + 5 * SLOT and c.lag == 3 * PER - (PER + 5)
    with RollingBusReader(rolling_dir, consumer="r") as r:
        assert read_seq(r) == PER + 5


def test_expire_policy_holds_segments_within_the_bound_then_expires(rolling_dir):
    w = RollingBusWriter(rolling_dir, SEG, REC, retain_segments=1, max_consumer_lag=3).open()
    n = fill(w, 0, 1)
    with RollingBusReader(rolling_dir, consumer="slow") as r:
        assert read_seq(r) == 0
        r.commit()
    n = fill(w, n, 2)                 # the writers in segment 3: the consumer lags 3
    w._look_ahead()
    assert 0 in list_segments(rolling_dir)
    assert not mb.consumers(rolling_dir)[0].expired
    n = fill(w, n, 2)                 # lag 5 > 3: expired, its segments go
    w._look_ahead()
    (c,) = mb.consumers(rolling_dir)
    assert c.expired
    assert 0 not in list_segments(rolling_dir)
    oldest = list_segments(rolling_dir)[0]
    with RollingBusReader(rolling_dir, consumer="slow") as r:
        assert r.position == 8 + SLOT
        with pytest.raises(BusGapError) as e:
            r.read(0)
        assert (e.value.lost_from, e.value.lost_to) == (8 + SLOT, oldest * SEG + 8)
        r.seek(e.value.lost_to)
        assert read_seq(r) == oldest * PER
        r.commit()
    assert not mb.consumers(rolling_dir)[0].expired      # committed again: held again
    w.close()


def test_without_max_consumer_lag_consumers_hold_nothing(rolling_dir):
    with RollingBusWriter(rolling_dir, SEG, REC, retain_segments=1) as w:
        with RollingBusReader(rolling_dir, consumer="c"):
            pass
        fill(w, 0, 5)
        w._look_ahead()
    assert 0 not in list_segments(rolling_dir)
    assert not mb.consumers(rolling_dir)[0].expired


def test_block_policy_stops_the_writer_then_raises_naming_the_consumer(rolling_dir):
    w = RollingBusWriter(rolling_dir, SEG, REC, retain_segments=1, max_consumer_lag=2,
                         on_consumer_lag="block", consumer_block_timeout=0.2).open()
    r = RollingBusReader(rolling_dir, consumer="slow").open()    # at position 8
    n = fill(w, 0, 3)                   # segments 0-2 full: rolling into 3 would lag 3
    t = time.monotonic()
    with pytest.raises(BusBackPressureError, match="'slow'") as e:
        w.write(n.to_bytes(8, "little"))
    assert time.monotonic() - t >= 0.2
    assert (e.value.consumer, e.value.position, e.value.lag) == ("slow", 8, 3)
    assert w.segment == 2 and not mb.consumers(rolling_dir)[0].expired
    for i in range(PER):                # the consumer catches up one segment
        assert read_seq(r) == i
    r.commit()
    assert w.write(n.to_bytes(8, "little"))     # the retried write goes through
    assert w.segment == 3
    assert 0 in list_segments(rolling_dir) or True
    r.close()
    w.close()


def test_block_policy_writer_resumes_as_soon_as_the_consumer_commits(rolling_dir):
    w = RollingBusWriter(rolling_dir, SEG, REC, max_consumer_lag=1, on_consumer_lag="block",
                         consumer_block_timeout=30).open()
    with RollingBusReader(rolling_dir, consumer="c"):
        pass
    n = fill(w, 0, 2)
    code = """
import sys, time
from mappedbus_py import RollingBusReader
time.sleep(0.3)
with RollingBusReader(sys.argv[1], consumer="c") as r:
    while r.read(0) is not None:
        pass
    r.commit()
"""
    p = subprocess.Popen([sys.executable, "-c", code, rolling_dir])
    t = time.monotonic()
    assert w.write(n.to_bytes(8, "little"))
    assert 0.2 < time.monotonic() - t < 20
    assert p.wait(30) == 0
    w.close()


def test_consumer_policy_is_fixed_when_the_bus_is_created(rolling_dir):
    with RollingBusWriter(rolling_dir, SEG, REC, max_consumer_lag=4):
        pass
    with pytest.raises(ValueError, match="consumer policy is fixed"):
        RollingBusWriter(rolling_dir, max_consumer_lag=2).open()
    with RollingBusWriter(rolling_dir) as w:            # not given: the bus's policy
        assert w.meta.max_consumer_lag == 4 and w.meta.on_consumer_lag == "expire"
    for bad in (dict(max_consumer_lag=-1), dict(on_consumer_lag="drop"),
                dict(consumer_block_timeout="1s")):
        with pytest.raises(ValueError):
            RollingBusWriter(rolling_dir + "x", SEG, REC, **bad)


def test_retention_decisions():
    from mappedbus_py.formats.busmeta import BusMeta
    meta = BusMeta.create("rolling", REC, segment_size=SEG, max_consumer_lag=2)
    end = 8 + PER * SLOT
    assert consumer_segment(3 * SEG + 8, SEG, REC) == 3
    assert consumer_segment(3 * SEG + end, SEG, REC) == 4       # read all of segment 3
    entries = [dict(index=0, name="a", position=5 * SEG + 8, flags=0),
               dict(index=1, name="b", position=2 * SEG + 8, flags=0),
               dict(index=2, name="c", position=0 * SEG + 8, flags=1)]   # expired
    assert consumer_retention(entries, meta, 4) == (2, [])
    hold, expire = consumer_retention(entries, meta, 5)
    assert hold == 5 and [e["name"] for e in expire] == ["b"]
    block = BusMeta.create("rolling", REC, segment_size=SEG, max_consumer_lag=2,
                           on_consumer_lag="block")
    assert consumer_retention(entries, block, 9) == (2, [])
    assert [e["name"] for e in consumer_blockers(entries, block, 5)] == ["b"]
    assert consumer_blockers(entries, meta, 9) == []
    assert records_between(2 * SEG + 8, 2, 8 + 10 * SLOT, SEG, REC) == 10
    assert records_between(1 * SEG + 8 + 5 * SLOT, 3, 8 + 2 * SLOT, SEG, REC) == \
        (PER - 5) + PER + 2


# -- the bus recreated, and a registry in hostile hands ------------------------------------

def test_an_entry_of_a_recreated_bus_starts_anew(bus):
    with MappedBusReader(bus, consumer="c") as r:
        for _ in range(50):
            read_seq(r)
        r.commit()
    for p in (bus, bus + ".meta"):
        os.unlink(p)
    with MappedBusWriter(bus, 1 << 20, REC) as w:
        write_seq(w, 1000, 3)
    with pytest.warns(RuntimeWarning, match="starts anew"):
        r = MappedBusReader(bus, consumer="c").open()
    assert read_seq(r) == 1000
    r.close()


def test_a_symlinked_registry_is_refused(bus, tmp_path):
    target = tmp_path / "elsewhere"
    target.write_bytes(b"\0" * layout.CONSUMERS_FILE_SIZE)
    os.symlink(target, bus + ".consumers")
    with pytest.raises(UnsafeBusFileError, match="symbolic link"):
        MappedBusReader(bus, consumer="c").open()
    with pytest.raises(UnsafeBusFileError):
        mb.consumers(bus)
    assert target.read_bytes() == b"\0" * layout.CONSUMERS_FILE_SIZE


def test_a_registry_planted_by_another_user_is_refused(bus):
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to act as another user")
    reg = bus + ".consumers"
    subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                    sys.executable, "-c",
                    f"open({reg!r}, 'wb').write(bytes({layout.CONSUMERS_FILE_SIZE}))"],
                   check=True, cwd="/")
    assert os.stat(reg).st_uid == 65534
    with pytest.raises(UnsafeBusFileError, match="owned by uid 65534"):
        MappedBusReader(bus, consumer="c").open()
    with pytest.raises(UnsafeBusFileError):
        mb.consumers(bus)
    assert mb.consumers(bus, allow_foreign=True) == []


def corrupt(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def test_corrupt_registries_give_clear_errors(bus):
    reg = bus + ".consumers"
    with MappedBusReader(bus, consumer="c") as r:
        read_seq(r)
        r.commit()
    e0 = layout.CONSUMERS_ENTRIES_OFFSET
    good = open(reg, "rb").read()
    corrupt(reg, e0 + layout.CONSUMER_POSITION_OFFSET, (12345).to_bytes(8, "little"))
    with pytest.raises(CorruptBusError, match="'c' has position 12345"):
        MappedBusReader(bus, consumer="c").open()
    open(reg, "wb").write(good)
    corrupt(reg, e0 + layout.CONSUMER_NAME_OFFSET, b"\xff\xfe")
    with pytest.raises(CorruptBusError, match="no valid consumer name"):
        mb.consumers(bus)
    corrupt(reg, 0, b"NOTAREGI")
    with pytest.raises(CorruptBusError, match="not a bus consumer registry"):
        mb.consumers(bus)
    with pytest.raises(CorruptBusError, match="not a bus consumer registry"):
        MappedBusReader(bus, consumer="c").open()
    open(reg, "wb").write(good[:100])                       # short
    with pytest.raises(CorruptBusError, match="100 bytes, shorter than its 32768"):
        mb.consumers(bus)
    assert [read_seq(MappedBusReader(bus).open()) for _ in range(1)] == [0]   # bus intact


def test_a_registry_truncated_under_a_holder_fails_its_commit_without_a_crash(bus):
    r = MappedBusReader(bus, consumer="c").open()
    read_seq(r)
    r.commit()
    os.truncate(bus + ".consumers", 0)
    read_seq(r)
    with pytest.raises(BusTruncatedError, match="registry was truncated"):
        r.commit()
    r.close()
    assert read_seq(MappedBusReader(bus).open()) == 0


def test_a_lock_held_by_a_dead_process_is_taken_over(bus):
    p = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                       capture_output=True, text=True)
    dead = int(p.stdout)
    with MappedBusReader(bus, consumer="c"):
        pass
    corrupt(bus + ".consumers", layout.CONSUMERS_LOCK_OFFSET, dead.to_bytes(8, "little"))
    t = time.monotonic()
    with MappedBusReader(bus, consumer="c") as r:
        assert read_seq(r) == 0
    assert time.monotonic() - t < 2


def test_remove_consumer(bus):
    with MappedBusReader(bus, consumer="a"):
        pass
    with pytest.raises(KeyError):
        mb.remove_consumer(bus, "b")
    mb.remove_consumer(bus, "a")
    assert mb.consumers(bus) == []
    with pytest.raises(KeyError):
        mb.remove_consumer(bus + "-none", "a")


def test_a_consumer_at_the_end_of_a_segment_that_records_fill_exactly_resumes(rolling_dir):
    seg = 8 + 256 * SLOT             # 256 records fill a segment to its last byte
    with RollingBusWriter(rolling_dir, seg, REC) as w:
        write_seq(w, 0, 300)
    with RollingBusReader(rolling_dir, consumer="c") as r:
        assert [read_seq(r) for _ in range(256)] == list(range(256))
        r.commit()                   # its position: seg + 0, the end of segment 0
        r.commit(r.position)
    with RollingBusReader(rolling_dir, consumer="c") as r:
        assert read_seq(r) == 256


def test_committed_at_follows_the_clock_while_a_consumer_is_held(bus):
    with MappedBusReader(bus, consumer="c") as r:
        for _ in range(3):
            time.sleep(0.1)
            read_seq(r)
            r.commit()
            assert abs(time.time() - mb.consumers(bus)[0].committed_at) < 0.05
