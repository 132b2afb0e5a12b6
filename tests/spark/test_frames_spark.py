"""Framed buses in Spark (issue 36; docs/design/frames.md): a framed bus reads as rows (position,
topic, payload of any size), planned at the messages' first slots; topic = / IN pushed down to the
readers; Spark writes framed rows (payload of any size, an optional topic column)."""
import os
import random

import pytest

from mappedbus_py import MappedBusWriter, RollingBusWriter

pytestmark = pytest.mark.spark

RECORD = 64
FILE_SIZE = 64 << 20


def _messages(seed, count):
    """(payload, topic) pairs of 0 B to 2 MiB, topics quotes/orders/none."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        n = rng.choice([0, 1, 40, 41, 1000, rng.randrange(1 << 16), rng.randrange(2 << 20)])
        out.append((rng.randbytes(n), rng.choice(["quotes", "orders", None])))
    return out


def _write(path, messages, **kw):
    try:
        w = MappedBusWriter(path, FILE_SIZE, RECORD, frames=True, **kw).open()
    except TypeError:
        pytest.skip("the Python core of this tree has no framed writer")
    with w:
        for payload, topic in messages:
            assert w.write(payload, topic=topic)


def _read(spark, path, **options):
    r = spark.read.format("mappedbus").option("path", path)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_a_framed_bus_reads_as_rows_of_any_size(spark, bus_path):
    sent = _messages(1, 60)
    _write(bus_path, sent)
    df = _read(spark, bus_path, recordsPerPartition=5000)   # many partitions, cut at messages
    assert [f.name for f in df.schema.fields] == ["position", "topic", "payload"]
    assert df.rdd.getNumPartitions() > 1
    rows = sorted(df.collect(), key=lambda r: r.position)
    assert [(bytes(r.payload), r.topic) for r in rows] == sent
    positions = [r.position for r in rows]
    assert positions[0] == 8 and positions == sorted(set(positions))


def test_topic_filters_are_pushed_down(spark, bus_path):
    sent = _messages(2, 40)
    _write(bus_path, sent)
    df = _read(spark, bus_path)
    quotes = df.where("topic = 'quotes'")
    assert [bytes(r.payload) for r in quotes.orderBy("position").collect()] == \
        [p for p, t in sent if t == "quotes"]
    plan = quotes._jdf.queryExecution().executedPlan().toString()
    assert "topic in [quotes]" in plan
    both = df.where("topic in ('quotes', 'orders')").orderBy("position").collect()
    assert [(bytes(r.payload), r.topic) for r in both] == [(p, t) for p, t in sent if t]
    assert df.where("topic = 'absent'").count() == 0
    assert df.where("topic is null").count() == sum(1 for _, t in sent if t is None)


def test_spark_writes_framed_rows_of_any_size(spark, bus_path):
    rows = [(os.urandom(n), t) for n, t in [(0, "a"), (5, None), (300_000, "b"), (3 << 20, "a")]]
    df = spark.createDataFrame(rows, "payload binary, topic string").coalesce(1)
    (df.write.format("mappedbus").mode("append").option("path", bus_path).option("fileSize", FILE_SIZE)
     .option("recordSize", RECORD).option("frames", "true").save())
    got = _read(spark, bus_path).orderBy("position").collect()
    assert [(bytes(r.payload), r.topic) for r in got] == rows
    # Without a topic column; a Python-made bus's framing comes from its metadata.
    spark.createDataFrame([(b"xyz",)], "payload binary").write.format("mappedbus") \
        .mode("append").option("path", bus_path).save()
    assert bytes(_read(spark, bus_path).orderBy("position").collect()[-1].payload) == b"xyz"
    with pytest.raises(Exception, match="framed"):
        _read(spark, bus_path, frames="false").collect()


def test_a_framed_rolling_bus_where_messages_meet_segment_ends(spark, bus_dir):
    sent = _messages(3, 30)
    # Written by Spark (one task: one order), read by Spark: segments of 4 MiB, messages up to 2 MiB.
    (spark.createDataFrame(sent, "payload binary, topic string").coalesce(1).write.format("mappedbus")
     .mode("append").option("path", bus_dir).option("segmentSize", 4 << 20).option("recordSize", RECORD)
     .option("frames", "true").save())
    df = _read(spark, bus_dir)
    rows = df.orderBy("position").collect()
    assert [(bytes(r.payload), r.topic) for r in rows] == sent
    assert len({r.position // (4 << 20) for r in rows}) > 1
    assert [bytes(r.payload) for r in df.where("topic = 'orders'").orderBy("position").collect()] == \
        [p for p, t in sent if t == "orders"]


@pytest.fixture
def bus_dir():
    import shutil
    import uuid
    base = "/dev/shm" if os.path.isdir("/dev/shm") else "/tmp"
    path = os.path.join(base, f"mbsparkframes-{os.getpid()}-{uuid.uuid4().hex[:12]}")
    yield path
    shutil.rmtree(path, ignore_errors=True)
