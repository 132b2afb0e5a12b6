#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the demo: several processes on one bus.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python samples/demo.py "$@"
