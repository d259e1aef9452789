#!/usr/bin/env bash
# GPU session in one script: build against the machine's PyTorch, run the tests,
# then the benchmarks issue 8 asks for, each as a stage so that one lease can take
# them in a few calls (a lent machine keeps build/ while it stays warm):
#
#   bash scripts/bench_gpu.sh build test block step pytorch memory summary
#
#   build    configure + build (Release, Hopper sm_90 unless TORCH_CUDA_ARCH_LIST is set)
#   test     the C++ tests (the CUDA ones run here instead of skipping: the fused XSA
#            kernels against float64, the SDPA backend flash attention must be, the model)
#   block    `xsagpt bench` block grid: XSA vs SA time and memory, T 1024..8192
#   step     training-step tokens/s and MFU of gpt2-124m (16x1024) and paper-0.7b (8x2048), SA and XSA
#   pytorch  the same steps in PyTorch (tests/reference/model.py), eager and torch.compile
#   memory   peak memory of a 1.4B and a 2.7B step at 8x2048, without and with block checkpointing
#   summary  one table: xsagpt's steps against PyTorch eager and compiled (scripts/bench_compare.py)
#
# Logs and JSON go to out/gpu/ and, where the device tool's $OUT is set, a tarball
# of them to $OUT/gpu-results.tgz. See docs/gpu-machine.md for the carry list.
set -euo pipefail
cd "$(dirname "$0")/.."
RES=out/gpu
mkdir -p "$RES"
BIN=build/xsagpt
PY=${PYTHON:-python3}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}

log() { printf '\n=== %s  %s\n' "$(date +%H:%M:%S)" "$*"; }
finish() { [[ -n ${OUT:-} ]] && tar czf "$OUT/gpu-results.tgz" -C out gpu || true; }
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
  log "GPU tests in detail (fused XSA kernels, SDPA backend, model on CUDA)"
  build/tests/xsagpt_tests --gtest_filter='XsaCuda*:SdpaBackend*:*OnCuda*' 2>&1 | grep -E "^head_dim|OK|FAILED|Failure|rel_err|Expected" \
    | tee "$RES/gpu-tests.txt"
}

stage_block() {
  log "block grid"
  $BIN bench --no-step --json "$RES/block.json" 2>"$RES/block.err" | tee "$RES/block.txt"
}

stage_step() {
  log "training step, gpt2-124m"
  $BIN bench --no-block --variants sa,xsa,xsa-fused --step-config gpt2-124m --step-batch 16 --step-seq-len 1024 --iters 20 \
    --json "$RES/step-124m.json" 2>"$RES/step-124m.err" | tee "$RES/step-124m.txt"
  log "training step, paper-0.7b"
  $BIN bench --no-block --variants sa,xsa,xsa-fused --step-config paper-0.7b --step-batch 8 --step-seq-len 2048 --iters 10 \
    --json "$RES/step-0.7b.json" 2>"$RES/step-0.7b.err" | tee "$RES/step-0.7b.txt"
}

stage_pytorch() {
  for a in sa xsa; do
    log "PyTorch gpt2-124m $a"
    "$PY" scripts/bench_pytorch.py --config gpt2-124m -b 16 -t 1024 --attention $a --compile | tee -a "$RES/pytorch.jsonl"
  done
  log "PyTorch paper-0.7b sa"
  "$PY" scripts/bench_pytorch.py --config paper-0.7b -b 8 -t 2048 --attention sa --steps 10 --compile \
    | tee -a "$RES/pytorch.jsonl"
}

stage_memory() {
  # Without and with whole-block checkpointing (the estimate covers mlp, see `xsagpt info`).
  for cfg in paper-1.4b paper-2.7b; do
    for rc in none block; do
      log "memory $cfg checkpointing $rc"
      $BIN bench --no-block --variants xsa --step-config $cfg --step-batch 8 --step-seq-len 2048 --warmup 1 --iters 3 \
        --step-recompute $rc --step-loss-chunk 4096 --json "$RES/mem-$cfg-$rc.json" 2>"$RES/mem-$cfg-$rc.err" \
        | tail -3 | tee -a "$RES/memory.txt" || echo "$cfg $rc failed: $(tail -1 "$RES/mem-$cfg-$rc.err")"
    done
  done
}

stage_summary() {
  log "summary"
  "$PY" scripts/bench_compare.py "$RES"/step-*.json $([[ -f $RES/pytorch.jsonl ]] && echo --pytorch "$RES/pytorch.jsonl") \
    | tee "$RES/summary.md"
}

[[ $# -gt 0 ]] || { sed -n '2,18p' "$0"; exit 2; }
for s in "$@"; do
  declare -F "stage_$s" >/dev/null || { echo "bench_gpu.sh: unknown stage '$s'" >&2; exit 2; }
  "stage_$s"
done
