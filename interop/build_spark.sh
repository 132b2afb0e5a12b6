#!/usr/bin/env bash
# Builds the Spark connector (io.mappedbuspy.spark) with plain javac/jar against the jars of the
# installed pyspark and the core jar:
#   build/jvm/mappedbuspy-spark.jar   classes + META-INF/services (format("mappedbus"))
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

if [[ -f "$jar_file" && ! "$here/build_spark.sh" -nt "$jar_file" && ! "$core_jar" -nt "$jar_file" \
      && -z "$(find "$src" "$res" -type f -newer "$jar_file" -print -quit)" ]]; then
    echo "$jar_file"
    exit 0
fi

spark_jars="${SPARK_JARS:-$("${PYTHON:-python3}" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')}"
if [[ ! -d "$spark_jars" ]]; then
    echo "error: no Spark jars directory at $spark_jars (install pyspark or set SPARK_JARS)" >&2
    exit 1
fi

echo "compiling $src" >&2
rm -rf "$classes"
mkdir -p "$classes"
list="$classes.sources"
find "$src" -name '*.java' > "$list"
"$JAVAC" "${JAVAC_FLAGS[@]}" -d "$classes" -cp "$core_jar:$spark_jars/*" "@$list"
rm -f "$list"
cp -R "$res/." "$classes/"
"$JAR" --create --file "$jar_file" -C "$classes" .
echo "$jar_file"
