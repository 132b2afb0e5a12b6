"""Writes: batch and streaming appends read back by the Python reader; bad rows and options."""
import os

import pytest

from mappedbus_py import MappedBusReader, MappedBusWriter, PriceUpdate, Trade

from .helpers import read_all

pytestmark = pytest.mark.spark

FILE_SIZE = 200_000


def writer(df, path, mode="append", **options):
    w = df.write.format("mappedbus").mode(mode).option("path", path).option("fileSize", FILE_SIZE)
    for k, v in options.items():
        w = w.option(k, v)
    return w


def test_batch_write_payload_and_meta(spark, bus_path):
    data = [(bytes([i]) * (i % 12 + 1), i) for i in range(60)]
    df = spark.createDataFrame(data, "payload binary, meta int").repartition(3)
    writer(df, bus_path, recordSize=12).save()
    got = read_all(bus_path, FILE_SIZE, 12)
    assert sorted((m, p[:m % 12 + 1]) for _, m, p in got) == sorted((m, p) for p, m in data)
    # Without a meta column the metadata is the length, as for byte-array records.
    writer(spark.createDataFrame([(b"hello",)], "payload binary"), bus_path, recordSize=12).save()
    last = read_all(bus_path, FILE_SIZE, 12)[-1]
    assert (last[1], last[2][:5]) == (5, b"hello")


def test_batch_write_typed_trade(spark, bus_path):
    df = spark.createDataFrame([(10**12 + i, i * 0.25, i) for i in range(40)],
                               "id long, price double, quantity int").repartition(2)
    writer(df, bus_path, layout="Trade", recordSize=24).save()
    msg, got = Trade(), []
    with MappedBusReader(bus_path, FILE_SIZE, 24) as r:
        while r.read_into(msg):
            got.append((msg.id, msg.price, msg.quantity))
    assert sorted(got) == [(10**12 + i, i * 0.25, i) for i in range(40)]
    assert {m for _, m, _ in read_all(bus_path, FILE_SIZE, 24)} == {Trade.type_id}


def test_streaming_write(spark, bus_path, tmp_path):
    src = bus_path + "-src"
    try:
        with MappedBusWriter(src, FILE_SIZE, 12) as w:
            for i in range(50):
                w.write(PriceUpdate(i % 2, i, 1))
        q = (spark.readStream.format("mappedbus").option("path", src).option("layout", "PriceUpdate")
             .load().selectExpr("source", "price * 10 as price", "quantity")
             .writeStream.format("mappedbus").option("path", bus_path).option("fileSize", FILE_SIZE)
             .option("layout", "PriceUpdate").option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(availableNow=True).start())
        assert q.awaitTermination(120)
        msg, got = PriceUpdate(), []
        with MappedBusReader(bus_path, FILE_SIZE, 12) as r:
            while r.read_into(msg):
                got.append((msg.source, msg.price))
        assert sorted(got) == sorted((i % 2, i * 10) for i in range(50))
    finally:
        if os.path.exists(src):
            os.unlink(src)


@pytest.mark.parametrize("rows, schema, options, message", [
    ([(b"x" * 13,)], "payload binary", {"recordSize": 12}, "payload of 13 bytes is longer than recordSize 12"),
    ([("a", 1, 2)], "source string, price int, quantity int", {"layout": "PriceUpdate"},
     "column source is string but layout field source:int32@0 needs an integer column"),
    ([(1, 2)], "source int, price int", {"layout": "PriceUpdate"}, "no column for layout field quantity"),
    ([(1, 2, 3, 4)], "source int, price int, quantity int, extra int", {"layout": "PriceUpdate"},
     r"cannot write column\(s\) \[extra int\]"),
    ([(1, 2, 2**40)], "source int, price int, quantity long", {"layout": "PriceUpdate"},
     "column quantity value 1099511627776 does not fit in int32"),
    ([(1, None, 3)], "source int, price int, quantity int", {"layout": "PriceUpdate"},
     "column price is null"),
    ([(1,)], "n int", {"recordSize": 12}, r"cannot write column\(s\) \[n int\]"),
    ([(b"x",)], "payload binary", {"layout": "Nope", "recordSize": 12}, "neither a known message"),
    ([(b"x",)], "payload binary", {"layout": "a:int33", "recordSize": 12}, "unknown type 'int33'"),
    ([(1, 2, 3)], "source int, price int, quantity int", {"layout": "PriceUpdate", "recordSize": 8},
     "needs 12 payload bytes but recordSize is 8"),
])
def test_bad_rows_and_options(spark, bus_path, rows, schema, options, message):
    df = spark.createDataFrame(rows, schema)
    with pytest.raises(Exception, match=message):
        writer(df, bus_path, **options).save()


def test_new_bus_needs_file_size(spark, tmp_path):
    df = spark.createDataFrame([(b"x",)], "payload binary")
    with pytest.raises(Exception, match="give option 'fileSize'"):
        df.write.format("mappedbus").mode("append").option("path", str(tmp_path / "new")) \
            .option("recordSize", 12).save()


def test_overwrite_is_refused(spark, bus_path):
    with MappedBusWriter(bus_path, FILE_SIZE, 12):
        pass
    df = spark.createDataFrame([(b"x",)], "payload binary")
    with pytest.raises(Exception):
        writer(df, bus_path, mode="overwrite", recordSize=12).save()
    assert read_all(bus_path, FILE_SIZE, 12) == []


def test_bad_read_options(spark, bus_path):
    with MappedBusWriter(bus_path, FILE_SIZE, 12) as w:
        w.write(PriceUpdate(1, 2, 3))
    with pytest.raises(Exception, match="startingPosition must be"):
        spark.readStream.format("mappedbus").option("path", bus_path).option("recordSize", 12) \
            .option("startingPosition", "13").load()
    with pytest.raises(Exception, match="option recordSize 16 differs from record_size 12"):
        spark.read.format("mappedbus").option("path", bus_path).option("recordSize", 16).load().count()
    # A file without metadata (the Java original's) says nothing of its sizes: recordSize is needed,
    # and one off the file's record grid is refused.
    os.unlink(bus_path + ".meta")
    with pytest.raises(Exception, match="option 'recordSize' is required"):
        spark.read.format("mappedbus").option("path", bus_path).load()
    with pytest.raises(Exception, match="not on a record boundary"):
        spark.read.format("mappedbus").option("path", bus_path).option("recordSize", 16).load().count()
