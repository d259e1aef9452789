#!/usr/bin/env bash
# GPU session in one script: the verdict on the fused kernels, then the stages the
# speed work measures with. A lent GPU is 15 minutes of device time with its start,
# 10 minutes a command, and keeps build/ and out/ only while warm (30 s after a call), so:
#
#   bash scripts/bench/bench_gpu.sh pack        (here) build for sm_90 and lay out out/lease/ to carry
#   bash scripts/bench/bench_gpu.sh lease [--cpu-dry-run] [--budget S] [--only a,b] [--retry-failed]
#   bash scripts/bench/bench_gpu.sh verdict [--cpu-dry-run] [--budget S] [--only a,b] [--retry-failed] [--sanitizer]
#   bash scripts/bench/bench_gpu.sh build test step kernels pytorch summary
#   bash scripts/bench/bench_gpu.sh train memory block
#
#   pack     scripts/bench/pack.sh: xsagpt and xsagpt_tests built here with sm_90 device code,
#            the vendored libraries and the KJV shards in one folder of at most 40 MiB; prints its path
#   lease    scripts/bench/lease.py: the verdict in one call of at most 10 minutes on the
#            packed binaries: correctness (CUDA tests, parity) while torch.compile's first
#            compiles fill Inductor's cache, then the timed stages alone, the default's table,
#            the profile of fused+fp8 and the candidates first; the table comes back
#            even when a stage fails. Device call (docs/gpu-machine.md):
#              run(carry=["out/lease"], timeout_s=600, command="bash scripts/bench/bench_gpu.sh lease")
#   verdict  scripts/bench/bench_verdict.py: preflight, build, the CUDA tests (one process per
#            suite), 200 steps of gpt2-124m XSA on the KJV shards per kernel against aten,
#            the step benchmark at 124M and 0.7B in 3 paired rounds, each kernel alone in
#            GB/s, PyTorch eager and torch.compile; named stages of at most 6 minutes,
#            resumed where the last call stopped (results in out/gpu/), the table printed
#            at the end of every call. Needs data/kjv/shards and third_party (carry both).
#            With --cpu-dry-run: the same stages at tiny sizes here, into out/gpu-dry-run/.
#   build    configure + build (Release, Hopper sm_90 unless TORCH_CUDA_ARCH_LIST is set)
#   test     the C++ tests (the CUDA ones run here instead of skipping) and the Python suite
#   step     training-step tokens/s and MFU of gpt2-124m (16x1024) and paper-0.7b (8x2048),
#            SA and XSA: ATen (@aten, the baseline), the default (auto), fused and fused+fp8
#   kernels  what each fused kernel is worth alone (gpt2-124m 16x1024)
#   pytorch  the same steps in PyTorch (scripts/reference/model.py), eager and torch.compile
#   summary  one table: xsagpt's steps against PyTorch eager and compiled (scripts/bench/bench_compare.py)
#   train    `xsagpt train` with the shipped paper-0.7b run config (KJV shards) against the
#            bench step of the same shape: tokens/s of the real loop vs the benchmark
#   memory   peak memory of a 1.4B and a 2.7B step at 8x2048, without and with block checkpointing
#   block    `xsagpt bench` block grid: XSA vs SA time and memory, T 1024..8192
#
# Logs and JSON go to out/gpu/ and, where the device tool's $OUT is set, a tarball of
# their text (no checkpoint: runs train into out/gpu-scratch/, deleted after) to
# $OUT/gpu-stages.tgz. See docs/gpu-machine.md for the device calls.
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ ${1:-} == pack ]] && exec bash scripts/bench/pack.sh
if [[ ${1:-} == verdict || ${1:-} == lease ]]; then
  script=scripts/bench/bench_verdict.py
  [[ $1 == lease ]] && script=scripts/bench/lease.py
  shift
  PY=${PYTHON:-python3}
  [[ " $* " == *" --cpu-dry-run "* && -z ${PYTHON:-} && -x .venv/bin/python ]] && PY=.venv/bin/python
  exec "$PY" "$script" "$@"
fi
DRY=0
stages=()
for a in "$@"; do
  if [[ $a == --cpu-dry-run ]]; then DRY=1; else stages+=("$a"); fi
done
RES=out/gpu
[[ $DRY == 1 ]] && RES=out/gpu-dry-run
mkdir -p "$RES"
BIN=build/xsagpt
PY=${PYTHON:-python3}
[[ $DRY == 1 && -z ${PYTHON:-} && -x .venv/bin/python ]] && PY=.venv/bin/python
# Hopper only on the GPU machine; a dry run keeps the local build's configuration (a
# different arch list would recompile every CUDA unit of build/).
[[ $DRY == 1 ]] || export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}

log() { printf '\n=== %s  %s\n' "$(date +%H:%M:%S)" "$*"; }
SCRATCH=out/gpu-scratch
finish() {
  [[ -n ${OUT:-} ]] || return 0
  (cd out && find gpu -type f \( -name '*.json' -o -name '*.jsonl' -o -name '*.md' -o -name '*.txt' -o -name '*.log' \) \
    -size -512k -print0 | tar czf "$OUT/gpu-stages.tgz" --null -T -) || true
}
trap finish EXIT

stage_build() {
  log "machine"; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$RES/gpu.txt"
  "$PY" -c 'import torch; print("torch", torch.__version__, torch.version.cuda)' | tee -a "$RES/gpu.txt"
  log "build"
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -Wno-dev \
    >"$RES/configure.log" 2>&1 || { tail -30 "$RES/configure.log"; exit 1; }
  cmake --build build -j"$(nproc)" >"$RES/build.log" 2>&1 || { grep -m20 -A5 error "$RES/build.log"; exit 1; }
  echo "built $(ls -la $BIN | awk '{print $5}') bytes"
}

stage_test() {
  log "C++ tests"
  ctest --test-dir build -j8 --output-on-failure >"$RES/ctest.log" 2>&1 || { tail -60 "$RES/ctest.log"; exit 1; }
  tail -3 "$RES/ctest.log"; grep -i skipped "$RES/ctest.log" || true
  log "GPU tests in detail (fused kernels, SDPA backend, model and step on CUDA)"
  build/tests/xsagpt_tests --gtest_filter='KernelsCuda*:XsaCuda*:Fp8LinearCuda*:SdpaBackend*:*OnCuda*' 2>&1 \
    | grep -E "^head_dim|OK|FAILED|Failure|rel_err|Expected|Which|actual" | tee "$RES/gpu-tests.txt"
  log "Python tests"
  XSAGPT_BUILD_DIR=build "$PY" -m pytest -q -x tests/python >"$RES/pytest.log" 2>&1 || { tail -40 "$RES/pytest.log"; exit 1; }
  tail -3 "$RES/pytest.log"
}

stage_block() {
  log "block grid"
  $BIN bench --no-step --json "$RES/block.json" 2>"$RES/block.err" | tee "$RES/block.txt"
}

# Bench variants built from train.kernels' table as the program lists it (`xsagpt config
# --json`, from src/config/runtime.cpp), so a new kernel is timed without an edit here.
# step: ATen, the default, fused, and fused with each kernel outside it that runs the
# shipped models (fp8); kernels:
# each fused kernel alone (XSA's on XSA, the others on SA).
kernel_variants() {
  $BIN config --json | $PY -c '
import json, sys
rows = json.load(sys.stdin)["kernels"]
fused = [r["name"] for r in rows if r["fused"]]
extra = [r["name"] for r in rows if not r["fused"] and r["default_model"]]  # gelu needs a tanh-GELU model
if sys.argv[1] == "step":
    plus = lambda a: [f"{a}@fused+{k}" for k in extra]
    print(",".join(["sa@aten", "sa", "sa@fused", *plus("sa"), "xsa@aten", "xsa", "xsa@xsa_wide", "xsa@fused",
                    *plus("xsa")]))
else:
    sa = [k for k in fused if not k.startswith("xsa")]
    xsa = [k for k in fused if k.startswith("xsa")]
    print(",".join(["sa@aten", *(f"sa@{k}" for k in sa), "sa@weights+norm", "sa@fused", "xsa@aten",
                    *(f"xsa@{k}" for k in xsa), "xsa@fused"]))
' "$1"
}

stage_step() {
  local STEP_VARIANTS
  STEP_VARIANTS=$(kernel_variants step)
  log "training step, gpt2-124m"
  $BIN bench --no-block --variants $STEP_VARIANTS --step-config gpt2-124m --step-batch 16 --step-seq-len 1024 --iters 20 \
    --json "$RES/step-124m.json" 2>"$RES/step-124m.err" | tee "$RES/step-124m.txt"
  log "training step, paper-0.7b"
  $BIN bench --no-block --variants $STEP_VARIANTS --step-config paper-0.7b --step-batch 8 --step-seq-len 2048 --iters 10 \
    --json "$RES/step-0.7b.json" 2>"$RES/step-0.7b.err" | tee "$RES/step-0.7b.txt"
}

stage_kernels() {
  log "each fused kernel alone, gpt2-124m 16x1024"
  $BIN bench --no-block --step-config gpt2-124m --step-batch 16 --step-seq-len 1024 --iters 20 \
    --variants "$(kernel_variants kernels)" \
    --json "$RES/kernels-124m.json" 2>"$RES/kernels-124m.err" | tee "$RES/kernels-124m.txt"
  log "chunked loss must cost nothing: gpt2-124m 16x1024, loss chunk 4096"
  $BIN bench --no-block --step-config gpt2-124m --step-batch 16 --step-seq-len 1024 --iters 20 --step-loss-chunk 4096 \
    --variants sa@aten,sa@fused --json "$RES/kernels-124m-chunk.json" 2>"$RES/kernels-124m-chunk.err" \
    | tee "$RES/kernels-124m-chunk.txt"
}

stage_train() {
  [[ -f data/kjv/shards/val_000000.bin ]] || { echo "train: data/kjv/shards missing (carry it)"; exit 1; }
  log "xsagpt train, configs/runs/paper-0.7b.json on KJV (16 x 2048 x 16 accumulation, loss chunk 4096)"
  $BIN train -c configs/runs/paper-0.7b.json --out "$SCRATCH/train-0.7b" --overwrite \
    --set data.train='data/kjv/shards/train_*.bin' --set data.val='data/kjv/shards/val_*.bin' \
    --set train.max_steps=12 --set train.log_interval=4 --set train.eval_interval=0 --set train.eval_tokens=32768 \
    --set train.ckpt_interval=0 2>&1 | grep -E "kernels|step .*tok/s" | tee "$RES/train-0.7b.txt"
  rm -rf "$SCRATCH/train-0.7b"  # its final checkpoint is about 10 GB: nothing to bring back
  log "the bench step of the same shape"
  $BIN bench --no-block --variants xsa --step-config paper-0.7b --step-batch 16 --step-seq-len 2048 --step-accum 16 \
    --step-loss-chunk 4096 --warmup 1 --iters 3 --json "$RES/train-bench-0.7b.json" 2>"$RES/train-bench-0.7b.err" \
    | tee -a "$RES/train-0.7b.txt"
}

stage_pytorch() {
  for a in sa xsa; do
    log "PyTorch gpt2-124m $a"
    "$PY" scripts/bench/bench_pytorch.py --config gpt2-124m -b 16 -t 1024 --attention $a --compile | tee -a "$RES/pytorch.jsonl"
  done
  log "PyTorch paper-0.7b sa"
  "$PY" scripts/bench/bench_pytorch.py --config paper-0.7b -b 8 -t 2048 --attention sa --steps 10 --compile \
    | tee -a "$RES/pytorch.jsonl"
}

stage_memory() {
  # Without and with whole-block checkpointing (the estimate covers mlp, see `xsagpt info`).
  for cfg in paper-1.4b paper-2.7b; do
    for rc in none block; do
      log "memory $cfg checkpointing $rc"
      $BIN bench --no-block --variants xsa@aten,xsa --step-config $cfg --step-batch 8 --step-seq-len 2048 --warmup 1 --iters 3 \
        --step-recompute $rc --step-loss-chunk 4096 --json "$RES/mem-$cfg-$rc.json" 2>"$RES/mem-$cfg-$rc.err" \
        | tail -3 | tee -a "$RES/memory.txt" || echo "$cfg $rc failed: $(tail -1 "$RES/mem-$cfg-$rc.err")"
    done
  done
}

stage_summary() {
  log "summary"
  "$PY" scripts/bench/bench_compare.py "$RES"/step-*.json $([[ -f $RES/pytorch.jsonl ]] && echo --pytorch "$RES/pytorch.jsonl") \
    | tee "$RES/summary.md"
}

[[ ${#stages[@]} -gt 0 ]] || { sed -n '2,41p' "$0"; exit 2; }
for s in "${stages[@]}"; do
  declare -F "stage_$s" >/dev/null || { echo "bench_gpu.sh: unknown stage '$s'" >&2; exit 2; }
  "stage_$s"
done
