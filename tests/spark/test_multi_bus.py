"""Several buses in one batch read: a comma-separated list or a pattern, each bus planned with its
own options as its own partitions, with a ``bus`` column naming the record's bus."""
import os
import struct

import pytest

from mappedbus_py import MappedBusWriter, RollingBusWriter

pytestmark = pytest.mark.spark

LAYOUT = "id:int64,value:int32"
SIZE = 100_000



def write_ids(path, ids):
    with MappedBusWriter(path, SIZE, 12) as w:
        for i in ids:
            assert w.write(struct.pack("<qi", i, 0))


def read(spark, path, **options):
    r = spark.read.format("mappedbus").option("path", path).option("layout", LAYOUT)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


@pytest.mark.parametrize("columnar", ["true", "false"])
def test_a_list_and_a_pattern_read_every_bus_with_its_path(spark, bus_root, columnar):
    a, b, c = (os.path.join(bus_root, f"prices-{k}") for k in "abc")
    write_ids(a, range(0, 100))
    write_ids(b, range(1000, 1050))
    write_ids(c, range(2000, 2010))
    df = read(spark, f"{a},{c}", columnar=columnar, recordsPerPartition=40)
    assert df.columns == ["position", "meta", "id", "value", "bus"]
    assert df.rdd.getNumPartitions() == 3 + 1          # a's 100 records in 3 parts, c's 10 in one
    got = sorted((r.bus, r.id) for r in df.collect())
    assert got == sorted([(a, i) for i in range(100)] + [(c, i) for i in range(2000, 2010)])
    every = read(spark, os.path.join(bus_root, "prices-*"), columnar=columnar)   # .meta files are not buses
    counts = {r.bus: r["count"] for r in every.groupBy("bus").count().collect()}
    assert counts == {a: 100, b: 50, c: 10}
    # Pushed-down ranges apply to each bus; a query that does not use `bus` gets no such column work.
    assert sorted(r.id for r in every.where("position < 48").select("id").collect()) == [0, 1, 1000, 1001, 2000, 2001]


def test_a_rolling_bus_and_a_single_file_in_one_read(spark, bus_root):
    single, rolling = os.path.join(bus_root, "one"), os.path.join(bus_root, "roll")
    write_ids(single, range(5))
    with RollingBusWriter(rolling, 8 + 10 * 20, 12) as w:
        for i in range(100, 125):
            assert w.write(struct.pack("<qi", i, 0))
    got = sorted((r.bus, r.id) for r in read(spark, f"{single},{rolling}").collect())
    assert got == [(single, i) for i in range(5)] + [(rolling, i) for i in range(100, 125)]


def test_several_buses_are_refused_where_one_is_needed(spark, bus_root, tmp_path):
    a, b = os.path.join(bus_root, "a"), os.path.join(bus_root, "b")
    write_ids(a, range(3))
    write_ids(b, range(3))
    with pytest.raises(Exception, match="matches no bus"):
        read(spark, os.path.join(bus_root, "nothing-*")).collect()
    # Streams of several buses: tests/spark/test_multi_bus_stream.py.
    with pytest.raises(Exception, match="a write goes to one bus"):
        read(spark, a).write.format("mappedbus").mode("append").option("path", f"{a},{b}") \
            .option("layout", LAYOUT).save()
