"""A writer without prefault maps the pages just ahead of its records in chunks
(madvise(MADV_POPULATE_WRITE), Linux >= 5.14), never the whole file: /proc/self/smaps shows
how much of the bus the process has mapped."""
import errno
import os
import platform

import numpy as np
import pytest

from mappedbus_py import MappedBusReader, MappedBusWriter, PriceUpdate

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux"
    or tuple(int(x) for x in platform.release().split(".")[:2] if x.isdigit()) < (5, 14),
    reason="MADV_POPULATE_WRITE needs Linux 5.14")


def mapped_kb(path):
    """Rss (kB) of this process's mapping of ``path``."""
    rss, inside = None, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and ":" not in head[0]:
                inside = line.rstrip().endswith(path)
            elif inside and head[0] == "Rss:":
                rss = int(head[1])
    return rss


SIZE = 8 + 200_000 * 20     # 4 MB, 977 pages


def test_a_writer_maps_a_bounded_window_ahead_of_its_records(bus_path):
    with MappedBusWriter(bus_path, SIZE, 12) as w:
        w.write(PriceUpdate(1, 2, 3))
        first = mapped_kb(bus_path)
        # More than the one page written (the window ahead), far less than the file.
        assert 16 <= first <= 256, first
        for i in range(20_000):             # 400 kB of records
            w.write(PriceUpdate(1, i, 3))
        later = mapped_kb(bus_path)
        assert 400 <= later <= 400 + 256, later


def test_prefault_maps_everything_and_a_batch_maps_as_it_goes(bus_path):
    with MappedBusWriter(bus_path, SIZE, 12, prefault=True):
        assert mapped_kb(bus_path) >= SIZE // 1024
    rows = np.zeros(50_000, PriceUpdate.numpy_dtype())
    rows["price"] = np.arange(50_000)
    with MappedBusWriter(bus_path, SIZE, 12) as w:
        assert w.write_batch(rows) == 50_000        # 1 MB in one allocation
        assert 1000 <= mapped_kb(bus_path) <= 1000 + 256
    with MappedBusReader(bus_path, SIZE, 12) as r:
        out = np.zeros(50_000, PriceUpdate.numpy_dtype())
        assert r.read_batch(out, timeout=0) == 50_000
        assert (out["price"] == np.arange(50_000)).all()


def test_a_background_fallocate_grows_the_file_and_its_result_is_waited_for(bus_path):
    from mappedbus_py.rolling._rolling import BackgroundCall
    fd = os.open(bus_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        call = BackgroundCall.fallocate(fd, 8 << 20)
        assert call.wait() == 0 and call.done and call.wait() == 0     # joined once
        assert os.fstat(fd).st_size == 8 << 20
        assert os.fstat(fd).st_blocks * 512 >= 8 << 20                 # reserved, not sparse
    finally:
        os.close(fd)
    assert BackgroundCall.fallocate(fd, 4096).wait() == errno.EBADF    # closed: the error number


def test_a_background_populate_maps_every_page_of_a_writer(bus_path):
    from mappedbus_py.rolling._rolling import BackgroundCall
    with MappedBusWriter(bus_path, SIZE, 12) as w:
        assert mapped_kb(bus_path) < 1024
        call = BackgroundCall.populate(w, True)
        assert call.wait() == 0
        assert mapped_kb(bus_path) >= SIZE // 1024 - 4
        before = mapped_kb(bus_path)
        for i in range(1000):
            w.write(PriceUpdate(i, i, i))
        assert mapped_kb(bus_path) == before
    with MappedBusWriter(bus_path, SIZE, 12, prefault=True) as w:
        assert BackgroundCall.populate(w, False) is None      # mapped at open: nothing to do


def test_a_forked_child_never_waits_for_its_parents_background_call(bus_path):
    from mappedbus_py.rolling._rolling import BackgroundCall
    fd = os.open(bus_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        call = BackgroundCall.fallocate(fd, 256 << 20)
        pid = os.fork()
        if pid == 0:
            # The call's thread is the parent's: done at once here, and -1 (it ran elsewhere).
            os._exit(0 if call.done and call.wait() == -1 else 1)
        assert os.waitpid(pid, 0)[1] == 0
        assert call.wait() == 0
    finally:
        os.close(fd)
