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
