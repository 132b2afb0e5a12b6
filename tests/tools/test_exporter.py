"""``mappedbus exporter``: a real exporter process scraped over HTTP on an ephemeral port, its
output parsed with prometheus_client's parser; consumers, parked readers and writers are real
processes on real buses. And the incremental counting behind it (``mappedbus_py.tools.metrics``)."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import GOLDEN, SHM
from mappedbus_py import MappedBusReader, MappedBusWriter, RollingBusWriter
from mappedbus_py.formats.positions import records_to
from mappedbus_py.tools import metrics
from mappedbus_py.consumers import registry_path
from mappedbus_py.formats.layout import WAKE_FILE, WAKE_SUFFIX
from test_cli_consumers import Consumer, one_line

RECORD = 12


class Exporter:
    """A ``mappedbus exporter`` process on a free port; ``scrape()`` parses /metrics."""

    def __init__(self, *paths, args=()):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mappedbus_py", "exporter", *map(str, paths), "--port", "0",
             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert "/metrics" in line, (line, self.proc.stderr.read() if self.proc.poll() else "")
        self.url = line.split()[-1]
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])

    def text(self):
        with urllib.request.urlopen(self.url, timeout=10) as r:
            assert r.status == 200
            return r.read().decode()

    def scrape(self):
        """{(sample name, frozenset of label items): value}."""
        out = {}
        for family in text_string_to_metric_families(self.text()):
            for s in family.samples:
                out[s.name, frozenset(s.labels.items())] = s.value
        return out

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, err


def value(samples, name, **labels):
    return samples[name, frozenset(labels.items())]


@pytest.fixture
def rolling_path():
    path = SHM / f"mbtest-{os.getpid()}-{uuid.uuid4().hex[:12]}.d"
    yield str(path)
    shutil.rmtree(path, ignore_errors=True)


def write(path, n, **kw):
    w = RollingBusWriter(path, 4096, RECORD, **kw) if path.endswith(".d") else \
        MappedBusWriter(path, 100_000, RECORD)
    with w:
        for i in range(n):
            w.write(i.to_bytes(RECORD, "little"))


def test_a_scrape_shows_records_rollbacks_consumers_and_limits(bus_path, rolling_path):
    with MappedBusWriter(bus_path, 100_000, RECORD) as w:
        for i in range(20):
            w.write(bytes(RECORD))
        w._allocate_only(b"")                    # a writer that never commits: rolled back
        w.write(bytes(RECORD))
        w._allocate_only(b"")                    # and one that is mid-write: not set
    with MappedBusReader(bus_path, timeout=0.02) as r:
        for _ in range(21):
            assert r.read(5) is not None
    write(rolling_path, 300)
    gone = Consumer(bus_path, "archiver", 5, stay=False)
    live = Consumer(bus_path, "billing", 15)
    rlive = Consumer(rolling_path, "spark-query", 250)
    ex = Exporter(bus_path, rolling_path)
    try:
        s = ex.scrape()
        b, r = {"bus": bus_path}, {"bus": rolling_path}
        assert value(s, "mappedbus_up", **b) == 1 and value(s, "mappedbus_up", **r) == 1
        assert value(s, "mappedbus_records_committed_total", **b) == 21
        assert value(s, "mappedbus_records_rolled_back_total", **b) == 1
        assert value(s, "mappedbus_slots_not_set", **b) == 1
        assert value(s, "mappedbus_slots_allocated_total", **b) == 23
        assert value(s, "mappedbus_slots_corrupt", **b) == 0
        assert value(s, "mappedbus_limit_position", **b) == 8 + 23 * 20
        assert value(s, "mappedbus_capacity_records", **b) == (100_000 - 8) // 20
        assert value(s, "mappedbus_full", **b) == 0
        assert value(s, "mappedbus_records_committed_total", **r) == 300
        assert value(s, "mappedbus_segments", **r) >= 2
        assert value(s, "mappedbus_capacity_records", **r) == 204
        assert value(s, "mappedbus_consumers", **b) == 2
        assert value(s, "mappedbus_consumers", **r) == 1
        assert len([k for k in s if k[0] == "mappedbus_bus_info"]) == 2
        info = dict(next(k for k in s if k[0] == "mappedbus_bus_info" and
                         ("bus", bus_path) in k[1])[1])
        assert info["kind"] == "single" and len(info["bus_id"]) == 32

        c = {"bus": bus_path, "consumer": "billing"}
        assert value(s, "mappedbus_consumer_position", **c) == live.position
        assert value(s, "mappedbus_consumer_lag_records", **c) == 23 - 15
        assert value(s, "mappedbus_consumer_alive", **c) == 1
        assert value(s, "mappedbus_consumer_expired", **c) == 0
        assert 0 <= value(s, "mappedbus_consumer_last_commit_age_seconds", **c) < 60
        a = {"bus": bus_path, "consumer": "archiver"}
        assert value(s, "mappedbus_consumer_alive", **a) == 0
        assert value(s, "mappedbus_consumer_lag_records", **a) == 23 - 5
        q = {"bus": rolling_path, "consumer": "spark-query"}
        assert value(s, "mappedbus_consumer_lag_records", **q) == 50
        assert value(s, "mappedbus_consumer_position", **q) == rlive.position
        assert value(s, "mappedbus_exporter_collect_seconds") < 1

        # The consumer process goes: no longer alive, its position kept.
        live.stop()
        s = ex.scrape()
        assert value(s, "mappedbus_consumer_alive", **c) == 0
        assert value(s, "mappedbus_consumer_position", **c) == live.position
    finally:
        live.stop()
        rlive.stop()
        code, err = ex.stop()
    assert code == 0 and err == ""


def test_the_text_format_uncompressed_whatever_prometheus_asks(bus_path):
    write(bus_path, 7)
    ex = Exporter(bus_path)
    try:
        req = urllib.request.Request(ex.url, headers={      # what Prometheus 2.x sends
            "Accept": "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
            "Accept-Encoding": "gzip"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.headers.get("Content-Encoding") is None
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = r.read().decode()
        families = {f.name: f for f in text_string_to_metric_families(text)}
        committed = families["mappedbus_records_committed"]
        assert committed.type == "counter" and committed.samples[0].value == 7
        assert "# EOF" not in text
    finally:
        ex.stop()


def test_counts_follow_new_records_incrementally_and_survive_retention(rolling_path):
    write(rolling_path, 10, retain_segments=1)
    ex = Exporter(rolling_path)
    r = {"bus": rolling_path}
    try:
        total = 10
        seen = []
        with RollingBusWriter(rolling_path) as w:
            for _ in range(12):                   # 12 x 100 records: about 6 segments
                for i in range(100):
                    w.write(bytes(RECORD))
                total += 100
                s = ex.scrape()
                seen.append(value(s, "mappedbus_records_committed_total", **r))
                assert seen[-1] == total           # a scrape reads what is new itself
        assert seen == sorted(seen)
        assert value(s, "mappedbus_slots_allocated_total", **r) == total
        assert value(s, "mappedbus_slots_uncounted", **r) == 0
        assert value(s, "mappedbus_first_position", **r) > 4096    # segment 0 went
        assert value(s, "mappedbus_segments", **r) <= 3
    finally:
        ex.stop()


def test_parked_readers_are_counted_and_an_absent_wake_file_is_not_created(bus_path,
                                                                           rolling_path):
    write(bus_path, 3)
    write(rolling_path, 3)
    for p in (bus_path + WAKE_SUFFIX, os.path.join(rolling_path, WAKE_FILE)):
        if os.path.exists(p):
            os.unlink(p)
    ex = Exporter(bus_path, rolling_path)
    try:
        s = ex.scrape()
        assert value(s, "mappedbus_parked_readers", bus=bus_path) == 0
        assert value(s, "mappedbus_parked_readers", bus=rolling_path) == 0
        assert not os.path.exists(bus_path + WAKE_SUFFIX)
        assert not os.path.exists(os.path.join(rolling_path, WAKE_FILE))
        # Two reader processes wait for a record that does not come: they park.
        waiting = [subprocess.Popen([sys.executable, "-c", f"""
import sys
from mappedbus_py import MappedBusReader
with MappedBusReader({bus_path!r}, start={8 + 3 * 20}) as r:
    print("waiting", flush=True)
    r.read(60)
"""], stdout=subprocess.PIPE, text=True) for _ in range(2)]
        try:
            for p in waiting:
                assert p.stdout.readline().strip() == "waiting"
            deadline = time.monotonic() + 10
            while value(ex.scrape(), "mappedbus_parked_readers", bus=bus_path) != 2:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            write(bus_path, 1)                    # wakes them
            deadline = time.monotonic() + 10
            while value(ex.scrape(), "mappedbus_parked_readers", bus=bus_path) != 0:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        finally:
            for p in waiting:
                p.kill()
                p.wait()
    finally:
        ex.stop()


def _non_loopback_address():
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))           # TEST-NET-1: nothing is sent
            ip = s.getsockname()[0]
    except OSError:
        return None
    return None if ip.startswith("127.") else ip


def test_the_exporter_binds_localhost_only_by_default(bus_path):
    psutil = pytest.importorskip("psutil")
    write(bus_path, 1)
    ex = Exporter(bus_path)
    try:
        assert ex.url == f"http://127.0.0.1:{ex.port}/metrics"
        listening = [c.laddr for c in psutil.Process(ex.proc.pid).net_connections(kind="inet")
                     if c.status == psutil.CONN_LISTEN]
        assert listening == [("127.0.0.1", ex.port)]
        other = _non_loopback_address()
        if other is not None:                     # reachable from this machine only
            with pytest.raises(OSError):
                socket.create_connection((other, ex.port), timeout=2).close()
        assert ex.text()
    finally:
        ex.stop()


def test_host_option_binds_where_told(bus_path):
    write(bus_path, 1)
    ex = Exporter(bus_path, args=("--host", "0.0.0.0"))
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ex.port}/metrics", timeout=10) as r:
            assert b"mappedbus_up" in r.read()
    finally:
        ex.stop()


def run_exporter(*args):
    p = subprocess.run([sys.executable, "-m", "mappedbus_py", "exporter", *map(str, args)],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def test_start_errors_are_one_line_and_exit_2(bus_path, tmp_path):
    write(bus_path, 3)
    code, out, err = run_exporter("/dev/shm/no-such-bus-here", "--port", "0")
    assert code == 2 and out == "" and one_line(err) and "no such file or directory" in err
    code, out, err = run_exporter(tmp_path, "--port", "0")
    assert code == 2 and one_line(err) and "without bus.meta" in err
    code, out, err = run_exporter(GOLDEN / "uncommitted-r12.bus", "--port", "0")
    assert code == 2 and one_line(err) and "no metadata" in err      # the Java original's
    code, out, err = run_exporter(bus_path, "--port", "70000")
    assert code == 2 and one_line(err) and "not a TCP port" in err
    # a port taken by someone else
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        code, out, err = run_exporter(bus_path, "--port", s.getsockname()[1])
    assert code == 2 and out == "" and one_line(err) and "cannot listen" in err
    # a corrupt registry
    Consumer(bus_path, "billing", 1, stay=False)
    with open(registry_path(bus_path), "r+b") as f:
        f.write(b"garbage!")
    code, out, err = run_exporter(bus_path, "--port", "0")
    assert code == 2 and out == "" and one_line(err)
    assert err.startswith(f"mappedbus: {registry_path(bus_path)}: not a bus consumer registry")


def test_a_bus_that_breaks_later_is_down_and_the_others_are_served(bus_path, rolling_path):
    write(bus_path, 3)
    write(rolling_path, 3)
    Consumer(bus_path, "billing", 1, stay=False)
    ex = Exporter(bus_path, rolling_path)
    try:
        assert value(ex.scrape(), "mappedbus_up", bus=bus_path) == 1
        with open(registry_path(bus_path), "r+b") as f:
            f.write(b"garbage!")
        s = ex.scrape()
        assert value(s, "mappedbus_up", bus=bus_path) == 0
        assert value(s, "mappedbus_exporter_errors_total", bus=bus_path) == 1
        assert value(s, "mappedbus_up", bus=rolling_path) == 1
        assert value(s, "mappedbus_records_committed_total", bus=rolling_path) == 3
        os.unlink(rolling_path + "/bus.meta")          # the rolling bus goes
        s = ex.scrape()
        assert value(s, "mappedbus_up", bus=rolling_path) == 0
    finally:
        code, err = ex.stop(signal.SIGINT)
    assert code == 130 and err == ""


# -- the incremental counting --------------------------------------------------------------

def test_a_refresh_reads_only_new_slots_and_recounts_the_uncommitted(bus_path):
    with MappedBusWriter(bus_path, 100_000, RECORD) as w:
        for _ in range(10):
            w.write(bytes(RECORD))
        c = metrics.open_bus(bus_path)
        single = c._single
        assert single.refresh() == 0                  # nothing new: only the limit is read
        for _ in range(5):
            w.write(bytes(RECORD))
        assert single.refresh() == 5 * 20
        late = w._allocate_only(b"")
        assert single.refresh() == 20
        s = c.snapshot()
        assert (s.committed, s.not_set) == (15, 1)
        assert w._commit_at(late)                     # the slot seen uncommitted commits
        assert single.refresh() == 0                  # re-read alone, no new slot
        s = c.snapshot()
        assert (s.committed, s.not_set, s.rolled_back) == (16, 0, 0)
    c.close()


def test_counts_agree_with_stat_on_a_bus_with_every_status(bus_path):
    from mappedbus_py.tools.views import describe
    with MappedBusWriter(bus_path, 100_000, RECORD) as w:
        for i in range(200):
            if i % 7 == 3:
                w._allocate_only(b"")
            else:
                w.write(bytes(RECORD))
    c = metrics.BusCounter(bus_path)
    while not c.refresh(budget=20 * 16):              # a small budget: many steps
        pass
    with MappedBusReader(bus_path, timeout=0.01) as r:  # rolls back the stalled ones
        time.sleep(0.05)
        while r.read(0.2) is not None:
            pass
    c.refresh()
    s = c.snapshot()
    d = describe(bus_path)["records"]
    assert (s.committed, s.rolled_back, s.not_set, s.corrupt) == \
        (d["committed"], d["rolled_back"], d["pending"], d["corrupt"])
    assert s.rolled_back == len([i for i in range(200) if i % 7 == 3])
    c.close()


def test_records_between_positions():
    assert records_to(8, 8 + 5 * 20, RECORD) == 5
    assert records_to(100, 8, RECORD) == 0
    # rolling, segment_size 4096: 204 records a segment
    assert records_to(8, 4096 + 8, RECORD, 4096) == 204
    assert records_to(8 + 200 * 20, 2 * 4096 + 8 + 20, RECORD, 4096) == 4 + 204 + 1


def test_without_prometheus_client_the_exporter_names_the_extra_and_the_cli_still_starts():
    code = ("import sys\n"
            "sys.modules['prometheus_client'] = None   # as if not installed\n"
            "from mappedbus_py.tools import cli, exporter\n"
            "try:\n"
            "    exporter._prometheus()\n"
            "except ImportError as e:\n"
            "    print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "pip install 'mappedbus_py[metrics]'" in proc.stdout, proc.stdout
