#!/usr/bin/env bash
# The quickstart: does XSA beat standard attention? On a fresh machine this sets
# up, prepares the offline corpus (the King James Bible from Debian's bible-kjv,
# GPT-2 tokenized with the vocabulary shipped in data/gpt2/), trains SA and XSA on
# the same data and seeds, prints their val losses side by side and draws the
# curves. A second run reuses what is done. Needs no network beyond the package
# registries that setup uses.
#   CPU (no GPU seen by torch): a tiny model, one seed each, 160 steps of 4 x 128
#       tokens (configs/sweeps/cpu-demo.json -> runs/cpu-demo): a few minutes on 2 cores.
#   GPU: GPT-2 124M, 400 steps of 16 x 1024 tokens, two seeds per attention, each
#       attention's mean and spread (configs/sweeps/gpu-demo.json -> runs/gpu-demo):
#       minutes on one H100.
#   XSAGPT_DEMO=cpu or XSAGPT_DEMO=gpu picks the branch; extra arguments go to
#   `xsagpt sweep` (e.g. --dry-run).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh --target xsagpt  # the demo runs only the binary; tests build with the test command
build="${XSAGPT_BUILD_DIR:-build}"
case "${XSAGPT_DEMO:-auto}" in
  cpu) demo=cpu ;;
  gpu) demo=gpu ;;
  auto)
    # torch's view of the GPUs is the binary's: it links the same LibTorch.
    if .venv/bin/python -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
      demo=gpu
    else
      demo=cpu
    fi ;;
  *) echo "demo.sh: XSAGPT_DEMO must be cpu, gpu or auto, got '${XSAGPT_DEMO}'" >&2; exit 2 ;;
esac
echo "[demo] preparing the offline corpus (data/kjv/shards)"
bash data/kjv/prepare.sh
echo "[demo] training SA and XSA on the ${demo^^} (configs/sweeps/${demo}-demo.json -> runs/${demo}-demo)"
"$build/xsagpt" sweep -c "configs/sweeps/${demo}-demo.json" "$@"
