#!/usr/bin/env bash
# GPU session in one script: build against the machine's PyTorch, run the tests,
# then the GPU benchmarks (issue 12), each as a stage so that one lease can take
# them in a few calls (a lent machine keeps build/ while it stays warm):
#
#   bash scripts/bench_gpu.sh verdict                 the one command that decides (below)
#   bash scripts/bench_gpu.sh verdict --cpu-dry-run   the same stages at tiny sizes on a CPU
#   bash scripts/bench_gpu.sh build test step kernels pytorch summary
#   bash scripts/bench_gpu.sh parity train memory block
#
#   verdict  build; the CUDA tests; 200 steps of gpt2-124m (XSA) on the KJV shards with
#            each fused kernel alone and with `fused`, against `aten` with the same seed
#            (final val loss, largest parameter difference, tokens/s, ratio); the step
#            benchmark of aten/auto/fused at 124M 16x1024 and 0.7B 8x2048, SA and XSA,
#            beside PyTorch eager and torch.compile; then one table, kernel | tests |
#            loss delta | speed ratio | verdict (scripts/bench_verdict.py), also written
#            to out/gpu/verdict.md. Needs data/kjv/shards (carry it). With --cpu-dry-run:
#            out/gpu-dry-run/, the tiny model, 20 steps, CUDA tests skipped, no decision.
#   build    configure + build (Release, Hopper sm_90 unless TORCH_CUDA_ARCH_LIST is set)
#   test     the C++ tests (the CUDA ones run here instead of skipping: every fused kernel
#            against its ATen twin and float64, the model and training step fused vs ATen,
#            the SDPA backend flash attention must be) and the Python suite
#   step     training-step tokens/s and MFU of gpt2-124m (16x1024) and paper-0.7b (8x2048),
#            SA and XSA, today's ATen path (@aten, the baseline), the default (auto) and all
#            fused kernels (@fused)
#   kernels  what each fused kernel is worth alone (gpt2-124m 16x1024)
#   pytorch  the same steps in PyTorch (tests/reference/model.py), eager and torch.compile
#   summary  one table: xsagpt's steps against PyTorch eager and compiled (scripts/bench_compare.py)
#   parity   400 steps of gpt2-124m on the KJV shards, aten vs fused: final val losses
#            (needs data/kjv/shards in carry)
#   train    `xsagpt train` with the shipped paper-0.7b run config (KJV shards) against the
#            bench step of the same shape: tokens/s of the real loop vs the benchmark
#   memory   peak memory of a 1.4B and a 2.7B step at 8x2048, without and with block checkpointing
#   block    `xsagpt bench` block grid: XSA vs SA time and memory, T 1024..8192
#
# Logs and JSON go to out/gpu/ and, where the device tool's $OUT is set, a tarball
# of them to $OUT/gpu-results.tgz. See docs/gpu-machine.md for the carry list.
set -euo pipefail
cd "$(dirname "$0")/.."
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
  log "GPU tests in detail (fused kernels, SDPA backend, model and step on CUDA)"
  build/tests/xsagpt_tests --gtest_filter='KernelsCuda*:XsaCuda*:SdpaBackend*:*OnCuda*' 2>&1 \
    | grep -E "^head_dim|OK|FAILED|Failure|rel_err|Expected|Which|actual" | tee "$RES/gpu-tests.txt"
  log "Python tests"
  XSAGPT_BUILD_DIR=build "$PY" -m pytest -q -x tests/python >"$RES/pytest.log" 2>&1 || { tail -40 "$RES/pytest.log"; exit 1; }
  tail -3 "$RES/pytest.log"
}

stage_block() {
  log "block grid"
  $BIN bench --no-step --json "$RES/block.json" 2>"$RES/block.err" | tee "$RES/block.txt"
}

STEP_VARIANTS=sa@aten,sa,sa@fused,xsa@aten,xsa,xsa@xsa_wide,xsa@fused

stage_step() {
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
    --variants sa@aten,sa@weights,sa@norm,sa@rope,sa@loss,sa@weights+norm,sa@fused,xsa@aten,xsa@xsa,xsa@xsa_wide,xsa@fused \
    --json "$RES/kernels-124m.json" 2>"$RES/kernels-124m.err" | tee "$RES/kernels-124m.txt"
  log "chunked loss must cost nothing: gpt2-124m 16x1024, loss chunk 4096"
  $BIN bench --no-block --step-config gpt2-124m --step-batch 16 --step-seq-len 1024 --iters 20 --step-loss-chunk 4096 \
    --variants sa@aten,sa@fused --json "$RES/kernels-124m-chunk.json" 2>"$RES/kernels-124m-chunk.err" \
    | tee "$RES/kernels-124m-chunk.txt"
}

stage_parity() {
  [[ -f data/kjv/shards/val_000000.bin ]] || { echo "parity: data/kjv/shards missing (carry it)"; exit 1; }
  for k in aten fused; do
    log "400 steps of gpt2-124m on KJV, kernels $k"
    $BIN train -c configs/runs/cpu-demo-sa.json --out "$RES/parity-$k" --overwrite --set model.base=gpt2-124m \
      --set model.attention=xsa --set train.kernels=$k --set train.max_steps=400 --set train.seq_len=1024 \
      --set train.micro_batch=16 --set train.lr=6e-4 --set train.warmup_steps=40 --set train.eval_interval=400 \
      --set train.eval_tokens=65536 --set train.ckpt_interval=0 --set train.log_interval=50 \
      2>&1 | grep -E "val loss|tok/s" | tail -4 | tee -a "$RES/parity.txt"
  done
  "$PY" - "$RES" <<'PYEOF' | tee -a "$RES/parity.txt"
import json, pathlib, sys
res = pathlib.Path(sys.argv[1])
val = {k: json.loads((res / f"parity-{k}" / "done.json").read_text())["final_val_loss"] for k in ("aten", "fused")}
print(f"final val loss: aten {val['aten']:.4f}, fused {val['fused']:.4f}, |diff| {abs(val['aten'] - val['fused']):.4f} (target <= 0.01)")
PYEOF
}

stage_train() {
  [[ -f data/kjv/shards/val_000000.bin ]] || { echo "train: data/kjv/shards missing (carry it)"; exit 1; }
  log "xsagpt train, configs/runs/paper-0.7b.json on KJV (16 x 2048 x 16 accumulation, loss chunk 4096)"
  $BIN train -c configs/runs/paper-0.7b.json --out "$RES/train-0.7b" --overwrite \
    --set data.train='data/kjv/shards/train_*.bin' --set data.val='data/kjv/shards/val_*.bin' \
    --set train.max_steps=12 --set train.log_interval=4 --set train.eval_interval=0 --set train.eval_tokens=32768 \
    --set train.ckpt_interval=0 2>&1 | grep -E "kernels|step .*tok/s" | tee "$RES/train-0.7b.txt"
  log "the bench step of the same shape"
  $BIN bench --no-block --variants xsa --step-config paper-0.7b --step-batch 16 --step-seq-len 2048 --step-accum 16 \
    --step-loss-chunk 4096 --warmup 1 --iters 3 --json "$RES/train-bench-0.7b.json" 2>"$RES/train-bench-0.7b.err" \
    | tee -a "$RES/train-0.7b.txt"
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
      $BIN bench --no-block --variants xsa@aten,xsa --step-config $cfg --step-batch 8 --step-seq-len 2048 --warmup 1 --iters 3 \
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

VERDICT_KERNELS=weights,norm,rope,loss,xsa,xsa_wide,fused

verdict_build() {
  if [[ $DRY == 1 ]]; then
    log "machine (CPU dry run)"
    echo "CPU dry run: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores" | tee "$RES/gpu.txt"
  else
    log "machine"
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$RES/gpu.txt"
  fi
  "$PY" -c 'import torch; print("torch", torch.__version__, torch.version.cuda)' | tee -a "$RES/gpu.txt"
  log "build (xsagpt, xsagpt_tests)"
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -Wno-dev \
    >"$RES/configure.log" 2>&1 || { tail -30 "$RES/configure.log"; exit 1; }
  cmake --build build -j"$(nproc)" --target xsagpt xsagpt_tests >"$RES/build.log" 2>&1 \
    || { grep -m20 -A5 error "$RES/build.log"; exit 1; }
}

# The CUDA tests, all of them, into cuda-tests.json; a failure is recorded, not fatal:
# the table says which kernels it touches.
verdict_tests() {
  log "CUDA tests (KernelsCuda.*, XsaCuda.*)"
  build/tests/xsagpt_tests --gtest_filter='KernelsCuda.*:XsaCuda.*' --gtest_output="json:$RES/cuda-tests.json" \
    >"$RES/cuda-tests.log" 2>&1 || echo "some CUDA tests FAILED: see $RES/cuda-tests.log"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) *\] [0-9]+ test|^\[  FAILED  \] [A-Z]" "$RES/cuda-tests.log" || true
}

# 200 steps (dry run: 20 of the tiny model) for aten and each kernel set, same seed.
verdict_parity() {
  [[ -f data/kjv/shards/val_000000.bin ]] || { echo "verdict: data/kjv/shards missing (carry it)"; exit 1; }
  local size
  if [[ $DRY == 1 ]]; then
    size=(--set model.base=tiny --set train.max_steps=20 --set train.seq_len=64 --set train.micro_batch=4
          --set train.warmup_steps=2 --set train.lr=3e-3 --set train.eval_interval=20 --set train.eval_tokens=2048
          --set train.log_interval=5)
  else
    size=(--set model.base=gpt2-124m --set train.max_steps=200 --set train.seq_len=1024 --set train.micro_batch=16
          --set train.warmup_steps=20 --set train.lr=6e-4 --set train.eval_interval=200 --set train.eval_tokens=65536
          --set train.log_interval=25)
  fi
  for k in aten ${VERDICT_KERNELS//,/ }; do
    log "parity run, kernels $k"
    $BIN train -c configs/runs/cpu-demo-sa.json --out "$RES/parity-$k" --overwrite --set model.attention=xsa \
      --set train.kernels=$k --set train.ckpt_interval=0 --set train.keep_checkpoints=1 "${size[@]}" \
      >"$RES/parity-$k.log" 2>&1 || { tail -20 "$RES/parity-$k.log"; exit 1; }
    grep -E "val loss" "$RES/parity-$k.log" | tail -1 || true
  done
}

verdict_step() {
  local v=sa@aten,sa,sa@fused,xsa@aten,xsa,xsa@fused
  rm -f "$RES/pytorch.jsonl" "$RES"/step-*.json
  if [[ $DRY == 1 ]]; then
    log "training step, tiny 2x64 (dry run)"
    $BIN bench --no-block --variants $v --step-config tiny --step-batch 2 --step-seq-len 64 --warmup 1 --iters 2 \
      --json "$RES/step-tiny.json" 2>"$RES/step-tiny.err" | tee "$RES/step-tiny.txt"
    for a in sa xsa; do
      log "PyTorch tiny $a (eager, torch.compile)"
      "$PY" scripts/bench_pytorch.py --config tiny -b 2 -t 64 --attention $a --steps 2 --warmup 1 --compile \
        | tee -a "$RES/pytorch.jsonl"
    done
  else
    log "training step, gpt2-124m 16x1024"
    $BIN bench --no-block --variants $v --step-config gpt2-124m --step-batch 16 --step-seq-len 1024 --iters 20 \
      --json "$RES/step-124m.json" 2>"$RES/step-124m.err" | tee "$RES/step-124m.txt"
    log "training step, paper-0.7b 8x2048"
    $BIN bench --no-block --variants $v --step-config paper-0.7b --step-batch 8 --step-seq-len 2048 --iters 10 \
      --json "$RES/step-0.7b.json" 2>"$RES/step-0.7b.err" | tee "$RES/step-0.7b.txt"
    for a in sa xsa; do
      log "PyTorch gpt2-124m $a"
      "$PY" scripts/bench_pytorch.py --config gpt2-124m -b 16 -t 1024 --attention $a --compile | tee -a "$RES/pytorch.jsonl"
      log "PyTorch paper-0.7b $a"
      "$PY" scripts/bench_pytorch.py --config paper-0.7b -b 8 -t 2048 --attention $a --steps 10 --compile \
        | tee -a "$RES/pytorch.jsonl"
    done
  fi
  "$PY" scripts/bench_compare.py "$RES"/step-*.json --pytorch "$RES/pytorch.jsonl" | tee "$RES/summary.md"
}

stage_verdict() {
  local t0=$SECONDS
  verdict_build
  verdict_tests
  verdict_parity
  verdict_step
  log "verdict"
  "$PY" scripts/bench_verdict.py "$RES" --kernels $VERDICT_KERNELS $([[ $DRY == 1 ]] && echo --dry-run)
  echo "verdict took $((SECONDS - t0)) s"
}

[[ ${#stages[@]} -gt 0 ]] || { sed -n '2,38p' "$0"; exit 2; }
for s in "${stages[@]}"; do
  declare -F "stage_$s" >/dev/null || { echo "bench_gpu.sh: unknown stage '$s'" >&2; exit 2; }
  "stage_$s"
done
