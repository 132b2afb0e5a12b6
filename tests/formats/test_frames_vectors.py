"""The shared frame vectors (tests/vectors/frames-*.bus, frames.json): made again by
make_frames.py byte for byte, and their manifest self-consistent with layout.py."""
import json
import os
import struct
import subprocess
import sys

from mappedbus_py.formats import layout

VECTORS = os.path.join(os.path.dirname(__file__), "..", "vectors")


def manifest():
    with open(os.path.join(VECTORS, "frames.json")) as f:
        return json.load(f)


def test_vectors_are_made_again_byte_for_byte(tmp_path):
    subprocess.run([sys.executable, os.path.join(VECTORS, "make_frames.py"), str(tmp_path)],
                   check=True, timeout=60)
    made = sorted(p for p in os.listdir(tmp_path))
    assert made == sorted(p for p in os.listdir(VECTORS)
                          if p.startswith("frames-") or p == "frames.json")
    for name in made:
        with open(tmp_path / name, "rb") as a, open(os.path.join(VECTORS, name), "rb") as b:
            assert a.read() == b.read(), name


def test_manifest_matches_the_bytes():
    for case in manifest()["files"]:
        with open(os.path.join(VECTORS, case["file"]), "rb") as f:
            data = f.read()
        assert len(data) == layout.mapped_size(case["file_size"])
        assert struct.unpack_from("<q", data, 0)[0] == case["limit"]
        slot = layout.slot_size(case["record_size"])
        pos = layout.FIRST_RECORD_OFFSET
        for fr in case["frames"]:
            assert fr["position"] == pos
            status, meta = struct.unpack_from("<ii", data, pos)
            assert status == fr["status"]
            assert layout.frame_meta_slots(meta) == fr["slots"]
            if status == 1:
                length, topic, flags = struct.unpack_from("<qii", data, pos + layout.PAYLOAD_OFFSET)
                assert (length, topic, flags) == (fr["length"], fr["topic"], fr["flags"])
                start = pos + layout.FRAME_PAYLOAD_OFFSET
                assert data[start:start + length].hex() == fr["payload_hex"]
            pos += fr["slots"] * slot
        assert pos == min(case["limit"], layout.FIRST_RECORD_OFFSET
                          + (case["file_size"] - layout.FIRST_RECORD_OFFSET) // slot * slot)
