#!/usr/bin/env bash
# Prints the class path of the libraries the JUnit tests compile and run against, from the system's
# jars: the JUnit 5 console launcher (a single jar holding Jupiter's API, params and engine and the
# platform launcher) and Gson. Looks in $JUNIT_DIR (default /usr/share/java, where Debian's junit5 and
# libgoogle-gson-java put them); fails naming what is missing and how to install it.
set -euo pipefail

dir="${JUNIT_DIR:-/usr/share/java}"
missing=()
paths=()
for jar in junit-platform-console-standalone.jar gson.jar; do
    if [[ -f "$dir/$jar" ]]; then paths+=("$dir/$jar"); else missing+=("$dir/$jar"); fi
done
if (( ${#missing[@]} )); then
    echo "error: the Java tests need ${missing[*]}: run scripts/setup.sh as root, or" \
         "apt-get install junit5 libgoogle-gson-java, or set JUNIT_DIR to a directory holding them" >&2
    exit 1
fi
(IFS=:; echo "${paths[*]}")
