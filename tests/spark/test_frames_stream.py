"""Structured Streaming over framed buses (issue 36; docs/spark.md, "Framed buses"): rows position,
topic, payload of any size; offsets are the messages' first slots; option topics filters in the
Java reader; a writer SIGKILLed mid-message never yields a partial row, and the stream goes on
past it at once (its claim's holder is dead in the writers file)."""
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from mappedbus_py import MappedBusReader, MappedBusWriter, RollingBusWriter
from mappedbus_py.spark import start_realtime

pytestmark = pytest.mark.spark

RECORD = 64                     # slot 72 B: messages of 0 B .. several slots, and a few far larger
FILE_SIZE = 16 << 20


def _messages(seed, count):
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        n = rng.choice([0, 1, 40, 41, 47, 48, 200, rng.randrange(600), rng.randrange(30_000)])
        out.append((rng.randbytes(n), rng.choice(["quotes", "orders", None])))
    return out


def _run(spark, src, out, ckpt, **options):
    """One Trigger.AvailableNow run of a stream of ``src`` into Parquet at ``out``; every row so far."""
    r = spark.readStream.format("mappedbus").option("path", src)
    for k, v in options.items():
        r = r.option(k, v)
    q = (r.load().writeStream.format("parquet").option("path", out)
         .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
    assert q.awaitTermination(60), "the stream did not end within 60 s"
    assert q.exception() is None
    return [(r.position, bytes(r.payload), r.topic)
            for r in spark.read.parquet(out).orderBy("position").collect()]


@pytest.mark.parametrize("rolling", [False, True], ids=["single", "rolling"])
def test_a_stream_delivers_every_message_whole_in_order(spark, bus_root, rolling):
    src = os.path.join(bus_root, "in")
    sent = _messages(7, 30)
    if rolling:       # segments of 24 KiB: messages meet segment ends, padded and moved
        w = RollingBusWriter(src, 24 << 10, RECORD, frames=True).open()
    else:
        w = MappedBusWriter(src, FILE_SIZE, RECORD, frames=True).open()
    with w:
        for payload, topic in sent[:18]:
            assert w.write(payload, topic=topic)
        got = _run(spark, src, os.path.join(bus_root, "all"), os.path.join(bus_root, "ck-all"),
                   maxRecordsPerTrigger=8)      # several micro-batches
        assert [(p, t) for _, p, t in got] == sent[:18]
        for payload, topic in sent[18:]:                 # the restarted query goes on from its offset
            assert w.write(payload, topic=topic)
    got = _run(spark, src, os.path.join(bus_root, "all"), os.path.join(bus_root, "ck-all"))
    assert [(p, t) for _, p, t in got] == sent
    positions = [pos for pos, _, _ in got]
    assert positions == sorted(set(positions)) and positions[0] == 8
    if rolling:
        assert len({pos // (24 << 10) for pos in positions}) > 1
    # Option topics: only those messages' rows, the others passed over in the reader.
    got = _run(spark, src, os.path.join(bus_root, "q"), os.path.join(bus_root, "ck-q"), topics="quotes")
    assert [(p, t) for _, p, t in got] == [(p, t) for p, t in sent if t == "quotes"]
    assert [pos for pos, _, _ in got] == [pos for pos, _, t in _all(positions, sent) if t == "quotes"]


def _all(positions, sent):
    return [(pos, p, t) for pos, (p, t) in zip(positions, sent)]


DIE = """
import os, sys
from mappedbus_py import MappedBusWriter, RollingBusWriter
rolling = sys.argv[2] == "rolling"
w = (RollingBusWriter if rolling else MappedBusWriter)(sys.argv[1], frames=True).open()
w.write(b"before", topic="t")
# 70 slots reserved, count set, 1000 B written, never committed (a rolling bus: in its segment's writer)
(w._w if rolling else w)._frame_allocate_only(5000, 1000, publish=True)
os.kill(os.getpid(), 9)
"""


@pytest.mark.parametrize("rolling", [False, True], ids=["single", "rolling"])
def test_a_writer_killed_mid_message_yields_no_row_and_the_stream_goes_on(spark, bus_root, rolling):
    src = os.path.join(bus_root, "in")
    if rolling:
        RollingBusWriter(src, 1 << 20, RECORD, frames=True).open().close()
    else:
        MappedBusWriter(src, FILE_SIZE, RECORD, frames=True).open().close()
    p = subprocess.run([sys.executable, "-c", DIE, src, "rolling" if rolling else "single"], timeout=60)
    assert p.returncode == -signal.SIGKILL
    with (RollingBusWriter if rolling else MappedBusWriter)(src, frames=True) as w:
        w.write(b"after", topic="t")
        w.write(b"", topic=None)
    # timeoutMs of 10 minutes: only the writers file (the holder is dead) lets the stream pass at once.
    got = _run(spark, src, os.path.join(bus_root, "o"), os.path.join(bus_root, "ck"),
               timeoutMs=600_000)
    assert [(p, t) for _, p, t in got] == [(b"before", "t"), (b"after", "t"), (b"", None)]
    slot = RECORD + 8
    assert got[1][0] - got[0][0] == slot + 70 * slot    # "before", then the dead message skipped whole


def test_exactly_once_sink_onto_a_framed_bus_writes_a_replayed_batch_once(spark, bus_root):
    """A restart re-runs the last batch whose commit the checkpoint lacks (the forced retry): the
    sink's commit log finds its tasks done and writes none of their messages again."""
    src, dst, ckpt = (os.path.join(bus_root, n) for n in ("in", "out", "ck"))
    sent = _messages(11, 24)
    with MappedBusWriter(src, FILE_SIZE, RECORD, frames=True) as w:
        for payload, topic in sent:
            assert w.write(payload, topic=topic)

    def run():
        q = (spark.readStream.format("mappedbus").option("path", src).option("maxRecordsPerTrigger", 10)
             .load().select("payload", "topic")
             .writeStream.format("mappedbus").option("path", dst).option("fileSize", FILE_SIZE)
             .option("recordSize", RECORD).option("frames", "true").option("exactlyOnce", "true")
             .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
        assert q.awaitTermination(60), "the query did not end within 60 s"
        assert q.exception() is None
    run()
    commits = os.path.join(ckpt, "commits")
    last = [n for n in os.listdir(commits) if n.lstrip(".").startswith("2")]
    assert last, sorted(os.listdir(commits))          # three batches: 0, 1, 2
    for name in last:
        os.unlink(os.path.join(commits, name))
    run()
    assert os.path.exists(os.path.join(commits, "2"))   # batch 2 ran again
    assert os.path.exists(dst + ".commits")
    got = spark.read.format("mappedbus").option("path", dst).load().orderBy("position").collect()
    assert [(bytes(r.payload), r.topic) for r in got] == sent
    # Option topics applies to batch reads too, with a pushed topic filter.
    df = spark.read.format("mappedbus").option("path", dst).option("topics", "quotes, orders").load()
    assert [bytes(r.payload) for r in df.where("topic = 'orders'").orderBy("position").collect()] == \
        [p for p, t in sent if t == "orders"]
    assert df.count() == sum(1 for _, t in sent if t is not None)


@pytest.mark.slow          # Real-time Mode's start takes its time, as in test_realtime.py
def test_real_time_mode_hands_over_each_framed_message_as_it_commits(spark, bus_root):
    """Real-time Mode on a framed bus: the long-running batch's reader is the core's framed reader
    (option topics in it), and BusRealTimeSink writes each row at once as a message of another
    framed bus."""
    src, dst = os.path.join(bus_root, "in"), os.path.join(bus_root, "out")
    sent = _messages(13, 30)
    want = [(p, t) for p, t in sent if t is not None]
    MappedBusWriter(src, FILE_SIZE, RECORD, frames=True).open().close()
    df = (spark.readStream.format("mappedbus").option("path", src).option("topics", "quotes,orders").load()
          .select("payload", "topic"))
    q = start_realtime(df, dst, batch="10 minutes", checkpoint=os.path.join(bus_root, "ck"),
                       frames="true", recordSize=RECORD, fileSize=FILE_SIZE)
    got = []
    try:
        with MappedBusWriter(src, frames=True) as w:
            for payload, topic in sent:
                w.write(payload, topic=topic)
        deadline = time.monotonic() + 60
        while len(got) < len(want) and time.monotonic() < deadline:
            if not os.path.exists(dst):
                time.sleep(0.1)
                continue
            with MappedBusReader(dst) as r:
                got = [(bytes(rec.payload), rec.topic) for rec in r.records(timeout=0.2)]
        assert q.exception() is None
        assert q.recentProgress == []          # from inside the running batch, not at its end
    finally:
        q.stop()
    assert got == want
