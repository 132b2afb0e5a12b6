"""Layouts from Python Message classes in one call, timestamp fields (int64 nanoseconds or
microseconds -> Spark TimestampType), and the README's windowed event-time example."""
import datetime
import struct

import pytest

from mappedbus_py import Message, MappedBusReader, MappedBusWriter, PriceUpdate, Token, Trade
from mappedbus_py.messages import fixed_bytes, float64, int32, int64, uint32
from mappedbus_py.spark import layout_of, layout_options

pytestmark = pytest.mark.spark

FILE_SIZE = 100_000
T0 = datetime.datetime(2026, 1, 2, 9, 30, tzinfo=datetime.timezone.utc)


class Tick(Message, type_id=5):
    ts = int64()        # event time, nanoseconds since the epoch
    symbol = fixed_bytes(4)
    price = float64()


def ns(dt):
    return int(dt.timestamp()) * 1_000_000_000 + dt.microsecond * 1000


def test_layout_of_the_message_classes_matches_the_named_layouts():
    assert layout_of(PriceUpdate) == "source:int32,price:int32,quantity:int32"
    assert layout_of(Token) == "from:int32,to:int32"
    assert layout_of(Trade) == "id:int64,price:float64,quantity:int32"
    assert layout_of(Tick, {"ts": "ns"}) == "ts:timestamp_ns,symbol:bytes4,price:float64"
    # no recordSize: the bus's metadata has it (a layout's own size would refuse a wider bus)
    assert layout_options(Trade) == {"layout": "id:int64,price:float64,quantity:int32", "typeId": "2"}


def test_layout_of_refuses_what_a_layout_cannot_hold():
    class Unsigned(Message):
        n = uint32()

    class Gap(Message):
        a = int32()
        b = int32(offset=8)

    with pytest.raises(ValueError, match="Unsigned.n .*unsigned"):
        layout_of(Unsigned)
    with pytest.raises(ValueError, match="Gap.b is at offset 8, not 4"):
        layout_of(Gap)
    with pytest.raises(ValueError, match="Tick.price: a timestamp needs an int64 field"):
        layout_of(Tick, {"price": "ns"})
    with pytest.raises(ValueError, match="no int64 field"):
        layout_of(Tick, {"when": "us"})


def test_windowed_event_time_aggregate_over_timestamp_ns_fields(spark, bus_path):
    from pyspark.sql import functions as F
    ticks = [(T0 + datetime.timedelta(seconds=s), sym, p)
             for s, sym, p in [(5, b"AAA", 10.0), (50, b"AAA", 12.0), (65, b"BBB", 7.0), (70, b"AAA", 11.0),
                               (130, b"BBB", 9.0)]]
    with MappedBusWriter(bus_path, FILE_SIZE, Tick.payload_size) as w:
        for t, sym, p in ticks:
            assert w.write(Tick(ns(t) + 123, sym, p))   # + 123 ns: below Spark's microsecond
    # README, "Event time": the example as written there.
    df = (spark.read.format("mappedbus").option("path", bus_path)
          .options(**layout_options(Tick, timestamps={"ts": "ns"})).load())
    assert dict(df.dtypes)["ts"] == "timestamp"
    per_minute = (df.groupBy(F.window("ts", "1 minute"), "symbol")
                  .agg(F.count("*").alias("n"), F.avg("price").alias("avg_price")))
    got = sorted((r.window.start.astimezone(datetime.timezone.utc), bytes(r.symbol).rstrip(b"\0"), r.n,
                  r.avg_price) for r in per_minute.collect())
    m = datetime.timedelta(minutes=1)
    assert got == [(T0, b"AAA", 2, 11.0), (T0 + m, b"AAA", 1, 11.0), (T0 + m, b"BBB", 1, 7.0),
                   (T0 + 2 * m, b"BBB", 1, 9.0)]
    first = df.orderBy("position").first().ts.astimezone(datetime.timezone.utc)
    assert first == T0 + datetime.timedelta(seconds=5)   # the 123 ns are truncated


def test_timestamp_columns_are_written_as_int64_in_the_fields_unit(spark, bus_path):
    rows = [(T0 + datetime.timedelta(microseconds=7), 1), (T0 + datetime.timedelta(seconds=1), 2)]
    df = spark.createDataFrame(rows, "at timestamp, n int")
    df2 = df.withColumn("at_ns", df["at"])
    (df2.write.format("mappedbus").mode("append").option("path", bus_path).option("fileSize", FILE_SIZE)
     .option("layout", "at:timestamp_us,n:int32,at_ns:timestamp_ns").save())
    with MappedBusReader(bus_path, FILE_SIZE, 20) as r:
        got = sorted(struct.unpack("<qiq", bytes(r.read(1).payload)) for _ in range(2))
    us = [int(t.timestamp()) * 1_000_000 + t.microsecond for t, _ in rows]
    assert got == [(us[0], 1, us[0] * 1000), (us[1], 2, us[1] * 1000)]
