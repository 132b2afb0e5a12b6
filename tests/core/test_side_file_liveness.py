"""Issue 33's registry and liveness rows: parkers (the wake file) and consumer holders (the
registry) known by the kernel's OFD locks, not pids: a SIGKILLed holder and a zombie are dead,
a holder in another pid namespace is alive and never taken over; a 0-byte registry or wake file
left by a first opener killed before sizing it wedges nobody; a garbage, symlinked or foreign
registry is a clear error at once where the user acts, retention never silently stops, and
``RollingBusWriter.close()`` always closes."""
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import mappedbus_py as mb
from mappedbus_py import (BusLockTimeoutError, ConsumerInUseError, CorruptBusError,
                          MappedBusReader, MappedBusWriter, RollingBusReader, RollingBusWriter,
                          UnsafeBusFileError)
from mappedbus_py.formats import layout
from mappedbus_py._core._consumers import ConsumerRegistry
from mappedbus_py._core._liveness import Hold, LiveFile
from mappedbus_py._core._wake import WakeFile
from mappedbus_py.tools.metrics import parked_readers
from mappedbus_py.rolling import list_segments

REC = 8
SLOT = layout.HEADER_SIZE + REC
SEG = 4096
PER = (SEG - 8) // SLOT
ROOT = os.geteuid() == 0
HAVE_UNSHARE = ROOT and shutil.which("unshare") is not None
HAVE_SETPRIV = ROOT and shutil.which("setpriv") is not None
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

# A reader parked on the bus at argv[1] (``consumer`` argv[2] unless "-"), for a minute.
PARKER = """
import sys
from mappedbus_py import MappedBusReader
consumer = None if sys.argv[2] == "-" else sys.argv[2]
r = MappedBusReader(sys.argv[1], idle="park", park=5.0, park_max=5.0, consumer=consumer).open()
print("ready", flush=True)
r.read(timeout=60)
"""


def spawn(code, *args, namespace=False):
    cmd = [sys.executable, "-c", textwrap.dedent(code), *map(str, args)]
    if namespace:
        cmd = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", *cmd]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    line = p.stdout.readline().strip()
    assert line == "ready", p.stderr.read() if p.poll() is not None else line
    return p


def kill_leaving_a_zombie(p):
    """SIGKILL ``p`` and do not reap it: once its state is Z it is a zombie, which kill(pid, 0)
    still finds. Returns a function that reaps it."""
    p.send_signal(signal.SIGKILL)
    deadline = time.monotonic() + 10
    while True:
        # Z, and no other thread left exiting (the leader turns Z before them; the last one
        # out closes the descriptors)
        with open(f"/proc/{p.pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z" \
                    and os.listdir(f"/proc/{p.pid}/task") == [str(p.pid)]:
                break
        assert time.monotonic() < deadline, "never became a zombie"
        time.sleep(0.005)
    os.kill(p.pid, 0)               # the pid is still there, as a zombie
    return p.wait


def wait_parked(bus, n, rolling=False, timeout=20.0):
    deadline = time.monotonic() + timeout
    while parked_readers(bus, rolling) != n:
        assert time.monotonic() < deadline, f"{parked_readers(bus, rolling)} parked, not {n}"
        time.sleep(0.005)


@pytest.fixture
def bus(bus_path):
    with MappedBusWriter(bus_path, 1 << 20, REC) as w:
        w.write((1).to_bytes(8, "little"))
    with MappedBusReader(bus_path) as r:      # past the record: parkers wait for the next
        r.read(0)
    yield bus_path


@pytest.fixture
def rolling_dir(tmp_path_factory):
    base = "/dev/shm" if os.path.isdir("/dev/shm") else str(tmp_path_factory.getbasetemp())
    path = os.path.join(base, f"mblive-{os.getpid()}-{random.randrange(1 << 40):x}.d")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def start_end_parker(bus, consumer="-", namespace=False):
    code = PARKER.replace("consumer=consumer).open()", "consumer=consumer, start='end').open()")
    return spawn(code, bus, consumer, namespace=namespace)


# -- parkers (the wake file) --------------------------------------------------------------

def test_a_parker_killed_and_not_reaped_is_not_counted_and_its_slot_is_reclaimed(bus):
    p = start_end_parker(bus)
    wait_parked(bus, 1)
    reap = kill_leaving_a_zombie(p)
    try:
        assert parked_readers(bus, False) == 0          # top / the exporter: not parked
        wake = WakeFile(bus + layout.WAKE_SUFFIX)
        assert wake.parked == 1                         # its park was left behind ...
        assert wake.reclaim() == 1 and wake.parked == 0  # ... and is undone while a zombie
        wake.close()
    finally:
        reap()


def test_a_live_parker_is_never_reclaimed_and_keeps_its_slot(bus):
    p = start_end_parker(bus)
    try:
        wait_parked(bus, 1)
        wake = WakeFile(bus + layout.WAKE_SUFFIX)
        assert wake.reclaim() == 0 and wake.parked == 1
        wake.close()
    finally:
        p.kill()
        p.wait()


@pytest.mark.skipif(not HAVE_UNSHARE, reason="needs root and unshare")
def test_a_parker_in_another_pid_namespace_is_alive_until_it_dies(bus):
    p = start_end_parker(bus, namespace=True)
    try:
        wait_parked(bus, 1)
        wake = WakeFile(bus + layout.WAKE_SUFFIX)
        assert wake.reclaim() == 0 and wake.parked == 1     # alive: its pid here means nothing
        p.send_signal(signal.SIGKILL)                       # pid 1 of the namespace dies too
        p.wait()
        deadline = time.monotonic() + 10
        while wake.reclaim() == 0:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert wake.parked == 0 and parked_readers(bus, False) == 0
        wake.close()
    finally:
        if p.poll() is None:
            p.kill()


def test_a_zero_byte_wake_file_is_sized_by_the_next_opener(bus):
    zero_byte(bus + layout.WAKE_SUFFIX)               # a first opener killed before sizing it
    t = time.monotonic()
    p = start_end_parker(bus)
    try:
        wait_parked(bus, 1)
        assert os.path.getsize(bus + layout.WAKE_SUFFIX) == layout.WAKE_FILE_SIZE
        with MappedBusWriter(bus, 1 << 20, REC) as w:
            w.write((2).to_bytes(8, "little"))
        out, _ = p.communicate(timeout=30)
        assert p.returncode == 0
        assert time.monotonic() - t < 9, "someone waited for the empty file (the 10 s bound)"
    finally:
        if p.poll() is None:
            p.kill()


def test_a_wake_file_of_the_pid_era_is_refused_naming_its_version(bus):
    path = bus + layout.WAKE_SUFFIX
    WakeFile(path).close()
    with open(path, "r+b") as f:
        f.seek(layout.WAKE_VERSION_OFFSET)
        f.write((1).to_bytes(4, "little"))
    with pytest.raises(CorruptBusError, match="its version is 1, this reads 2"):
        WakeFile(path)


# -- consumer holders (the registry) -------------------------------------------------------

def test_a_consumer_holder_killed_and_not_reaped_is_dead_and_its_name_is_taken_at_once(bus):
    p = start_end_parker(bus, "z")
    (c,) = mb.consumers(bus)
    assert c.alive and c.pid == p.pid
    reap = kill_leaving_a_zombie(p)
    try:
        (c,) = mb.consumers(bus)
        assert not c.alive and c.pid == 0
        with MappedBusReader(bus, consumer="z") as r:       # taken over, no timeout
            (c,) = mb.consumers(bus)
            assert c.alive and c.pid == os.getpid()
            r.commit()
        mb.remove_consumer(bus, "z")
        assert mb.consumers(bus) == []
    finally:
        reap()


@pytest.mark.skipif(not HAVE_UNSHARE, reason="needs root and unshare")
def test_a_consumer_holder_in_another_pid_namespace_is_never_taken_over_while_alive(bus):
    p = start_end_parker(bus, "ns", namespace=True)
    try:
        (c,) = mb.consumers(bus)
        assert c.alive                      # its pid (in its namespace) is no process here
        with pytest.raises(ConsumerInUseError):
            MappedBusReader(bus, consumer="ns").open()
        with pytest.raises(ConsumerInUseError):
            mb.remove_consumer(bus, "ns")
        p.send_signal(signal.SIGKILL)
        p.wait()
        deadline = time.monotonic() + 10
        while mb.consumers(bus)[0].alive:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with MappedBusReader(bus, consumer="ns"):
            assert mb.consumers(bus)[0].alive
    finally:
        if p.poll() is None:
            p.kill()


def test_two_readers_of_one_process_each_hold_their_own_name(bus):
    with MappedBusReader(bus, consumer="a"), MappedBusReader(bus, consumer="b"):
        with pytest.raises(ConsumerInUseError, match="this process"):
            MappedBusReader(bus, consumer="a").open()
        assert sorted((c.name, c.alive) for c in mb.consumers(bus)) == [("a", True), ("b", True)]
    assert [c.alive for c in mb.consumers(bus)] == [False, False]


HOLD_THE_LOCK = """
import os, sys, time
from mappedbus_py._core._liveness import LiveFile, Hold
from mappedbus_py.formats.layout import CONSUMERS_LOCK_OFFSET
f = LiveFile(os.open(sys.argv[1], os.O_RDWR | os.O_CLOEXEC))
assert f.hold(CONSUMERS_LOCK_OFFSET) == Hold.TAKEN
print("ready", flush=True)
time.sleep(60)
"""


def test_the_registry_lock_of_a_live_holder_times_out_clearly_and_of_a_dead_one_is_free(bus):
    with MappedBusReader(bus, consumer="c"):
        pass
    p = spawn(HOLD_THE_LOCK, bus + layout.CONSUMERS_SUFFIX)
    try:
        reg = ConsumerRegistry(bus + layout.CONSUMERS_SUFFIX, lock_timeout=0.3)
        with pytest.raises(BusLockTimeoutError, match="lock for more than 0.3 s"):
            reg.acquire("d", None, 8)                   # alive: never taken over
        reap = kill_leaving_a_zombie(p)                 # dead inside a structural change
        index, position, made, _ = reg.acquire("d", None, 8)
        assert made and position == 8
        reg.release(index)
        reg.close()
        reap()
    finally:
        if p.poll() is None:
            p.kill()


# -- a 0-byte registry ---------------------------------------------------------------------

def zero_byte(path):
    if os.path.exists(path):
        os.unlink(path)
    open(path, "wb").close()


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "mappedbus_py", *args], capture_output=True,
                          text=True, timeout=8, env=ENV)   # the empty-file wait was 10 s


def test_a_zero_byte_registry_reads_as_empty_and_is_sized_by_whoever_writes(bus):
    reg = bus + layout.CONSUMERS_SUFFIX
    zero_byte(reg)
    assert mb.consumers(bus) == []
    out = run_cli("consumers", bus)
    assert out.returncode == 0, out.stderr
    with pytest.raises(KeyError, match="no consumer 'x'"):
        mb.remove_consumer(bus, "x")
    assert os.path.getsize(reg) == layout.CONSUMERS_FILE_SIZE      # sized, made a registry
    zero_byte(reg)
    with MappedBusReader(bus, consumer="x") as r:
        assert r.read(0) is not None
        r.commit()
    (c,) = mb.consumers(bus)
    assert c.name == "x" and c.position == 8 + SLOT


def test_a_short_registry_with_bytes_in_it_is_corrupt_at_once(bus):
    reg = bus + layout.CONSUMERS_SUFFIX
    with open(reg, "wb") as f:
        f.write(b"MBUSCON1" + bytes(92))
    with pytest.raises(CorruptBusError, match="shorter than"):
        mb.consumers(bus)


def test_a_rolling_writer_with_a_zero_byte_registry_keeps_the_positions_committed_after(rolling_dir):
    w = RollingBusWriter(rolling_dir, SEG, REC, retain_segments=1, max_consumer_lag=8).open()
    zero_byte(os.path.join(rolling_dir, layout.CONSUMERS_FILE))
    t = time.monotonic()
    for _ in range(3):                      # rolls: none waits for the empty file
        for i in range(PER):
            w.write(i.to_bytes(8, "little"))
        w._look_ahead()
    assert time.monotonic() - t < 9, "a roll waited for the empty registry (the 10 s bound)"
    with RollingBusReader(rolling_dir, consumer="c") as r:
        r.seek(2 * SEG + 8)
        r.commit()
    for _ in range(3):
        for i in range(PER):
            w.write(i.to_bytes(8, "little"))
        w._look_ahead()
    assert 2 in list_segments(rolling_dir)          # held by the consumer's position
    (c,) = mb.consumers(rolling_dir)
    assert c.position == 2 * SEG + 8 and not c.expired
    w.close()


# -- garbage, symlinked and foreign registries on a rolling bus ----------------------------

def plant(rolling_dir, how, tmp_path):
    reg = os.path.join(rolling_dir, layout.CONSUMERS_FILE)
    if os.path.lexists(reg):
        os.unlink(reg)
    if how == "garbage":
        with open(reg, "wb") as f:
            f.write(os.urandom(layout.CONSUMERS_FILE_SIZE))
    elif how == "symlink":
        target = tmp_path / "elsewhere"
        target.write_bytes(bytes(layout.CONSUMERS_FILE_SIZE))
        os.symlink(target, reg)
    else:
        mode = os.stat(rolling_dir).st_mode & 0o7777
        os.chmod(rolling_dir, 0o777)
        try:
            subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                            sys.executable, "-c",
                            f"open({reg!r}, 'wb').write(bytes({layout.CONSUMERS_FILE_SIZE}))"],
                           check=True, cwd="/")
        finally:
            os.chmod(rolling_dir, mode)
        assert os.stat(reg).st_uid != os.geteuid()
    return reg


KINDS = ["garbage", "symlink",
         pytest.param("foreign", marks=pytest.mark.skipif(not HAVE_SETPRIV,
                                                          reason="needs root and setpriv"))]
ERRORS = {"garbage": CorruptBusError, "symlink": UnsafeBusFileError, "foreign": UnsafeBusFileError}


@pytest.mark.parametrize("policy", ["expire", "block"])
@pytest.mark.parametrize("how", KINDS)
def test_a_bad_registry_is_an_error_at_the_writers_open_and_at_a_consumers_open(
        rolling_dir, tmp_path, how, policy):
    with RollingBusWriter(rolling_dir, SEG, REC, retain_segments=1, max_consumer_lag=2,
                          on_consumer_lag=policy):
        pass
    plant(rolling_dir, how, tmp_path)
    w = RollingBusWriter(rolling_dir, SEG, REC, retain_segments=1, max_consumer_lag=2,
                         on_consumer_lag=policy)
    with pytest.raises(ERRORS[how], match="consumers"):
        w.open()
    assert w.closed
    with pytest.raises(ERRORS[how]):
        RollingBusReader(rolling_dir, consumer="c").open()


@pytest.mark.parametrize("policy", ["expire", "block"])
@pytest.mark.parametrize("how", KINDS)
def test_a_registry_gone_bad_after_the_open_fails_every_roll_and_retention_waits(
        rolling_dir, tmp_path, how, policy):
    w = RollingBusWriter(rolling_dir, SEG, REC, retain_segments=1, max_consumer_lag=2,
                         on_consumer_lag=policy).open()
    for i in range(PER):
        w.write(i.to_bytes(8, "little"))
    plant(rolling_dir, how, tmp_path)
    kept = list_segments(rolling_dir)
    for attempt in range(3):                        # at once, at every roll, never stuck
        with pytest.raises(ERRORS[how], match="consumers"):
            w.write(b"rolls")
        assert w.segment == 0 and not w.closed
        assert list_segments(rolling_dir)[0] == kept[0]     # nothing removed unheld
    os.unlink(os.path.join(rolling_dir, layout.CONSUMERS_FILE))
    assert w.write(b"rolls")                        # readable again (absent): it rolls
    assert w.segment == 1
    w.close()


def test_close_always_closes_then_raises_when_the_last_retention_could_not_run(rolling_dir):
    w = RollingBusWriter(rolling_dir, SEG, REC, retain_segments=1, max_consumer_lag=2).open()
    with RollingBusReader(rolling_dir, consumer="c"):
        pass
    for i in range(PER + 1):                        # rolled once: that roll's retention pends
        w.write(i.to_bytes(8, "little"))
    with open(os.path.join(rolling_dir, layout.CONSUMERS_FILE), "r+b") as f:
        f.seek(layout.CONSUMERS_ENTRIES_OFFSET + layout.CONSUMER_NAME_OFFSET)
        f.write(b"\x01bad")                         # an entry's name: corrupt now
    wake = w._wake
    with pytest.raises(CorruptBusError, match="no valid consumer name"):
        w.close()
    assert w.closed and wake.closed and w._registry is None
    w.close()                                       # closed: nothing more to raise
