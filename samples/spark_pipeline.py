"""Streaming pipeline: Python writers -> bus A -> Spark Structured Streaming -> bus B -> Python reader.

    python samples/spark_pipeline.py --messages 2000 --writers 2

Each writer process publishes ``--messages`` price updates (stamped with the wall clock at write time)
onto bus A. A Spark query reads bus A with the ``mappedbus`` source, keeps a running count and
volume-weighted average price per source (sum(price * quantity) / sum(quantity)), and appends each
changed result onto bus B with the ``mappedbus`` sink. A reader process prints the results as they
arrive and measures the end-to-end latency: from the write of the newest price update a result includes
to the moment the reader sees that result. Everything runs on this machine, in /dev/shm by default, and
is removed at the end. Exits 0 once every source's final count and VWAP are right.
"""
import argparse
import json
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
import uuid
from typing import Any, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from mappedbus_py import MappedBusReader, MappedBusWriter, Message, float64, int32, int64  # noqa: E402


class TimedPrice(Message, type_id=10):
    """A price update stamped with its writer's clock (time.time_ns())."""
    source = int32()
    price = int32()
    quantity = int32()
    ts = int64()


class PriceStats(Message, type_id=11):
    """A running result: count and VWAP of a source, and the newest input timestamp it includes."""
    source = int32()
    count = int64()
    vwap = float64()
    ts = int64()


IN_LAYOUT = "source:int32,price:int32,quantity:int32,ts:int64"
OUT_LAYOUT = "source:int32,count:int64,vwap:float64,ts:int64"
IN_RECORD = 24    # TimedPrice takes 20 bytes; 24 keeps every status int32 aligned
OUT_RECORD = 32   # PriceStats takes 28 bytes


def price_of(source: int, i: int) -> Tuple[int, int]:
    return 100 + source * 10 + i % 7, 1 + i % 5


def expected_vwap(source: int, n: int) -> float:
    pq = q = 0
    for i in range(n):
        p, qty = price_of(source, i)
        pq += p * qty
        q += qty
    return pq / q


def writer(path: str, file_size: int, source: int, n: int, rate: float) -> None:
    """Writes n TimedPrice records at about ``rate`` per second."""
    msg = TimedPrice()
    msg.source = source
    start = time.perf_counter()
    with MappedBusWriter(path, file_size, IN_RECORD) as w:
        for i in range(n):
            due = start + i / rate
            while time.perf_counter() < due:
                time.sleep(min(0.001, max(0.0, due - time.perf_counter())))
            msg.price, msg.quantity = price_of(source, i)
            msg.ts = time.time_ns()
            w.write(msg)


WARMUP = -1  # source id of the record that warms the query up (its first batch compiles everything)


def reader(path: str, file_size: int, sources: int, n: int, timeout: float, out: Any,
           warm: Any) -> None:
    """Prints results until every source's count reaches n; sends a summary through ``out``.
    Sets ``warm`` once the warm-up result has arrived."""
    msg = PriceStats()
    latest: Dict[int, Tuple[int, float]] = {}
    latencies: List[float] = []
    deadline = time.time() + timeout
    with MappedBusReader(path, file_size, OUT_RECORD) as r:
        while time.time() < deadline:
            if not r.read_into(msg):
                time.sleep(0.0002)
                continue
            seen = time.time_ns()
            lat_ms = (seen - msg.ts) / 1e6
            if msg.source == WARMUP:
                print(f"warm-up result after {lat_ms:.0f} ms (first micro-batch, not counted)", flush=True)
                warm.set()
                continue
            latencies.append(lat_ms)
            latest[msg.source] = (msg.count, msg.vwap)
            print(f"{msg!r}  latency={lat_ms:.1f} ms", flush=True)
            if len(latest) == sources and all(c >= n for c, _ in latest.values()):
                break
    out.put({"results": len(latencies), "latencies_ms": latencies, "final": latest})


def percentile(values: List[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))] if s else float("nan")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=2000, help="price updates per writer")
    ap.add_argument("--writers", type=int, default=2, help="writer processes (one source each)")
    ap.add_argument("--rate", type=float, default=1000.0, help="updates per second per writer")
    ap.add_argument("--trigger-ms", type=int, default=0, help="micro-batch interval (0: back to back)")
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir())
    ap.add_argument("--timeout", type=float, default=120.0, help="give up after this many seconds")
    args = ap.parse_args(argv)

    tag = f"spark-pipeline-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    bus_a = os.path.join(args.dir, tag + "-a")
    bus_b = os.path.join(args.dir, tag + "-b")
    work = tempfile.mkdtemp(prefix=tag)
    size_a = 8 + (args.messages * args.writers + 1 + 16) * (8 + IN_RECORD)
    size_b = 64 << 20
    for path, size, rec in ((bus_a, size_a, IN_RECORD), (bus_b, size_b, OUT_RECORD)):
        MappedBusWriter(path, size, rec).open().close()

    ctx = mp.get_context("spawn")  # the Spark driver's JVM and py4j threads must not be forked
    query = spark = None
    procs = []
    try:
        from mappedbus_py.spark import session
        from pyspark.sql import functions as F

        t0 = time.time()
        spark = session("spark_pipeline", "local[2]", spark_sql_shuffle_partitions=2)
        spark.sparkContext.setLogLevel("ERROR")
        prices = (spark.readStream.format("mappedbus").option("path", bus_a).option("fileSize", size_a)
                  .option("recordSize", IN_RECORD).option("layout", IN_LAYOUT).load())
        stats = (prices.groupBy("source")
                 .agg(F.count("*").alias("count"),
                      (F.sum(F.col("price").cast("long") * F.col("quantity"))
                       / F.sum(F.col("quantity").cast("long"))).alias("vwap"),
                      F.max("ts").alias("ts")))
        w = (stats.writeStream.outputMode("update").format("mappedbus")
             .option("path", bus_b).option("fileSize", size_b).option("recordSize", OUT_RECORD)
             .option("layout", OUT_LAYOUT).option("typeId", PriceStats.type_id)
             .option("checkpointLocation", os.path.join(work, "checkpoint")))
        if args.trigger_ms:
            w = w.trigger(processingTime=f"{args.trigger_ms} milliseconds")
        query = w.start()
        print(f"spark session and query started in {time.time() - t0:.1f} s", flush=True)

        out, warm = ctx.Queue(), ctx.Event()
        rd = ctx.Process(target=reader,
                         args=(bus_b, size_b, args.writers, args.messages, args.timeout, out, warm))
        rd.start()
        procs.append(rd)
        with MappedBusWriter(bus_a, size_a, IN_RECORD) as w:
            w.write(TimedPrice(WARMUP, 1, 1, time.time_ns()))
        if not warm.wait(args.timeout):
            print("error: no warm-up result in time", file=sys.stderr)
            return 1
        t_write = time.time()
        for s in range(args.writers):
            p = ctx.Process(target=writer, args=(bus_a, size_a, s, args.messages, args.rate))
            p.start()
            procs.append(p)
        for p in procs[1:]:
            p.join()
        write_s = time.time() - t_write
        try:
            summary = out.get(timeout=args.timeout)
        except Exception:
            print("error: the reader got no complete result in time", file=sys.stderr)
            return 1
        rd.join()
        elapsed = time.time() - t_write
        time.sleep(0.5)  # let the last progress report land
        batches = [p for p in query.recentProgress if p["numInputRows"] > 0]

        ok = True
        for s in range(args.writers):
            count, vwap = summary["final"].get(s, (0, float("nan")))
            want = expected_vwap(s, args.messages)
            if count != args.messages or abs(vwap - want) > 1e-9 * want:
                print(f"error: source {s}: count {count} vwap {vwap}, expected {args.messages} {want}",
                      file=sys.stderr)
                ok = False
        lat = summary["latencies_ms"]
        report = {
            "messages": args.messages * args.writers, "writers": args.writers,
            "write_seconds": round(write_s, 2), "pipeline_seconds": round(elapsed, 2),
            "batches_with_input": len(batches), "results": summary["results"],
            "latency_ms": {"p50": round(percentile(lat, 0.5), 1), "p90": round(percentile(lat, 0.9), 1),
                           "max": round(max(lat), 1) if lat else None,
                           "last_result": round(lat[-1], 1) if lat else None},
            "vwap_ok": ok,
        }
        print("end-to-end latency (writer timestamp -> result seen by the reader): "
              f"p50 {report['latency_ms']['p50']} ms, p90 {report['latency_ms']['p90']} ms, "
              f"max {report['latency_ms']['max']} ms")
        print(json.dumps(report))
        return 0 if ok else 1
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join()
        if query is not None:
            query.stop()
        if spark is not None:
            spark.stop()
        for path in (bus_a, bus_b):
            for f in (path, path + ".meta"):    # the bus and its metadata file
                if os.path.exists(f):
                    os.unlink(f)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
