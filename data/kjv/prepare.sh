#!/usr/bin/env bash
# The offline default corpus: the King James Bible from Debian's bible-kjv package
# (public domain, ~1.1M GPT-2 tokens), one document per chapter (1,189), tokenized
# into data/kjv/shards/: val_000000.bin (the first 100K tokens, Genesis 1 onward)
# and train_000001.bin ... of 256K tokens each. A second run finds the shards done
# and returns at once. Extra arguments go to prepare.py (e.g. --workers 1).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
py="${XSAGPT_PYTHON:-$root/.venv/bin/python}"
[ -x "$py" ] || py=python3
if ! command -v bible >/dev/null; then
  echo "kjv/prepare.sh: the 'bible' program is missing: sudo apt-get install bible-kjv (scripts/setup.sh does)" >&2
  exit 1
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# -l: one verse per line. The output is blank-line separated chapter headings
# ("Genesis 1") followed by verses indented two spaces ("  1 In the beginning ...").
bible -l 1000000 Gen1:1-Rev22:21 | awk -v dir="$tmp" '
  /^$/ { next }
  /^[^ ]/ { if (out) close(out); out = sprintf("%s/%04d.txt", dir, ++n); print $0 "\n" > out; next }
  { sub(/^  /, ""); print > out }'
"$py" "$here/../prepare.py" text "$tmp"/*.txt --out-dir "$here/shards" \
  --val-tokens 100000 --shard-tokens 262144 "$@"
