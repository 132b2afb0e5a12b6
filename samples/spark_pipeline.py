"""Streaming pipeline: Python writers -> bus A -> Spark Structured Streaming -> bus B -> Python reader.

    python samples/spark_pipeline.py --messages 2000 --writers 2
    python samples/spark_pipeline.py --real-time                # 2 x 5000 records, latency per record
    python samples/spark_pipeline.py --real-time --passthrough  # records copied as they are

Each writer process publishes ``--messages`` price updates (stamped with the wall clock at write time)
onto bus A. A Spark query reads bus A with the ``mappedbus`` source, keeps a running count and
volume-weighted average price per source (sum(price * quantity) / sum(quantity)), and appends each
changed result onto bus B with the ``mappedbus`` sink. A reader process prints the results as they
arrive and measures the end-to-end latency: from the write of the newest price update a result includes
to the moment the reader sees that result. Everything runs on this machine, in /dev/shm by default, and
is removed at the end. Exits 0 once every source's final count and VWAP are right.

``--real-time`` runs the same query in Spark's Real-time Mode (``trigger(realTime=...)``, the
``mappedbus`` source's real-time reader and the ``BusRealTimeSink`` writer, through
``mappedbus_py.spark.realtime_aggregate``): every input record updates its source's result at once, so
each result carries the send time of the one record it came from, and the reader reports the latency
of every record: p50/p99/p99.9/max. ``--passthrough`` copies the records instead of aggregating them
(``realtime_passthrough``; the check is then that every record arrived once). Send times are
``time.monotonic_ns()`` (CLOCK_MONOTONIC, the clock of Java's ``System.nanoTime()`` on Linux).
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
from mappedbus_py.formats.files import remove_bus  # noqa: E402


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
            while True:  # paced: sleep while ahead, spin the last 50 us
                ahead = due - time.perf_counter()
                if ahead <= 0:
                    break
                if ahead > 0.00005:
                    time.sleep(ahead - 0.00005)
            msg.price, msg.quantity = price_of(source, i)
            msg.ts = time.monotonic_ns()
            w.write(msg)


WARMUP = -1  # source id of the record that warms the query up (its first batch compiles everything)


def reader(path: str, file_size: int, sources: int, n: int, timeout: float, out: Any,
           warm: Any, passthrough: bool = False, print_every: int = 1) -> None:
    """Prints results until every source's count reaches n (passthrough: until n records of each
    source came); sends a summary through ``out``. Sets ``warm`` once the warm-up result has arrived.
    Waits with the bus's own blocking wait, so a result is seen microseconds after it commits."""
    msg = TimedPrice() if passthrough else PriceStats()
    record = IN_RECORD if passthrough else OUT_RECORD
    latest: Dict[int, Tuple[int, float]] = {}
    seen_seq: Dict[int, int] = {}
    latencies: List[float] = []
    deadline = time.monotonic() + timeout
    with MappedBusReader(path, file_size, record) as r:
        while time.monotonic() < deadline:
            if not r.wait(0.2):
                continue
            r.read_message(msg)
            lat_ms = (time.monotonic_ns() - msg.ts) / 1e6
            if msg.source == WARMUP:
                if not warm.is_set():
                    print(f"warm-up result after {lat_ms:.0f} ms (first batch, not counted)", flush=True)
                    warm.set()
                continue
            latencies.append(lat_ms)
            if passthrough:
                seen_seq[msg.source] = seen_seq.get(msg.source, 0) + 1
                latest[msg.source] = (seen_seq[msg.source], float("nan"))
            else:
                assert isinstance(msg, PriceStats)
                latest[msg.source] = (msg.count, msg.vwap)
            if len(latencies) % print_every == 0 or latest[msg.source][0] >= n:
                print(f"{msg!r}  latency={lat_ms:.1f} ms", flush=True)
            if len(latest) == sources and all(c >= n for c, _ in latest.values()):
                break
    out.put({"results": len(latencies), "latencies_ms": latencies, "final": latest})


def percentile(values: List[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))] if s else float("nan")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=None,
                    help="price updates per writer (default 2000; --real-time: 5000)")
    ap.add_argument("--writers", type=int, default=2, help="writer processes (one source each)")
    ap.add_argument("--rate", type=float, default=1000.0, help="updates per second per writer")
    ap.add_argument("--trigger-ms", type=int, default=0, help="micro-batch interval (0: back to back)")
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir())
    ap.add_argument("--timeout", type=float, default=120.0, help="give up after this many seconds")
    ap.add_argument("--real-time", action="store_true",
                    help="Spark Real-time Mode: per-record processing, latency of every record")
    ap.add_argument("--passthrough", action="store_true",
                    help="copy the records to bus B instead of aggregating them")
    ap.add_argument("--batch", default="1 minute",
                    help="--real-time: duration of Spark's long-running batches (checkpoint interval)")
    args = ap.parse_args(argv)
    if args.messages is None:
        args.messages = 5000 if args.real_time else 2000

    tag = f"spark-pipeline-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    bus_a = os.path.join(args.dir, tag + "-a")
    bus_b = os.path.join(args.dir, tag + "-b")
    work = tempfile.mkdtemp(prefix=tag)
    # Real-time: 2000 warm-up records (not counted) get the JVM's JIT past the per-record path first.
    warmup = 2000 if args.real_time else 1
    size_a = 8 + (args.messages * args.writers + warmup + 16) * (8 + IN_RECORD)
    size_b = 64 << 20
    out_record = IN_RECORD if args.passthrough else OUT_RECORD
    for path, size, rec in ((bus_a, size_a, IN_RECORD), (bus_b, size_b, out_record)):
        MappedBusWriter(path, size, rec).open().close()

    ctx = mp.get_context("spawn")  # the Spark driver's JVM and py4j threads must not be forked
    query = spark = None
    procs = []
    try:
        from mappedbus_py.spark import realtime_aggregate, realtime_passthrough, session
        from pyspark.sql import functions as F

        t0 = time.time()
        # Real-time aggregation: the pipelined shuffle flushes a partly filled buffer after this many ms
        # (default 50), which would be most of each record's latency.
        conf = {"spark.shuffle.streaming.networkBufferMaxWaitTimeMs": 1} if args.real_time else {}
        spark = session("spark_pipeline", "local[2]", spark_sql_shuffle_partitions=2, **conf)
        spark.sparkContext.setLogLevel("OFF" if args.real_time else "ERROR")  # a stopped RTM task logs its kill
        checkpoint = os.path.join(work, "checkpoint")
        vwap = [F.count("*").alias("count"),
                (F.sum(F.col("price").cast("long") * F.col("quantity"))
                 / F.sum(F.col("quantity").cast("long"))).alias("vwap"),
                F.max("ts").alias("ts")]
        src_opts = {"fileSize": size_a, "recordSize": IN_RECORD}
        if args.real_time and args.passthrough:
            query = realtime_passthrough(spark, bus_a, bus_b, IN_LAYOUT, batch=args.batch, checkpoint=checkpoint,
                                         src_options=src_opts, fileSize=size_b, recordSize=IN_RECORD,
                                         typeId=TimedPrice.type_id)
        elif args.real_time:
            # Each input record changes its source's result at once, so max(ts) is that record's send time.
            query = realtime_aggregate(spark, bus_a, bus_b, ["source"],
                                       ["count(*) AS count",
                                        "sum(cast(price AS long) * quantity) / sum(cast(quantity AS long)) AS vwap",
                                        "max(ts) AS ts"],
                                       IN_LAYOUT, OUT_LAYOUT, batch=args.batch, checkpoint=checkpoint,
                                       src_options=src_opts, fileSize=size_b, recordSize=OUT_RECORD,
                                       typeId=PriceStats.type_id)
        else:
            prices = (spark.readStream.format("mappedbus").option("path", bus_a).option("fileSize", size_a)
                      .option("recordSize", IN_RECORD).option("layout", IN_LAYOUT).load())
            if args.passthrough:
                out_df, layout, type_id, mode = prices.drop("position", "meta"), IN_LAYOUT, TimedPrice.type_id, "append"
            else:
                out_df, layout, type_id, mode = prices.groupBy("source").agg(*vwap), OUT_LAYOUT, PriceStats.type_id, "update"
            w = (out_df.writeStream.outputMode(mode).format("mappedbus")
                 .option("path", bus_b).option("fileSize", size_b).option("recordSize", out_record)
                 .option("layout", layout).option("typeId", type_id)
                 .option("checkpointLocation", checkpoint))
            if args.trigger_ms:
                w = w.trigger(processingTime=f"{args.trigger_ms} milliseconds")
            query = w.start()
        print(f"spark session and query started in {time.time() - t0:.1f} s", flush=True)

        out, warm = ctx.Queue(), ctx.Event()
        rd = ctx.Process(target=reader,
                         args=(bus_b, size_b, args.writers, args.messages, args.timeout, out, warm,
                                 args.passthrough, 1000 if args.real_time else 1))
        rd.start()
        procs.append(rd)
        with MappedBusWriter(bus_a, size_a, IN_RECORD) as w:
            for _ in range(warmup):
                w.write(TimedPrice(WARMUP, 1, 1, time.monotonic_ns()))
                if warmup > 1:
                    time.sleep(0.0005)
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
            if count != args.messages or (not args.passthrough and abs(vwap - want) > 1e-9 * want):
                print(f"error: source {s}: count {count} vwap {vwap}, expected {args.messages} {want}",
                      file=sys.stderr)
                ok = False
        lat = summary["latencies_ms"]
        report = {
            "messages": args.messages * args.writers, "writers": args.writers,
            "write_seconds": round(write_s, 2), "pipeline_seconds": round(elapsed, 2),
            "batches_with_input": len(batches), "results": summary["results"],
            "mode": "real-time" if args.real_time else "micro-batch",
            "query": "passthrough" if args.passthrough else "vwap",
            "latency_ms": {"p50": round(percentile(lat, 0.5), 3), "p90": round(percentile(lat, 0.9), 3),
                           "p99": round(percentile(lat, 0.99), 3), "p99.9": round(percentile(lat, 0.999), 3),
                           "max": round(max(lat), 3) if lat else None,
                           "last_result": round(lat[-1], 3) if lat else None},
            "vwap_ok": ok,
        }
        lm = report["latency_ms"]
        print(f"end-to-end latency (writer timestamp -> result seen by the reader, {len(lat)} results): "
              f"p50 {lm['p50']} ms, p90 {lm['p90']} ms, p99 {lm['p99']} ms, p99.9 {lm['p99.9']} ms, "
              f"max {lm['max']} ms")
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
            remove_bus(path)        # the bus and its side files (metadata, commit log, wake, ...)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
