"""The benchmark suite runs end to end in its tiny mode: every benchmark, well-formed output.

No assertion on speed: this machine is shared and the counts are tiny. perf/run.py --quick or
--full gives the figures."""
import importlib.util
import json
import math
import os
import subprocess
import sys

import pytest

from support.java_original import ORIGINAL_JAR

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

NAMED = [
    "py_py_msgs_per_s", "py_py_bytes_msgs_per_s", "py_py_batch_msgs_per_s",
    "java_java_msgs_per_s", "java_py_msgs_per_s", "py_java_msgs_per_s",
    "py_2w_1r_msgs_per_s", "py_4w_1r_msgs_per_s", "py_8w_1r_msgs_per_s",
    "payload_8_msgs_per_s", "payload_32768_mb_per_s",
    "rtt_p50_ns", "rtt_p90_ns", "rtt_p99_ns", "rtt_p99_9_ns", "rtt_max_ns",
    "py_java_rtt_p50_ns", "java_py_rtt_p99_ns", "java_java_rtt_p50_ns",
    # the machine's own round trip (two cache lines bounced in C) and what the bus adds to it
    "floor_rtt_p50_ns", "floor_rtt_p99_ns", "rtt_over_floor_p50_ns", "java_java_rtt_over_floor_p99_ns",
    "zmq_ipc_msgs_per_s", "mp_queue_msgs_per_s", "mp_pipe_msgs_per_s",
    "faster_fifo_msgs_per_s", "py4j_msgs_per_s",
    "mem_writer_peak_rss_kb_small", "mem_reader_peak_rss_kb_large",
    "mem_writer_private_growth_kb", "mem_reader_private_growth_kb",
    "ratio_java_py_vs_java_java", "ratio_py_java_vs_py4j",
    # the Python per-message forms and their floor (bus calls replaced by a C no-op)
    "py_py_fields_msgs_per_s", "py_floor_ns_per_msg", "py_fields_floor_ns_per_msg",
    "py_bus_overhead_ns_per_msg", "py_writer_alone_ns_per_msg", "py_fields_writer_alone_ns_per_msg",
    # default (fresh file, page faults timed) and prefaulted pairs
    "java_java_default_msgs_per_s", "java_java_prefault_msgs_per_s",
    "py_py_default_msgs_per_s", "py_py_prefault_msgs_per_s",
]
# Measured in the same run only when the Java original is beside the checkout.
ORIGINAL = [
    "java_original_msgs_per_s", "java_original_default_msgs_per_s",
    "java_original_prefault_msgs_per_s", "ratio_py_py_vs_java_original",
    "ratio_java_java_default_vs_java_original_default",
    "ratio_java_java_prefault_vs_java_original_prefault", "ratio_py_batch_vs_java_original",
]
MACHINE = ["machine_cpu", "machine_cores", "machine_ram_gb", "machine_kernel", "machine_python",
           "machine_java"]


@pytest.mark.slow
@pytest.mark.java
@pytest.mark.original
def test_smoke_run_writes_every_named_figure(tmp_path):
    before = {n for n in os.listdir("/dev/shm") if n.startswith("mbperf-")}
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "perf", "run.py"), "--smoke",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "[1/" in proc.stderr          # progress is shown
    figures = json.loads((tmp_path / "latest.json").read_text())
    named = NAMED + (ORIGINAL if os.path.exists(ORIGINAL_JAR) else [])
    if importlib.util.find_spec("iceoryx2"):
        named.append("iox2_msgs_per_s")
    missing = [k for k in named + MACHINE if k not in figures]
    assert not missing, missing
    # The original is measured, never a constant: its ratio is the two figures of this run.
    if os.path.exists(ORIGINAL_JAR):
        assert figures["ratio_py_py_vs_java_original"] == pytest.approx(
            figures["py_py_msgs_per_s"] / figures["java_original_msgs_per_s"])
    else:
        assert "java_original_msgs_per_s" not in figures
    for k in named:
        assert isinstance(figures[k], (int, float)) and math.isfinite(figures[k]), (k, figures[k])
        # A difference of two timings ("..._over_floor_...") may come out below zero in a
        # smoke run on a busy machine; every other timing or rate is positive.
        if k.endswith(("msgs_per_s", "_ns", "mb_per_s")) and "_over_floor_" not in k:
            assert figures[k] > 0, (k, figures[k])
    assert figures["mode"] == "smoke"
    table = (tmp_path / "latest.md").read_text()
    assert "| mappedbus_py Python -> Python, per message |" in table
    assert "Side by side in this run" in table and "| mappedbus_py Java port |" in table
    assert "| machine floor (C, two cache lines, no bus) |" in table
    for png in ("throughput.png", "payload.png", "latency.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Every bus file the suite made is gone.
    after = {n for n in os.listdir("/dev/shm") if n.startswith("mbperf-")}
    assert after <= before


# perf/bench_wake.py (issue 22): the sporadic probe's pairs at both rates, and the busy path.
WAKE_RATES = ("1khz", "50hz")
WAKE_PY_PAIRS = ("py_py", "py_py_async")
WAKE_JAVA_PAIRS = ("java_java", "py_java", "java_py")
WAKE_JAVA_READERS = ("java_java", "py_java")
WAKE_BUSY = ["wake_busy_spin_park_msgs_per_s", "wake_busy_busy_spin_msgs_per_s",
             "wake_busy_spin_park_rtt_p50_ns", "wake_busy_busy_spin_rtt_p50_ns",
             "wake_busy_msgs_ratio", "wake_busy_rtt_p50_ratio"]


def _have_jdk():
    from mappedbus_py import jvm
    try:
        jvm.java_executable()
        jvm.jar_path()              # built from the sources when missing (needs javac)
        return True
    except jvm.JavaNotFoundError:
        return False


@pytest.mark.slow
def test_wake_quick_run_writes_every_named_figure(tmp_path):
    before = {n for n in os.listdir("/dev/shm") if n.startswith("mbperf-")}
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "perf", "bench_wake.py"), "--quick",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads((tmp_path / "wake.json").read_text())
    java = _have_jdk()
    zmq = importlib.util.find_spec("zmq") is not None
    bus_pairs = WAKE_PY_PAIRS + (WAKE_JAVA_PAIRS if java else ())
    pairs = bus_pairs + ("pipe", "pipe_async") + (("zmq",) if zmq else ())
    named = list(WAKE_BUSY)
    for p in pairs:
        for rate in WAKE_RATES:
            named += [f"wake_{p}_{rate}_{k}" for k in ("p50_ns", "p99_ns", "max_ns", "cpu_pct",
                                                        "messages", "rate_hz")]
    for p in bus_pairs:
        named += [f"wake_{p}_{rate}_{q}_vs_pipe" for rate in WAKE_RATES for q in ("p50", "p99")]
        if zmq:
            named.append(f"wake_{p}_50hz_zmq_p50_vs")
    # read_async against asyncio's own floor (information beside the targets).
    named += [f"wake_py_py_async_{rate}_{q}_vs_pipe_async" for rate in WAKE_RATES
              for q in ("p50", "p99", "cpu")]
    named += [f"wake_py_py_async_{rate}_cpu_vs_pipe" for rate in WAKE_RATES]
    missing = [k for k in named + MACHINE if k not in figures]
    assert not missing, missing
    for k in named:
        assert isinstance(figures[k], (int, float)) and math.isfinite(figures[k]), (k, figures[k])
        assert figures[k] > 0, (k, figures[k])
    if not java:
        assert not [k for k in figures if k.startswith(("wake_java_", "wake_py_java_"))]
        assert set(figures["raw"]["wake_skipped"]) == set(WAKE_JAVA_PAIRS)
    else:
        # The JVM readers slept on the wake file, woken by the writers (not polling instead).
        for p in WAKE_JAVA_READERS:
            assert figures["raw"][f"wake_{p}_1khz"]["java_wake_library_loaded"], p
    # The ratios are the figures' own, and every target is reported, met or not.
    assert figures["wake_py_py_1khz_p50_vs_pipe"] == pytest.approx(
        figures["wake_py_py_1khz_p50_ns"] / figures["wake_pipe_1khz_p50_ns"])
    rows = {t["target"]: t for t in figures["targets"]}
    assert len(rows) == len(bus_pairs) * (3 * len(WAKE_RATES) + (1 if zmq else 0)) + 2, list(rows)
    assert all(isinstance(t["met"], bool) and t["measured"] for t in rows.values())
    assert len(figures["information"]) == 3 * len(WAKE_RATES)
    assert all("asyncio floor" in t["row"] and t["measured"] for t in figures["information"])
    table = (tmp_path / "wake.md").read_text()
    assert "| Python -> Python, await read_async() | 50 Hz (20 ms sleep) |" in table
    assert "| floor: pipe, blocking os.read | 1 kHz (1 ms sleep) |" in table
    assert "| asyncio floor: pipe, loop.add_reader + os.read | 50 Hz (20 ms sleep) |" in table
    assert "against asyncio's own floor (information, no target)" in table
    assert "| spin_park / busy_spin |" in table and "### Targets of issue 22" in table
    assert f"Machine: {figures['machine_cpu']}, {figures['machine_cores']} cores" in table
    after = {n for n in os.listdir("/dev/shm") if n.startswith("mbperf-")}
    assert after <= before



def test_segment_memory_reports_every_step_and_leaves_no_file(tmp_path):
    # A small segment, one repetition: well-formed figures only (the timings are the machine's).
    sys.path.insert(0, os.path.join(ROOT, "perf"))
    try:
        import segment_memory
    finally:
        sys.path.pop(0)
    cost = segment_memory.measure(1 << 20, reps=1, directory=str(tmp_path))
    assert list(cost) == segment_memory.STEPS
    assert all(isinstance(v, float) and v >= 0 for v in cost.values()), cost
    assert list(tmp_path.iterdir()) == []
    # Four writers cost the segment more than one: three more mappings and unmappings.
    assert segment_memory.per_segment(cost, 4) >= segment_memory.per_segment(cost, 1)
    assert segment_memory.share(cost, 1, "other_populate_read", 1e6, 20, 1 << 20, 2) == \
        pytest.approx(1e6 * 20 / (1 << 20) * segment_memory.per_segment(cost, 1) / 1e3 / 2)


def test_asyncio_bench_quick_run_compares_the_bus_with_asyncios_floor(tmp_path):
    # perf/bench_asyncio.py (issue 33): the pipe floor, the ring and the relay thread in one run.
    out = tmp_path / "asyncio.json"
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "perf", "bench_asyncio.py"),
                           "--rounds", "1", "--n", "60", "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(out.read_text())["figures"]
    assert set(figures) == {"pipe_async", "ring", "thread"}
    for name, f in figures.items():
        assert f["messages"] == 60 - 6, name
        assert all(math.isfinite(f[k]) and f[k] > 0 for k in ("p50_us", "p99_us", "cpu_pct"))
    assert "| bus, read_async(), fileno() an io_uring |" in proc.stdout
    assert "target p50 <= 1.5 x floor:" in proc.stdout
