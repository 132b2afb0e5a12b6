#!/usr/bin/env bash
# Sets up everything a clean clone needs, idempotently: a virtualenv in .venv with the
# package built in place (plus the test, JVM, Spark, benchmark, docs and dist extras), and the jars.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v javac >/dev/null 2>&1; then
    echo "setup: installing a JDK (javac not found)" >&2
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && apt-get install -y -qq openjdk-17-jdk-headless >/dev/null
    else
        echo "setup: need javac (OpenJDK 17+); install openjdk-17-jdk-headless" >&2
        exit 1
    fi
fi

# The Java tests run on JUnit 5 and read JSON with Gson, from the system's packages (interop/test-libs.sh
# finds them in /usr/share/java).
if [ ! -f /usr/share/java/junit-platform-console-standalone.jar ] || [ ! -f /usr/share/java/gson.jar ]; then
    echo "setup: installing JUnit 5 and Gson for the Java tests (junit5, libgoogle-gson-java)" >&2
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && apt-get install -y -qq junit5 libgoogle-gson-java >/dev/null
    else
        echo "setup: the Java tests need JUnit 5 and Gson: as root, apt-get install junit5 libgoogle-gson-java" \
             "(or set JUNIT_DIR to a directory holding junit-platform-console-standalone.jar and gson.jar)" >&2
        exit 1
    fi
fi

# Java readers decompress archived segments (zstd, lz4 frames) with the system's zstd-jni and lz4-java
# (interop/codec-libs.sh copies them beside the library jar; the wheel carries them).
if [ ! -f /usr/share/java/zstd-jni.jar ] || [ ! -f /usr/share/java/lz4-java.jar ]; then
    echo "setup: installing zstd-jni and lz4-java for the Java side's archive (libzstd-jni-java, liblz4-java)" >&2
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && apt-get install -y -qq libzstd-jni-java liblz4-java >/dev/null
    else
        echo "setup: the Java side needs zstd-jni and lz4-java: as root, apt-get install libzstd-jni-java" \
             "liblz4-java (or set CODEC_DIR and CODEC_LIB_DIR, see interop/codec-libs.sh)" >&2
        exit 1
    fi
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv" >&2
    "$PY" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate

stamp=".venv/.deps-$(cat pyproject.toml setup.py scripts/setup.sh | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
    echo "setup: installing dependencies (pyspark is large: about a minute)" >&2
    python -m pip install -q --upgrade pip
    # The build tools too, so the in-place rebuild below works inside .venv.
    python -m pip install -q "cython>=3.0.10,<3.3" "setuptools>=77"
    python -m pip install -q -e ".[test,metrics,jvm,spark,perf,docs,dist]"
    touch "$stamp"
fi
# Rebuild the extensions in place when a .pyx/.pxd/.h changed (a no-op otherwise).
python setup.py -q build_ext --inplace 2>&1 | { grep -v -e "^running" -e "BetaConfiguration" -e "warnings.warn" || true; }

bash interop/build.sh >/dev/null
# The JNI library of the wake file (Java readers sleep until a writer wakes them); build.sh builds it too, but
# only warns if it fails: here it must work.
bash interop/build_native.sh >/dev/null
if [ -f interop/build_spark.sh ]; then
    bash interop/build_spark.sh >/dev/null
fi
echo "setup: ready (.venv, build/jvm)" >&2
