"""Frames and topics across languages (issue 36; docs/design/frames.md): Java reads the shared
vectors as their manifest says; Java and Python writers racing on one framed bus (messages of
0 B to 8 MiB) are read by Java and Python readers byte for byte in one order; a Java writer
SIGKILLed mid-message leaves no partial message and every reader skips the same; topic filters
in Java. FramesChild (interop/src/test) is the Java side; message s of writer w has topic
"w<w>", size(w, s) bytes of fill(w, s) (the same functions as FramesChild's)."""
import json
import os
import random
import shutil
import signal
import subprocess
import time
import zlib

import numpy
import pytest

from mappedbus_py import MappedBusReader, MappedBusWriter, jvm
from mappedbus_py.formats import layout
from support import procs

pytestmark = pytest.mark.java

VECTORS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vectors")
TESTS_JAR = (jvm.pathlib.Path(os.environ["MAPPEDBUS_PY_JARS"]) if os.environ.get("MAPPEDBUS_PY_JARS")
             else jvm.BUILD) / "mappedbuspy-tests.jar"
CHILD = "io.mappedbuspy.FramesChild"
RECORD = 256
FILE_SIZE = 512 << 20


@pytest.fixture(scope="module")
def java():
    procs.java_or_skip()
    if not TESTS_JAR.is_file():
        pytest.skip(f"{TESTS_JAR} is missing: run `bash interop/build.sh`")


@pytest.fixture
def shm(tmp_path):
    """A directory in /dev/shm (the messages are large): removed after the test."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else str(tmp_path)
    d = os.path.join(base, f"mbframes-{os.getpid()}-{random.getrandbits(40):x}")
    os.mkdir(d, 0o700)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def size(w, s):
    """FramesChild.size: 8 MiB, 0 B, then mostly small messages, some up to 8 MiB."""
    if s == 0:
        return 8 << 20 if w == 0 else 1 + w * 1000
    if s == 1:
        return 0
    h = ((w * 1_000_003 + s * 7919) * 2654435761) & 0xFFFFFFFF
    k = h % 8
    return h % (8 << 20) if k == 0 else h % (256 << 10) if k in (1, 2) else h % 4096


def fill(w, s, n):
    """FramesChild.fill: byte i = w*31 + s*17 + 7i + (i >> 8), mod 256."""
    i = numpy.arange(n, dtype=numpy.int64)
    return ((w * 31 + s * 17 + 7 * i + (i >> 8)) & 0xFF).astype(numpy.uint8).tobytes()


def _java(*args, stdout=subprocess.PIPE):
    cmd = jvm.java_command(CHILD, *map(str, args), classpath=[TESTS_JAR],
                           jvm_args=("-Xmx256m", "-XX:+UseSerialGC"))
    return subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True)


def _run(*args, timeout=120):
    p = _java(*args)
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, err[-3000:]
    return out


def _messages(out):
    """(position, topic, length, crc) of each MSG line, and the END line's numbers."""
    lines = out.splitlines()
    msgs = [tuple(ln.split()[1:]) for ln in lines if ln.startswith("MSG ")]
    end = [ln.split()[1:] for ln in lines if ln.startswith("END")]
    return [(int(p), None if t == "null" else t, int(n), int(c, 16)) for p, t, n, c in msgs], end


def _python_frames(what="writer"):
    """Skip unless this tree's Python core has framed writers (what="writer") or readers."""
    if not _python_has(what):
        pytest.skip(f"the Python core of this tree has no framed {what} yet")


def _python_has(what):
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "probe")
        try:
            MappedBusWriter(path, 1 << 16, RECORD, frames=True).open().close()
            if what == "reader":
                MappedBusReader(path, frames=True).open().close()
        except TypeError:
            return False
    return True


def _python_read(path, count, topics=None):
    """What a Python framed reader delivers: (position, topic, length, crc) of each message."""
    kw = {"topics": topics} if topics else {}
    out = []
    with MappedBusReader(path, frames=True, **kw) as r:
        for _ in range(count):
            rec = r.read(60)
            assert rec is not None, f"no message {len(out)} within 60 s"
            payload = bytes(rec.payload)
            out.append((rec.position, rec.topic, len(payload), zlib.crc32(payload)))
    return out


def _check_order(msgs):
    """Every message is message s of its writer, whole: the s-th of topic w<w>, of its size and
    bytes; each writer's messages in order 0, 1, 2, ...; positions increasing."""
    seen = {}
    for pos, topic, n, crc in msgs:
        w = int(topic[1:])
        s = seen.get(w, 0)
        assert n == size(w, s), (pos, topic, s, n)
        assert crc == zlib.crc32(fill(w, s, n)), (pos, topic, s)
        seen[w] = s + 1
    assert [m[0] for m in msgs] == sorted(m[0] for m in msgs)
    return seen


# -- the shared vectors ----------------------------------------------------------------------

def _vector_cases():
    with open(os.path.join(VECTORS, "frames.json")) as f:
        return json.load(f)["files"]


@pytest.mark.parametrize("case", _vector_cases(), ids=lambda c: c["file"])
def test_java_reads_the_shared_vectors_as_the_manifest_says(java, tmp_path, case):
    for name in os.listdir(VECTORS):
        if name.startswith(case["file"]):
            dst = tmp_path / name
            shutil.copyfile(os.path.join(VECTORS, name), dst)
            os.chmod(dst, 0o600)
    bus = tmp_path / case["file"]
    # The Java mapping is page-rounded and refuses a shorter file: zeros past file_size, which
    # no reader looks at (the Java original grows files so too).
    with open(bus, "r+b") as f:
        f.truncate(max(os.path.getsize(bus), -(-case["file_size"] // 4096) * 4096))
    out = _run("read-file", bus, case["record_size"], case["file_size"])
    got = [ln.split(" ", 4)[1:] for ln in out.splitlines() if ln.startswith("MSG ")]
    names = {e["id"]: e["name"] for e in case.get("topic_entries", [])}
    want = [[str(fr["position"]), str(names.get(fr["topic"])) if fr["topic"] else "null",
             str(fr["flags"]), fr["payload_hex"]] for fr in case["frames"] if fr["delivered"]]
    assert got == want
    assert out.splitlines()[-1] == "END"
    for topics, positions in case.get("filters", {}).items():
        out = _run("read-file", bus, case["record_size"], case["file_size"], topics)
        assert [int(ln.split()[1]) for ln in out.splitlines() if ln.startswith("MSG ")] == positions


def test_a_java_writer_writes_the_shared_vectors_byte_for_byte(java, tmp_path):
    case = next(c for c in _vector_cases() if c["file"] == "frames-sizes.bus")
    bus = tmp_path / "written.bus"
    lines = "".join(f"{fr['flags']} {fr['payload_hex']}\n" for fr in case["frames"])
    cmd = jvm.java_command(CHILD, "write-hex", str(bus), case["record_size"], case["file_size"],
                           classpath=[TESTS_JAR])
    p = subprocess.run(cmd, input=lines, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "written", p.stderr[-3000:]
    with open(os.path.join(VECTORS, case["file"]), "rb") as f:
        want = f.read()
    assert bus.read_bytes()[:case["file_size"]] == want


# -- writers racing ----------------------------------------------------------------------------

def _make(path, rolling=False, seg=None):
    args = ["make", path, seg or FILE_SIZE, RECORD] + (["rolling"] if rolling else [])
    assert _run(*args).strip() == "made"


def test_four_java_writers_race_to_java_readers_every_message_whole_in_one_order(java, shm):
    bus = os.path.join(shm, "bus")
    _make(bus)
    count = 10
    writers = [_java("write", bus, w, count) for w in range(4)]
    readers = [_java("read", bus, 4 * count), _java("read", bus, count, "w2")]
    outs = [p.communicate(timeout=180) for p in writers + readers]
    for p, (out, err) in zip(writers + readers, outs):
        assert p.returncode == 0, err[-3000:]
    all_msgs, end = _messages(outs[4][0])
    assert _check_order(all_msgs) == {w: count for w in range(4)}
    assert end == [["0", "0", "0"]]                     # nothing rolled back, nothing filtered
    w2, end2 = _messages(outs[5][0])
    assert w2 == [m for m in all_msgs if m[1] == "w2"]  # the filter: w2's, the same bytes
    # It passed over exactly the others' messages before w2's last one. How many that is depends
    # on the race (none when w2 finished before anyone else started), so it is counted, not assumed.
    last = w2[-1][0]
    assert int(end2[0][2]) == sum(1 for m in all_msgs if m[1] != "w2" and m[0] < last)


def test_java_and_python_writers_race_to_java_and_python_readers(java, shm):
    _python_frames("writer")
    bus = os.path.join(shm, "bus")
    _make(bus)
    count = 8
    java_writers = [_java("write", bus, w, count) for w in (0, 2)]
    reader = _java("read", bus, 4 * count)
    with MappedBusWriter(bus, frames=True) as pw:   # sizes from its metadata
        for s in range(count):                          # writers 1 and 3 from Python, interleaved
            for w in (1, 3):
                assert pw.write(fill(w, s, size(w, s)), topic=f"w{w}")
    for p in java_writers:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err[-3000:]
    out, err = reader.communicate(timeout=180)
    assert reader.returncode == 0, err[-3000:]
    java_msgs, _ = _messages(out)
    assert _check_order(java_msgs) == {w: count for w in range(4)}
    w1, _ = _messages(_run("read", bus, count, "w1"))
    assert w1 == [m for m in java_msgs if m[1] == "w1"]  # the filter, on Python's topics too
    if _python_has("reader"):
        assert _python_read(bus, 4 * count) == java_msgs    # one order, the same bytes
        assert _python_read(bus, count, topics=["w1"]) == w1


# -- a writer killed mid-message -------------------------------------------------------------

CAP = 1 << 20      # the killed writer's messages: size(0, s) % CAP bytes (up to 1 MiB), 1 ms apart
IDLE_MS = 4000     # readers read until nothing comes for this long (past the 2 s rollback timeout)


def _read_idle_python(bus, topics=None, rolling=False):
    from mappedbus_py import RollingBusReader
    kw = {"topics": topics} if topics else {}
    out = []
    with (RollingBusReader if rolling else MappedBusReader)(bus, frames=True, **kw) as r:
        while (rec := r.read(IDLE_MS / 1000)) is not None:
            payload = bytes(rec.payload)
            out.append((rec.position, rec.topic, len(payload), zlib.crc32(payload)))
    return out


def _check_lives(msgs, rounds):
    """w0's messages restart at 0 with each writer life, each whole and of its size (the kill
    loses only the message being written); the markers (w1's message 0) end each life."""
    lives, s = 0, 0
    for pos, topic, n, crc in msgs:
        if topic == "w1":
            assert n == size(1, 0) and crc == zlib.crc32(fill(1, 0, n)), pos
            lives, s = lives + 1, 0
            continue
        assert topic == "w0" and n == size(0, s) % CAP, (pos, topic, s, n)
        assert crc == zlib.crc32(fill(0, s, n)), (pos, s)
        s += 1
    assert lives == rounds


def _kill_rounds(bus, rounds, rolling=False):
    """`rounds` times: a Java writer of w0's messages SIGKILLed at a random moment, then a
    marker (w1's message 0) from another Java writer."""
    rng = random.Random(36)
    extra = ["rolling"] if rolling else []
    for _ in range(rounds):
        w = _java("write-forever", bus, 0, CAP, *extra)
        assert w.stdout.readline().strip() == "writing"
        time.sleep(rng.uniform(0.005, 0.05))
        w.send_signal(signal.SIGKILL)
        w.wait()
        assert _run("write", bus, 1, 1, *extra).strip() == "done 1"


@pytest.mark.parametrize("rounds", [pytest.param(3, id="3"),
                                    pytest.param(100, id="100", marks=pytest.mark.slow)])
def test_a_java_writer_killed_mid_message_leaves_nothing_partial(java, shm, rounds):
    bus = os.path.join(shm, "bus")
    _make(bus)
    _kill_rounds(bus, rounds)
    readers = [_java("read-idle", bus, IDLE_MS), _java("read-idle", bus, IDLE_MS)]
    outs = [p.communicate(timeout=300) for p in readers]
    for p, (out, err) in zip(readers, outs):
        assert p.returncode == 0, err[-3000:]
    first, _ = _messages(outs[0][0])
    _check_lives(first, rounds)
    assert _messages(outs[1][0])[0] == first          # two Java readers racing: the same messages
    if _python_has("reader"):
        assert _read_idle_python(bus) == first        # and a Python reader after them


def _paddings(msgs, seg):
    """Paddings a rolling bus of segments of ``seg`` bytes holds between messages ``msgs`` (all
    of them, in order): one where the next message is in the next segment and the last slot of
    this one was free (the reservation that met the end padded it; the ones after it were past
    the last slot and rolled without one)."""
    slot = layout.slot_size(RECORD)
    last = layout.FIRST_RECORD_OFFSET + ((seg - layout.FIRST_RECORD_OFFSET) // slot - 1) * slot
    return sum(1 for (pos, _, n, _), (nxt, _, _, _) in zip(msgs, msgs[1:])
               if nxt // seg != pos // seg
               and pos % seg + layout.frame_slots(n, RECORD) * slot <= last)


def test_a_framed_rolling_bus_where_messages_meet_segment_ends(java, shm):
    bus = os.path.join(shm, "rolling")
    _make(bus, rolling=True, seg=16 << 20)            # w0's 8 MiB message takes half a segment
    count = 10
    writers = [_java("write", bus, w, count, "rolling") for w in range(3)]
    for p in writers:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err[-3000:]
    out = _run("read", bus, 3 * count, "-", "rolling")
    msgs, end = _messages(out)
    assert _check_order(msgs) == {w: count for w in range(3)}
    assert len({m[0] // (16 << 20) for m in msgs}) > 1   # over several segments
    # No rollback; the paddings skipped: one at each segment end a message did not fill exactly
    # (the reservation that ran past it; where a message ends exactly at the end, none). Counted
    # from the messages' places, which the race decides.
    assert end[0][0] == "0" and int(end[0][1]) == _paddings(msgs, 16 << 20)
    w1, _ = _messages(_run("read", bus, count, "w1", "rolling"))
    assert w1 == [m for m in msgs if m[1] == "w1"]
    try:
        python = _read_idle_python(bus, rolling=True)
    except TypeError:
        return                                            # no framed Python rolling reader in this tree yet
    assert python == msgs
