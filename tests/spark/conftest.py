"""One SparkSession for the whole Spark suite.

This directory is a package (``__init__.py``) so that this conftest does not take the module name
``conftest`` from the top-level tests' one."""
import os
import pathlib
import shutil
import uuid

import pytest

pytest.importorskip("pyspark")
if shutil.which("java") is None:
    pytest.skip("the Spark suite needs a JDK", allow_module_level=True)


@pytest.fixture(scope="session")
def spark():
    from mappedbus_py.spark import session
    s = session("mappedbus-tests", "local[2]",
                spark_sql_shuffle_partitions=2,
                **{"spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
                   "spark.driver.memory": "1g"})
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


@pytest.fixture
def bus_root():
    """A fresh directory in /dev/shm (or /tmp) for the buses of one test, removed after it."""
    base = pathlib.Path("/dev/shm") if os.path.isdir("/dev/shm") else pathlib.Path("/tmp")
    root = base / f"mbspark-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    root.mkdir()
    yield str(root)
    shutil.rmtree(root, ignore_errors=True)
