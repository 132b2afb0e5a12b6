"""The streaming sample end to end, as a user runs it."""
import json
import os
import subprocess
import sys

import pytest

from .helpers import ROOT

pytestmark = pytest.mark.spark


def leftovers():
    return {f for f in os.listdir("/dev/shm") if f.startswith("spark-pipeline-")} \
        if os.path.isdir("/dev/shm") else set()


def test_spark_pipeline_sample():
    before = leftovers()
    res = subprocess.run([sys.executable, str(ROOT / "samples" / "spark_pipeline.py"),
                          "--messages", "300", "--writers", "2", "--rate", "500"],
                         capture_output=True, text=True, timeout=240,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    results = [l for l in lines if l.startswith("PriceStats [source=")]
    assert any("count=300," in l and "source=0," in l for l in results)
    assert any("count=300," in l and "source=1," in l for l in results)
    assert any(l.startswith("end-to-end latency") for l in lines)
    report = json.loads(lines[-1])
    assert report["vwap_ok"] and report["messages"] == 600
    assert report["latency_ms"]["p50"] > 0
    assert leftovers() <= before  # its buses are removed
