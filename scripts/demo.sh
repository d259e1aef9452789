#!/usr/bin/env bash
# The quickstart: does XSA beat standard attention? On a fresh machine this sets
# up, prepares the offline corpus (the King James Bible from Debian's bible-kjv,
# GPT-2 tokenized), trains a tiny SA model and a tiny XSA model on the same data
# and seed (CPU: a few minutes on 2 cores; a GPU is used if present), prints
# their val losses side by side and draws the curves. A second run reuses what
# is done. GPT-2's encoder.json/vocab.bpe are read from $XSAGPT_GPT2_VOCAB or
# data/gpt2/ when present, else tiktoken downloads them once.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
echo "[demo] preparing the offline corpus (data/kjv/shards)"
bash data/kjv/prepare.sh
echo "[demo] training SA and XSA (configs/sweeps/cpu-demo.json -> runs/cpu-demo)"
"${XSAGPT_BUILD_DIR:-build}/xsagpt" sweep -c configs/sweeps/cpu-demo.json "$@"
