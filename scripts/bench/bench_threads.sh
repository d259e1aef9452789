#!/usr/bin/env bash
# CPU threads under load: training tokens/s of the quickstart's tiny model
# (configs/runs/cpu-demo-sa.json: its 50304-wide LM head is most of the work) and of
# the same model with a 256-token vocabulary (the KJV tokens mod 256: small ops, where
# threads wait on each other most), with one thread and with LibTorch's default (one
# per physical core) under three OpenMP wait settings: OpenMP's default (idle
# threads spin ~3 ms), a short spin (GOMP_SPINCOUNT=10000) and xsagpt's default
# (OMP_WAIT_POLICY=passive: they sleep at once); on an otherwise idle machine,
# beside LOAD busy loops (default 1) and beside a twin (the same run started twice
# at once, as when two users or a sweep and a test share the cores). Prints one
# table; docs/benchmarks.md holds the figures.
#   STEPS (default 60) training steps per run; the rate is the median of the
#   10-step windows after the first.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
build="${XSAGPT_BUILD_DIR:-build}"
steps="${STEPS:-60}"
load="${LOAD:-1}"
[ -x "$build/xsagpt" ] || { echo "bench_threads.sh: $build/xsagpt not built (bash scripts/setup.sh)" >&2; exit 1; }
[ -e data/kjv/shards ] || bash data/kjv/prepare.sh
work="$(mktemp -d)"
busy=()
cleanup() { for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

# The small-vocabulary shards: the same header (src/data/shard.h), tokens mod 256.
mkdir -p "$work/v256"
.venv/bin/python - "$work/v256" data/kjv/shards/*.bin <<'PY'
import sys, numpy as np
for f in sys.argv[2:]:
    raw = np.fromfile(f, dtype="<u2")
    raw[512:] %= 256  # the header is 256 int32 = 512 uint16
    raw.tofile(f"{sys.argv[1]}/{f.rsplit('/', 1)[1]}")
PY

# One training run into $1 (model threads wait).
train() {
  local out="$1" model=() wait=()
  [ "$2" = small ] && model=(--set model.vocab_size=256 --set "data.train=$work/v256/train_*.bin"
                             --set "data.val=$work/v256/val_*.bin")
  case "$4" in
    default) wait=(env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=300000) ;;  # libgomp's own default, spelled out
    spin10k) wait=(env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=10000) ;;
    passive) wait=(env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=passive) ;;
  esac
  rm -rf "$out"
  "${wait[@]}" "$build/xsagpt" train -c configs/runs/cpu-demo-sa.json --out "$out" \
    "${model[@]}" --set train.device=cpu --set train.threads="$3" --set train.max_steps="$steps" \
    --set train.log_interval=10 --set train.eval_interval=0 --set train.ckpt_interval=0 >/dev/null 2>&1
}

# One measurement: prints the median tokens/s of the logged windows after the first.
rate() {  # model threads wait [twin]
  local out="$work/run"
  if [ "${4:-}" = twin ]; then
    train "$work/twin" "$1" "$2" "$3" &
    train "$out" "$1" "$2" "$3"
    wait
  else
    train "$out" "$1" "$2" "$3"
  fi
  .venv/bin/python - "$out/metrics.jsonl" <<'PY'
import json, statistics, sys
rates = [json.loads(l)["tokens_per_s"] for l in open(sys.argv[1]) if '"tokens_per_s"' in l][1:]
print(f"{statistics.median(rates):.0f}")
PY
}

row() {  # label model [twin]
  printf '%-34s %9s %15s %15s %15s\n' "$1" "$(rate "$2" 1 passive "${3:-}")" "$(rate "$2" 0 default "${3:-}")" \
    "$(rate "$2" 0 spin10k "${3:-}")" "$(rate "$2" 0 passive "${3:-}")"
}

echo "bench_threads: $(nproc) hardware threads, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%F)"
echo "tokens/s, median of 10-step windows; columns: 1 thread, then LibTorch's default threads with OpenMP's"
echo "default wait (spin ~3 ms), GOMP_SPINCOUNT=10000 and OMP_WAIT_POLICY=passive (xsagpt's default)"
printf '%-34s %9s %15s %15s %15s\n' "" "1 thread" "spin 3 ms" "spin 10000" "passive"
for model in demo small; do
  row "$model model, idle" $model
  row "$model model, beside its twin" $model twin
done
for _ in $(seq "$load"); do (while :; do :; done) & busy+=("$!"); done
for model in demo small; do row "$model model, beside $load busy loop(s)" $model; done
