"""Spark access to buses: a SparkSession with the project's ``mappedbus`` data source.

    from mappedbus_py.spark import session

    spark = session()
    df = (spark.read.format("mappedbus")
          .option("path", "/dev/shm/prices").option("layout", "PriceUpdate").load())

A rolling bus is read (and written) the same way with ``option("path", directory)``: its sizes come
from its ``bus.meta``; streaming offsets carry the bus id, and ``failOnDataLoss`` says what a query does
when records it had not read are gone. A streaming query is a named consumer of its bus (option
``consumer``, default ``spark-<checkpoint directory>-<hash>``): ``mappedbus_py.consumers(path)`` shows
it at the end of its last committed batch, held by the driver while it runs.

Real-time Mode (Spark 4.1+, per-record latency): ``realtime_passthrough`` and ``realtime_aggregate``
start a query from one bus to another in one call, ``start_realtime`` writes any streaming DataFrame
to a bus that way (through the JVM ``ForeachWriter`` ``io.mappedbuspy.spark.write.BusRealTimeSink``).

The data source is Java (``build/jvm/mappedbuspy-spark.jar`` on the core ``mappedbuspy.jar``); its
options are described in ``interop/src/spark/README.md``. pyspark is imported only when a session is
built, so importing this module needs neither pyspark nor a JVM.
"""
import os
import sys

__all__ = ("session", "jar_paths", "layout_of", "layout_options", "realtime_sink", "start_realtime",
           "realtime_passthrough", "realtime_aggregate")


def jar_paths(build=True):
    """The core and connector jar paths (strings), found as ``mappedbus_py.jvm.jar_paths`` finds
    them: ``$MAPPEDBUS_PY_JARS``, the installed package's ``jars/``, or the source tree's
    ``build/jvm`` (built first with ``interop/build_spark.sh`` if missing)."""
    from . import jvm
    return [str(j) for j in jvm.jar_paths(build)]


def session(app_name="mappedbus", master="local[2]", **conf):
    """Builds (or gets) a SparkSession with the project's jars on the driver and executor classpath,
    and ``-Dmappedbus.wakeLib`` (the wake library beside the jar) added to their Java options.

    ``conf`` holds Spark settings; a keyword without a dot has its underscores read as dots
    (``spark_sql_shuffle_partitions=2`` is ``spark.sql.shuffle.partitions``). A session that is already
    running keeps its jars: if it was started without these, ``format("mappedbus")`` will not be found.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from . import jvm

    jars = jar_paths()
    builder = (SparkSession.builder.appName(app_name).master(master)
               .config("spark.jars", ",".join(jars))
               .config("spark.driver.extraClassPath", os.pathsep.join(jars))
               .config("spark.executor.extraClassPath", os.pathsep.join(jars))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    settings = {}
    for key, value in conf.items():
        if "." not in key:
            key = key.replace("_", ".")
        settings[key] = str(value) if not isinstance(value, bool) else str(value).lower()
    # The driver and executors load the wake library (Java readers sleep until a writer wakes them)
    # from the path named here: Spark may load the connector's classes from a copy of the jar.
    # (Spark gives its JVMs --enable-native-access itself.)
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        wake_args = jvm.wake_jvm_args(settings.get(key, "").split(), jars[0])
        for arg in (a for a in wake_args if a.startswith("-D")):
            arg = f'"{arg}"' if " " in arg else arg
            settings[key] = f"{settings[key]} {arg}" if settings.get(key) else arg
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


# -- Real-time Mode -----------------------------------------------------------------------------------

def _opts(options):
    """Spark option values as strings (booleans lower-case), without the unset ones."""
    out = {}
    for k, v in options.items():
        if v is None:
            continue
        out[k] = str(v).lower() if isinstance(v, bool) else str(v)
    return out


def realtime_sink(df, path, **options):
    """The JVM ``ForeachWriter`` that writes ``df``'s rows to the bus at ``path``, each as it comes
    (``io.mappedbuspy.spark.write.BusRealTimeSink``). ``options`` are the ``mappedbus`` sink's (``fileSize``,
    ``layout``, ``segmentSize``, ...). Built on the driver: it checks the columns against the layout and
    creates the bus if it does not exist."""
    jvm = df.sparkSession._jvm
    return jvm.io.mappedbuspy.spark.write.BusRealTimeSink(_opts(dict(options, path=path)), df._jdf.schema())


def start_realtime(df, path, *, batch="1 minute", checkpoint=None, output_mode="update", query_name=None,
                   **options):
    """Starts a Real-time Mode query writing ``df`` (a streaming DataFrame) to the bus at ``path``;
    returns its ``StreamingQuery``.

    Records are processed as they arrive inside long-running batches of ``batch`` (Spark's
    ``trigger(realTime=...)``): each batch end writes a checkpoint and starts the next batch, which
    holds records back for a moment (about 0.1-0.3 s here), so long batches give the lowest tail
    latency; a restart re-reads from the last batch end. The sink is the JVM ``ForeachWriter``
    :func:`realtime_sink` (PySpark's ``foreach`` would call Python for every row).
    """
    from pyspark.sql.streaming.query import StreamingQuery
    jvm = df.sparkSession._jvm
    w = (df._jdf.writeStream().foreach(realtime_sink(df, path, **options))
         .trigger(jvm.org.apache.spark.sql.streaming.Trigger.RealTime(batch))
         .outputMode(output_mode))
    if checkpoint is not None:
        w = w.option("checkpointLocation", str(checkpoint))
    if query_name is not None:
        w = w.queryName(query_name)
    return StreamingQuery(w.start())


def _read(spark, src, layout, options):
    r = spark.readStream.format("mappedbus").option("path", str(src))
    if layout is not None:
        r = r.option("layout", layout)
    for k, v in _opts(options).items():
        r = r.option(k, v)
    return r.load()


def realtime_passthrough(spark, src, dst, layout=None, *, columns=None, batch="1 minute", checkpoint=None,
                         src_options=None, **dst_options):
    """Copies every record of bus ``src`` to bus ``dst`` as it commits, in Real-time Mode; returns the
    ``StreamingQuery``.

    With ``layout`` the records are decoded and re-encoded field by field (``columns`` picks or
    computes the output columns, SQL expressions, default all the fields); without it the raw
    ``payload`` and ``meta`` are copied. ``src_options`` go to the source (``startingPosition``,
    ``timeoutMs``, ``fileSize`` for a bus not created yet...), ``dst_options`` to the sink (``fileSize``
    to create ``dst``, ``layout`` if it differs). See :func:`start_realtime` for ``batch``.
    """
    df = _read(spark, src, layout, src_options or {})
    if columns is not None:
        df = df.selectExpr(*columns)
    elif layout is None:
        df = df.select("payload", "meta")
    else:
        df = df.drop("position", "meta")
    dst_options.setdefault("layout", layout)
    return start_realtime(df, dst, batch=batch, checkpoint=checkpoint, **dst_options)


def realtime_aggregate(spark, src, dst, group_by, aggs, layout, out_layout, *, batch="1 minute",
                       checkpoint=None, shuffle_partitions=1, src_options=None, **dst_options):
    """Keeps a running aggregate of bus ``src`` per group and writes each changed group's new result to
    bus ``dst`` as soon as an input record changes it (Real-time Mode, update output mode); returns the
    ``StreamingQuery``.

    ``group_by``: column names; ``aggs``: SQL expressions with aliases naming ``out_layout``'s fields
    (``["count(*) AS n", "sum(price * quantity) / sum(quantity) AS vwap"]``). Real-time Mode runs every
    stage of the query at once, so it needs ``1 + shuffle_partitions`` free task slots (``local[2]``:
    ``shuffle_partitions=1``, the default); a query restarted from its checkpoint keeps the number of
    partitions it was started with. Its shuffle holds a partly filled buffer for up to
    ``spark.shuffle.streaming.networkBufferMaxWaitTimeMs`` (default 50 ms): build the session with
    ``session(..., **{"spark.shuffle.streaming.networkBufferMaxWaitTimeMs": 1})`` for millisecond
    results.
    """
    from pyspark.sql import functions as F
    df = _read(spark, src, layout, src_options or {})
    out = df.groupBy(*group_by).agg(*[F.expr(a) for a in aggs])
    conf = spark.conf
    before = conf.get("spark.sql.shuffle.partitions")
    conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions))
    try:
        return start_realtime(out, dst, batch=batch, checkpoint=checkpoint, layout=out_layout, **dst_options)
    finally:
        conf.set("spark.sql.shuffle.partitions", before)


_LAYOUT_TYPES = {"<i1": "int8", "<i2": "int16", "<i4": "int32", "<i8": "int64",
                 "<f4": "float32", "<f8": "float64"}


def layout_of(message_class, timestamps=None):
    """The data source's ``layout`` string for a ``Message`` class: its fields in offset order,
    ``PriceUpdate`` -> ``"source:int32,price:int32,quantity:int32"`` (a trailing ``_`` of a field
    name is dropped, as in ``numpy_dtype``: ``Token.from_`` is column ``from``).

    ``timestamps`` maps int64 field names to ``"ns"`` or ``"us"``: those fields become
    ``timestamp_ns`` / ``timestamp_us`` (Spark ``TimestampType``). Python writes them as the plain
    int64 they are declared as (nanoseconds or microseconds since the epoch, UTC); only Spark reads
    them as timestamps (nanoseconds truncated to Spark's microseconds).

    Refused with ValueError naming the class and field: unsigned fields (the layout has no unsigned
    types), gaps or overlaps between fields (a layout's fields are consecutive from offset 0), and
    timestamp names that are not int64 fields."""
    timestamps = dict(timestamps or {})
    fields = sorted(message_class.fields, key=lambda f: f.offset)
    if not fields:
        raise ValueError(f"{message_class.__name__} has no fields")
    parts, end = [], 0
    for f in fields:
        name = f.name.rstrip("_")
        if f.offset != end:
            raise ValueError(f"{message_class.__name__}.{f.name} is at offset {f.offset}, not {end}: "
                             "a layout's fields are consecutive from offset 0 (no gaps or overlaps)")
        unit = timestamps.pop(f.name, timestamps.pop(name, None))
        if unit is not None:
            if f.code != "<i8" or unit not in ("ns", "us"):
                raise ValueError(f"{message_class.__name__}.{f.name}: a timestamp needs an int64 field "
                                 f"and unit 'ns' or 'us', got {f.code!r} and {unit!r}")
            kind = "timestamp_" + unit
        elif f.code in _LAYOUT_TYPES:
            kind = _LAYOUT_TYPES[f.code]
        elif f.code.startswith("S"):
            kind = "bytes" + f.code[1:]
        else:
            raise ValueError(f"{message_class.__name__}.{f.name} has type {f.code!r}, which a Spark layout "
                             "cannot hold (no unsigned types: declare it signed)")
        parts.append(f"{name}:{kind}")
        end = f.offset + f.size
    if timestamps:
        raise ValueError(f"{message_class.__name__} has no int64 field(s) {sorted(timestamps)}")
    return ",".join(parts)


def layout_options(message_class, timestamps=None):
    """The read/write options for records of a ``Message`` class, in one call:
    ``spark.read.format("mappedbus").options(path=p, **layout_options(PriceUpdate))``:
    ``layout`` (``layout_of``) and ``typeId`` (the class's type id, the metadata written). No
    ``recordSize``: the connector takes the bus's own from its metadata, or the layout's size for
    a new bus (a file of the Java original needs ``recordSize`` given)."""
    return {"layout": layout_of(message_class, timestamps), "typeId": str(message_class.type_id)}
