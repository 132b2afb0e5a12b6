"""Full disks, files that cannot grow, sparse files, permissions and read-only readers: a
clear error at open (or a working read-only reader), never a SIGBUS."""
import contextlib
import errno
import os
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys

import pytest

from mappedbus_py import MappedBusReader, MappedBusWriter
from reliability_helpers import java, jars, shm_dir  # noqa: F401 (fixtures)

RECORD = 8


@contextlib.contextmanager
def small_tmpfs(tmp_path, size="64k"):
    """A tmpfs of `size` bytes (needs root and a sandbox that allows mounts)."""
    d = tmp_path / "tmpfs"
    d.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(d)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {p.stderr.strip() or p.returncode}")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], capture_output=True)


def run_py(code, **kw):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, **kw)


def no_growth_past(limit):
    def pre():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)      # EFBIG instead of a kill
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return pre


WRITE_1MB = """
from mappedbus_py import MappedBusWriter
try:
    MappedBusWriter({path!r}, 1_000_000, 8).open()
    print("opened")
except OSError as e:
    print("OSError", e.errno, e.filename == {path!r}, e.strerror)
"""


@pytest.mark.slow
@pytest.mark.java
def test_bus_larger_than_a_full_tmpfs_fails_at_open_with_enospc_in_python_and_java(tmp_path, jars):
    with small_tmpfs(tmp_path) as d:
        path = str(d / "py.bus")
        p = run_py(WRITE_1MB.format(path=path))
        assert p.returncode == 0, p.stderr                       # not killed by SIGBUS
        assert p.stdout.split()[:3] == ["OSError", str(errno.ENOSPC), "True"]
        assert "no space to reserve" in p.stdout
        jpath = str(d / "java.bus")
        p = subprocess.run(java("io.mappedbuspy.tools.BusTool", "write-bytes", jpath, 1_000_000,
                                RECORD, 100_000, 1), capture_output=True, text=True, timeout=120)
        # Before: the sparse file grew, the JVM wrote 4095 records, then died of an
        # InternalError (SIGBUS on the mapped store). Now: an IOException at open.
        assert p.returncode == 1 and p.stdout.strip() == "wrote 0 committed 0", p.stdout + p.stderr
        assert "IOException: no space to grow" in p.stderr and "InternalError" not in p.stderr
        # A bus that fits is fine, in both languages, up to BusFullError/EOFException.
        for f in os.listdir(d):
            os.unlink(d / f)
        small = str(d / "fits.bus")
        with MappedBusWriter(small, 16_384, RECORD) as w:
            n = 0
            with pytest.raises(EOFError):
                while True:
                    w.write(struct.pack("<ii", 0, n))
                    n += 1
        assert n == (16_384 - 8) // 16
        p = subprocess.run(java("io.mappedbuspy.tools.BusTool", "write-bytes", str(d / "j.bus"),
                                16_384, RECORD, 10, 1), capture_output=True, text=True, timeout=120)
        assert p.returncode == 0 and p.stdout.strip() == "wrote 10 committed 10", p.stderr


def java_write_bytes(path, file_size, count, writer_id=1):
    return subprocess.run(java("io.mappedbuspy.tools.BusTool", "write-bytes", path, file_size, RECORD,
                               count, writer_id), capture_output=True, text=True, timeout=120)


def fill(directory):
    """Fill the file system of ``directory`` to the last byte."""
    filler = os.path.join(directory, "filler")
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError as e:
        assert e.errno == errno.ENOSPC
    finally:
        os.close(fd)


@pytest.mark.slow
@pytest.mark.java
def test_java_reserves_a_tmpfs_bus_so_a_tmpfs_filled_later_cannot_fault_its_writes(tmp_path, jars):
    # Java has no posix_fallocate: it writes a new tmpfs bus full of zeros (as the Python side
    # reserves it), so every page the bus will need is the file's before anyone fills the device.
    size = 256 << 10
    slots = (size - 8) // (RECORD + 8)
    with small_tmpfs(tmp_path, "1m") as d:
        path = str(d / "java.bus")
        p = java_write_bytes(path, size, 1)
        assert p.returncode == 0 and p.stdout.strip() == "wrote 1 committed 1", p.stdout + p.stderr
        assert os.stat(path).st_blocks * 512 >= size                  # reserved, not sparse
        fill(d)
        # Before: the sparse file's later pages needed the device, the store to the first of
        # them raised SIGBUS and the JVM died of an InternalError. Now every record fits.
        p = java_write_bytes(path, size, slots - 1, 2)
        assert p.returncode == 0, p.stdout + p.stderr
        assert p.stdout.strip() == f"wrote {slots - 1} committed {slots - 1}"
        assert "InternalError" not in p.stderr
        got = 0
        with MappedBusReader(path, size, RECORD) as r, pytest.raises(EOFError):
            while r.next():
                got += 1
        assert got == slots


@pytest.mark.java
def test_java_leaves_a_bus_on_a_disk_sparse_writing_no_zeros_to_the_device(tmp_path, jars):
    if subprocess.run(["stat", "-f", "-c", "%T", str(tmp_path)], capture_output=True,
                      text=True).stdout.strip() == "tmpfs":
        pytest.skip("the temporary directory is a tmpfs here")
    path = str(tmp_path / "disk.bus")
    p = java_write_bytes(path, 8 << 20, 10)
    assert p.returncode == 0, p.stderr
    assert os.path.getsize(path) == 8 << 20
    assert os.stat(path).st_blocks * 512 < 1 << 20                 # holes: only what was written


@pytest.mark.java
def test_java_writer_maps_tmpfs_pages_ahead_sixteen_to_a_fault(shm_dir, jars):
    # A store faults for one page, a load maps the 16 around it the file has (fault-around): the
    # writer loads a byte of each page ahead of its records. Counted, not timed: the minor
    # faults of a writer filling 64 MiB, less those of one writing a single record.
    def faults(name, size, count):
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
        p = java_write_bytes(str(shm_dir / name), size, count)
        assert p.returncode == 0, p.stderr
        return resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before
    size = 64 << 20
    pages = size // 4096
    base = faults("one.bus", size, 1)
    full = faults("full.bus", size, (size - 8) // (RECORD + 8))
    # One fault a page would be 16,384 more; 16 pages a fault, about 1,024.
    assert full - base < pages // 4, (full, base)


@pytest.mark.slow
@pytest.mark.java
def test_file_that_cannot_grow_fails_at_open_with_a_clear_error(shm_dir, jars):
    path = str(shm_dir / "py.bus")
    p = run_py(WRITE_1MB.format(path=path), preexec_fn=no_growth_past(65_536))
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[:3] == ["OSError", str(errno.EFBIG), "True"]
    assert "cannot grow" in p.stdout
    jpath = str(shm_dir / "java.bus")
    p = subprocess.run(java("io.mappedbuspy.tools.BusTool", "write-bytes", jpath, 1_000_000,
                            RECORD, 10, 1), capture_output=True, text=True, timeout=120,
                       preexec_fn=no_growth_past(65_536))
    assert p.returncode == 1 and f"cannot grow {jpath}" in p.stderr, p.stderr


def test_sparse_file_made_by_another_process_is_reserved_when_a_writer_opens_it(tmp_path):
    path = tmp_path / "sparse.bus"
    subprocess.run(["truncate", "-s", "1M", str(path)], check=True)
    assert os.stat(path).st_blocks * 512 < 1 << 20              # holes: nothing reserved
    MappedBusWriter(str(path), 1 << 20, RECORD).open().close()
    assert os.stat(path).st_blocks * 512 >= 1 << 20             # every block now reserved


@pytest.mark.java
def test_java_creates_bus_files_owner_only(shm_dir, jars):
    path = str(shm_dir / "j.bus")
    old = os.umask(0)            # whatever the umask, the file is rw------- (as in Python)
    try:
        p = subprocess.run(java("io.mappedbuspy.tools.BusTool", "write-bytes", path, 10_000,
                                RECORD, 1, 1), capture_output=True, text=True, timeout=120)
    finally:
        os.umask(old)
    assert p.returncode == 0, p.stderr
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def without_dac_override():
    """Run a child as root without CAP_DAC_OVERRIDE, so file modes apply to it."""
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv (util-linux) to drop CAP_DAC_OVERRIDE")
    prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search",
              "--inh-caps", "-dac_override,-dac_read_search"]
    return prefix


READ_0444 = """
import warnings
from mappedbus_py import MappedBusReader
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with MappedBusReader({path!r}, 100_000, 8, timeout=0.05{opt}) as r:
        got = [rec.data for rec in r.records(timeout=0.5)]
        print(r.read_only, got, r.skipped, r.rollbacks)
for w in caught:
    print("WARN", w.message)
"""


@pytest.mark.slow
@pytest.mark.parametrize("opt", ["", ", read_only=True"], ids=["implicit", "explicit"])
def test_reader_of_a_0444_bus_reads_it_never_rolls_back_and_says_so(shm_dir, opt):
    path = str(shm_dir / "ro.bus")
    with MappedBusWriter(path, 100_000, RECORD) as w:
        w.write(b"one")
        w._allocate_only(b"stalled")              # a writer died here
        w.write(b"two")
    os.chmod(path, 0o444)
    with open(path, "rb") as f:
        before = f.read()
    cmd = without_dac_override() + [sys.executable, "-c", READ_0444.format(path=path, opt=opt)]
    probe = subprocess.run(without_dac_override() + [sys.executable, "-c",
                           f"import os; os.open({path!r}, os.O_RDWR)"], capture_output=True)
    if probe.returncode == 0:
        pytest.skip("file modes do not apply here even without CAP_DAC_OVERRIDE")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "True [b'one', b'two'] 1 0"
    warns = "\n".join(lines[1:])
    if not opt:
        assert "not writable by this process" in warns
    assert "skipped the uncommitted record" in warns
    with open(path, "rb") as f:
        assert f.read() == before                  # never written: no rollback attempted


@pytest.mark.slow
def test_truncating_a_live_bus_under_a_reader_raises_bus_truncated_not_sigbus(shm_dir):
    """Another process shrinking the file pulls pages from under the mapping: the kernel
    sends SIGBUS on the next access. The library's SIGBUS guard turns that into
    BusTruncatedError (it used to kill the reader: the documented limit this pinned)."""
    path = str(shm_dir / "bus")
    with MappedBusWriter(path, 100_000, RECORD) as w:
        w.write(b"x")
    code = (f"import sys\nfrom mappedbus_py import MappedBusReader\n"
            f"from mappedbus_py.errors import BusTruncatedError\n"
            f"r = MappedBusReader({path!r}, 100_000, 8).open()\nprint('open', flush=True)\n"
            f"sys.stdin.readline()\n"
            f"try:\n    r.read(0)\nexcept BusTruncatedError:\n    print('BusTruncatedError')")
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "open"
    os.truncate(path, 0)
    out, _ = p.communicate("go\n", timeout=60)
    assert (p.returncode, out.strip()) == (0, "BusTruncatedError")
