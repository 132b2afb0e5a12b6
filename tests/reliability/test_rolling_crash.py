"""The rolling bus across languages under crashes (issue 10, "what it must show").

1. Two Python and two Java writer processes write ~10 M records through ~77 segments of 2 MiB
   while two Python and two Java readers follow live; writers are SIGKILLed at random moments,
   writers of both languages stopped inside a segment creation (MAPPEDBUS_TEST_ROLL_STALL, the
   same hook in rolling/directory.py and RollingDir.java) and Java ones near a segment boundary; each
   killed writer is replaced
   by a new one that writes the rest of its share. Every reader prints one summary line
   (rolling_child.py verify / RollingVerify): the four lines must be identical, and agree with
   what the writers report and with a scan of the files.
2. A paused reader of either language behind a Java writer with retention reports exactly the
   lost range, computed here from the directory listing and the sizes.
3. A bus deleted and recreated by a writer of the other language: readers of both languages
   notice (BusReplacedError / BusReplacedException) instead of waiting forever.
"""
import os
import random
import re
import signal
import struct
import subprocess
import sys
import threading
import time

import numpy
import pytest

from mappedbus_py import (BusGapError, MappedBusReader, RollingBusReader, RollingBusWriter,
                          jvm, rolling)
from mappedbus_py.formats import layout
from reliability_helpers import ROOT, have_java, shm_dir  # noqa: F401 (fixture)

pytestmark = [pytest.mark.slow, pytest.mark.java]

sys.path.insert(0, str(ROOT / "tests"))
from support import rolling_child  # noqa: E402  (the readers' summary, to read the files the same way)

ROLLING_CHILD = [sys.executable, str(ROOT / "tests" / "support" / "rolling_child.py")]
BUS_TOOL = "io.mappedbuspy.tools.BusTool"
VERIFY = "io.mappedbuspy.tools.RollingVerify"
JVM_ARGS = ("-Xmx64m", "-XX:+UseSerialGC")

RS = 8
SLOT = 16
SLOT_DT = numpy.dtype([("status", "<i4"), ("meta", "<i4"), ("wid", "<i4"), ("i", "<i4")])
TIMEOUT_MS = 200              # readers' rollback timeout: a killed writer's slot costs one
SUMMARY = re.compile(r"VERIFY n=(\d+) skipped=(\d+) lost=(\d+) hash=([0-9a-f]{16}) bad=(\d+) "
                     r"writers=(\S*)")
TMP_PID = re.compile(r"-(\d+)-[0-9a-f]+$")


@pytest.fixture(scope="module")
def jar():
    if not have_java():
        pytest.skip("needs a JDK (java and javac) on PATH")
    # Other sessions build too: the same lock as the working rules' build command.
    build = ["flock", "/tmp/mb-java.lock", "bash", str(ROOT / "interop" / "build.sh")]
    proc = subprocess.run(build, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return jvm.jar_path(build=False)


_children = []


@pytest.fixture(autouse=True)
def _no_child_left(shm_dir):
    """A failed test leaves no process behind (readers wait for a stop file forever); they
    are killed before shm_dir is removed."""
    yield
    while _children:
        c = _children.pop()
        if c.p.poll() is None:
            c.kill()


class Child:
    """A child process whose stdout lines are collected by a thread (no pipe fills up) and
    whose stderr goes to a file, for failure messages."""

    def __init__(self, name, cmd, logdir, env=None):
        self.name = name
        self.err_path = os.path.join(logdir, f"{name}.err")
        with open(self.err_path, "w") as err:
            self.p = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=err,
                                      text=True, env=env)
        _children.append(self)
        self.pid = self.p.pid
        self.lines = []
        self._t = threading.Thread(target=self._collect, daemon=True)
        self._t.start()

    def _collect(self):
        for line in self.p.stdout:
            self.lines.append(line.rstrip("\n"))

    def has(self, prefix):
        return any(line.startswith(prefix) for line in self.lines)

    def wait_line(self, prefix, timeout):
        deadline = time.monotonic() + timeout
        while not self.has(prefix):
            assert self.p.poll() is None or self._t.is_alive(), self.describe("exited")
            assert time.monotonic() < deadline, self.describe(f"no {prefix!r} in {timeout} s")
            time.sleep(0.005)

    def kill(self):
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()
        self._t.join(10)

    def finish(self, timeout):
        try:
            self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(self.describe(f"still running after {timeout} s"))
        self._t.join(10)
        assert self.p.returncode == 0, self.describe(f"exit {self.p.returncode}")
        return self.lines

    def describe(self, what):
        with open(self.err_path) as f:
            err = f.read()[-3000:]
        return f"{self.name} (pid {self.pid}): {what}\nstdout: {self.lines[-5:]}\nstderr: {err}"


def java_cmd(main_class, *args):
    return jvm.java_command(main_class, *args, jvm_args=JVM_ARGS)


def py_reader(bus, seg, *opts):
    return ROLLING_CHILD + ["verify", bus, seg, RS, *opts]


def java_reader(bus, seg, *opts):
    return java_cmd(VERIFY, bus, seg, RS, *opts)


def summary(lines):
    """A verify reader's output -> (its end line or None, RATE fields, the summary fields)."""
    assert lines and SUMMARY.fullmatch(lines[-1]), lines[-3:]
    end = [line for line in lines if line.startswith(("GAP ", "REPLACED"))]
    rate = [line.split()[1:] for line in lines if line.startswith("RATE ")]
    m = SUMMARY.fullmatch(lines[-1])
    writers = {}
    for item in filter(None, m.group(6).split(",")):
        w, c, f, last = map(int, item.split(":"))
        writers[w] = (c, f, last)
    return (end[0] if end else None, rate[0],
            dict(n=int(m.group(1)), skipped=int(m.group(2)), lost=int(m.group(3)),
                 hash=m.group(4), bad=int(m.group(5)), writers=writers))


def end_offset(seg):
    return 8 + (seg - 8) // SLOT * SLOT


def scan_segment(bus, index, seg):
    """The slots of segment ``index`` below its limit (and its end), from the file itself."""
    with open(rolling.segment_path(bus, index), "rb") as f:
        data = f.read(end_offset(seg))
    limit = struct.unpack_from("<q", data)[0]
    n = (min(limit, end_offset(seg)) - 8) // SLOT
    return limit, numpy.frombuffer(data, dtype=SLOT_DT, count=max(n, 0), offset=8)


def expected_hash(values):
    h = 0
    for v in values:
        h = (h * rolling_child.HASH_P + v) & ((1 << 64) - 1)
    return f"{h:016x}"


# -- 1. mixed writers, live readers, kills ---------------------------------------------------

SEG = 2 << 20                 # 131071 slots of 16 bytes: 10 M records fill ~77 segments
TOTAL = 10_000_000
LANES = ("py", "py", "java", "java")
SHARE = TOTAL // len(LANES)


class Run:
    """The writers of test 1: four lanes, each writing SHARE records through a chain of
    writer processes (a killed one is replaced by a new writer id writing the rest)."""

    def __init__(self, bus, logdir):
        self.bus, self.logdir = bus, logdir
        self.remaining = [SHARE] * len(LANES)
        self.current = [None] * len(LANES)     # (wid, Child, first segment it may write)
        self.writers = {}                      # wid -> dict(lane, lang, state, count, committed)
        self.next_wid = 1
        self.kills = []                        # (kind, wid, lane, segment at the kill)
        # Lane 0's (Python) and lane 2's (Java) first writers stop in their first segment
        # creation; lane 1's in the first one of a writer started mid-run (test: "arm-stall").
        self.stalls_wanted = {0: "before-link", 2: "after-link"}

    def start(self, lane):
        wid, self.next_wid = self.next_wid, self.next_wid + 1
        count, lang = self.remaining[lane], LANES[lane]
        first_seg = max(0, rolling.list_segments(self.bus)[-1] - 1)
        # The same hook in both languages (rolling.py, RollingDir.java).
        env = dict(os.environ)
        stall = self.stalls_wanted.get(lane)
        if stall:
            env[rolling.directory.STALL_ENV] = stall
        if lang == "py":
            cmd = ROLLING_CHILD + ["write", self.bus, SEG, RS, count, wid]
        else:
            cmd = java_cmd(BUS_TOOL, "rolling-write", self.bus, SEG, RS, count, wid)
        child = Child(f"writer{wid}-{lang}", cmd, self.logdir, env=env)
        self.current[lane] = (wid, child, first_seg)
        self.writers[wid] = dict(lane=lane, lang=lang, state="running", count=count, stall=stall,
                                 pid=child.pid)

    def committed_in_files(self, wid, first_seg):
        """A dead writer's committed records, counted in the segment files."""
        n = 0
        for k in rolling.list_segments(self.bus):
            if k >= first_seg:
                _, slots = scan_segment(self.bus, k, SEG)
                n += int(numpy.count_nonzero((slots["status"] == 1) & (slots["wid"] == wid)))
        return n

    def kill(self, lane, kind, segment):
        wid, child, first_seg = self.current[lane]
        child.kill()
        if child.p.returncode != -signal.SIGKILL:    # it finished just before the signal
            return self.reap(lane)
        committed = self.committed_in_files(wid, first_seg)
        w = self.writers[wid]
        w.update(state="killed", committed=committed)
        self.kills.append((kind, wid, lane, segment))
        if kind.startswith("stall"):
            self.stalls_wanted.pop(lane, None)
        self.remaining[lane] -= committed
        self.start(lane)

    def reap(self, lane):
        """The lane's writer exited: record its report; True when the lane is done."""
        wid, child, _ = self.current[lane]
        lines = child.finish(10)
        m = re.fullmatch(r"wrote (\d+) committed (\d+)", lines[-1] if lines else "")
        assert m, child.describe("no 'wrote N committed M' line")
        count, committed = int(m.group(1)), int(m.group(2))
        assert count == self.remaining[lane]
        self.writers[wid].update(state="finished", committed=committed)
        self.remaining[lane] = 0
        self.current[lane] = None
        return True

    def alive(self, lang=None):
        return [lane for lane, cur in enumerate(self.current)
                if cur is not None and (lang is None or LANES[lane] == lang)]


def newest_with_records(bus, seg):
    """(index, limit) of the segment being written now."""
    segs = rolling.list_segments(bus)
    for k in reversed(segs):
        limit = rolling.segment_limit(bus, k)
        if limit is not None and limit > 8:
            return k, limit
    return segs[0], 8


def test_mixed_writers_killed_at_random_and_during_rolls_leave_every_reader_the_same_order(
        jar, shm_dir, tmp_path):
    seed = int(os.environ.get("MAPPEDBUS_SEED", time.time_ns() % 2**31))
    rng = random.Random(seed)
    ctx = f"(seed {seed}; MAPPEDBUS_SEED={seed} repeats the random choices)"
    bus = str(shm_dir / "bus.d")
    logdir = str(tmp_path)
    RollingBusWriter(bus, SEG, RS).open().close()       # readers never create the bus
    t0 = time.monotonic()
    stop = str(tmp_path / "stop")
    opts = ("--timeout", TIMEOUT_MS, "--idle-exit", 1500, "--stop-file", stop)
    readers = [Child(f"reader{k}-py", py_reader(bus, SEG, *opts), logdir) for k in range(2)]
    readers += [Child(f"reader{k}-java", java_reader(bus, SEG, *opts), logdir) for k in (2, 3)]
    for r in readers:
        r.wait_line("ready", 60)                        # following from the very start
    run = Run(bus, logdir)
    t_write = time.monotonic()
    for lane in range(len(LANES)):
        run.start(lane)
    # Java writers are also killed near a boundary of these segments or later: in
    # the last 5% of a segment or the first 2% of the next; four random kills (any lane) a
    # random delay after these segments start.
    java_at = {2: rng.randint(3, 12), 3: rng.randint(13, 24)}
    random_at = sorted(rng.sample(range(5, 60), 4))
    pending_random = None
    arm_stall_at = rng.randint(10, 30)
    deadline = time.monotonic() + 240
    while any(run.current):
        assert time.monotonic() < deadline, f"writers not done after 240 s {ctx}: {run.writers}"
        k, limit = newest_with_records(bus, SEG)
        for lane in range(len(LANES)):
            cur = run.current[lane]
            if cur is None:
                continue
            wid, child, _ = cur
            if child.p.poll() is not None:
                run.reap(lane)
            elif run.writers[wid]["stall"] and child.has("stalled"):
                run.kill(lane, f"stall-{run.writers[wid]['stall']}", k)
        for lane, at in list(java_at.items()):
            near = limit >= 0.95 * SEG or (k > 0 and limit <= 0.02 * SEG)
            if k >= at and near and run.current[lane] is not None:
                run.kill(lane, "java-boundary", k)
                del java_at[lane]
        if arm_stall_at is not None and k >= arm_stall_at and run.current[1] is not None:
            # The replacement of this writer stops inside the next segment it creates.
            arm_stall_at = None
            run.stalls_wanted[1] = "after-link"
            run.kill(1, "arm-stall", k)
        if random_at and k >= random_at[0] and pending_random is None:
            random_at.pop(0)
            pending_random = time.monotonic() + rng.uniform(0, 0.3)
        if pending_random is not None and time.monotonic() >= pending_random:
            pending_random = None
            if run.alive():
                run.kill(rng.choice(run.alive()), "random", k)
        time.sleep(0.0005)
    t_written = time.monotonic()
    with open(stop, "w"):
        pass
    results = [summary(r.finish(120)) for r in readers]
    t_end = time.monotonic()

    kinds = [kind for kind, *_ in run.kills]
    stalled = {run.writers[wid]["lang"] for kind, wid, *_ in run.kills if kind.startswith("stall")}
    assert stalled == {"py", "java"}, f"not a writer of each language killed mid-roll {ctx}"
    assert "java-boundary" in kinds, f"no Java writer killed at a boundary {ctx}: {run.kills}"

    # All four readers: one and the same summary (count, rollbacks, per-writer figures, hash).
    first = results[0][2]
    for (end, _, s), r in zip(results, readers):
        assert end is None, f"{r.name}: {end} {ctx}"
        assert s == first, f"{r.name} differs from {readers[0].name} {ctx}:\n{s}\n{first}"
    assert first["bad"] == 0 and first["lost"] == 0, ctx
    # Rolled-back slots, from the files: a live writer writes its payload before it learns at
    # the commit that a reader rolled the slot back, so such a slot names its (writer, i).
    segs = rolling.list_segments(bus)
    rolled = {}
    for k in segs:
        _, slots = scan_segment(bus, k, SEG)
        for idx in numpy.flatnonzero(slots["status"] == 2).tolist():
            rolled[int(slots["wid"][idx]), int(slots["i"][idx])] = (k, 8 + idx * SLOT)
    # Per writer: what it reported committed (finished) or what the files hold (killed); its
    # sequence has no hole but the rows a reader rolled back while it lived (a writer paused
    # longer than the timeout between allocating and committing), found rolled back above.
    live_rolled_back = []
    for wid, w in run.writers.items():
        got = first["writers"].get(wid)
        if w["committed"] == 0:
            assert got is None, f"writer {wid} {w}: read {got} {ctx}"
            continue
        assert got is not None, f"writer {wid} {w} never read {ctx}"
        count, lo, hi = got
        assert count == w["committed"], f"writer {wid} {w}: read {got} {ctx}"
        attempted = w["count"] if w["state"] == "finished" else hi + 1
        if count < attempted:
            seen = set()
            for k in segs:
                _, slots = scan_segment(bus, k, SEG)
                seen.update(slots["i"][(slots["status"] == 1) & (slots["wid"] == wid)].tolist())
            missing = sorted(set(range(attempted)) - seen)
            for i in missing:
                assert (wid, i) in rolled, (
                    f"writer {wid} {w}: read {got}; its record {i} is neither committed nor "
                    f"rolled back {ctx}")
                live_rolled_back.append((wid, i, rolled[wid, i]))
    assert set(first["writers"]) <= set(run.writers), ctx
    # A killed writer's replacement writes what it did not commit (holes included): only the
    # rows finished writers saw rolled back are missing from the total.
    finished_short = sum(w["count"] - w["committed"] for w in run.writers.values()
                         if w["state"] == "finished")
    assert first["n"] == TOTAL - finished_short, ctx
    # Killed writers may leave the slot they held allocated; readers rolled it back.
    assert len(live_rolled_back) <= first["skipped"] <= len(live_rolled_back) + len(run.kills), ctx

    # The files: one segment per index from 0, no hole; every slot settled (committed or
    # rolled back); each segment a plain Mappedbus file whose records, in order, hash as the
    # readers' did.
    assert segs == list(range(len(segs))) and len(segs) >= 50, segs
    newest, _ = newest_with_records(bus, SEG)
    plain = rolling_child.Verifier()
    status_counts = numpy.zeros(3, dtype=numpy.int64)
    buf = numpy.empty(1 << 16, dtype="<u8")
    for k in segs:
        limit, slots = scan_segment(bus, k, SEG)
        if k < newest:
            assert limit >= end_offset(SEG), f"segment {k} not full: limit {limit}"
        counts = numpy.bincount(slots["status"], minlength=3)
        assert len(counts) == 3, f"segment {k}: a slot status out of 0..2: {counts}"
        assert counts[0] == 0, f"segment {k}: {counts[0]} slots never settled"
        status_counts += counts
        with MappedBusReader(rolling.segment_path(bus, k), SEG, RS, read_only=True,
                             timeout=TIMEOUT_MS / 1000) as r:
            got = 0
            while True:
                try:
                    n = r.read_batch(buf, timeout=0)
                except EOFError:
                    break
                if n == 0:
                    break
                plain.add(buf[:n])
                got += n
        assert got == counts[1], f"segment {k}: a plain reader read {got} of {counts[1]}"
    assert (plain.n, plain.hash) == (first["n"], int(first["hash"], 16))
    assert status_counts[1] == first["n"] and status_counts[2] == first["skipped"]
    # Temporary files: only those of writers killed inside a segment creation.
    tmps = [n for n in os.listdir(bus) if n.startswith(layout.TMP_PREFIX)]
    killed_pids = {run.writers[wid]["pid"] for _, wid, _, _ in run.kills}
    for name in tmps:
        m = TMP_PID.search(name)
        assert m and int(m.group(1)) in killed_pids, f"{name}: not left by a killed writer"

    rates = [(r.name, int(n), float(secs), float(cpu)) for r, (_, (n, secs, cpu), _)
             in zip(readers, results)]
    print(f"\nrolling crash run {ctx}: {first['n']} records, {len(segs)} segments, "
          f"{len(run.kills)} kills {run.kills}, {len(run.writers)} writer processes, "
          f"skipped={first['skipped']} (live rollbacks: (writer, i, (segment, offset)) "
          f"{live_rolled_back}), tmp left {tmps}; "
          f"readers ready {t_write - t0:.1f} s, writing {t_written - t_write:.1f} s, "
          f"readers done {t_end - t_written:.1f} s later")
    for name, n, secs, cpu in rates:
        print(f"  {name}: {n} records in {secs:.1f} s first to last "
              f"({n / max(secs, 1e-9) / 1e6:.2f} M/s), {cpu:.1f} s CPU "
              f"({n / max(cpu, 1e-9) / 1e6:.2f} M records per CPU s)")


# -- 2. a paused reader behind a Java writer with retention ----------------------------------

GAP_SEG = 4096
GAP_PER = (GAP_SEG - 8) // SLOT        # 255


def maps_segment(pid, bus, index):
    """Whether process ``pid`` maps segment ``index`` of ``bus`` (maybe removed since)."""
    name = os.path.join(bus, layout.segment_name(index))
    with open(f"/proc/{pid}/maps") as f:
        return any(line.split(None, 5)[-1].strip().startswith(name) for line in f
                   if len(line.split(None, 5)) == 6)


def test_paused_readers_of_both_languages_report_the_exact_range_retention_removed(
        jar, shm_dir, tmp_path):
    bus = str(shm_dir / "bus.d")
    logdir = str(tmp_path)
    # A Java writer with retention 2 fills segments 0 and 1 and starts segment 2 (10 records:
    # not past the middle, so no spare segment 3 yet).
    phase1 = 2 * GAP_PER + 10
    Child("writer1", java_cmd(BUS_TOOL, "rolling-write", bus, GAP_SEG, RS, phase1, 1,
                              "--retain-segments", 2), logdir).finish(120)
    assert rolling.list_segments(bus)[-1] == 2
    first_seg = rolling.list_segments(bus)[0]
    stop = str(tmp_path / "stop")
    common = ("--timeout", TIMEOUT_MS, "--idle-exit", 500, "--stop-file", stop)
    readers = {}
    for lang, make in (("py", py_reader), ("java", java_reader)):
        for gap in ("raise", "skip"):
            readers[lang, gap] = Child(f"reader-{lang}-{gap}",
                                       make(bus, GAP_SEG, *common, "--on-gap", gap), logdir)
    # Each reader reads up to segment 2 and waits there, in the middle of it; then it is paused.
    deadline = time.monotonic() + 60
    for r in readers.values():
        r.wait_line("ready", 60)
        while not maps_segment(r.pid, bus, 2):
            assert time.monotonic() < deadline, r.describe("never mapped segment 2")
            time.sleep(0.01)
        r.p.send_signal(signal.SIGSTOP)
    # Meanwhile a Java writer goes on through ten more segments; retention removes 0..~9.
    phase2 = 10 * GAP_PER
    Child("writer2", java_cmd(BUS_TOOL, "rolling-write", bus, GAP_SEG, RS, phase2, 2), logdir
          ).finish(120)
    segs = rolling.list_segments(bus)
    oldest = segs[0]
    assert oldest > 3 and segs == list(range(oldest, segs[-1] + 1)), segs
    with open(stop, "w"):
        pass
    for r in readers.values():
        r.p.send_signal(signal.SIGCONT)
    # Each reader still maps segment 2, so it reads it to its end; segments 3..oldest-1 are
    # lost: from the first position of 3 to the first of the oldest retained.
    lost_from, lost_to = 3 * GAP_SEG + 8, oldest * GAP_SEG + 8
    lost = (oldest - 3) * GAP_PER
    records = [(1, i) for i in range(phase1)] + [(2, i) for i in range(phase2)]
    before = records[first_seg * GAP_PER:3 * GAP_PER]
    after = records[oldest * GAP_PER:]
    for (lang, gap), r in readers.items():
        end, _, s = summary(r.finish(60))
        if gap == "raise":
            assert end == f"GAP {lost_from} {lost_to} {lost}", r.describe(f"segments {segs}")
            expect = before
        else:
            assert end is None, r.name
            assert s["lost"] == lost, r.name
            expect = before + after
        assert s["n"] == len(expect) and s["skipped"] == 0 and s["bad"] == 0, (r.name, s)
        assert s["hash"] == expected_hash(w | i << 32 for w, i in expect), (r.name, s)


# -- 3. identity across languages -------------------------------------------------------------

@pytest.mark.parametrize("first, second", [("py", "java"), ("java", "py")])
def test_a_bus_recreated_by_the_other_language_is_noticed_by_readers_of_both(
        jar, shm_dir, tmp_path, first, second):
    seg = 1 << 16
    bus = str(shm_dir / "bus.d")
    logdir = str(tmp_path)

    def write(lang, count, wid):
        cmd = (ROLLING_CHILD + ["write", bus, seg, RS, count, wid] if lang == "py" else
               java_cmd(BUS_TOOL, "rolling-write", bus, seg, RS, count, wid))
        lines = Child(f"writer{wid}-{lang}", cmd, logdir).finish(120)
        assert lines[-1] == f"wrote {count} committed {count}"

    write(first, 100, 1)
    # Waiting in the middle of segment 0, sleeping 1 ms between polls (the tools' default): the
    # identity check is due by the clock (every 100 ms), not only every 2^16 empty polls.
    readers = [Child("reader-py", py_reader(bus, seg, "--idle-exit", 60000), logdir),
               Child("reader-java", java_reader(bus, seg, "--idle-exit", 60000), logdir)]
    for r in readers:
        r.wait_line("ready", 60)
    time.sleep(0.5)
    old_id = rolling.read_bus_meta(bus).id
    for name in os.listdir(bus):
        os.unlink(os.path.join(bus, name))
    os.rmdir(bus)
    write(second, 100, 2)
    assert rolling.read_bus_meta(bus).id != old_id
    for r in readers:
        end, _, s = summary(r.finish(10))     # well before the 60 s idle exit
        assert end == "REPLACED", r.name
        # Nothing of the new bus was taken for the old one's.
        assert s["n"] == 100 and s["writers"] == {1: (100, 0, 99)}, (r.name, s)


# -- bugs found on the way (fixed since) ------------------------------------------------------

def test_python_write_batch_rolls_when_a_batch_starts_exactly_at_the_segment_end(shm_dir):
    w = RollingBusWriter(str(shm_dir / "bus.d"), 8 + 4 * SLOT, RS).open()
    rows = numpy.zeros((1, 2), dtype="<i4")
    try:
        for _ in range(5):         # the fifth row starts at the end of the full segment 0
            assert w.write_batch(rows, 8) == 1
        assert w.segment == 1
    finally:
        w.close()


def test_python_read_batch_delivers_the_rows_before_a_gap(shm_dir):
    seg = 8 + GAP_PER * SLOT
    bus = str(shm_dir / "bus.d")
    w = RollingBusWriter(bus, seg, RS, retain_segments=1).open()
    rows = numpy.zeros((1, 2), dtype="<i4")
    try:
        w.write(rows.tobytes())
        with RollingBusReader(bus, timeout=TIMEOUT_MS / 1000) as r:     # maps segment 0
            for _ in range(6 * GAP_PER):
                w.write(rows.tobytes())
            assert rolling.list_segments(bus)[0] > 1      # segment 1 is gone
            out = numpy.empty(10 * GAP_PER, dtype="<u8")
            # Segment 0 is still mapped: its records first, then the gap on the next call.
            assert r.read_batch(out) == GAP_PER
            with pytest.raises(BusGapError):
                r.read_batch(out)
    finally:
        w.close()
