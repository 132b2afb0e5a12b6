"""perf/rolling_soak.py runs end to end in a small configuration, in both languages, and what it
reports holds: the bus directory stays within its retention bound, nothing is read twice or out of
order, every record is either read or counted lost. No assertion on speed (perf/ gives figures)."""
import json
import os
import subprocess
import sys

import pytest

from support.procs import java_or_skip

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
@pytest.mark.java
def test_rolling_soak_stays_bounded_and_reads_in_order(tmp_path):
    java_or_skip()
    seg = 1 << 20
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "perf", "rolling_soak.py"),
                           "--segments", "12", "--segment-size", str(seg), "--retain", "3",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "rolling_soak.json").read_text())["results"]
    assert set(results) == {"py", "java"}
    for lang, res in results.items():
        r = res["reader"]
        assert res["segments"] >= 12, (lang, res["segments"])
        # retention + the one being written + a spare made ahead of time + while the next spare
        # is being made, its temporary file (docs/files-and-rolling.md, "Retention")
        assert 0 < res["max_dir_bytes"] <= (3 + 3) * seg + 4096 * 8, (lang, res["max_dir_bytes"])
        assert r["out_of_order"] == 0, lang
        assert r["last_seq"] == res["records"] - 1, (lang, r)
        # from where it started (the oldest retained record then), every slot is read or
        # counted lost to retention (the writer may outrun the reader, even before its first
        # record: then the first record read is past the start, and the slots between are lost)
        assert r["read"] + r["lost_slots"] == res["records"] - r["start_seq"], (lang, r)
        assert r["start_seq"] <= r["first_seq"], (lang, r)
        assert res["write_latency"]["rolls"] == res["segments"] - 1, lang
    assert "| the write that rolled |" in (tmp_path / "rolling_soak.md").read_text()
