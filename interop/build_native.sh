#!/usr/bin/env bash
# Builds the JNI library that makes the system calls the JDK lacks for the Java port: those of the wake file's
# protocol (FUTEX_WAIT and FUTEX_WAKE, kill(pid, 0), /proc/PID/stat; the protocol, mappedbus_py/_core/_wake.h, runs in
# WakeFile.java; issue 22), and posix_fallocate and madvise(MADV_POPULATE_WRITE) for a rolling writer's next
# segment (DiskSpace.java):
#   build/jvm/libmappedbuswake.so   interop/native/wake_jni.c over mappedbus_py/_core/_wake.h and _atomic.h
# and the work groups' protocol, mappedbus_py/groups/_group.h and (framed buses) _group_frames.h (issues 35, 36:
# GroupProtocol.java calls it, so Python and Java members share one implementation).
# The JDK's JNI headers come from JAVA_HOME, else from the JDK that javac on PATH belongs to (its real
# path); without them the file declares the few JNI types it needs itself. CC picks the compiler
# (default gcc). Skips work when the library is newer than its sources and this script. Without the
# library the Java side still works: its readers poll with a bounded park instead of sleeping until
# woken, its writers wake nobody, and a rolling writer makes its next segment with zeros and maps its pages
# with loads.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
out="$root/build/jvm"
lib="$out/libmappedbuswake.so"
sources=("$here/native/wake_jni.c" "$root/mappedbus_py/_core/_wake.h" "$root/mappedbus_py/_core/_atomic.h"
         "$root/mappedbus_py/_core/_liveness.h" "$root/mappedbus_py/groups/_group.h"
         "$root/mappedbus_py/groups/_group_frames.h"
         "$here/build_native.sh")

stale=0
if [[ ! -f "$lib" ]]; then
    stale=1
else
    for s in "${sources[@]}"; do
        [[ "$s" -nt "$lib" ]] && stale=1
    done
fi

if (( stale )); then
    home="${JAVA_HOME:-}"
    if [[ -z "$home" || ! -f "$home/include/jni.h" ]]; then
        javac_path="$(command -v javac || true)"
        home="${javac_path:+$(dirname "$(dirname "$(readlink -f "$javac_path")")")}"
    fi
    includes=()
    if [[ -n "$home" && -f "$home/include/jni.h" ]]; then
        includes=(-I"$home/include" -I"$home/include/linux")
    fi
    mkdir -p "$out"
    echo "compiling $here/native/wake_jni.c" >&2
    tmp="$lib.tmp.$$"
    "${CC:-gcc}" -O2 -shared -fPIC -fvisibility=hidden -Wall -Wextra "${includes[@]}" -I"$root/mappedbus_py/_core" -I"$root/mappedbus_py" \
        -o "$tmp" "$here/native/wake_jni.c"
    mv -f "$tmp" "$lib"   # atomically: a JVM loading the old one meanwhile keeps a whole file
fi

echo "$lib"
