"""mappedbus_py.spark: a small API that imports pyspark only when a session is built."""
import os
import subprocess
import sys

import pytest

from .helpers import ROOT

pytestmark = pytest.mark.spark


def test_import_is_lazy_and_api_small():
    code = ("import sys, mappedbus_py.spark as s; "
            "assert 'pyspark' not in sys.modules, 'pyspark imported eagerly'; "
            "print(sorted(s.__all__))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT))).stdout
    assert out.strip() == ("['jar_paths', 'layout_of', 'layout_options', 'realtime_aggregate', "
                           "'realtime_passthrough', 'realtime_sink', 'session', 'start_realtime']")


def test_session_has_the_jars(spark):
    from mappedbus_py.spark import jar_paths
    jars = jar_paths()
    assert all(os.path.isfile(j) for j in jars)
    assert [os.path.basename(j) for j in jars] == ["mappedbuspy.jar", "mappedbuspy-spark.jar"]
    conf = spark.sparkContext.getConf().get("spark.jars")
    assert all(j in conf for j in jars)
    assert os.environ["PYSPARK_PYTHON"]
