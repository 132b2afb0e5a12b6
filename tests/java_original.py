"""Where the tests look for the Java original (Mappedbus 0.5.1 built for JDK 17): the directory
``../shared/original`` beside the checkout, or ``$MAPPEDBUS_ORIGINAL_DIR`` (perf/common.py reads
the same variable). It is not part of the project and a user's clone lacks it: tests that need
it are marked ``original`` and skip (or expect fewer figures) without it, and CI runs them once
more with the variable naming a directory that does not exist (.ci/run)."""
import os

ENV = "MAPPEDBUS_ORIGINAL_DIR"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORIGINAL_DIR = os.path.normpath(os.environ.get(ENV) or os.path.join(ROOT, "..", "shared", "original"))
ORIGINAL_JAR = os.path.join(ORIGINAL_DIR, "mappedbus-0.5.1-jdk17.jar")
