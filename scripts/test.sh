#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test: unit, golden, multi-process, JVM, Spark.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/python -m pytest "$@"
