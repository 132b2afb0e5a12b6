#!/usr/bin/env bash
# Builds the API reference from the docstrings into build/docs (HTML; open build/docs/index.html),
# or into $DOCS_OUT when set.
# Sphinx with autodoc, warnings as errors. Needs the `docs` extra in .venv (scripts/setup.sh) and the
# extension modules built in place (scripts/setup.sh too). Extra arguments go to sphinx-build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-$PWD/.venv/bin/python}"
out="${DOCS_OUT:-build/docs}"
rm -rf "$out"
exec "$PY" -m sphinx -W --keep-going -q -b html -d "$out/.doctrees" "$@" docs "$out"
