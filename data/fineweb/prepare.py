#!/usr/bin/env python3
"""FineWeb GPT-2 shards, llm.c format: `python data/prepare.py fineweb` under its usual name.

    python data/fineweb/prepare.py [--dataset fineweb-edu] [--sample 100BT] [--shard-tokens ...]

Writes data/<dataset>/shards/<sample>/{val_000000,train_*}.bin (see data/prepare.py).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import prepare  # noqa: E402

if __name__ == "__main__":
    sys.exit(prepare.main(["fineweb", *sys.argv[1:]]))
