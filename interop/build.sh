#!/usr/bin/env bash
# Builds the JVM side with plain javac/jar (no Maven), one jar per source root, by what ships:
#   build/jvm/mappedbuspy.jar          the library: io.mappedbuspy (the API) with its messages and
#                                      io.mappedbuspy.internal (interop/src/main/java), no third-party
#                                      libraries; the wheel carries it
#   build/jvm/mappedbuspy-tools.jar    the command-line tools, io.mappedbuspy.tools (interop/src/tools/java),
#                                      which the Python side and the tests run; the wheel carries it
#   build/jvm/mappedbuspy-samples.jar  the Java samples, io.mappedbuspy.samples (interop/src/samples/java):
#                                      the demo and tests/test_samples.py run them from the checkout
#   build/jvm/mappedbuspy-perf.jar     the benchmark drivers, io.mappedbuspy.perf (interop/src/perf/java),
#                                      for perf/ (checkout only)
#   build/jvm/mappedbuspy-tests.jar    JUnit 5 test classes and the test helper mains (SafetyChild, ...)
#   build/jvm/libmappedbuswake.so      the JNI library of the wake file (interop/build_native.sh; needs gcc)
#   build/jvm/zstd-jni.jar, lz4-java.jar, libzstd-jni.so
#                                      the compression libraries that read archived segments, copied from the
#                                      system's packages (interop/codec-libs.sh); beside the library jar, never in
#                                      it; the wheel carries them
# Tools, samples and perf drivers compile against the library jar alone; the library never sees them.
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
# Jars built on the library: name -> source root (interop/src/NAME/java -> build/jvm/mappedbuspy-NAME.jar).
apps=(tools samples perf)

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

# Stage 0: the compression libraries (the library compiles against them; ArchiveCodec alone uses them).
codec_libs="$(bash "$here/codec-libs.sh")"

# Stage 1: the library.
if stale "$main_jar" "$main_src"; then
    echo "compiling $main_src" >&2
    compile_jar "$main_src" "$out/classes" "$main_jar" -cp "$codec_libs"
fi

# Stage 2: the tools, samples and perf drivers, each its own jar on the library.
for app in "${apps[@]}"; do
    app_src="$here/src/$app/java"
    app_jar="$out/mappedbuspy-$app.jar"
    if stale "$app_jar" "$app_src" "$main_jar"; then
        echo "compiling $app_src" >&2
        compile_jar "$app_src" "$out/$app-classes" "$app_jar" -cp "$main_jar"
    fi
done

# Stage 3: tests (against the library jar, JUnit and Gson; they run the tools by class name, through the
# class path interop/test.sh gives them).
if stale "$test_jar" "$test_src" "$main_jar"; then
    test_libs="$(bash "$here/test-libs.sh")"
    echo "compiling $test_src" >&2
    compile_jar "$test_src" "$out/test-classes" "$test_jar" -cp "$main_jar:$codec_libs:$test_libs"
fi

# The Spark connector (interop/src/spark/java) is built by interop/build_spark.sh, against pyspark's jars.

# Stage 4: the JNI library through which Java readers park and writers wake them (issue 22). Optional: without it
# (no C compiler) the Java side polls instead, so a failure here only warns.
if ! bash "$here/build_native.sh" >/dev/null; then
    echo "warning: interop/build_native.sh failed: Java readers will poll instead of sleeping until woken" >&2
fi

echo "$main_jar"
for app in "${apps[@]}"; do echo "$out/mappedbuspy-$app.jar"; done
echo "$test_jar"
