"""The shared vectors of the journal (tests/vectors/journal/, made by tests/vectors/make_journal.py):
made again and compared, then read back by the Python readers of archived segments and time indices
(the Java side runs the same files)."""
import importlib.util
import json
import os
import pathlib
import struct

import pytest

from mappedbus_py.errors import CorruptBusError
from mappedbus_py.formats.archive import ZstdSeekTable, archive_config, list_archived, read_archived
from mappedbus_py.formats.busmeta import read_meta
from mappedbus_py.formats.layout import STATUS_COMMITTED, TIME_INDEX_DIR, slot_size, time_index_name
from mappedbus_py.formats.timeindex import floor_ms, read_index

VDIR = pathlib.Path(__file__).parent.parent / "vectors"
JDIR = VDIR / "journal"
DOC = json.loads((JDIR / "journal.json").read_text())
# The vector directories (archive-<form>) and the compression each one's bus.meta names.
FORMS = {"none": "none", "zstd": "zstd", "zstd-oneframe": "zstd", "lz4": "lz4"}


def _maker():
    spec = importlib.util.spec_from_file_location("make_journal", VDIR / "make_journal.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _segment(how):
    d = JDIR / f"archive-{how}"
    names = list_archived(d)
    assert list(names) == [DOC["segment"]]
    return read_archived(d, DOC["segment"], names[DOC["segment"]], DOC["segment_size"])


def _index(how):
    return read_index(str(JDIR / f"archive-{how}" / TIME_INDEX_DIR / time_index_name(DOC["segment"])),
                      DOC["bus_id"], DOC["segment"], DOC["segment_size"], DOC["record_size"])


def test_the_script_makes_the_same_files(tmp_path):
    _maker().build(tmp_path)
    assert json.loads((tmp_path / "journal.json").read_text()) == DOC
    for how in FORMS:
        mine, theirs = tmp_path / f"archive-{how}", JDIR / f"archive-{how}"
        assert (mine / "bus.meta").read_bytes() == (theirs / "bus.meta").read_bytes()
        idx = pathlib.Path(TIME_INDEX_DIR) / time_index_name(DOC["segment"])
        assert (mine / idx).read_bytes() == (theirs / idx).read_bytes()
        name = list_archived(theirs)[DOC["segment"]]
        # compressed bytes may differ between library versions: what they hold may not
        assert read_archived(mine, DOC["segment"], name, DOC["segment_size"]) == _segment(how)


@pytest.mark.parametrize("how", FORMS)
def test_archived_segments_hold_the_records(how):
    data = _segment(how)
    assert len(data) == DOC["mapped_size"]
    assert data == _segment("none")
    for r in DOC["records"]:
        off = r["position"] - DOC["segment"] * DOC["segment_size"]
        status, meta = struct.unpack_from("<ii", data, off)
        assert (status, meta) == (STATUS_COMMITTED, r["meta"])
        assert data[off + 8:off + 8 + meta].decode() == r["payload"]
    meta = read_meta(str(JDIR / f"archive-{how}" / "bus.meta"))
    assert meta.id == DOC["bus_id"] and archive_config(meta).compress == FORMS[how]


@pytest.mark.parametrize("how", FORMS)
def test_time_index_entries_and_torn_tail(how):
    ix = _index(how)
    assert [(int(t), int(p)) for t, p in zip(ix.times, ix.positions)] == \
        [(e["time_ns"], e["position"]) for e in DOC["index_entries"]]
    assert ix.torn == DOC["torn_bytes"][f"archive-{how}"]


def test_the_zstd_vector_is_seekable_and_the_old_one_is_one_frame():
    d = JDIR / "archive-zstd"
    data = (d / list_archived(d)[DOC["segment"]]).read_bytes()
    table = ZstdSeekTable.read(data, DOC["mapped_size"], "archive-zstd")
    assert [f.dst_size for f in table.frames] == DOC["zstd_frames"] and len(DOC["zstd_frames"]) > 1
    old = JDIR / "archive-zstd-oneframe"
    assert ZstdSeekTable.read((old / list_archived(old)[DOC["segment"]]).read_bytes(),
                              DOC["mapped_size"], "archive-zstd-oneframe") is None


@pytest.mark.parametrize("case", DOC["seek_time"], ids=lambda c: str(c["t_ns"]))
def test_seek_time_cases(case):
    assert _index("zstd").first_at_or_after(floor_ms(case["t_ns"])) == case["position"]


def test_seek_rule_against_the_records():
    # Every record allocated at or after t is at or past the position; none before floor_ms(t).
    when = {e["position"]: e["time_ns"] for e in DOC["index_entries"]}
    for case in DOC["seek_time"]:
        p = case["position"]
        if p is None:
            assert all(t < floor_ms(case["t_ns"]) for t in when.values())
        else:
            assert when[p] >= floor_ms(case["t_ns"])


def test_corrupt_inputs_are_named(tmp_path):
    _maker().build(tmp_path)
    d = tmp_path / "archive-zstd"
    seg = d / list_archived(d)[DOC["segment"]]
    seg.write_bytes(seg.read_bytes()[:30])
    with pytest.raises(CorruptBusError, match="zstd"):
        read_archived(d, DOC["segment"], seg.name, DOC["segment_size"])
    idx = d / TIME_INDEX_DIR / time_index_name(DOC["segment"])
    raw = bytearray(idx.read_bytes())
    raw[0] ^= 0xFF
    idx.write_bytes(bytes(raw))
    with pytest.raises(CorruptBusError, match="magic"):
        read_index(str(idx), DOC["bus_id"], DOC["segment"], DOC["segment_size"], DOC["record_size"])
    with pytest.raises(CorruptBusError, match="belongs to bus"):
        read_index(str(JDIR / "archive-none" / TIME_INDEX_DIR / time_index_name(DOC["segment"])),
                   "f" * 32, DOC["segment"], DOC["segment_size"], DOC["record_size"])
    (d / "00000000000000000001.bus").write_bytes(b"")
    with pytest.raises(CorruptBusError, match="twice"):
        list_archived(d)
