#!/usr/bin/env bash
# Builds the API reference from the docstrings into build/docs (HTML; open build/docs/index.html).
# Sphinx with autodoc, warnings as errors. Needs the `docs` extra in .venv (scripts/setup.sh) and the
# extension modules built in place (scripts/setup.sh too). Extra arguments go to sphinx-build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-$PWD/.venv/bin/python}"
rm -rf build/docs
exec "$PY" -m sphinx -W --keep-going -q -b html -d build/docs/.doctrees "$@" docs build/docs
