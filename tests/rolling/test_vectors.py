"""The language-neutral vectors of tests/vectors/rolling.json, run against the Python side
(VectorsTest.java runs the same file against the Java side)."""
import json
import pathlib

import pytest

from mappedbus_py.formats.busmeta import BusMeta
from mappedbus_py.formats.layout import join_position, record_index, slot_size
from mappedbus_py.rolling import (consumer_blockers, consumer_retention, consumer_segment,
                                  end_boundary, gap_range, spare_trigger, locate, on_grid, records_between,
                                  retention_plan, slots_per_segment)

VECTORS = json.loads((pathlib.Path(__file__).parent.parent / "vectors" / "rolling.json").read_text())


def cases(section):
    return pytest.mark.parametrize("v", VECTORS[section],
                                   ids=[v.get("why", str(i))[:60] for i, v in enumerate(VECTORS[section])])


def test_every_section_has_cases():
    counts = {k: len(v) for k, v in VECTORS.items() if isinstance(v, list)}
    print("vectors:", counts, "total", sum(counts.values()))
    assert set(counts) == {"positions", "grid", "slot_index", "retention", "gaps", "lag",
                           "consumer_needs", "consumer_retention"}
    assert all(counts.values())


@cases("positions")
def test_positions(v):
    k, off = locate(v["position"], v["segment_size"], v["record_size"])
    assert (k, off) == (v["segment"], v["offset"])
    assert join_position(k, off, v["segment_size"]) == v["position"]
    assert on_grid(off, v["segment_size"], v["record_size"]) == v["on_grid"]


@cases("grid")
def test_grid(v):
    seg, rec = v["segment_size"], v["record_size"]
    assert slot_size(rec) == v["slot_size"]
    assert end_boundary(seg, rec) == v["end_boundary"]
    assert slots_per_segment(seg, rec) == v["slots_per_segment"]
    assert spare_trigger(seg, rec) == v["spare_trigger"]


@cases("slot_index")
def test_slot_index(v):
    assert record_index(v["offset"], v["record_size"]) == v["slot_index"]


@cases("retention")
def test_retention(v):
    meta = BusMeta.create("rolling", 8, segment_size=v["segment_size"],
                          retain_segments=v["retain_segments"], retain_bytes=v["retain_bytes"],
                          retain_age_ms=v["retain_age_ms"])
    full = {int(k): ms for k, ms in v["full_ms"].items()}
    assert retention_plan(v["segments"], meta, v["newest"], v["keep_from"], v["now_ms"],
                          full.get, v["hold_from"]) == v["removes"]


@cases("gaps")
def test_gaps(v):
    assert gap_range(v["from_segment"], v["from_offset"], v["oldest"], v["segment_size"],
                     v["record_size"]) == (v["lost_from"], v["lost_to"], v["lost"])


@cases("lag")
def test_lag(v):
    assert records_between(v["position"], v["head_segment"], v["head_limit"],
                           v["segment_size"], v["record_size"]) == v["records"]


@cases("consumer_needs")
def test_consumer_needs(v):
    assert consumer_segment(v["position"], v["segment_size"], v["record_size"]) == v["needs"]


@cases("consumer_retention")
def test_consumer_retention(v):
    meta = BusMeta.create("rolling", v["record_size"], segment_size=v["segment_size"],
                          max_consumer_lag=v["max_consumer_lag"],
                          on_consumer_lag=v["on_consumer_lag"])
    entries = [dict(index=i, name=c["name"], position=c["position"], flags=int(c["expired"]))
               for i, c in enumerate(v["consumers"])]
    hold, expire = consumer_retention(entries, meta, v["current"])
    assert (hold, [e["name"] for e in expire]) == (v["hold_from"], v["expire"])
    if "target" in v:
        assert [e["name"] for e in consumer_blockers(entries, meta, v["target"])] == v["blockers"]
