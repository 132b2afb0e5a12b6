"""count() answered by the driver's planning walk (a LocalScan): exactly the committed records the
planned ranges hold, rolled-back and uncommitted slots excluded, pushed-down ranges and meta filters
applied, single files, rolling buses and several buses alike."""
import os

import pytest

from mappedbus_py import MappedBusWriter, PriceUpdate, RollingBusWriter

from .helpers import bus_reader, hung_slot, read_all, status_at

pytestmark = pytest.mark.spark

FILE_SIZE = 100_000
RS = 12
SLOT = 8 + RS


def pos(i):
    return 8 + i * SLOT


def write(path, prices, source=1):
    with MappedBusWriter(path, FILE_SIZE, RS) as w:
        for i in prices:
            assert w.write(PriceUpdate(source, i, 0))


def plan(df):
    return df.groupBy().count()._jdf.queryExecution().executedPlan().toString()


def test_count_skips_rolled_back_slots_and_honours_position_and_meta_filters(spark, bus_path):
    write(bus_path, range(100))                     # slots 0-99
    holes = [hung_slot(bus_path, FILE_SIZE, RS) for _ in range(3)]   # slots 100-102
    write(bus_path, range(100, 150))                # slots 103-152
    with MappedBusWriter(bus_path, FILE_SIZE, RS) as w:
        for _ in range(4):
            assert w.write(b"xyz")                  # meta 3, slots 153-156
    # A bus reader rolls the three hung slots back (CAS 0 -> 2).
    assert len(read_all(bus_path, FILE_SIZE, RS, timeout_ms=50, wait=0.5)) == 154
    assert [status_at(bus_path, h) for h in holes] == [2, 2, 2]
    df = bus_reader(spark, bus_path, layout="PriceUpdate", recordsPerPartition=40)
    # No task walks the statuses again, and the one row is the total: no partial counts to shuffle and sum.
    assert "LocalTableScan" in plan(df) and "Exchange" not in plan(df)
    assert df.count() == 154
    assert df.where(f"position >= {pos(90)} and position < {pos(110)}").count() == 10 + 7
    assert df.where(f"position > {pos(101)}").count() == 50 + 4
    assert df.where("meta = 3").count() == 4
    assert df.where(f"meta = 3 and position <= {pos(154)}").count() == 2
    # The same numbers as the rows themselves.
    assert df.where(f"position >= {pos(90)} and position < {pos(110)}").collect().__len__() == 17


def test_count_stops_at_an_uncommitted_slot_or_skips_it_with_uncommitted_wait(spark, bus_path):
    write(bus_path, range(30))
    hung_slot(bus_path, FILE_SIZE, RS)
    write(bus_path, range(30, 40))
    assert bus_reader(spark, bus_path, layout="PriceUpdate").count() == 30
    assert bus_reader(spark, bus_path, layout="PriceUpdate", uncommitted="wait", timeoutMs=100).count() == 40



def test_count_of_a_rolling_bus_and_of_several_buses(spark, bus_root):
    single, rolling = os.path.join(bus_root, "one"), os.path.join(bus_root, "roll")
    write(single, range(25))
    seg = 8 + 10 * SLOT
    with RollingBusWriter(rolling, seg, RS) as w:
        for i in range(37):
            assert w.write(PriceUpdate(1, i, 0))
    assert bus_reader(spark, rolling, layout="PriceUpdate").count() == 37
    # Segment 1 holds records 10-19: a range inside it and across segments.
    assert bus_reader(spark, rolling, layout="PriceUpdate").where(
        f"position >= {seg + 8} and position < {2 * seg + 8 + 2 * SLOT}").count() == 12
    both = bus_reader(spark, f"{single},{rolling}", layout="PriceUpdate")
    assert "LocalTableScan" in plan(both)
    assert both.count() == 62
    assert both.where(f"position < {pos(5)}").count() == 5 + 5


def test_a_recount_resumes_the_last_walk_and_stays_exact_as_the_bus_grows_or_is_recreated(spark, bus_path):
    # The driver remembers how far its last walk of a file got (statuses there are final); each
    # count below must still be the exact one, whatever was remembered from the counts before it.
    write(bus_path, range(50))
    df = lambda: bus_reader(spark, bus_path, layout="PriceUpdate")  # noqa: E731
    assert df().count() == 50
    assert df().where("meta = 3").count() == 0
    hung = hung_slot(bus_path, FILE_SIZE, RS)          # the walk stops here: slot 50
    write(bus_path, range(50, 60))
    assert df().count() == 50
    assert len(read_all(bus_path, FILE_SIZE, RS, timeout_ms=50, wait=0.5)) == 60   # rolls slot 50 back
    assert status_at(bus_path, hung) == 2
    with MappedBusWriter(bus_path, FILE_SIZE, RS) as w:
        assert w.write(b"xyz")                          # meta 3
    assert df().count() == 61
    assert df().where("meta = 3").count() == 1
    assert df().where(f"position >= {pos(55)}").count() == 7    # slots 55-61
    # A new bus at the same path: shorter than what the last walk covered, then longer (its slot 61
    # is settled too, so only the file's identity tells the old walk does not apply).
    for f in (bus_path, bus_path + ".meta"):
        os.unlink(f)
    write(bus_path, range(5))
    assert df().count() == 5
    write(bus_path, range(5, 70))
    assert df().count() == 70
    assert df().where("meta = 3").count() == 0
