"""Opening a single-file bus without trusting the path (docs/files-and-rolling.md): links,
file types, owner and mode, who may create, cleanup of failed opens, the bounded open
lock, truncation (SIGBUS) and replacement under a live mapping, stall timeouts."""
import errno
import os
import resource
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from mappedbus_py import MappedBusReader, MappedBusWriter
from mappedbus_py.errors import (BusLockTimeoutError, BusReplacedError, BusTruncatedError,
                                 RecordsRolledBackError, UnsafeBusFileError)

SIZE = 100_000
BOTH = (MappedBusWriter, MappedBusReader)


def child(code, *args, **kw):
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


# -- 1. what the path names ---------------------------------------------------------

@pytest.mark.parametrize("cls", BOTH)
def test_a_planted_symlink_is_refused_and_its_target_untouched(tmp_path, cls):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    link = tmp_path / "bus"
    link.symlink_to(victim)
    with pytest.raises(UnsafeBusFileError, match="symbolic link"):
        cls(str(link), SIZE, 8).open()
    assert victim.read_bytes() == b"precious"
    assert not (tmp_path / "bus.meta").exists()


def test_a_dangling_symlink_is_never_created_through(tmp_path):
    link = tmp_path / "bus"
    link.symlink_to(tmp_path / "target")
    for cls in BOTH:
        with pytest.raises(UnsafeBusFileError, match="symbolic link"):
            cls(str(link), SIZE, 8).open()
    assert not (tmp_path / "target").exists()


@pytest.mark.parametrize("cls", BOTH)
def test_a_fifo_is_refused_without_blocking(tmp_path, cls):
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo, 0o600)
    # Opening a FIFO for reading blocks until a writer comes: a hang would fail the timeout.
    p = child("""
        import sys
        from mappedbus_py import MappedBusReader, MappedBusWriter
        cls = {"MappedBusWriter": MappedBusWriter, "MappedBusReader": MappedBusReader}[sys.argv[1]]
        try:
            cls(sys.argv[2], 100000, 8).open()
        except Exception as e:
            print(type(e).__name__, e)
        """, cls.__name__, fifo)
    out, err = p.communicate(timeout=60)
    assert out.startswith("UnsafeBusFileError") and "is a FIFO" in out and fifo in out, err


@pytest.mark.parametrize("cls", BOTH)
@pytest.mark.parametrize("path, what", [("/dev/null", "character device"),
                                        ("/dev/shm", "is a directory")])
def test_devices_and_directories_are_refused(cls, path, what):
    with pytest.raises(UnsafeBusFileError, match=what):
        cls(path, SIZE, 8).open()


@pytest.mark.parametrize("cls", BOTH)
def test_a_proc_file_gives_an_error_naming_it(cls):
    with pytest.raises((OSError, ValueError)) as info:
        cls("/proc/version", SIZE, 8).open()
    assert "/proc/version" in str(info.value)
    assert "Illegal seek" not in str(info.value)


@pytest.mark.parametrize("cls", BOTH)
def test_group_writable_bus_is_refused_unless_allowed(bus_path, cls):
    with MappedBusWriter(bus_path, SIZE, 8) as w:
        w.write(b"x")
    os.chmod(bus_path, 0o666)
    with pytest.raises(UnsafeBusFileError, match="mode 0666"):
        cls(bus_path, SIZE, 8).open()
    with cls(bus_path, SIZE, 8, allow_foreign=True):
        pass


# -- 2. who creates, and cleanup ---------------------------------------------------

@pytest.mark.parametrize("read_only", [False, True])
def test_reader_of_a_missing_file_raises_file_not_found_and_creates_nothing(bus_path, read_only):
    with pytest.raises(FileNotFoundError, match="never creates") as info:
        MappedBusReader(bus_path, SIZE, 8, read_only=read_only).open()
    assert info.value.filename == bus_path
    assert not os.path.exists(bus_path) and not os.path.exists(bus_path + ".meta")


@pytest.mark.parametrize("read_only", [False, True])
def test_reader_refuses_a_short_file_and_never_grows_it(bus_path, read_only):
    with open(bus_path, "wb") as f:
        f.write(b"not a bus")
    os.chmod(bus_path, 0o600)
    with pytest.raises(ValueError, match="shorter than"):
        MappedBusReader(bus_path, SIZE, 8, read_only=read_only).open()
    with open(bus_path, "rb") as f:
        assert f.read() == b"not a bus"


@pytest.mark.parametrize("mode", [-1, 0o1777, 0o4600, 2**40, "0600", 1.5])
def test_writer_mode_outside_permission_bits_is_refused(bus_path, mode):
    with pytest.raises(ValueError, match="mode"):
        MappedBusWriter(bus_path, SIZE, 8, mode=mode)


def test_writer_creates_with_exactly_the_mode_whatever_the_umask(bus_path):
    old = os.umask(0o077)
    try:
        with MappedBusWriter(bus_path, SIZE, 8, mode=0o640):
            pass
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(bus_path).st_mode) == 0o640


@pytest.fixture
def small_tmpfs(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_writer_that_runs_out_of_space_leaves_nothing_behind(small_tmpfs):
    path = str(small_tmpfs / "bus")
    with pytest.raises(OSError) as info:
        MappedBusWriter(path, 4 * 2**20, 8).open()
    assert info.value.errno == errno.ENOSPC and info.value.filename == path
    assert os.listdir(small_tmpfs) == []


def test_a_writer_whose_metadata_does_not_fit_leaves_nothing_behind(small_tmpfs):
    # The bus takes the whole device: the metadata file (one more page) cannot be written.
    path = str(small_tmpfs / "bus")
    with pytest.raises(OSError) as info:
        MappedBusWriter(path, 2**20, 8).open()
    assert info.value.errno == errno.ENOSPC
    assert os.listdir(small_tmpfs) == []


def test_a_writer_whose_mapping_fails_leaves_nothing_behind(tmp_path):
    path = str(tmp_path / "bus")
    p = child("""
        import resource, sys
        from mappedbus_py import MappedBusWriter
        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))
        try:
            MappedBusWriter(sys.argv[1], 8 * 2**30, 8, preallocate=False).open()
        except OSError as e:
            print("OSError", e.errno)
        """, path)
    out, err = p.communicate(timeout=120)
    assert out.split() == ["OSError", str(errno.ENOMEM)], err
    assert os.listdir(tmp_path) == []


# -- 3. the bounded open lock ---------------------------------------------------------

@pytest.mark.parametrize("cls", BOTH)
def test_a_stopped_lock_holder_gives_a_lock_timeout_naming_its_pid(bus_path, cls):
    with MappedBusWriter(bus_path, SIZE, 8):
        pass
    holder = child("""
        import fcntl, os, sys, time
        fd = os.open(sys.argv[1], os.O_RDWR)
        fcntl.lockf(fd, fcntl.LOCK_EX)
        print("locked", flush=True)
        time.sleep(120)
        """, bus_path)
    try:
        assert holder.stdout.readline().strip() == "locked"
        os.kill(holder.pid, signal.SIGSTOP)
        t = time.monotonic()
        with pytest.raises(BusLockTimeoutError, match=f"process {holder.pid}") as info:
            cls(bus_path, SIZE, 8, lock_timeout=0.3).open()
        assert info.value.holder_pid == holder.pid
        assert time.monotonic() - t < 30
    finally:
        holder.kill()
        holder.wait()
    with cls(bus_path, SIZE, 8, lock_timeout=5):
        pass


def test_lock_timeout_must_be_a_non_negative_number(bus_path):
    for cls in BOTH:
        for bad in (-1, "10", None):
            with pytest.raises(ValueError, match="lock_timeout"):
                cls(bus_path, SIZE, 8, lock_timeout=bad)


# -- 6, 7. truncation and replacement while mapped ------------------------------------------

@pytest.mark.parametrize("shrink", ["truncate0", "truncate_half", "open_w"])
def test_truncation_under_a_live_bus_raises_bus_truncated_not_sigbus(bus_path, shrink):
    # In a child: without the guard, SIGBUS would kill it (a negative return code).
    p = child("""
        import os, sys
        from mappedbus_py import MappedBusReader, MappedBusWriter
        from mappedbus_py.errors import BusTruncatedError
        path, shrink = sys.argv[1], sys.argv[2]
        w = MappedBusWriter(path, 1 << 20, 8).open()
        r = MappedBusReader(path, 1 << 20, 8, timeout=0.05).open()
        for i in range(100):
            w.write(b"%d" % i)
        assert len([r.read(0) for _ in range(100)]) == 100
        if shrink == "truncate0":
            os.truncate(path, 0)
        elif shrink == "truncate_half":
            os.truncate(path, 1 << 19)
        else:
            open(path, "w").close()
        for who, call in (("writer", lambda: [w.write(b"y" * 8) for _ in range(1 << 17)]),
                          ("reader", lambda: [r.read(timeout=0.01) for _ in range(1 << 17)])):
            try:
                call()
                print(who, "no error")
            except BusTruncatedError as e:
                print(who, "BusTruncatedError", path in str(e))
        """, bus_path, shrink)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert out.splitlines() == ["writer BusTruncatedError True", "reader BusTruncatedError True"]


def test_a_reader_of_a_truncated_bus_delivers_nothing_after_it(bus_path):
    p = child("""
        import os, sys
        from mappedbus_py import MappedBusReader, MappedBusWriter
        from mappedbus_py.errors import BusTruncatedError
        path = sys.argv[1]
        with MappedBusWriter(path, 100000, 8) as w:
            w.write(b"one")
        r = MappedBusReader(path, 100000, 8).open()
        os.truncate(path, 0)
        try:
            print(r.read(0))
        except BusTruncatedError:
            print("BusTruncatedError")
        """, bus_path)
    out, err = p.communicate(timeout=60)
    assert out.strip() == "BusTruncatedError", (out, err)


def test_sigbus_outside_a_bus_mapping_still_reaches_the_previous_handler(tmp_path):
    # A SIGBUS that is not ours must behave as without the guard: faulthandler reports it.
    path = tmp_path / "other"
    path.write_bytes(bytes(8192))
    p = child("""
        import faulthandler, mmap, os, sys
        faulthandler.enable()
        from mappedbus_py import MappedBusWriter
        MappedBusWriter(sys.argv[2], 100000, 8).open()
        f = open(sys.argv[1], "r+b")
        m = mmap.mmap(f.fileno(), 8192)
        os.truncate(sys.argv[1], 0)
        m[5000]
        print("survived")
        """, path, tmp_path / "bus")
    out, err = p.communicate(timeout=60)
    assert p.returncode == -signal.SIGBUS and "Bus error" in err and "survived" not in out


def test_removed_bus_raises_bus_replaced_for_a_waiting_reader(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w:
        w.write(b"x")
        with MappedBusReader(bus_path, SIZE, 8) as r:
            assert r.read(0).data == b"x"
            os.unlink(bus_path)
            with pytest.raises(BusReplacedError, match="removed"):
                r.read(timeout=5)


def test_records_committed_before_the_bus_was_removed_are_still_delivered(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w, MappedBusReader(bus_path, SIZE, 8) as r:
        assert r.read(timeout=0.05) is None          # caught up, its wait has slept
        w.write(b"last")
        os.unlink(bus_path)
        for _ in range(1 << 17):                     # past a path check: still delivered
            if r.next():
                break
        assert r.read_bytes() == b"last"
        with pytest.raises(BusReplacedError):
            r.read(timeout=5)


def test_replaced_bus_raises_bus_replaced_for_a_polling_reader(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8):
        pass
    with MappedBusReader(bus_path, SIZE, 8) as r:
        os.replace(bus_path + ".meta", bus_path + ".old")   # keep it out of the way
        with MappedBusWriter(bus_path + ".new", SIZE, 8):
            pass
        os.replace(bus_path + ".new", bus_path)
        # next() never sleeps: it finds out within 2^16 empty polls.
        with pytest.raises(BusReplacedError, match="another file"):
            for _ in range(1 << 18):
                r.next()
    for suffix in (".old", ".new.meta"):
        os.unlink(bus_path + suffix)


# -- 8. one timeout per run, and the clock stops on a commit ---------------------------------------

def test_a_crashed_batch_of_many_slots_costs_one_timeout(bus_path):
    with MappedBusWriter(bus_path, SIZE, 8) as w:
        w._allocate_only(b"dead", count=50)
        w.write(b"alive")
    with MappedBusReader(bus_path, SIZE, 8, timeout=0.3) as r:
        t = time.monotonic()
        got = r.read(timeout=60)
        elapsed = time.monotonic() - t
    assert got.data == b"alive" and r.rollbacks == 50
    assert elapsed < 50 * 0.3 / 3     # one timeout each would take 15 s


def test_write_batch_reports_rows_a_reader_rolled_back(bus_path):
    # A reader with timeout 0 (in another process: write_batch holds the GIL) rolls back
    # every slot it finds uncommitted, so some rows of a batch are lost to it.
    fsize, rsize, rows = 64 << 20, 1024, 2000
    with MappedBusWriter(bus_path, fsize, rsize) as w:
        reader = child("""
            import sys
            from mappedbus_py import MappedBusReader
            r = MappedBusReader(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), ).open()
            r._set_timeout_ns(0)    # below the constructor's floor: tests only
            print("ready", flush=True)
            try:
                while True:
                    r.next()
            except EOFError:
                pass
            """, bus_path, fsize, rsize)
        try:
            assert reader.stdout.readline().strip() == "ready"
            caught = None
            data = np.ones((rows, rsize), dtype=np.uint8)
            for _ in range(20):
                try:
                    assert w.write_batch(data) == rows
                except RecordsRolledBackError as e:
                    caught = e
                    break
        finally:
            reader.kill()
            reader.wait()
    assert caught is not None, "the reader never rolled a row back"
    assert caught.committed + len(caught.rolled_back) == rows
    assert caught.rolled_back == sorted(set(caught.rolled_back))
    assert all(0 <= i < rows for i in caught.rolled_back)


def _slowed_batch(bus_path, rows, rsize, timeout_ms):
    """One write_batch of ``rows`` rows, its writer stopped and continued over and over, read
    by a reader with ``timeout_ms``: (seconds the batch took, the writer's and the reader's
    output)."""
    for f in (bus_path, bus_path + ".meta"):
        if os.path.exists(f):
            os.unlink(f)
    fsize = 8 + rows * (8 + rsize) + 4096
    with MappedBusWriter(bus_path, fsize, rsize):
        pass
    reader = child("""
        import sys
        from mappedbus_py import MappedBusReader
        r = MappedBusReader(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), timeout=int(sys.argv[4]) / 1000).open()
        print("ready", flush=True)
        n = 0
        while n < int(sys.argv[5]):
            if r.wait(60):
                n += 1
            else:
                break
        print(n, r.rollbacks)
        """, bus_path, fsize, rsize, timeout_ms, rows)
    assert reader.stdout.readline().strip() == "ready"
    writer = child("""
        import sys, time
        import numpy as np
        from mappedbus_py import MappedBusWriter
        from mappedbus_py.errors import RecordsRolledBackError
        w = MappedBusWriter(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])).open()
        data = np.ones((int(sys.argv[4]), int(sys.argv[3])), dtype=np.uint8)
        print("go", flush=True)
        t = time.monotonic()
        try:
            print("committed", w.write_batch(data))
        except RecordsRolledBackError as e:
            print("rolled back", len(e.rolled_back))
        print("seconds", time.monotonic() - t)
        """, bus_path, fsize, rsize, rows)
    assert writer.stdout.readline().strip() == "go"
    # 30 ms stopped, 1 ms running: the batch is slowed about thirty-fold; a stop is a tenth
    # of a timeout, so a loaded machine that skips a few running windows stalls no row for one.
    while writer.poll() is None:
        os.kill(writer.pid, signal.SIGSTOP)
        time.sleep(0.03)
        os.kill(writer.pid, signal.SIGCONT)
        time.sleep(0.001)
    wout, werr = writer.communicate(timeout=120)
    rout, rerr = reader.communicate(timeout=120)
    lines = wout.splitlines()
    assert len(lines) == 2, (wout, werr)
    return float(lines[1].split()[1]), lines[0], (rout, rerr)


@pytest.mark.slow
def test_a_slow_healthy_batch_loses_nothing(bus_path):
    # The batch must last several reader timeouts while each row takes far less than one.
    # How long it lasts depends on the machine's speed, so a batch that was too quick is
    # written again, larger, until one was slow enough: each attempt must lose nothing.
    rsize, timeout_ms = 4096, 300
    for rows in (50_000, 120_000, 250_000):
        seconds, wrote, (rout, rerr) = _slowed_batch(bus_path, rows, rsize, timeout_ms)
        assert wrote == f"committed {rows}", (wrote, rout, rerr)
        assert rout.split() == [str(rows), "0"], (rout, rerr)
        if seconds > 3 * timeout_ms / 1000:
            break
    else:
        pytest.fail(f"even {rows} rows took only {seconds:.2f} s: the batch was never slow")
