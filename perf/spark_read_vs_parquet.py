"""Batch-read throughput of the mappedbus Spark source beside Parquet, same records, same run.

    python perf/spark_read_vs_parquet.py --records 5000000

Writes N PriceUpdate records to a bus in /dev/shm (Python ``write_batch``), copies them to Parquet
(also in /dev/shm, so both are read from RAM), then times with the same SparkSession:
``count()`` and ``agg(sum(price), sum(quantity), max(source))`` on the bus (decoded with
``layout=PriceUpdate``; columnar batches, and row by row for comparison) and on the Parquet copy.
Best of ``--repeat`` runs after one warm-up. Prints one JSON object (rows/s).
Parquet answers ``count()`` from its footers without reading data, so the aggregate is the fair
comparison.
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


def best(fn, repeat):
    fn()  # warm-up: JIT, codegen, page cache
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir())
    args = ap.parse_args(argv)

    n = args.records
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

        bus_df().select("source", "price", "quantity").write.parquet(parquet)
        pq_df = lambda: spark.read.parquet(parquet)  # noqa: E731

        aggs = [F.sum("price").alias("p"), F.sum("quantity").alias("q"), F.max("source").alias("s")]
        want = (int(rows["price"].sum()), int(rows["quantity"].sum()), 15)
        for make in (bus_df, pq_df):
            got = tuple(make().agg(*aggs).first())
            assert got == want, (make.__name__, got, want)
            assert make().count() == n

        cases = {
            "bus_columnar": bus_df,
            "bus_rows": lambda: bus_df(columnar=False),
            "parquet": pq_df,
        }
        result = {"records": n, "master": args.master, "bus_bytes": os.path.getsize(bus),
                  "parquet_bytes": sum(os.path.getsize(os.path.join(parquet, f))
                                       for f in os.listdir(parquet))}
        for name, make in cases.items():
            t_count = best(lambda: make().count(), args.repeat)
            t_agg = best(lambda: make().agg(*aggs).collect(), args.repeat)
            result[name] = {"count_rows_per_s": round(n / t_count), "sum_rows_per_s": round(n / t_agg),
                            "count_s": round(t_count, 4), "sum_s": round(t_agg, 4)}
        result["sum_bus_columnar_vs_parquet"] = round(
            result["bus_columnar"]["sum_rows_per_s"] / result["parquet"]["sum_rows_per_s"], 2)
        print(json.dumps(result, indent=1))
    finally:
        if spark is not None:
            spark.stop()
        for f in (bus, bus + ".meta"):
            if os.path.exists(f):
                os.unlink(f)
        shutil.rmtree(parquet, ignore_errors=True)


if __name__ == "__main__":
    main()
