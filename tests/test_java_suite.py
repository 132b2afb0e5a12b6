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


def test_java_suite_passes(java_jars):
    proc = subprocess.run(
        ["java", "-Dmappedbuspy.root=" + ROOT, "-cp", os.pathsep.join(java_jars),
         "io.mappedbuspy.testing.TestRunner"],
        capture_output=True, text=True, timeout=900, cwd=ROOT)
    output = proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines, output
    assert re.fullmatch(r"\d+ passed, 0 failed", lines[-1]), output
    assert proc.returncode == 0, output
