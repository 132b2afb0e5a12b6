"""Batch reads: records exactly as the Python reader sees them, typed columns, uncommitted and
rolled-back slots, read-only access."""
import os
import struct

import pytest

from mappedbus_py import MappedBusReader, MappedBusWriter, PriceUpdate

from .helpers import bus_reader, bus_tool, hung_slot, read_all, status_at

pytestmark = pytest.mark.spark

FILE_SIZE = 200_000


def rows_of(df):
    return sorted((r.position, r.meta, bytes(r.payload)) for r in df.collect())


def write_prices(path, n, source=1):
    with MappedBusWriter(path, FILE_SIZE, 12) as w:
        for i in range(n):
            assert w.write(PriceUpdate(source, i, 2 * i))


@pytest.mark.parametrize("columnar", ["true", "false"])
def test_python_written_bus_in_partitions(spark, bus_path, columnar):
    write_prices(bus_path, 1000)
    with MappedBusWriter(bus_path, FILE_SIZE, 12) as w:
        assert w.write(b"abc")  # a byte-array record among the messages: meta 3
    df = bus_reader(spark, bus_path, recordSize=12, recordsPerPartition=300, columnar=columnar)
    assert df.rdd.getNumPartitions() == 4
    assert df.schema.simpleString() == "struct<position:bigint,meta:int,payload:binary>"
    expected = read_all(bus_path, FILE_SIZE, 12)
    assert len(expected) == 1001
    assert rows_of(df) == expected
    last = df.orderBy("position", ascending=False).first()
    assert (last.meta, bytes(last.payload)) == (3, b"abc" + bytes(9))


def test_trim_payload(spark, bus_path):
    with MappedBusWriter(bus_path, FILE_SIZE, 16) as w:
        for i in range(5):
            w.write(b"x" * i)
    df = bus_reader(spark, bus_path, recordSize=16, trimPayload="true")
    assert [bytes(r.payload) for r in df.orderBy("position").collect()] == [b"x" * i for i in range(5)]


def test_java_written_bus(spark, bus_path):
    for writer in (1, 2):
        assert "committed 500" in bus_tool("write-objects", bus_path, FILE_SIZE, 12, 500, "price", writer)
    df = bus_reader(spark, bus_path, recordSize=12, numPartitions=3)
    assert df.rdd.getNumPartitions() == 3
    assert rows_of(df) == read_all(bus_path, FILE_SIZE, 12)
    typed = bus_reader(spark, bus_path, layout="PriceUpdate", fileSize=FILE_SIZE, numPartitions=3)
    got = sorted((r.source, r.price, r.quantity) for r in typed.collect())
    assert got == sorted((s, i, 2 * i) for s in (1, 2) for i in range(500))


def test_price_update_columns_match_python_messages(spark, bus_path):
    write_prices(bus_path, 300, source=7)
    df = bus_reader(spark, bus_path, layout="PriceUpdate", recordSize=12, numPartitions=2)
    assert df.schema.simpleString() == \
        "struct<position:bigint,meta:int,source:int,price:int,quantity:int>"
    msg = PriceUpdate()
    expected = []
    with MappedBusReader(bus_path, FILE_SIZE, 12) as r:
        while r.read_into(msg):
            expected.append(repr(msg))
    got = [f"PriceUpdate [source={r.source}, price={r.price}, quantity={r.quantity}]"
           for r in df.orderBy("position").collect()]
    assert got == expected
    agg = df.groupBy("source").agg({"price": "sum", "quantity": "max"}).collect()[0]
    assert (agg["sum(price)"], agg["max(quantity)"]) == (sum(range(300)), 598)


def test_trade_int64_float64_from_java(spark, bus_path):
    bus_tool("write-objects", bus_path, FILE_SIZE, 24, 200, "trade", 3)
    df = bus_reader(spark, bus_path, layout="Trade", recordSize=24, numPartitions=2)
    assert df.schema.simpleString() == \
        "struct<position:bigint,meta:int,id:bigint,price:double,quantity:int>"
    got = [(r.meta, r.id, r.price, r.quantity) for r in df.orderBy("position").collect()]
    assert got == [(2, 3 * 10**9 + i, i + 0.5, 3) for i in range(200)]


def test_field_list_layout(spark, bus_path):
    with MappedBusWriter(bus_path, FILE_SIZE, 24) as w:
        for i in range(10):
            w.write(struct.pack("<bhf6s", i, -i, i / 4, b"name%d" % i))
    df = bus_reader(spark, bus_path, recordSize=24, layout="a:int8,b:int16,c:float32,tag:bytes6")
    assert df.schema.simpleString() == \
        "struct<position:bigint,meta:int,a:tinyint,b:smallint,c:float,tag:binary>"
    got = [(r.a, r.b, r.c, bytes(r.tag)) for r in df.orderBy("position").collect()]
    assert got == [(i, -i, i / 4, (b"name%d" % i).ljust(6, b"\0")) for i in range(10)]


def test_stops_at_uncommitted_then_skips_rolled_back(spark, bus_path):
    write_prices(bus_path, 10)
    hole = hung_slot(bus_path, FILE_SIZE, 12)
    write_prices(bus_path, 10, source=2)
    # Default uncommitted=stop: the batch ends before the uncommitted slot, which stays untouched.
    df = bus_reader(spark, bus_path, layout="PriceUpdate", numPartitions=3)
    assert df.count() == 10
    assert df.agg({"position": "max"}).first()[0] < hole
    assert status_at(bus_path, hole) == 0
    # uncommitted=wait: wait timeoutMs, then skip the slot locally (still no write to the file).
    df = bus_reader(spark, bus_path, layout="PriceUpdate", uncommitted="wait", timeoutMs=200)
    assert df.count() == 20
    assert status_at(bus_path, hole) == 0
    # A bus reader rolls it back; the batch read then skips the rolled-back slot.
    assert len(read_all(bus_path, FILE_SIZE, 12, timeout_ms=50, wait=0.5)) == 20
    assert status_at(bus_path, hole) == 2
    rows = bus_reader(spark, bus_path, layout="PriceUpdate", numPartitions=4).orderBy("position").collect()
    assert [(r.source, r.price) for r in rows] == [(1, i) for i in range(10)] + [(2, i) for i in range(10)]
    assert hole not in {r.position for r in rows}


def test_batch_read_opens_read_only(spark, bus_path):
    write_prices(bus_path, 50)
    hung_slot(bus_path, FILE_SIZE, 12)
    before = open(bus_path, "rb").read()
    mtime = os.stat(bus_path).st_mtime_ns
    os.chmod(bus_path, 0o400)
    try:
        assert bus_reader(spark, bus_path, recordSize=12, uncommitted="wait", timeoutMs=10).count() == 50
    finally:
        os.chmod(bus_path, 0o600)
    assert open(bus_path, "rb").read() == before
    assert os.stat(bus_path).st_mtime_ns == mtime


def test_empty_and_missing_bus(spark, bus_path, tmp_path):
    with MappedBusWriter(bus_path, FILE_SIZE, 12):
        pass
    assert bus_reader(spark, bus_path, recordSize=12).count() == 0
    with pytest.raises(Exception, match="does not exist"):
        bus_reader(spark, str(tmp_path / "nope"), recordSize=12).count()
