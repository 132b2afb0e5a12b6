"""Spark access to buses: a SparkSession with the project's ``mappedbus`` data source.

    from mappedbus_py.spark import session

    spark = session()
    df = (spark.read.format("mappedbus")
          .option("path", "/dev/shm/prices").option("layout", "PriceUpdate").load())

A rolling bus is read (and written) the same way with ``option("path", directory)``: its sizes come
from its ``bus.meta``; streaming offsets carry the bus id, and ``failOnDataLoss`` says what a query does
when records it had not read are gone.

The data source is Java (``build/jvm/mappedbuspy-spark.jar`` on the core ``mappedbuspy.jar``); its
options are described in ``interop/src/spark/README.md``. pyspark is imported only when a session is
built, so importing this module needs neither pyspark nor a JVM.
"""
import os
import subprocess
import sys

__all__ = ("session", "jar_paths")

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def jar_paths(build=True):
    """The core and connector jar paths (strings), found as ``mappedbus_py.jvm.jar_paths`` finds
    them: ``$MAPPEDBUS_PY_JARS``, the installed package's ``jars/``, or the source tree's
    ``build/jvm`` (built first with ``interop/build_spark.sh`` if missing)."""
    from . import jvm
    return [str(j) for j in jvm.jar_paths(build)]


def session(app_name="mappedbus", master="local[2]", **conf):
    """Builds (or gets) a SparkSession with the project's jars on the driver and executor classpath.

    ``conf`` holds Spark settings; a keyword without a dot has its underscores read as dots
    (``spark_sql_shuffle_partitions=2`` is ``spark.sql.shuffle.partitions``). A session that is already
    running keeps its jars: if it was started without these, ``format("mappedbus")`` will not be found.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    jars = jar_paths()
    builder = (SparkSession.builder.appName(app_name).master(master)
               .config("spark.jars", ",".join(jars))
               .config("spark.driver.extraClassPath", os.pathsep.join(jars))
               .config("spark.executor.extraClassPath", os.pathsep.join(jars))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    for key, value in conf.items():
        if "." not in key:
            key = key.replace("_", ".")
        builder = builder.config(key, str(value) if not isinstance(value, bool) else str(value).lower())
    return builder.getOrCreate()
