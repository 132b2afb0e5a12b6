"""Batch reads of a position range (startingPosition/endingPosition, single and rolling buses) and the
predicates the source answers itself: a position range plans only the slots in it, a meta filter
drops records in the reader before they are decoded."""
import os
import pathlib
import shutil
import uuid

import pytest

from mappedbus_py import MappedBusWriter, PriceUpdate, RollingBusWriter

from .helpers import bus_reader

pytestmark = pytest.mark.spark

FILE_SIZE = 200_000
SLOT = 20  # recordSize 12


def pos(i):
    return 8 + i * SLOT


def write_prices(path, n):
    with MappedBusWriter(path, FILE_SIZE, 12) as w:
        for i in range(n):
            assert w.write(PriceUpdate(1, i, 2 * i))


def poison(path, position):
    """An invalid status at a slot: a read that looks at it fails, so a read that succeeds never did."""
    with open(path, "r+b") as f:
        f.seek(position)
        f.write((7).to_bytes(4, "little"))


def prices(df):
    return sorted(r.price for r in df.select("price").collect())


def test_starting_and_ending_position_bound_a_batch_read(spark, bus_path):
    write_prices(bus_path, 100)
    df = bus_reader(spark, bus_path, layout="PriceUpdate", startingPosition=pos(10), endingPosition=pos(20))
    assert prices(df) == list(range(10, 20))
    assert prices(bus_reader(spark, bus_path, layout="PriceUpdate", startingPosition=pos(95))) == list(range(95, 100))
    assert prices(bus_reader(spark, bus_path, layout="PriceUpdate", endingPosition=pos(3))) == [0, 1, 2]
    # Slots outside the range are never looked at, not even their statuses.
    poison(bus_path, pos(5))
    poison(bus_path, pos(30))
    assert prices(bus_reader(spark, bus_path, layout="PriceUpdate", startingPosition=pos(10),
                             endingPosition=pos(20))) == list(range(10, 20))
    with pytest.raises(Exception, match="invalid status"):
        bus_reader(spark, bus_path, layout="PriceUpdate").count()


@pytest.mark.parametrize("option, value, message", [
    ("startingPosition", "9", "startingPosition must be earliest, latest or a record offset"),
    ("endingPosition", "earliest", "endingPosition must be latest or a record offset"),
    ("startingPosition", "latest", "startingPosition=latest is for streaming reads"),
])
def test_bad_batch_positions_are_refused(spark, bus_path, option, value, message):
    write_prices(bus_path, 3)
    with pytest.raises(Exception, match=message):
        bus_reader(spark, bus_path, layout="PriceUpdate", **{option: value}).collect()


def test_position_predicates_plan_only_the_slots_in_range(spark, bus_path):
    write_prices(bus_path, 1000)
    df = bus_reader(spark, bus_path, layout="PriceUpdate", recordsPerPartition=100)
    assert df.rdd.getNumPartitions() == 10
    ranged = df.where(f"position >= {pos(250)} and position < {pos(450)}")
    assert ranged.rdd.getNumPartitions() == 2   # 200 slots planned, not 1000
    assert prices(ranged) == list(range(250, 450))
    # Bounds that are not record boundaries, <=, > and = behave as the predicate says.
    assert prices(df.where(f"position > {pos(997) - 3}")) == [997, 998, 999]
    assert prices(df.where(f"position <= {pos(2)}")) == [0, 1, 2]
    assert prices(df.where(f"position = {pos(7)}")) == [7]
    assert prices(df.where(f"position in ({pos(7)}, {pos(9)})")) == [7, 9]
    assert prices(df.where(f"position = {pos(7) + 1}")) == []
    poison(bus_path, pos(900))
    assert prices(df.where(f"position < {pos(5)}")) == [0, 1, 2, 3, 4]
    plan = df.where(f"position < {pos(5)}")._jdf.queryExecution().executedPlan().toString()
    assert f"positions=[, {pos(5)})" in plan


def test_meta_predicates_drop_records_before_decoding(spark, bus_path):
    with MappedBusWriter(bus_path, FILE_SIZE, 12) as w:
        for i in range(50):
            assert w.write(b"x" * (i % 5))      # byte-array records: meta is the length 0..4
        assert w.write(PriceUpdate(1, 2, 3))   # meta 0 ...
    poison_meta = 999
    with MappedBusWriter(bus_path, FILE_SIZE, 12) as w:
        class Odd(PriceUpdate, type_id=poison_meta):
            pass
        assert w.write(Odd(1, 2, 3))          # meta 999: not a length, so trimPayload cannot decode it
    df = bus_reader(spark, bus_path, recordSize=12, trimPayload="true")
    with pytest.raises(Exception, match="length 999"):
        df.collect()
    got = df.where("meta = 3").collect()
    assert [bytes(r.payload) for r in got] == [b"xxx"] * 10
    got = df.where("meta in (1, 4)").collect()
    assert sorted(bytes(r.payload) for r in got) == [b"x"] * 10 + [b"xxxx"] * 10
    assert df.where("meta in (1, 4) and meta = 2").count() == 0
    plan = df.where("meta in (4, 1)")._jdf.queryExecution().executedPlan().toString()
    assert "meta in [1, 4]" in plan


@pytest.fixture
def bus_dir():
    base = pathlib.Path("/dev/shm") if os.path.isdir("/dev/shm") else pathlib.Path("/tmp")
    path = base / f"mbsparkpos-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    yield str(path)
    shutil.rmtree(path, ignore_errors=True)


def test_rolling_bus_position_range_opens_only_its_segments(spark, bus_dir):
    per, seg = 10, 8 + 10 * SLOT
    with RollingBusWriter(bus_dir, seg, 12) as w:
        for i in range(50):
            assert w.write(PriceUpdate(1, i, 2 * i))

    def gpos(i):
        return (i // per) * seg + 8 + (i % per) * SLOT
    df = bus_reader(spark, bus_dir, layout="PriceUpdate", startingPosition=gpos(15), endingPosition=gpos(32))
    assert prices(df) == list(range(15, 32))
    assert prices(bus_reader(spark, bus_dir, layout="PriceUpdate").where(
        f"position >= {gpos(38)} and position <= {gpos(41)}")) == [38, 39, 40, 41]
    # Segments outside the range are not even opened: an unreadable one does not matter.
    first = os.path.join(bus_dir, sorted(n for n in os.listdir(bus_dir) if n != "bus.meta")[0])
    poison(first, 8 + 3 * SLOT)
    assert prices(bus_reader(spark, bus_dir, layout="PriceUpdate", startingPosition=gpos(20))) == list(range(20, 50))
    with pytest.raises(Exception, match="invalid status"):
        bus_reader(spark, bus_dir, layout="PriceUpdate").count()


def test_count_is_answered_from_the_statuses_per_partition(spark, bus_path, tmp_path):
    write_prices(bus_path, 1000)
    with MappedBusWriter(bus_path, FILE_SIZE, 12) as w:
        for _ in range(7):
            assert w.write(b"ab")                 # meta 2
    df = bus_reader(spark, bus_path, layout="PriceUpdate", recordsPerPartition=300)
    plan = df.groupBy().count()._jdf.queryExecution().executedPlan().toString()
    assert "LocalTableScan [count0" in plan   # answered by the driver's planning walk
    assert df.count() == 1007
    assert df.where("meta = 2").count() == 7
    assert df.where(f"position >= {pos(990)}").count() == 17
    assert df.where("price > 989").count() == 10 + 0   # not pushed (a field): Spark counts rows
    assert "LocalTableScan" not in df.where("price > 989").groupBy().count()._jdf.queryExecution() \
        .executedPlan().toString()
    assert bus_reader(spark, bus_path, layout="PriceUpdate", columnar="false").count() == 1007
    # A rolled-back slot is not counted.
    hung = 8 + 1007 * SLOT
    with open(bus_path, "r+b") as f:
        f.seek(0)
        f.write((hung + SLOT).to_bytes(8, "little"))   # one more slot allocated ...
        f.seek(hung)
        f.write((2).to_bytes(4, "little"))             # ... and rolled back
    assert bus_reader(spark, bus_path, layout="PriceUpdate").count() == 1007
