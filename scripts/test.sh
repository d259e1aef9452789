#!/usr/bin/env bash
# The test command: sets up if needed, then runs the C++ suite (ctest) and the
# Python suite (pytest: data preparation, reference-model and cross-language
# checks). Exits non-zero if anything fails. Extra args go to ctest.
# Both suites print their slowest tests, so that a test which grows shows in every
# run's log, and each test has a time limit (XSAGPT_TEST_TIME_LIMIT in
# tests/CMakeLists.txt, kept by the test binary; pytest-timeout in
# tests/python/pytest.ini), so that a test which hangs fails with its name instead of
# holding the run. ctest runs a process per googletest suite, each writing a report
# that the list of slowest tests is read from. pytest runs one
# pytest-xdist worker per core (XSAGPT_TEST_WORKERS to change it; 0 runs in one
# process), each worker's binaries on one thread (tests/python/conftest.py), a test
# file's tests on one worker (--dist loadfile), so that a module's trained run or
# export is made once, not once per worker.
# Before pytest it starts a local Slurm cluster (scripts/slurm/start.sh, in a folder of
# its own under /tmp) for the tests of the sweep's Slurm jobs: two nodes, each in network
# and UTS namespaces of its own, where namespaces can be made (root), else one node, in
# which case the tests that need two skip and say why. It hands the cluster to them in
# SLURM_CONF and XSAGPT_SLURM_CONF, and stops it (daemons, jobs, namespaces, links) when
# it exits, however it exits. Where Slurm could not be installed (XSAGPT_NO_APT) those
# tests skip and say why.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="${XSAGPT_BUILD_DIR:-build}"
workers="${XSAGPT_TEST_WORKERS:-$(nproc)}"
bash scripts/setup.sh --eval --track --slurm
status=0
echo "[test] C++ suite (ctest)"
slurm_dir=""
cleanup() {
  if [ -n "$slurm_dir" ]; then bash scripts/slurm/stop.sh "$slurm_dir"; rm -rf "$slurm_dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
rm -rf "$build/gtest-reports"  # each suite's process writes its report here (tests/CMakeLists.txt)
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@" || status=1
echo "[test] slowest C++ tests"
.venv/bin/python scripts/maint/gtest_reports.py "$build/gtest-reports" --slowest 15 || true
if command -v slurmctld >/dev/null; then
  echo "[test] local Slurm cluster for the Slurm tests"
  slurm_dir="$(mktemp -d /tmp/xsagpt-slurm.XXXXXX)"
  slurm_rc=0
  bash scripts/slurm/start.sh --nodes 2 "$slurm_dir" >/dev/null || slurm_rc=$?
  if [ "$slurm_rc" -eq 3 ]; then  # no network namespaces here: one node, the two-node tests skip
    echo "[test] no network namespaces here (above): a one-node cluster, and the tests that need two skip" >&2
    slurm_rc=0
    bash scripts/slurm/start.sh "$slurm_dir" >/dev/null || slurm_rc=$?
  fi
  if [ "$slurm_rc" -eq 0 ]; then
    export SLURM_CONF="$slurm_dir/slurm.conf" XSAGPT_SLURM_CONF="$slurm_dir/slurm.conf"
  else
    echo "[test] the Slurm cluster did not start (above): the Slurm tests will fail" >&2
    status=1
  fi
fi
echo "[test] Python suite (pytest)"
xdist=()
[ "$workers" -gt 0 ] && xdist=(-n "$workers" --dist loadfile)
XSAGPT_BUILD_DIR="$build" .venv/bin/python -m pytest -q --durations=15 "${xdist[@]}" tests/python || status=1
exit $status
