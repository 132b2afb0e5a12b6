#!/usr/bin/env bash
# Builds the JVM side with plain javac/jar (no Maven):
#   build/jvm/mappedbuspy.jar        main classes (io.mappedbuspy...), no third-party libraries
#   build/jvm/mappedbuspy-tests.jar  JUnit 5 test classes and the test helper mains (SafetyChild, ...)
#   build/jvm/libmappedbuswake.so    the JNI library of the wake file (interop/build_native.sh; needs gcc)
# The tests compile against JUnit 5 and Gson from the system's jars (Debian: apt-get install junit5
# libgoogle-gson-java; scripts/setup.sh does it), looked up in $JUNIT_DIR (default /usr/share/java);
# interop/test.sh runs them. Paths are relative to the repository root; runnable from any directory.
# Skips work when each jar is newer than all of its sources. Set JAVA_HOME to use another JDK.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
out="$root/build/jvm"
main_src="$here/src/main/java"
test_src="$here/src/test/java"
main_jar="$out/mappedbuspy.jar"
test_jar="$out/mappedbuspy-tests.jar"

bin() {
    if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/$1" ]]; then echo "$JAVA_HOME/bin/$1"; else echo "$1"; fi
}
JAVAC="$(bin javac)"
JAR="$(bin jar)"
JAVAC_FLAGS=(--release 17 -encoding UTF-8 -Xlint:all -Werror)

# True when $1 is missing or older than any file under the later arguments (or this script).
stale() {
    local jar="$1"; shift
    [[ ! -f "$jar" ]] && return 0
    [[ "$here/build.sh" -nt "$jar" ]] && return 0
    [[ -n "$(find "$@" -type f -newer "$jar" -print -quit)" ]]
}

# Compiles every .java under $1 into $2 (emptied first) and jars it to $3; extra args go to javac.
compile_jar() {
    local src="$1" classes="$2" jar="$3"; shift 3
    rm -rf "$classes"
    mkdir -p "$classes"
    local list="$classes.sources"
    find "$src" -name '*.java' > "$list"
    "$JAVAC" "${JAVAC_FLAGS[@]}" -d "$classes" "$@" "@$list"
    rm -f "$list"
    "$JAR" --create --file "$jar" -C "$classes" .
}

mkdir -p "$out"

# Stage 1: main classes.
if stale "$main_jar" "$main_src"; then
    echo "compiling $main_src" >&2
    compile_jar "$main_src" "$out/classes" "$main_jar"
fi

# Stage 2: tests (against the main jar, JUnit and Gson).
if stale "$test_jar" "$test_src" "$main_jar"; then
    test_libs="$(bash "$here/test-libs.sh")"
    echo "compiling $test_src" >&2
    compile_jar "$test_src" "$out/test-classes" "$test_jar" -cp "$main_jar:$test_libs"
fi

# Later (not built here): the Spark connector in interop/src/spark/java, compiled against the
# pyspark jars, e.g.
#   build_spark() {
#       local spark_jars; spark_jars="$(python3 -c 'import pyspark, os; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
#       stale "$out/mappedbuspy-spark.jar" "$here/src/spark/java" "$main_jar" &&
#           compile_jar "$here/src/spark/java" "$out/spark-classes" "$out/mappedbuspy-spark.jar" \
#               -cp "$main_jar:$spark_jars/*"
#   }
# and call build_spark here, when that source tree exists.

# Stage 3: the JNI library through which Java readers park and writers wake them (issue 22). Optional: without it
# (no C compiler) the Java side polls instead, so a failure here only warns.
if ! bash "$here/build_native.sh" >/dev/null; then
    echo "warning: interop/build_native.sh failed: Java readers will poll instead of sleeping until woken" >&2
fi

echo "$main_jar"
echo "$test_jar"
