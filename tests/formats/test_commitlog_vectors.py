"""The language-neutral vectors of tests/vectors/commitlog.json, run against the Python reader
of the Spark sink's commit log (CommitLogVectorsTest.java runs the same file against CommitLog.java)."""
import json
import pathlib

import pytest

from mappedbus_py.formats import commitlog
from mappedbus_py.formats.commitlog import Entry, Key, decode_entry, decode_log, read_log, recover
from mappedbus_py.formats.layout import COMMIT_ENTRY_SIZE
from mappedbus_py.rolling import locate

VECTORS = json.loads((pathlib.Path(__file__).parent.parent / "vectors" / "commitlog.json").read_text())
SECTIONS = ("entries", "files", "recovery")


def cases(section):
    return pytest.mark.parametrize("v", VECTORS[section],
                                   ids=[v["why"][:60] for v in VECTORS[section]])


def test_every_section_has_cases():
    counts = {k: len(v) for k, v in VECTORS.items() if isinstance(v, list)}
    print("commitlog vectors:", counts, "total", sum(counts.values()))
    assert set(counts) == set(SECTIONS)
    assert all(counts.values())


def test_public_names():
    assert all(hasattr(commitlog, name) for name in commitlog.__all__)


@cases("entries")
def test_entries(v):
    data = bytes.fromhex(v["hex"])
    assert len(data) == COMMIT_ENTRY_SIZE
    e = decode_entry(data)
    if not v["valid"]:
        assert e is None
        return
    assert e == Entry(v["kind"], v["query_hi"], v["query_lo"], v["epoch"], v["partition"],
                      v["first"], v["count"], v["source"])


@cases("files")
def test_files(v, tmp_path):
    data = bytes.fromhex(v["hex"])
    assert [e.kind for e in decode_log(data)] == v["kinds"]
    path = tmp_path / "out.bus.commits"
    path.write_bytes(data)
    assert read_log(path) == decode_log(data)


def log_of(v):
    """The vector's log: each entry's key fields are the vector key's unless it gives its own."""
    key = v["key"]
    return [Entry(e["kind"], e.get("query_hi", key["query_hi"]), e.get("query_lo", key["query_lo"]),
                  e.get("epoch", key["epoch"]), e.get("partition", key["partition"]),
                  e["first"], e["count"], e["source"]) for e in v["log"]]


@cases("recovery")
def test_recovery(v):
    ss, rs = v["segment_size"], v["record_size"]
    if ss is None:
        present = lambda position: True  # noqa: E731 - a single file: always there
    else:
        present = lambda position: locate(position, ss, rs)[0] in v["segments"]  # noqa: E731
    r = recover(log_of(v), Key(**v["key"]), present)
    assert r.action == v["action"]
    assert [list(x) for x in r.voids] == v["voids"]
    if v["group"] is None:
        assert r.group is None
    else:
        assert (r.group.first, r.group.source, [list(x) for x in r.group.ranges]) == (
            v["group"]["first"], v["group"]["source"], v["group"]["ranges"])
    assert (list(r.removed) if r.removed else None) == v["removed"]
    assert (r.corrupt is not None) == (v["action"] == "corrupt")
