#!/usr/bin/env bash
# A second offline corpus, unlike the KJV in every way that matters to a language
# model: the Python 3.11 documentation's reStructuredText sources from Debian's
# python3.11-doc (PSF licence; ~12 MB, ~3M GPT-2 tokens of technical prose and code),
# one document per source file (497), tokenized into data/pydocs/shards/ as
# val_000000.bin (the first 200K tokens) and train_*.bin of 1M tokens each. Used by
# the LM-head study (scripts/study/study_head.py) to check that a conclusion drawn on the
# KJV holds on other text. A second run finds the shards done and returns at once.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
py="${XSAGPT_PYTHON:-$root/.venv/bin/python}"
[ -x "$py" ] || py=python3
src=/usr/share/doc/python3.11/html/_sources
if [ ! -d "$src" ]; then
  if [ "${XSAGPT_NO_APT:-0}" != 1 ] && command -v apt-get >/dev/null; then
    sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
    echo "pydocs/prepare.sh: installing python3.11-doc (the corpus)" >&2
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3.11-doc >/dev/null
  else
    echo "pydocs/prepare.sh: $src is missing: sudo apt-get install python3.11-doc" >&2
    exit 1
  fi
fi
mapfile -t files < <(find "$src" -name '*.rst.txt' | LC_ALL=C sort)
"$py" "$here/../prepare.py" text "${files[@]}" --out-dir "$here/shards" \
  --val-tokens 200000 --shard-tokens 1048576 "$@"
