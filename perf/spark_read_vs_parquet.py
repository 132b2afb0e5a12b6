"""Batch-read throughput of the mappedbus Spark source beside Parquet, same records, same run.

    python perf/spark_read_vs_parquet.py            # 2 M records
    python perf/spark_read_vs_parquet.py --full     # 20 M records (the issue's target size)

Writes N PriceUpdate records to a bus in /dev/shm (Python ``write_batch``), copies them to Parquet
(also in /dev/shm, so both are read from RAM), then times with the same SparkSession:
``count()`` and ``agg(sum(price), sum(quantity), max(source))`` on the bus (decoded with
``layout=PriceUpdate``; columnar batches, and row by row for comparison) and on the Parquet copy.
Also ``groupBy(source)``, a filter on a field (``source = 3``, evaluated by Spark on both), and a
position range (10 % of the records in the middle: pushed down to the bus source, which plans only
those slots; Parquet skips row groups by their statistics). The Parquet copy holds ``position`` and
``meta`` too, so both sides answer the same queries. Best of ``--repeat`` runs after one warm-up.
Prints one JSON object (rows/s, and ``ratios``: bus time / Parquet time per query, target <= 1.0).
Parquet answers ``count()`` from its footers without reading data.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from mappedbus_py import MappedBusWriter, PriceUpdate  # noqa: E402
from mappedbus_py.formats.files import remove_bus  # noqa: E402


def best(fn, repeat):
    fn()  # warm-up: JIT, codegen, page cache
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def write_out(path, result):
    """Appends this run to the file's ``runs`` (shared machines: keep every run, say which is which)."""
    runs = []
    if os.path.exists(path):
        with open(path) as f:
            runs = json.load(f).get("runs", [])
    runs.append(result)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"runs": runs}, f, indent=1)
        f.write("\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--full", action="store_true", help="20 M records")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--out", help="also write the JSON to this file (with the load average and date); "
                    "an existing file gets this run appended to its 'runs' list")
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir())
    args = ap.parse_args(argv)

    n = 20_000_000 if args.full else args.records
    tag = f"spark-perf-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    bus = os.path.join(args.dir, tag + ".bus")
    parquet = os.path.join(args.dir, tag + ".parquet")
    file_size = 8 + n * (8 + 12)
    spark = None
    try:
        rows = np.zeros(n, dtype=PriceUpdate.numpy_dtype())
        i = np.arange(n, dtype=np.int64)
        rows["source"] = i % 16
        rows["price"] = 1000 + i % 997
        rows["quantity"] = 1 + i % 13
        with MappedBusWriter(bus, file_size, 12) as w:
            w.write_batch(rows)

        from pyspark.sql import functions as F
        from mappedbus_py.spark import session
        spark = session("spark_read_vs_parquet", args.master, spark_sql_shuffle_partitions=2,
                        spark_driver_memory="2g")
        spark.sparkContext.setLogLevel("ERROR")

        def bus_df(columnar=True):
            return (spark.read.format("mappedbus").option("path", bus).option("layout", "PriceUpdate")
                    .option("columnar", str(columnar).lower()).load())

        bus_df().write.parquet(parquet)
        pq_df = lambda: spark.read.parquet(parquet)  # noqa: E731

        aggs = [F.sum("price").alias("p"), F.sum("quantity").alias("q"), F.max("source").alias("s")]
        want = (int(rows["price"].sum()), int(rows["quantity"].sum()), 15)
        for make in (bus_df, pq_df):
            got = tuple(make().agg(*aggs).first())
            assert got == want, (make.__name__, got, want)
            assert make().count() == n

        lo, hi = 8 + (n * 45 // 100) * 20, 8 + (n * 55 // 100) * 20
        queries = {
            "count": lambda df: df.count(),
            "sum": lambda df: df.agg(*aggs).collect(),
            "groupBy": lambda df: df.groupBy("source").agg(F.sum("price")).collect(),
            "filter": lambda df: df.where(F.col("source") == 3).agg(F.sum("price")).collect(),
            "position_range": lambda df: df.where((F.col("position") >= lo) & (F.col("position") < hi))
                                           .agg(F.sum("price")).collect(),
        }
        for make in (bus_df, pq_df):  # the same answers on both sides
            assert make().where((F.col("position") >= lo) & (F.col("position") < hi)).count() == n // 10
            assert make().where(F.col("source") == 3).count() == (n + 12) // 16

        cases = {
            "bus_columnar": bus_df,
            "bus_rows": lambda: bus_df(columnar=False),
            "parquet": pq_df,
        }
        result = {"records": n, "master": args.master, "bus_bytes": os.path.getsize(bus),
                  "parquet_bytes": sum(os.path.getsize(os.path.join(parquet, f))
                                       for f in os.listdir(parquet))}
        for name, make in cases.items():
            result[name] = {}
            for q, run in queries.items():
                t = best(lambda: run(make()), args.repeat)
                result[name][q + "_s"] = round(t, 4)
                result[name][q + "_rows_per_s"] = round(n / t)
        result["ratios"] = {q: round(result["bus_columnar"][q + "_s"] / result["parquet"][q + "_s"], 2)
                            for q in queries}
        result["loadavg_1_5_15"] = [round(x, 2) for x in os.getloadavg()]
        result["date"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        result["cpus"] = os.cpu_count()
        print(json.dumps(result, indent=1))
        if args.out:
            write_out(args.out, result)
    finally:
        if spark is not None:
            spark.stop()
        remove_bus(bus)
        shutil.rmtree(parquet, ignore_errors=True)


if __name__ == "__main__":
    main()
