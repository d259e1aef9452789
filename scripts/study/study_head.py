#!/usr/bin/env python3
"""The LM-head study (results in docs/lm-head-study.md): which way of
starting the LM head trains best, for SA and for XSA, and does the choice move the
XSA - SA difference the project exists to measure?

Heads (model.tie_embeddings, model.head_init):
  tied          true,  normal     nanoGPT: the shared matrix N(0, 0.02); starts
                                  ~0.02*d_model nats above ln(vocab) behind ln_e
  tied-scaled   true,  scaled     shared matrix N(0, 0.5/d_model): self-logit 0.5
  tied-zeronorm true,  zero_norm  ln_f's gain starts at 0: logits 0 at step 0
  untied-zero   false, zero       its own zero matrix: logits 0 at step 0
  untied-normal false, normal     its own N(0, 0.02) matrix

The corpora are remapped to a compact vocabulary (--vocab, default 2048: the
2047 most frequent GPT-2 tokens of the training shards plus one for the rest), so a
2-core CPU can afford the runs: the head's cost scales with the vocabulary, the width
is real. --vocab 0 keeps GPT-2's 50304. Each cell (head, corpus, model size, steps)
is one `xsagpt sweep` over attention x seed, so every run is an ordinary run directory under --out and a rerun skips the
finished ones. The table gives each cell's final val loss mean +- sd over seeds and
the paired XSA - SA difference (same seed, same data order) mean +- sd.

  .venv/bin/python scripts/study/study_head.py                  # the full grid (hours on 2 cores)
  .venv/bin/python scripts/study/study_head.py --steps 300 --sizes tiny --jobs 2
  .venv/bin/python scripts/study/study_head.py --table-only     # just re-aggregate
"""
import argparse
import itertools
import json
import math
import os
import pathlib
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = pathlib.Path(__file__).resolve().parents[2]

HEADS = {
    "tied": (True, "normal"),
    "tied-scaled": (True, "scaled"),
    "tied-zeronorm": (True, "zero_norm"),
    "untied-zero": (False, "zero"),
    "untied-normal": (False, "normal"),
}
SIZES = {  # model section, peak lr
    "tiny": ({"base": "tiny"}, 3e-3),
    "w768": ({"base": "tiny", "n_layer": 2, "d_model": 768, "n_head": 12, "head_dim": 64}, 1e-3),
}
CORPORA = {  # shards and the script that makes them
    "kjv": ("data/kjv/shards", "data/kjv/prepare.sh"),
    "pydocs": ("data/pydocs/shards", "data/pydocs/prepare.sh"),
}


def compact_shards(corpus, vocab, out_root):
    """The corpus's shards at a compact vocabulary of `vocab` ids (data/prepare.py compact:
    the vocab-1 most frequent training tokens keep an id each, all others share the last;
    the mapping in vocab.json beside them); the GPT-2 shards themselves for vocab 0."""
    src = ROOT / CORPORA[corpus][0]
    if vocab == 0:
        return src
    dst = out_root / "data" / f"{corpus}-v{vocab}"
    subprocess.run([sys.executable, str(ROOT / "data" / "prepare.py"), "compact", str(src), "--vocab-size", str(vocab),
                    "--out-dir", str(dst)], check=True, stdout=subprocess.DEVNULL)
    return dst


def cell_config(head, shards, vocab, size, steps, out):
    tie, init = HEADS[head]
    model, lr = SIZES[size]
    return {
        "model": dict(model, tie_embeddings=tie, head_init=init, **({"vocab_size": vocab} if vocab else {})),
        "data": {"train": str(shards / "train_*.bin"), "val": str(shards / "val_*.bin")},
        "train": {"lr": lr, "warmup_steps": min(100, steps // 10), "max_steps": steps, "min_lr_ratio": 0.1,
                  "seq_len": 64, "micro_batch": 4, "log_interval": 50, "eval_interval": steps,
                  "eval_tokens": 16384, "ckpt_interval": 0, "threads": 1, "device": "cpu", "precision": "fp32"},
        "out_dir": str(out / "base"),
    }


def run_cell(binary, out_root, vocab, head, corpus, size, steps, seeds):
    cell = out_root / f"{corpus}-{size}-{steps}" / head
    cell.mkdir(parents=True, exist_ok=True)
    shards = compact_shards(corpus, vocab, out_root)
    (cell / "base.json").write_text(json.dumps(cell_config(head, shards, vocab, size, steps, cell), indent=1))
    sweep = {"base": "base.json", "grid": {"model.attention": ["sa", "xsa"], "train.seed": seeds},
             "out_dir": str(cell / "runs")}
    (cell / "sweep.json").write_text(json.dumps(sweep, indent=1))
    log = cell / "sweep.log"
    with open(log, "a") as f:
        rc = subprocess.run([str(binary), "sweep", "-c", str(cell / "sweep.json")], stdout=f, stderr=subprocess.STDOUT,
                            env=dict(os.environ, OMP_NUM_THREADS="1")).returncode
    print(f"[study] {cell.relative_to(out_root)}: {'done' if rc == 0 else f'FAILED (exit {rc}, see {log})'}",
          flush=True)


def final_val(run_dir):
    done = run_dir / "done.json"
    if not done.exists():
        return None
    return json.loads(done.read_text()).get("final_val_loss")


def mean_sd(xs):
    if not xs:
        return "-"
    sd = statistics.stdev(xs) if len(xs) > 1 else float("nan")
    return f"{statistics.mean(xs):.3f} ± {sd:.3f}"


def table(out_root, seeds):
    rows = ["| corpus | model | steps | head | start (step 0, SA) | SA val | XSA val | XSA − SA (paired) | n |",
            "|---|---|---|---|---|---|---|---|---|"]
    for cell_dir in sorted(p for p in out_root.iterdir() if p.is_dir() and p.name != "data"):
        corpus, size, steps = cell_dir.name.rsplit("-", 2)
        for head in HEADS:
            runs = cell_dir / head / "runs"
            if not runs.is_dir():
                continue
            vals = {}
            start = []
            for att, seed in itertools.product(("sa", "xsa"), seeds):
                d = next(runs.glob(f"*model.attention={att},train.seed={seed}"), None)
                v = final_val(d) if d else None
                if v is not None:
                    vals[(att, seed)] = v
                if d and att == "sa" and (d / "metrics.jsonl").exists():
                    for line in (d / "metrics.jsonl").read_text().splitlines():
                        rec = json.loads(line)
                        if rec.get("step") == 0 and "val_loss" in rec:
                            start.append(rec["val_loss"])
            sa = [vals[("sa", s)] for s in seeds if ("sa", s) in vals]
            xsa = [vals[("xsa", s)] for s in seeds if ("xsa", s) in vals]
            diff = [vals[("xsa", s)] - vals[("sa", s)] for s in seeds if ("sa", s) in vals and ("xsa", s) in vals]
            st = f"{statistics.mean(start):.2f}" if start else "-"
            rows.append(f"| {corpus} | {size} | {steps} | {head} | {st} | {mean_sd(sa)} | {mean_sd(xsa)} | "
                        f"{mean_sd(diff)} | {len(diff)} |")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heads", default=",".join(HEADS), help="comma list of " + ", ".join(HEADS))
    ap.add_argument("--corpora", default="kjv,pydocs", help="comma list of " + ", ".join(CORPORA))
    ap.add_argument("--sizes", default="tiny,w768", help="comma list of " + ", ".join(SIZES))
    ap.add_argument("--steps", default="300,1000", help="comma list of training lengths")
    ap.add_argument("--seeds", default="1,2,3", help="comma list of train.seed values")
    ap.add_argument("--vocab", type=int, default=2048, help="compact vocabulary size (0: GPT-2's 50304)")
    ap.add_argument("--jobs", type=int, default=1, help="cells run at once (each single-threaded)")
    ap.add_argument("--out", default="runs/study-head", help="study directory")
    ap.add_argument("--table-only", action="store_true", help="only aggregate what has finished")
    a = ap.parse_args()
    out_root = (ROOT / a.out).resolve()
    seeds = [int(s) for s in a.seeds.split(",")]
    split = lambda s, known: [x for x in s.split(",") if x] if all(x in known for x in s.split(",") if x) else \
        sys.exit(f"study_head.py: unknown value in '{s}' (expected some of {', '.join(known)})")
    heads, corpora, sizes = split(a.heads, HEADS), split(a.corpora, CORPORA), split(a.sizes, SIZES)
    steps = [int(s) for s in a.steps.split(",")]
    if not a.table_only:
        binary = ROOT / os.environ.get("XSAGPT_BUILD_DIR", "build") / "xsagpt"
        if not binary.exists():
            sys.exit(f"study_head.py: {binary} not built: run bash scripts/setup.sh first")
        for c in corpora:
            subprocess.run(["bash", str(ROOT / CORPORA[c][1])], check=True, stdout=subprocess.DEVNULL)
            compact_shards(c, a.vocab, out_root)
        cells = list(itertools.product(heads, corpora, sizes, steps))
        with ThreadPoolExecutor(max_workers=a.jobs) as pool:
            list(pool.map(lambda c: run_cell(binary, out_root, a.vocab, *c, seeds), cells))
    print(table(out_root, seeds))


if __name__ == "__main__":
    main()
