#!/usr/bin/env bash
# The test command: sets up if needed, then runs the C++ suite (ctest) and the
# Python suite (pytest: data preparation, reference-model and cross-language
# checks). Exits non-zero if anything fails. Extra args go to ctest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="${XSAGPT_BUILD_DIR:-build}"
bash scripts/setup.sh --eval --track
status=0
echo "[test] C++ suite (ctest)"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@" || status=1
echo "[test] Python suite (pytest)"
XSAGPT_BUILD_DIR="$build" .venv/bin/python -m pytest -q tests/python || status=1
exit $status
