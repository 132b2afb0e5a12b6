#!/usr/bin/env bash
# Builds the Spark connector (io.mappedbuspy.spark) with plain javac/jar against the jars of the
# installed pyspark and the core jar:
#   build/jvm/mappedbuspy-spark.jar        classes + META-INF/services (format("mappedbus"))
#   build/jvm/mappedbuspy-spark-tests.jar  its JUnit 5 tests (interop/src/spark-test/java), also against
#                                          JUnit and Gson (interop/test-libs.sh); interop/test.sh spark runs them
# Builds the core jar first (interop/build.sh) when it is missing. Skips work when the jar is newer than
# its sources, its resources, the core jar and this script. Set PYTHON to pick the python with pyspark,
# JAVA_HOME to use another JDK, SPARK_JARS to compile against another Spark's jars directory.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
out="$root/build/jvm"
src="$here/src/spark/java"
res="$here/src/spark/resources"
core_jar="$out/mappedbuspy.jar"
jar_file="$out/mappedbuspy-spark.jar"
classes="$out/spark-classes"

bin() {
    if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/$1" ]]; then echo "$JAVA_HOME/bin/$1"; else echo "$1"; fi
}
JAVAC="$(bin javac)"
JAR="$(bin jar)"
# -processing/-classfile/-path: warnings about the Spark jars (their manifests and annotations), not this code.
JAVAC_FLAGS=(--release 17 -encoding UTF-8 -Xlint:all,-processing,-classfile,-serial,-path -Werror)

if [[ ! -f "$core_jar" ]]; then
    bash "$here/build.sh" >/dev/null
fi

test_src="$here/src/spark-test/java"
tests_jar="$out/mappedbuspy-spark-tests.jar"
test_classes="$out/spark-test-classes"

spark_jars_dir() {
    local d="${SPARK_JARS:-$("${PYTHON:-python3}" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')}"
    if [[ ! -d "$d" ]]; then
        echo "error: no Spark jars directory at $d (install pyspark or set SPARK_JARS)" >&2
        exit 1
    fi
    echo "$d"
}

if [[ ! -f "$jar_file" || "$here/build_spark.sh" -nt "$jar_file" || "$core_jar" -nt "$jar_file" \
      || -n "$(find "$src" "$res" -type f -newer "$jar_file" -print -quit)" ]]; then
    spark_jars="$(spark_jars_dir)"
    echo "compiling $src" >&2
    rm -rf "$classes"
    mkdir -p "$classes"
    list="$classes.sources"
    find "$src" -name '*.java' > "$list"
    "$JAVAC" "${JAVAC_FLAGS[@]}" -d "$classes" -cp "$core_jar:$spark_jars/*" "@$list"
    rm -f "$list"
    cp -R "$res/." "$classes/"
    "$JAR" --create --file "$jar_file" -C "$classes" .
fi

# The tests: same package as the connector (they reach its package-private parts), compiled against it.
if [[ -d "$test_src" ]] && [[ ! -f "$tests_jar" || "$jar_file" -nt "$tests_jar" || "$here/build_spark.sh" -nt "$tests_jar" \
      || -n "$(find "$test_src" -type f -newer "$tests_jar" -print -quit)" ]]; then
    spark_jars="$(spark_jars_dir)"
    test_libs="$(bash "$here/test-libs.sh")"
    echo "compiling $test_src" >&2
    rm -rf "$test_classes"
    mkdir -p "$test_classes"
    list="$test_classes.sources"
    find "$test_src" -name '*.java' > "$list"
    "$JAVAC" "${JAVAC_FLAGS[@]}" -d "$test_classes" -cp "$core_jar:$jar_file:$test_libs:$spark_jars/*" "@$list"
    rm -f "$list"
    "$JAR" --create --file "$tests_jar" -C "$test_classes" .
fi
echo "$jar_file"
