"""The record size a read uses is the bus's own: from ``PATH.meta`` when the bus has metadata, so
a layout narrower than the records (PriceUpdate's 12 bytes in 32-byte records) reads every row,
and an option that disagrees is refused naming both sizes. A file without metadata (as the Java
original writes) read with a wrong ``recordSize`` fails as corrupt rather than ending early."""
import os
import re
import shutil

import pytest

from mappedbus_py import MappedBusWriter, PriceUpdate

from .helpers import ROOT, bus_reader

pytestmark = pytest.mark.spark

FILE_SIZE = 10_000_000
N = 1000


def write_prices(path, record_size=32):
    with MappedBusWriter(path, FILE_SIZE, record_size) as w:
        for i in range(N):
            assert w.write(PriceUpdate(7, 100 + i, 1000 + i))


def test_the_layout_alone_reads_every_record_of_a_wider_bus(spark, bus_path):
    write_prices(bus_path)
    df = bus_reader(spark, bus_path, layout="PriceUpdate")
    assert df.count() == N
    rows = df.orderBy("position").collect()
    assert [(r.position, r.source, r.price, r.quantity) for r in rows] == \
        [(8 + 40 * i, 7, 100 + i, 1000 + i) for i in range(N)]
    # The same size given explicitly is fine.
    assert bus_reader(spark, bus_path, layout="PriceUpdate", recordSize=32, fileSize=FILE_SIZE).count() == N


def test_a_record_size_that_differs_from_the_metadata_is_refused(spark, bus_path):
    write_prices(bus_path)
    message = rf"option recordSize 12 differs from record_size 32 in {re.escape(bus_path)}\.meta"
    with pytest.raises(Exception, match=message):
        bus_reader(spark, bus_path, layout="PriceUpdate", recordSize=12).count()
    with pytest.raises(Exception, match=message):
        spark.readStream.format("mappedbus").option("path", bus_path).option("layout", "PriceUpdate") \
            .option("recordSize", 12).load()
    with pytest.raises(Exception, match=rf"option fileSize 4096 differs from file_size {FILE_SIZE}"):
        bus_reader(spark, bus_path, layout="PriceUpdate", fileSize=4096).count()


def test_a_file_without_metadata_read_with_a_wrong_record_size_fails(spark, bus_path):
    write_prices(bus_path)
    os.unlink(bus_path + ".meta")  # as the Java original leaves a bus
    # Slots of 32 bytes: the limit (8 + 1000 * 40) is on that grid too. The second slot falls on zero
    # payload bytes (an "uncommitted" slot that would end the read at 1 row), the fourth on a
    # quantity: the read fails naming it, the record size and the likely cause.
    with pytest.raises(Exception, match=r"has invalid status 1002 \(wrong recordSize 24"):
        bus_reader(spark, bus_path, layout="PriceUpdate", recordSize=24).count()
    with pytest.raises(Exception, match=r"has invalid status 1002 \(wrong recordSize 24"):
        bus_reader(spark, bus_path, layout="PriceUpdate", recordSize=24).collect()
    # Slots of 28 bytes: the limit is off the grid.
    with pytest.raises(Exception, match="is not on a record boundary for recordSize 20"):
        bus_reader(spark, bus_path, layout="PriceUpdate", recordSize=20).count()
    assert bus_reader(spark, bus_path, layout="PriceUpdate", recordSize=32).count() == N


def test_a_golden_file_of_the_java_original(spark, bus_root):
    path = os.path.join(bus_root, "objects-r12.bus")
    shutil.copy(ROOT / "tests" / "data" / "golden" / "objects-r12.bus", path)
    assert not os.path.exists(path + ".meta")
    assert bus_reader(spark, path, layout="PriceUpdate").count() == 51
    with pytest.raises(Exception, match="limit 1028 in .* is not on a record boundary for recordSize 16"):
        bus_reader(spark, path, layout="PriceUpdate", recordSize=16).count()


@pytest.mark.parametrize("ms", [0, 9])
def test_a_rollback_timeout_below_10_ms_is_refused(spark, bus_path, ms):
    write_prices(bus_path)
    with pytest.raises(Exception, match=rf"option 'timeoutMs' is the rollback timeout: .* must be at "
                                        rf"least 10 ms, got {ms}"):
        bus_reader(spark, bus_path, layout="PriceUpdate", uncommitted="wait", timeoutMs=ms).count()
    assert bus_reader(spark, bus_path, layout="PriceUpdate", uncommitted="wait", timeoutMs=10).count() == N
