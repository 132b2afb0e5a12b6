"""A Spark sink's output consumed by a work group works unchanged (issue 35): rows written with
``df.write.format("mappedbus")`` go to three GroupReader member processes (tests/support/group_child.py),
every row acked exactly once across them."""
import collections
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from mappedbus_py import MappedBusWriter

from .helpers import read_all

pytestmark = pytest.mark.spark

FILE_SIZE = 400_000
RECORD = 12
ROWS = 900
CHILD = [sys.executable, str(pathlib.Path(__file__).resolve().parents[1] / "support" / "group_child.py")]


def _member(bus, log, **opts):
    p = subprocess.Popen(CHILD + [bus, "g", str(log), "work", json.dumps(opts)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    assert line.startswith("ready"), line
    return p


def _acks(log):
    with open(log) as f:
        return [tuple(map(int, line.split()[1:])) for line in f if line.startswith("A ")]


def test_three_members_ack_every_row_of_a_spark_sink_once(spark, bus_path, tmp_path):
    MappedBusWriter(bus_path, FILE_SIZE, RECORD).open().close()   # the bus the members join
    log = tmp_path / "acks"
    members = []
    try:
        # Members before the rows share them as they come (work: a little sleep per ack); each
        # stops once the group has done ROWS records.
        members = [_member(bus_path, log, idle=1.0, total=ROWS, work=0.001) for _ in range(3)]
        data = [(b"row%05d" % i, i) for i in range(ROWS)]
        (spark.createDataFrame(data, "payload binary, meta int").repartition(3)
         .write.format("mappedbus").mode("append").option("path", bus_path)
         .option("fileSize", FILE_SIZE).option("recordSize", RECORD).save())
        for p in members:
            assert p.wait(120) == 0
    finally:
        for p in members:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(bus_path + ".groups", ignore_errors=True)
    on_bus = {pos: (meta, payload) for pos, meta, payload in read_all(bus_path, FILE_SIZE, RECORD)}
    assert sorted((m, p[:8]) for m, p in on_bus.values()) == sorted((m, p) for p, m in data)
    acked = collections.Counter(pos for pos, _, _ in _acks(log))
    assert set(acked) == set(on_bus), "rows not acked, or acks of positions not on the bus"
    assert all(n == 1 for n in acked.values()), {p: n for p, n in acked.items() if n != 1}
    assert all(d == 1 for _, d, _ in _acks(log))                  # no member died: one delivery
