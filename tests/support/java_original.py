"""Where the tests look for the Java original (Mappedbus 0.5.1 built for JDK 17): the directory
``../shared/original`` beside the checkout, or ``$MAPPEDBUS_ORIGINAL_DIR`` (perf/common.py reads
the same variable). It is not part of the project and a user's clone lacks it: tests that need
it are marked ``original`` and skip (or expect fewer figures) without it, and CI runs them once
more with the variable naming a directory that does not exist (.ci/run)."""
import os

ENV = "MAPPEDBUS_ORIGINAL_DIR"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORIGINAL_DIR = os.path.normpath(os.environ.get(ENV) or os.path.join(ROOT, "..", "shared", "original"))
ORIGINAL_JAR = os.path.join(ORIGINAL_DIR, "mappedbus-0.5.1-jdk17.jar")


def client_command(directory, class_name, source):
    """Compile ``source`` (a class using the original's API) into ``directory`` against the
    original jar; the java command line that runs it. Skips the calling test without the
    original or javac."""
    import shutil
    import subprocess

    import pytest

    from mappedbus_py import jvm
    if not os.path.isfile(ORIGINAL_JAR):
        pytest.skip(f"the Java original is not at {ORIGINAL_JAR}")
    javac = shutil.which("javac")
    if javac is None:
        pytest.skip("needs javac")
    java_file = os.path.join(str(directory), class_name + ".java")
    with open(java_file, "w") as f:
        f.write(source)
    subprocess.run([javac, "--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED", "-cp", ORIGINAL_JAR,
                    "-d", str(directory), java_file], check=True, timeout=120)
    return [jvm.java_executable(), "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
            "-cp", os.pathsep.join([ORIGINAL_JAR, str(directory)]), class_name]
