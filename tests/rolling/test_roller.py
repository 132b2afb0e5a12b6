"""The roller's named state: a segment's claim is one of three outcomes (``Claim``), taken on
``bus.meta`` by ``SegmentClaims``; the writer's spare and retired segments are ``Spare`` and
``OpenSegment``, never tuples."""
import os
import subprocess
import sys
import textwrap

from mappedbus_py import PriceUpdate, RollingBusWriter
from mappedbus_py.formats.layout import META_FILE, SEGMENT_CLAIM_BASE
from mappedbus_py.rolling import create_segment
from mappedbus_py.rolling.roller import Claim, OpenSegment, SegmentClaims, Spare

SEG = 4096


def _bus(tmp_path):
    path = str(tmp_path / "bus.d")
    RollingBusWriter(path, SEG, 12).open().close()
    return path


def test_a_claim_is_taken_released_and_taken_again(tmp_path):
    claims = SegmentClaims(_bus(tmp_path), allow_foreign=False)
    try:
        assert claims.take(1) is Claim.TAKEN
        assert claims.fd is not None
        claims.release(1)
        assert claims.take(1) is Claim.TAKEN
    finally:
        claims.close()
    assert claims.fd is None


def test_a_claim_another_process_holds_is_held_elsewhere_and_others_are_free(tmp_path):
    path = _bus(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, sys
        fd = os.open({os.path.join(path, META_FILE)!r}, os.O_WRONLY)
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, {SEGMENT_CLAIM_BASE + 3})
        print("held", flush=True)
        sys.stdin.read()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    claims = SegmentClaims(path, allow_foreign=False)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert claims.take(3) is Claim.HELD_ELSEWHERE
        assert claims.take(4) is Claim.TAKEN
        holder.stdin.close()
        assert holder.wait(timeout=30) == 0
        assert claims.take(3) is Claim.TAKEN          # the kernel let it go with its holder
    finally:
        claims.close()
        holder.kill()
        holder.wait()


def test_without_a_bus_meta_to_lock_there_are_no_claims(tmp_path):
    claims = SegmentClaims(str(tmp_path), allow_foreign=False)     # no bus.meta here
    assert claims.take(0) is Claim.NOT_TAKEN
    assert claims.take(1) is Claim.NOT_TAKEN
    claims.close()


def test_the_writer_holds_its_spare_and_retired_segments_as_named_state(tmp_path):
    path = str(tmp_path / "bus.d")
    RollingBusWriter(path, SEG, 12).open().close()
    # Segment 1 made already and prefault: past the middle, the writer opens it as its spare at
    # once (nothing is left to a background call, so nothing depends on timing).
    assert create_segment(path, 1, SEG)
    with RollingBusWriter(path, SEG, 12, prefault=True) as w:
        msg = PriceUpdate(source=1, price=2, quantity=3)
        spares = []
        while w.segment == 0:
            w.write(msg)
            if w._spare is not None:
                spares.append(w._spare)
        assert spares, "segment 1 was never the spare before the roll"
        assert all(isinstance(s, Spare) and s.index == 1 for s in spares)
        assert all(isinstance(s.segment, OpenSegment) for s in spares)
        assert w._retired and all(isinstance(s, OpenSegment) for s in w._retired)
        assert all(isinstance(s.fd, int) and s.fd >= 0 for s in w._retired)


def _mapped_paths():
    with open("/proc/self/maps") as f:
        return {line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6}


def test_a_retired_segment_is_unmapped_by_a_background_call(tmp_path):
    from mappedbus_py import MappedBusWriter
    from mappedbus_py.rolling._rolling import BackgroundCall
    path = str(tmp_path / "seg.bus")
    w = MappedBusWriter(path, 1 << 16, 12).open()
    w.write(PriceUpdate(1, 2, 3))
    assert os.path.realpath(path) in _mapped_paths()
    call = BackgroundCall.unmap(w)
    assert call is not None and w.closed
    assert call.wait() == 0
    assert os.path.realpath(path) not in _mapped_paths()
    w.close()                                   # closing again unmaps nothing twice


def test_the_roller_unmaps_the_retired_segment_off_the_writing_thread(tmp_path):
    path = str(tmp_path / "bus.d")
    w = RollingBusWriter(path, 1 << 16, 12).open()
    try:
        while w.segment < 2:
            w.write(PriceUpdate(1, 2, 3))
        for _ in range(1000):
            w.write(PriceUpdate(1, 2, 3))
        assert w._unmaps                        # the calls unmapping segments 0 and 1
        w._wait_unmaps()
        seg0 = os.path.realpath(os.path.join(path, "00000000000000000000.bus"))
        assert seg0 not in _mapped_paths()
    finally:
        w.close()


def _tmp_files(path, index):
    return [n for n in os.listdir(path) if n.startswith(".tmp-") and f"{index:020d}" in n]


def _has_data_at(fd, offset):
    # tmpfs reports fallocated pages nobody wrote yet as holes: written (zeroed) pages are data.
    import errno
    try:
        return os.lseek(fd, offset, os.SEEK_DATA) == offset
    except OSError as e:
        if e.errno == errno.ENXIO:
            return False
        raise


def test_the_spare_is_made_and_prefaulted_early_and_linked_from_the_middle(monkeypatch):
    import pytest
    import tempfile
    from mappedbus_py.rolling import roller
    if not os.path.isdir("/dev/shm"):
        pytest.skip("needs tmpfs at /dev/shm")
    monkeypatch.setattr(roller, "PREFAULT_EARLY", True)
    with tempfile.TemporaryDirectory(dir="/dev/shm") as d:
        path = os.path.join(d, "bus.d")
        seg = 1 << 20
        w = RollingBusWriter(path, seg, 12).open()
        try:
            w.write(PriceUpdate(1, 2, 3))       # the first look-ahead: segment 0's start
            job = w._job
            assert job is not None and job.early and job.index == 1
            assert job.call.wait() == 0
            assert len(_tmp_files(path, 1)) == 1
            assert not os.path.exists(os.path.join(path, "00000000000000000001.bus"))
            fd = os.open(os.path.join(path, _tmp_files(path, 1)[0]), os.O_RDONLY)
            try:
                assert _has_data_at(fd, seg - 4096)   # its last page already zeroed
            finally:
                os.close(fd)
            for _ in range(100):
                w.write(PriceUpdate(1, 2, 3))
            assert not os.path.exists(os.path.join(path, "00000000000000000001.bus"))
            while w.segment == 0:
                w.write(PriceUpdate(1, 2, 3))
            assert not _tmp_files(path, 1)
        finally:
            w.close()


def test_without_prefault_the_early_spare_is_only_preallocated(monkeypatch):
    import pytest
    import tempfile
    from mappedbus_py.rolling import roller
    if not os.path.isdir("/dev/shm"):
        pytest.skip("needs tmpfs at /dev/shm")
    monkeypatch.setattr(roller, "PREFAULT_EARLY", False)
    with tempfile.TemporaryDirectory(dir="/dev/shm") as d:
        path = os.path.join(d, "bus.d")
        seg = 1 << 20
        with RollingBusWriter(path, seg, 12) as w:
            w.write(PriceUpdate(1, 2, 3))
            assert w._job is not None and w._job.early
            assert w._job.call.wait() == 0
            fd = os.open(os.path.join(path, _tmp_files(path, 1)[0]), os.O_RDONLY)
            try:
                assert not _has_data_at(fd, seg - 4096)   # what the prefault test tells apart
            finally:
                os.close(fd)


def test_a_writer_closed_short_of_the_middle_leaves_no_next_segment(tmp_path):
    path = str(tmp_path / "bus.d")
    w = RollingBusWriter(path, 1 << 16, 12).open()
    w.write(PriceUpdate(1, 2, 3))
    assert w._job is not None and w._job.early
    w.close()
    assert sorted(n for n in os.listdir(path) if n.endswith(".bus") or n.startswith(".tmp")) \
        == ["00000000000000000000.bus"]
