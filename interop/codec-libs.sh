#!/usr/bin/env bash
# Copies the compression libraries the library reads archived segments with (issue 37: zstd and lz4 frames) into
# build/jvm, from the system's packages, and prints their class path:
#   build/jvm/zstd-jni.jar     zstd-jni (Debian: libzstd-jni-java), com.github.luben.zstd
#   build/jvm/lz4-java.jar     lz4-java (Debian: liblz4-java), net.jpountz.lz4 (pure Java where its JNI part is absent)
#   build/jvm/libzstd-jni.so   zstd-jni's JNI library (Debian: libzstd-jni1, over the system's libzstd.so.1), loaded
#                              by the library from beside its jar (ArchiveCodec) when no other zstd-jni is loaded
# The jars are looked up in $CODEC_DIR (default /usr/share/java), the JNI library in $CODEC_LIB_DIR (default the
# multiarch library directory). The wheel carries all three beside mappedbuspy.jar (setup.py). Fails naming what is
# missing and how to install it. Copies only what changed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$(cd "$here/.." && pwd)/build/jvm"
dir="${CODEC_DIR:-/usr/share/java}"
arch="$(gcc -print-multiarch 2>/dev/null || dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)"
libdir="${CODEC_LIB_DIR:-/usr/lib/$arch}"
missing=()
for f in "$dir/zstd-jni.jar" "$dir/lz4-java.jar" "$libdir/libzstd-jni.so.1"; do
    [[ -f "$f" ]] || missing+=("$f")
done
if (( ${#missing[@]} )); then
    echo "error: archived (compressed) segments need ${missing[*]}: run scripts/setup.sh as root, or" \
         "apt-get install libzstd-jni-java liblz4-java, or set CODEC_DIR / CODEC_LIB_DIR to directories holding them" >&2
    exit 1
fi
mkdir -p "$out"
copy() {
    # -L: Debian's names are links to versioned files; the copy is a plain file.
    if [[ ! -f "$2" || "$(readlink -f "$1")" -nt "$2" ]]; then cp -L "$1" "$2"; fi
}
copy "$dir/zstd-jni.jar" "$out/zstd-jni.jar"
copy "$dir/lz4-java.jar" "$out/lz4-java.jar"
copy "$libdir/libzstd-jni.so.1" "$out/libzstd-jni.so"
echo "$out/zstd-jni.jar:$out/lz4-java.jar"
