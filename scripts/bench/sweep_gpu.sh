#!/usr/bin/env bash
# One `xsagpt sweep` on the lent GPU machine (docs/gpu-machine.md), in calls of at most
# 10 minutes: builds xsagpt when the machine has no build yet, runs the sweep until the
# call's time budget is spent (SIGTERM: the running point saves a checkpoint and the
# sweep stops cleanly; the same command continues it on the warm machine), then copies
# summary.json, summary.csv, report.md, the figures and the logs under $OUT.
#
#   bash scripts/bench/sweep_gpu.sh configs/sweeps/variants-124m.json [BUDGET_SECONDS]
#
# With out/lease carried (bench_gpu.sh pack) it runs the binaries packed there instead of
# building. BUDGET_SECONDS (default 500) counts from the start of the call, the build included,
# and leaves room under the device tool's 600 s for the copy. Exit status: 0 when every
# point is done, 3 when some are still to run (call again, back to back), else the error.
set -euo pipefail

spec=${1:?usage: bash scripts/bench/sweep_gpu.sh SWEEP_FILE [BUDGET_SECONDS]}
budget=${2:-500}
out=${OUT:-out/sweep-gpu}
mkdir -p "$out"
start=$(date +%s)
say() { echo "[sweep_gpu] $*" >&2; }

# Binaries packed here (`bash scripts/bench/bench_gpu.sh pack`, carried as out/lease) are
# linked into place as the lease links them (scripts/bench/lease.py), and run against
# the device's torch: no cold build, so a sweep of about 8 minutes fits one call.
if [ ! -e build/xsagpt ] && [ -x out/lease/build/xsagpt ]; then
  for rel in build third_party data/kjv/shards; do
    if [ -e "out/lease/$rel" ] && [ ! -e "$rel" ]; then
      [ -L "$rel" ] && rm "$rel"  # left dangling by an earlier call
      mkdir -p "$(dirname "$rel")"
      ln -s "$(cd "out/lease/$rel" && pwd)" "$rel"
    fi
  done
  site=$(python3 -c 'import pathlib, torch; print(pathlib.Path(torch.__file__).resolve().parents[1])')
  libs="$site/torch/lib"
  for d in "$site"/nvidia/*/lib "$site"/nvidia/*/*/lib; do [ -d "$d" ] && libs="$libs:$d"; done
  export LD_LIBRARY_PATH="$libs:$PWD/third_party/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  say "using the packed binaries (out/lease) against the device's torch in $site"
fi
if [ ! -x build/xsagpt ]; then
  say "building xsagpt (Release; a cold build takes about 200 s on 16 cores)"
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -Wno-dev >"$out/configure.log" 2>&1
  cmake --build build -j16 --target xsagpt >"$out/build.log" 2>&1 || { tail -30 "$out/build.log" >&2; exit 1; }
fi
dir=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["out_dir"])' "$spec")
left=$((budget - ($(date +%s) - start)))
if [ "$left" -lt 60 ]; then
  say "only ${left} s of the budget left after the build: call again to train"
  exit 3
fi
say "training for at most ${left} s into $dir"
status=0
# --preserve-status: the sweep's own exit status (docs/sweeps-and-plots.md), 3 when the
# budget's SIGTERM interrupted it, rather than timeout's 124.
timeout --preserve-status -s TERM -k 60 "$left" build/xsagpt sweep -c "$spec" >"$out/sweep.out" 2>"$out/sweep.log" ||
  status=$?
for f in summary.json summary.csv summary_seeds.csv report.md; do
  [ -f "$dir/$f" ] && cp "$dir/$f" "$out/"
done
[ -d "$dir/plots" ] && cp -r "$dir/plots" "$out/"
tail -c 8000 "$out/sweep.out"
case "$status" in
  0) say "every point is done: $out/report.md"; exit 0 ;;
  3) say "interrupted with points still to run: call the same command again"; exit 3 ;;
  137) say "killed 60 s after the budget's SIGTERM: call the same command again (it resumes)"; exit 3 ;;
  1) say "a point failed, is invalid or is held by another process (exit status 1); see $out/sweep.log"; exit 1 ;;
  *) say "the sweep failed (exit status $status); see $out/sweep.log"; exit "$status" ;;
esac
