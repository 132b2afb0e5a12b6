"""The files written by the Java original (shared/golden) read exactly as the manifest says."""
import hashlib
import os
import struct
import time

import pytest

from conftest import GOLDEN, golden_copy
from mappedbus_py import BusFullError, MappedBusReader, PriceUpdate
from mappedbus_py.tools.slots import scan
from mappedbus_py.tools.views import summarize

import json
FILES = [f["file"] for f in json.load(open(GOLDEN / "manifest.json"))["files"]]


def entry(manifest, name):
    return next(f for f in manifest["files"] if f["file"] == name)


def read_all(reader):
    out = []
    try:
        while True:
            rec = reader.read(timeout=0.5)
            if rec is None:
                break
            out.append({"offset": rec.position, "meta": rec.meta, "payload_hex": rec.payload.hex()})
    except BusFullError:
        pass
    return out


@pytest.mark.parametrize("name", FILES)
def test_golden_file_delivers_exactly_the_manifest_records(tmp_path, manifest, name):
    e = entry(manifest, name)
    path = golden_copy(tmp_path, name)
    with MappedBusReader(path, e["file_size"], e["record_size"], timeout=0.05) as r:
        got = read_all(r)
        assert r.has_recovered()
    assert got == e["delivered_when_uncommitted_rolled_back"]


@pytest.mark.parametrize("name", FILES)
def test_golden_file_slots_and_limit_match_the_manifest(manifest, name):
    e = entry(manifest, name)
    path = str(GOLDEN / name)
    slots = [{"offset": s.offset, "status": s.status, "meta": s.meta, "payload_hex": s.payload.hex()}
             for s in scan(path, e["record_size"], e["file_size"])]
    assert slots == e["slots"]
    s = summarize(path, e["record_size"], e["file_size"])
    assert s.limit == e["limit"] and s.file_length == e["bytes_on_disk"]


def test_golden_uncommitted_slot_is_rolled_back_once_and_later_records_delivered(tmp_path, manifest):
    e = entry(manifest, "uncommitted-r12.bus")
    path = golden_copy(tmp_path, "uncommitted-r12.bus")
    with MappedBusReader(path, e["file_size"], e["record_size"], timeout=0.1) as r:
        first = r.read(timeout=1)
        t0 = time.monotonic()
        second = r.read(timeout=5)
        waited = time.monotonic() - t0
        assert (first.position, second.position) == (8, 48)
        assert 0.09 <= waited < 2.0          # one timeout, not more
        assert (r.rollbacks, r.skipped) == (1, 1)
    with open(path, "rb") as f:
        f.seek(28)
        assert struct.unpack("<i", f.read(4))[0] == 2   # rolled back on the file


def test_golden_rolled_back_slot_is_skipped_and_counted(tmp_path, manifest):
    e = entry(manifest, "rollback-r12.bus")
    path = golden_copy(tmp_path, "rollback-r12.bus")
    with MappedBusReader(path, e["file_size"], e["record_size"]) as r:
        assert [x.position for x in r.records(timeout=0.05)] == [8, 48]
        assert (r.rollbacks, r.skipped) == (0, 1)


def test_golden_full_file_ends_without_waiting_for_the_failed_slot(tmp_path, manifest):
    e = entry(manifest, "full-r16.bus")
    path = golden_copy(tmp_path, "full-r16.bus")
    with MappedBusReader(path, e["file_size"], e["record_size"], timeout=10.0) as r:
        for _ in range(3):
            assert r.next()
        t0 = time.monotonic()
        with pytest.raises(BusFullError):
            r.next()
        assert time.monotonic() - t0 < 1.0
        assert r.has_recovered()


def test_golden_objects_decode_as_price_updates_with_java_style_api(tmp_path, manifest):
    e = entry(manifest, "objects-r12.bus")
    path = golden_copy(tmp_path, "objects-r12.bus")
    expected = e["delivered_when_uncommitted_rolled_back"]
    msg = PriceUpdate()
    with MappedBusReader(path, e["file_size"], e["record_size"]) as r:
        for want in expected:
            assert r.next()
            assert r.read_type() == want["meta"]
            r.read_message(msg)
            assert msg.to_bytes().hex() == want["payload_hex"]
            raw = bytes.fromhex(want["payload_hex"])
            assert (msg.source, msg.price, msg.quantity) == struct.unpack("<iii", raw)
        assert not r.next()
    assert {w["meta"] for w in expected} == {0, 7}


def test_golden_byte_arrays_read_into_buffers_with_their_lengths(tmp_path, manifest):
    for name in ("bytearray-r16.bus", "bytearray-r10.bus", "multiwriter-r8.bus"):
        e = entry(manifest, name)
        path = golden_copy(tmp_path, name)
        buf = bytearray(e["record_size"] + 4)
        with MappedBusReader(path, e["file_size"], e["record_size"]) as r:
            for want in e["delivered_when_uncommitted_rolled_back"]:
                assert r.next()
                n = r.read_buffer(buf, 4)
                assert n == want["meta"]
                assert bytes(buf[4:4 + n]) == bytes.fromhex(want["payload_hex"])[:n]
                assert r.read_bytes() == bytes(buf[4:4 + n])


def test_golden_read_only_reader_skips_the_stall_and_never_writes(tmp_path, manifest):
    e = entry(manifest, "uncommitted-r12.bus")
    path = golden_copy(tmp_path, "uncommitted-r12.bus")
    os.chmod(path, 0o444)
    before = hashlib.sha256(open(path, "rb").read()).hexdigest()
    with MappedBusReader(path, e["file_size"], e["record_size"], timeout=0.02, read_only=True) as r:
        with pytest.warns(RuntimeWarning, match="read-only reader skipped the uncommitted record at 28"):
            got = [x.position for x in r.records(timeout=0.3)]
        assert got == [8, 48]
        assert (r.rollbacks, r.skipped) == (0, 1)
    assert hashlib.sha256(open(path, "rb").read()).hexdigest() == before
