"""A streaming query bus -> bus in its own process, for the exactly-once sink test to stop or kill.

    eos_child.py IN OUT FILE_SIZE CHECKPOINT run|drain [SEGMENT_SIZE]

With SEGMENT_SIZE, OUT is a rolling bus (a directory) with segments of that size, made if absent;
FILE_SIZE then applies to IN only.

``run`` processes micro-batches until SIGTERM, then stops the query (``query.stop()``) and exits;
``drain`` processes what is on the input bus (``Trigger.AvailableNow``) and exits. Prints ``started``
once the query runs."""
import os
import signal
import sys
import threading

from mappedbus_py.spark import session

LAYOUT = "id:int64,value:int32"


def main():
    src, dst, file_size, ckpt, mode = sys.argv[1:6]
    segment_size = sys.argv[6] if len(sys.argv) > 6 else None
    spark = session("eos-child", "local[2]", spark_sql_shuffle_partitions=2,
                    **{"spark.driver.memory": "512m"})
    spark.sparkContext.setLogLevel("ERROR")
    df = (spark.readStream.format("mappedbus").option("path", src).option("layout", LAYOUT)
          .option("maxRecordsPerTrigger", 3000 if mode == "run" else 100_000).option("numPartitions", 2).load()
          .select("id", "value"))
    w = (df.writeStream.format("mappedbus").option("path", dst)
         .option(*(("segmentSize", segment_size) if segment_size else ("fileSize", file_size)))
         .option("layout", LAYOUT).option("checkpointLocation", ckpt)
         .option("exactlyOnce", os.environ.get("EOS_EXACTLY_ONCE", "true")))
    if mode == "drain":
        w.trigger(availableNow=True).start().awaitTermination()
        return
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    q = w.trigger(processingTime="50 milliseconds").start()
    print("started", flush=True)
    while not stop.wait(0.05) and q.isActive:
        pass
    q.stop()


if __name__ == "__main__":
    main()
