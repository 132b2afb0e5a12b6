"""Idle readers park on the wake file beside the bus and writers wake them (mappedbus_py/_core/_wake.h).

Timing assertions here are loose on purpose (a shared 2-core machine): a parked reader is given
a self-wake bound of a second or more, so a record delivered well within it came by a wake, and
one that waited the whole bound is a lost wake-up. Latency figures are perf/bench_wake.py's job.
"""
import math
import os
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from mappedbus_py import (BusReplacedError, BusTruncatedError, MappedBusReader, MappedBusWriter,
                          RollingBusReader, RollingBusWriter)
from mappedbus_py.formats import layout
from mappedbus_py._core._wake import C_CONSTANTS, WakeFile

SIZE = 1 << 20
LONG_PARK = dict(idle="park", park=2.0, park_max=2.0)   # a lost wake-up costs 2 s


def child(code, *args):
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_parked(wake_path, n, timeout=20.0):
    """Until ``n`` readers are parked on the wake file (they park right after their spin)."""
    w = WakeFile(wake_path)
    try:
        deadline = time.monotonic() + timeout
        while w.parked < n:
            assert time.monotonic() < deadline, f"only {w.parked} of {n} readers parked"
            time.sleep(0.005)
    finally:
        w.close()


def stamp():
    return struct.pack("<q", time.monotonic_ns())


# -- the file ------------------------------------------------------------------------------

def test_the_wake_layout_compiled_in_c_equals_layout_py():
    assert C_CONSTANTS == {k: layout.CONSTANTS[k] for k in C_CONSTANTS}
    assert layout.WAKE_SLOT_COUNT * layout.WAKE_SLOT_SIZE + layout.WAKE_SLOTS_OFFSET \
        == layout.WAKE_FILE_SIZE


def test_the_wake_file_lives_beside_the_bus_and_the_bus_file_is_untouched(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w:
        w.write(b"a")
        before = open(bus_path, "rb").read()
        with MappedBusReader(bus_path, SIZE, 8) as r:
            assert r.read(0).data == b"a"
            assert r.read(0.05) is None             # spins, parks, times out
        w.write(b"b")
    wake = bus_path + layout.WAKE_SUFFIX
    st = os.stat(wake)
    assert st.st_size == layout.WAKE_FILE_SIZE and st.st_mode & 0o777 == 0o600
    head = open(wake, "rb").read(16)
    assert struct.unpack("<qi", head[:12]) == (layout.WAKE_MAGIC, layout.WAKE_VERSION)
    # Records go where the 0.5.1 format puts them: nothing of parking is in the bus.
    after = open(bus_path, "rb").read()
    assert after[:8] == struct.pack("<q", 8 + 2 * 16) and after[8 + 16:] != before[8 + 16:]


def test_a_corrupt_wake_file_is_a_clear_error(bus_path):
    with open(bus_path + layout.WAKE_SUFFIX, "wb") as f:
        f.write(b"not a wake file".ljust(layout.WAKE_FILE_SIZE, b"\0"))
    os.chmod(bus_path + layout.WAKE_SUFFIX, 0o600)
    from mappedbus_py.errors import CorruptBusError
    with pytest.raises(CorruptBusError, match="not a bus wake file"):
        WakeFile(bus_path + layout.WAKE_SUFFIX)


def test_a_wake_file_planted_as_a_symlink_is_refused_and_the_reader_still_polls(bus_path, tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    os.symlink(victim, bus_path + layout.WAKE_SUFFIX)
    with MappedBusWriter(bus_path, SIZE, 8, wake=False) as w:
        w.write(b"x")
    with pytest.warns(RuntimeWarning, match="no wake file"):
        r = MappedBusReader(bus_path, SIZE, 8).open()
    with r:
        assert r.read(1.0).data == b"x"
        with pytest.raises(OSError, match="no wake file"):
            r.fileno()
    assert victim.read_bytes() == b"precious"


# -- waking ----------------------------------------------------------------------------------

READER = """
    import struct, sys, time
    from mappedbus_py import MappedBusReader
    r = MappedBusReader(sys.argv[1], idle="park", park=2.0, park_max=2.0).open()
    print("ready", flush=True)
    worst = 0
    for _ in range(int(sys.argv[2])):
        rec = r.read(timeout=30)
        worst = max(worst, time.monotonic_ns() - struct.unpack("<q", rec.data[:8])[0])
    print(worst, flush=True)
"""


def test_a_parked_reader_in_another_process_is_woken_by_each_write(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w:
        p = child(READER, bus_path, 20)
        assert p.stdout.readline().strip() == "ready"
        for _ in range(20):
            wait_parked(bus_path + layout.WAKE_SUFFIX, 1)
            w.write(stamp())
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert int(out) < 1.0e9, f"a record waited {int(out) / 1e6:.0f} ms: not woken"


def test_writers_pay_nothing_but_a_load_while_nobody_is_parked(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w, \
            MappedBusReader(bus_path, SIZE, 8, idle="busy_spin") as r:
        w.write(b"a")
        assert r.read(0.01).data == b"a"
        wake = WakeFile(bus_path + layout.WAKE_SUFFIX)
        seq = open(bus_path + layout.WAKE_SUFFIX, "rb").read()[128:132]
        for _ in range(100):
            w.write(b"b")
        # nobody parked: the wake word never moved (no FUTEX_WAKE was made)
        assert open(bus_path + layout.WAKE_SUFFIX, "rb").read()[128:132] == seq
        assert wake.parked == 0
        wake.close()


@pytest.mark.slow
def test_the_lost_wake_up_window_hammered_a_million_times_never_waits_for_the_self_wake():
    import pyximport
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    pyximport.install(build_dir=os.path.join(root, "build", "test-pyx"), language_level=3,
                      setup_args={"include_dirs": [os.path.join(root, "mappedbus_py", "_core"), root]})
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import wake_hammer
    n = 1_000_000
    lost, parked, woken = wake_hammer.hammer(n, 60, 2.0, 12345)
    print(f"{n} commits racing a parker: {parked} parks, {woken} wakes, {lost} lost")
    assert lost == 0
    assert parked > n // 2          # the commits did land in the parking window


def test_a_python_reader_parking_between_commits_misses_no_wake(bus_path):
    # The reader's own wait (spin 0, park only) against a writer committing a few
    # microseconds after the reader took the last record: every record by a wake.
    n = 20000
    code = """
        import struct, sys, time
        from mappedbus_py import MappedBusReader
        r = MappedBusReader(sys.argv[1], idle="park", park=2.0, park_max=2.0).open()
        print("ready", flush=True)
        worst = 0
        for i in range(int(sys.argv[2])):
            rec = r.read(timeout=30)
            assert struct.unpack("<q", rec.data[8:16])[0] == i
            worst = max(worst, time.monotonic_ns() - struct.unpack("<q", rec.data[:8])[0])
        print(worst, flush=True)
    """
    with MappedBusWriter(bus_path, 64 << 20, 16) as w, MappedBusReader(bus_path, 64 << 20, 16,
                                                                       idle="busy_spin") as seen:
        p = child(code, bus_path, n)
        assert p.stdout.readline().strip() == "ready"
        rng = np.random.default_rng(1)
        delays = rng.integers(0, 30, n)
        for i in range(n):
            t = time.perf_counter_ns() + int(delays[i]) * 1000
            while time.perf_counter_ns() < t:
                pass
            w.write(stamp() + struct.pack("<q", i))
        out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert int(out) < 1.5e9, f"a record waited {int(out) / 1e6:.0f} ms for the self-wake"


def test_sixty_four_parked_readers_are_all_woken_by_one_record(bus_path):
    code = """
        import struct, sys, threading, time
        from mappedbus_py import MappedBusReader
        n = int(sys.argv[2])
        readers = [MappedBusReader(sys.argv[1], idle="park", park=5.0, park_max=5.0).open()
                   for _ in range(n)]
        got = [None] * n
        def run(i):
            rec = readers[i].read(timeout=30)
            got[i] = time.monotonic_ns() - struct.unpack("<q", rec.data[:8])[0]
        ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
        for t in ts: t.start()
        print("ready", flush=True)
        for t in ts: t.join()
        print(max(got), flush=True)
    """
    with MappedBusWriter(bus_path, SIZE, 8) as w:
        procs = [child(code, bus_path, 16) for _ in range(4)]
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        wait_parked(bus_path + layout.WAKE_SUFFIX, 64)
        w.write(stamp())
        worst = []
        for p in procs:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
            worst.append(int(out))
    assert max(worst) < 2.5e9, f"a reader waited {max(worst) / 1e6:.0f} ms: not woken"
    wake = WakeFile(bus_path + layout.WAKE_SUFFIX)
    assert wake.parked == 0
    wake.close()


def test_a_reader_killed_while_parked_is_reclaimed_and_never_blocks_a_writer(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w:
        p = child(READER, bus_path, 1)
        assert p.stdout.readline().strip() == "ready"
        wait_parked(bus_path + layout.WAKE_SUFFIX, 1)
        p.send_signal(signal.SIGKILL)
        p.wait()
        wake = WakeFile(bus_path + layout.WAKE_SUFFIX)
        assert wake.parked == 1                 # counted until someone notices it is dead
        t = time.monotonic()
        for _ in range(1000):
            w.write(b"x")                       # wakes a dead parker: a syscall, no wait
        assert time.monotonic() - t < 5
        assert wake.reclaim() == 1 and wake.parked == 0
        wake.close()
        # and a new reader that opens claims its slot and parks as usual
        with MappedBusReader(bus_path, SIZE, 8, start="end", **LONG_PARK) as r:
            threading.Timer(0.3, lambda: w.write(stamp())).start()
            t = time.monotonic()
            assert r.read(10) is not None and time.monotonic() - t < 1.5


def test_a_reader_parked_when_its_process_dies_is_reclaimed_by_other_parkers(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w:
        p = child(READER, bus_path, 1)
        assert p.stdout.readline().strip() == "ready"
        wait_parked(bus_path + layout.WAKE_SUFFIX, 1)
        p.send_signal(signal.SIGKILL)
        p.wait()
        # A live reader that stays parked looks for dead parkers about once a second.
        with MappedBusReader(bus_path, SIZE, 8, start="end", idle="park", park=0.2,
                             park_max=0.2) as r:
            assert r.read(2.5) is None
        wake = WakeFile(bus_path + layout.WAKE_SUFFIX)
        assert wake.parked == 0
        wake.close()


def test_a_writer_that_wakes_nobody_still_reaches_a_parked_reader_within_the_bound(bus_path):
    # wake=False stands for the Java original (and a writer killed between commit and wake).
    with MappedBusWriter(bus_path, SIZE, 8, wake=False) as w, \
            MappedBusReader(bus_path, SIZE, 8, idle="park", park=0.01, park_max=0.08) as r:
        late = []
        for _ in range(5):
            threading.Timer(0.2, lambda: w.write(stamp())).start()
            rec = r.read(5)
            late.append(time.monotonic_ns() - struct.unpack("<q", rec.data[:8])[0])
        assert max(late) < 0.08e9 + 0.2e9     # park_max, with slack for a busy machine


# -- what a waiting reader notices ---------------------------------------------------------------

def _raises_while_waiting(reader, exc):
    box = []

    def run():
        try:
            reader.read(timeout=10)
        except BaseException as e:      # the test checks which
            box.append(e)
    t = threading.Thread(target=run)
    t.start()
    return t, box


@pytest.mark.parametrize("how", ["truncate", "cp over it", "replace"])
def test_a_waiting_reader_raises_when_its_file_is_truncated_or_replaced(bus_path, tmp_path, how):
    with MappedBusWriter(bus_path, SIZE, 8) as w:
        w.write(b"a")
    small = bus_path + "-small"          # beside it: a rename stays on the file system
    with open(small, "wb") as f:
        f.write(b"\0" * 8192)
    with MappedBusReader(bus_path, SIZE, 8, start="end") as r:
        t, box = _raises_while_waiting(r, None)
        time.sleep(0.2)
        start = time.monotonic()
        if how == "truncate":
            os.truncate(bus_path, 8192)
        elif how == "cp over it":
            shutil.copyfile(small, bus_path)
        else:
            os.replace(small, bus_path)
        t.join(5)
        assert not t.is_alive(), "the reader went on waiting"
        assert time.monotonic() - start < 2
    want = BusReplacedError if how == "replace" else BusTruncatedError
    assert len(box) == 1 and isinstance(box[0], want), box


# -- what waits take -------------------------------------------------------------------------

def test_waits_take_infinity_and_huge_timeouts(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w, MappedBusReader(bus_path, SIZE, 8) as r:
        for timeout in (math.inf, 1e10, 2**70):
            threading.Timer(0.05, lambda: w.write(b"x")).start()
            assert r.read(timeout=timeout).data == b"x"
        threading.Timer(0.05, lambda: w.write(b"y")).start()
        assert r.wait(1e300)
        with pytest.raises(ValueError, match="non-negative number of seconds"):
            r.read(timeout=float("nan"))
        with pytest.raises(ValueError, match="outside any bus"):
            r.seek(2**70)
    with pytest.raises(ValueError, match="outside any bus"):
        MappedBusReader(bus_path, SIZE, 8, start=2**70)


def test_read_batch_refuses_a_meta_array_of_the_wrong_dtype(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w, MappedBusReader(bus_path, SIZE, 8) as r:
        w.write(b"x")
        with pytest.raises(ValueError, match="int32"):
            r.read_batch(np.zeros((4, 8), np.uint8), meta=np.zeros(4, np.float32), timeout=0)
        assert r.read_batch(np.zeros((4, 8), np.uint8), meta=np.zeros(4, np.int32), timeout=0) == 1


@pytest.mark.parametrize("kw, match", [
    (dict(idle="sleep"), "idle must be one of"),
    (dict(spin=-1), "spin must be"),
    (dict(park=0), "park must be"),
    (dict(park=0.01, park_max=0.001), "park_max"),
])
def test_bad_idle_options_are_refused(bus_path, kw, match):
    with pytest.raises(ValueError, match=match):
        MappedBusReader(bus_path, SIZE, 8, **kw)


# -- strategies and event loops -------------------------------------------------------------------

@pytest.mark.parametrize("idle", ["busy_spin", "spin_park", "park"])
def test_every_idle_strategy_delivers_records_from_another_process(bus_path, idle):
    code = """
        import sys, time
        from mappedbus_py import MappedBusWriter
        w = MappedBusWriter(sys.argv[1], 1 << 20, 8).open()
        for i in range(50):
            time.sleep(0.002)
            w.write(i.to_bytes(8, "little"))
    """
    with MappedBusWriter(bus_path, SIZE, 8), MappedBusReader(bus_path, SIZE, 8, idle=idle) as r:
        p = child(code, bus_path)
        got = [int.from_bytes(r.read(10).data, "little") for _ in range(50)]
        assert p.wait(30) == 0
    assert got == list(range(50))


def test_fileno_turns_readable_for_a_selector_when_a_record_comes(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w, MappedBusReader(bus_path, SIZE, 8,
                                                                 park=2.0, park_max=2.0) as r:
        sel = selectors.DefaultSelector()
        sel.register(r.fileno(), selectors.EVENT_READ)
        assert r.arm()
        assert sel.select(0.1) == []               # nothing yet: not readable
        threading.Timer(0.1, lambda: w.write(b"sel")).start()
        t = time.monotonic()
        assert sel.select(5) != []
        assert time.monotonic() - t < 1.5          # woken, not the 2 s self-look
        assert r.read(0).data == b"sel"
        w.write(b"now")
        assert not r.arm()                         # a record is there: not armed
        assert r.read(0).data == b"now"
        sel.close()


def test_a_rolling_reader_parked_at_a_segment_end_is_woken_by_the_next_segment(tmp_path):
    d = str(tmp_path / "roll")
    seg, rs = 4096, 8
    per = (seg - 8) // 16
    with RollingBusWriter(d, seg, rs) as w:
        for i in range(per):
            w.write(i.to_bytes(8, "little"))
        with RollingBusReader(d, **LONG_PARK) as r:
            assert len([r.read(0) for _ in range(per)]) == per
            threading.Timer(0.3, lambda: w.write(b"next-seg")).start()
            t = time.monotonic()
            rec = r.read(10)
            assert rec.data == b"next-seg" and r.segment == 1
            assert time.monotonic() - t < 1.5
    assert os.path.exists(os.path.join(d, layout.WAKE_FILE))


def test_readers_of_several_buses_in_one_process_are_each_woken_by_their_own_writer(tmp_path):
    paths = [str(tmp_path / f"bus{i}") for i in range(3)]
    writers = [MappedBusWriter(p, SIZE, 8).open() for p in paths]
    readers = [MappedBusReader(p, SIZE, 8, start="end", **LONG_PARK).open() for p in paths]
    try:
        got = {}

        def run(i):
            rec = readers[i].read(10)
            got[i] = (rec.data, time.monotonic_ns() - struct.unpack("<q", rec.data)[0])
        ts = [threading.Thread(target=run, args=(i,)) for i in range(3)]
        for t in ts:
            t.start()
        for p in paths:
            wait_parked(p + layout.WAKE_SUFFIX, 1)
        for i in (2, 0, 1):
            writers[i].write(stamp())
            time.sleep(0.05)
        for t in ts:
            t.join(10)
        assert sorted(got) == [0, 1, 2]
        assert max(lat for _, lat in got.values()) < 1.5e9     # woken, not the 2 s self-look
    finally:
        for x in readers + writers:
            x.close()
