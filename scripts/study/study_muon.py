#!/usr/bin/env python3
"""The Muon study (results in docs/muon-study.md): SA against XSA when the block
matrices train with Muon (train.optimizer=muon) and when everything trains with AdamW,
on two corpora, over seeds; the number is the paired XSA - SA difference of the final
val loss (same seed: same initialisation but for attention, same data order) with
its 95% t interval.

First a learning-rate check: Muon at several train.muon_lr on the KJV (SA and XSA,
one seed), so that the comparison is not made at a bad rate; the main grid then uses
the rate with the lowest mean val loss (or --muon-lr).

Runs use study_head.py's setting (tiny model, corpora remapped to a compact
vocabulary, 4 x 64 tokens per step, fp32 on one CPU thread), each cell one
`xsagpt sweep` over attention x seed under --out, so a rerun skips finished runs.

  .venv/bin/python scripts/study/study_muon.py --jobs 2          # LR check, then the grid
  .venv/bin/python scripts/study/study_muon.py --table-only      # just re-aggregate
"""
import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from scipy import stats

from study_head import CORPORA, ROOT, compact_shards, final_val  # its sibling: the shards and run layout it uses

OPTIMIZERS = ("adamw", "muon")


def base_config(shards, vocab, steps, adamw_lr, optimizer, muon_lr, out):
    return {
        "model": {"base": "tiny", "vocab_size": vocab},
        "data": {"train": str(shards / "train_*.bin"), "val": str(shards / "val_*.bin")},
        "train": {"lr": adamw_lr, "warmup_steps": min(100, steps // 10), "max_steps": steps, "min_lr_ratio": 0.1,
                  "seq_len": 64, "micro_batch": 4, "log_interval": 50, "eval_interval": steps,
                  "eval_tokens": 16384, "ckpt_interval": 0, "threads": 1, "device": "cpu", "precision": "fp32",
                  "optimizer": optimizer, "muon_lr": muon_lr},
        "out_dir": str(out / "base"),
    }


def run_sweep(binary, cell, config, grid):
    cell.mkdir(parents=True, exist_ok=True)
    (cell / "base.json").write_text(json.dumps(config, indent=1))
    (cell / "sweep.json").write_text(json.dumps({"base": "base.json", "grid": grid, "out_dir": str(cell / "runs")},
                                                indent=1))
    with open(cell / "sweep.log", "a") as f:
        rc = subprocess.run([str(binary), "sweep", "-c", str(cell / "sweep.json")], stdout=f,
                            stderr=subprocess.STDOUT, env=dict(os.environ, OMP_NUM_THREADS="1")).returncode
    log = cell / "sweep.log"
    print(f"[study] {cell.name}: {'done' if rc == 0 else f'FAILED (exit {rc}, see {log})'}", flush=True)


def vals(cell, key, values, seeds):
    """(value, attention, seed) -> final val loss of the finished runs of a cell."""
    runs = {}  # a run directory's name is its grid point, "k=v,k=v,..."
    for d in (cell / "runs").glob("*=*"):
        point = dict(kv.split("=", 1) for kv in d.name.split(","))
        runs[(point.get(key), point.get("model.attention"), point.get("train.seed"))] = d
    out = {}
    for v, att, seed in itertools.product(values, ("sa", "xsa"), seeds):
        d = runs.get((None if key is None else f"{v:g}", att, str(seed)))
        loss = final_val(d) if d else None
        if loss is not None:
            out[(v, att, seed)] = loss
    return out


def lr_table(out_root, rates, seed):
    cell = out_root / "lr-check"
    got = vals(cell, "train.muon_lr", rates, [seed])
    rows = ["| muon_lr | SA val | XSA val | mean |", "|---|---|---|---|"]
    means = {}
    for r in rates:
        sa, xsa = got.get((r, "sa", seed)), got.get((r, "xsa", seed))
        if sa is not None and xsa is not None:
            means[r] = (sa + xsa) / 2
        fmt = lambda x: "-" if x is None else f"{x:.3f}"
        rows.append(f"| {r:g} | {fmt(sa)} | {fmt(xsa)} | {fmt(means.get(r))} |")
    return "\n".join(rows), (min(means, key=means.get) if means else None)


def paired(diff):
    m = statistics.mean(diff)
    if len(diff) < 2:
        return f"{m:+.3f}", "-"
    half = stats.t.ppf(0.975, len(diff) - 1) * statistics.stdev(diff) / len(diff) ** 0.5
    return f"{m:+.3f}", f"[{m - half:+.3f}, {m + half:+.3f}]"


def main_table(out_root, corpora, steps, seeds):
    rows = ["| corpus | optimizer | SA val | XSA val | XSA − SA (paired mean) | 95% t interval | per seed | n |",
            "|---|---|---|---|---|---|---|---|"]
    for corpus, opt in itertools.product(corpora, OPTIMIZERS):
        cell = out_root / f"{corpus}-{steps}-{opt}"
        if not (cell / "runs").is_dir():
            continue
        got = vals(cell, None, [None], seeds)
        both = [s for s in seeds if (None, "sa", s) in got and (None, "xsa", s) in got]
        if not both:
            continue
        sa = [got[(None, "sa", s)] for s in both]
        xsa = [got[(None, "xsa", s)] for s in both]
        diff = [x - s for x, s in zip(xsa, sa)]
        ms = lambda xs: f"{statistics.mean(xs):.3f} ± {statistics.stdev(xs):.3f}" if len(xs) > 1 else f"{xs[0]:.3f}"
        mean, interval = paired(diff)
        rows.append(f"| {corpus} | {opt} | {ms(sa)} | {ms(xsa)} | {mean} | {interval} | "
                    f"{', '.join(f'{d:+.3f}' for d in diff)} | {len(diff)} |")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", default="kjv,pydocs", help="comma list of " + ", ".join(CORPORA))
    ap.add_argument("--steps", type=int, default=300, help="optimizer steps per run")
    ap.add_argument("--seeds", default="1,2,3", help="comma list of train.seed values")
    ap.add_argument("--vocab", type=int, default=2048, help="compact vocabulary size")
    ap.add_argument("--adamw-lr", type=float, default=3e-3, help="train.lr (AdamW's peak rate; study_head.py's)")
    ap.add_argument("--lr-check", default="0.005,0.01,0.02,0.04,0.08", help="train.muon_lr values of the LR check")
    ap.add_argument("--lr-check-seed", type=int, default=1, help="train.seed of the LR check")
    ap.add_argument("--muon-lr", type=float, help="Muon's rate for the grid (default: the LR check's best)")
    ap.add_argument("--jobs", type=int, default=1, help="cells run at once (each single-threaded)")
    ap.add_argument("--out", default="runs/study-muon", help="study directory")
    ap.add_argument("--table-only", action="store_true", help="only aggregate what has finished")
    a = ap.parse_args()
    out_root = (ROOT / a.out).resolve()
    seeds = [int(s) for s in a.seeds.split(",")]
    rates = [float(r) for r in a.lr_check.split(",")]
    corpora = [c for c in a.corpora.split(",") if c]
    if unknown := [c for c in corpora if c not in CORPORA]:
        sys.exit(f"study_muon.py: unknown corpus {unknown} (expected some of {', '.join(CORPORA)})")
    binary = ROOT / os.environ.get("XSAGPT_BUILD_DIR", "build") / "xsagpt"
    if not a.table_only:
        if not binary.exists():
            sys.exit(f"study_muon.py: {binary} not built: run bash scripts/setup.sh first")
        for c in corpora:
            subprocess.run(["bash", str(ROOT / CORPORA[c][1])], check=True, stdout=subprocess.DEVNULL)
            compact_shards(c, a.vocab, out_root)
        if a.muon_lr is None:
            shards = compact_shards("kjv", a.vocab, out_root)
            cfg = base_config(shards, a.vocab, a.steps, a.adamw_lr, "muon", rates[0], out_root / "lr-check")
            run_sweep(binary, out_root / "lr-check", cfg,
                      {"train.muon_lr": rates, "model.attention": ["sa", "xsa"], "train.seed": [a.lr_check_seed]})
    table, best = lr_table(out_root, rates, a.lr_check_seed)
    print(f"Muon learning-rate check (kjv, {a.steps} steps, seed {a.lr_check_seed}):\n{table}\n")
    muon_lr = a.muon_lr if a.muon_lr is not None else best
    if not a.table_only:
        if muon_lr is None:
            sys.exit("study_muon.py: the LR check has no finished run to choose Muon's rate from")
        print(f"[study] Muon's rate for the grid: {muon_lr:g}", flush=True)
        cells = []
        for corpus, opt in itertools.product(corpora, OPTIMIZERS):
            cell = out_root / f"{corpus}-{a.steps}-{opt}"
            cfg = base_config(compact_shards(corpus, a.vocab, out_root), a.vocab, a.steps, a.adamw_lr, opt, muon_lr,
                              cell)
            cells.append((cell, cfg))
        with ThreadPoolExecutor(max_workers=a.jobs) as pool:
            list(pool.map(lambda c: run_sweep(binary, c[0], c[1], {"model.attention": ["sa", "xsa"],
                                                                      "train.seed": seeds}), cells))
    print(f"SA against XSA, {a.steps} steps, final val loss (mean ± sd over seeds {a.seeds}):\n"
          + main_table(out_root, corpora, a.steps, seeds))


if __name__ == "__main__":
    main()
