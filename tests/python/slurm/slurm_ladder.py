"""The ladder-shaped sweep the Slurm tests run: 2 variants x 2 rungs x 2 seeds of
tinyrun's model, a few steps a point, its second rung's jobs at 2 ranks (Gloo), with a
"slurm" section; and reading a sweep's final losses and job scripts."""
import json
import pathlib
import re

from tinyrun import write_run_config

VARIANTS = {"sa": {"model.attention": "sa"}, "xsa": {"model.attention": "xsa"}}
T, MICRO = 32, 4  # tinyrun's sequence and micro-batch
BATCH_TOKENS = 2 * T * MICRO  # fixed, so a point at 1 or 2 ranks is one run (accumulation 2 or 1)
STEPS = 6


def flops_per_token(L: int, d: int, vocab: int = 256) -> float:
    """6 x the matmul parameters (blocks and LM head) + 12 L d T for attention: the ladder's own count."""
    return 6.0 * (L * 12 * d * d + vocab * d) + 12.0 * L * d * T


def ladder_file(tmp_path: pathlib.Path, shards, slurm: dict, rung2_slurm=None, name="ladder.json", **extra):
    """Writes the sweep file; `rung2_slurm` is the second rung's own "slurm" (default: 2 ranks)."""
    base = write_run_config(tmp_path / "base.json", shards, tmp_path / "unused", max_steps=12, warmup_steps=2,
                            eval_interval=4, ckpt_interval=4, log_interval=1, batch_tokens=BATCH_TOKENS)
    flops = [STEPS * BATCH_TOKENS * flops_per_token(L, 32 * L) for L in (1, 2)]
    rung2 = {"depth": 2, "slurm": {"ntasks_per_node": 2} if rung2_slurm is None else rung2_slurm}
    spec = {"base": str(base), "variants": VARIANTS, "baseline": "sa", "grid": {"train.seed": [1, 2]},
            "ladder": {"rungs": [1, rung2], "aspect": 32, "head_dim": 16, "tokens": {"flops": flops},
                       "lr": {"per_rung": [1e-2, 1e-2]}},
            "slurm": slurm, "out_dir": str(tmp_path / "sweep"), **extra}
    path = tmp_path / name
    path.write_text(json.dumps(spec))
    return path


def point_names(dry_run_stdout: str) -> list:
    """The points in the dry run's order (their indices are the array task ids)."""
    return [l.split()[0] for l in dry_run_stdout.splitlines() if l.startswith("  ") and "attention=" in l]


def sbatch_lines(script: pathlib.Path) -> dict:
    """A batch script's #SBATCH options: name -> value ('' for a flag), a value in double
    quotes read as sbatch reads it (the quotes removed, \\" a quote)."""
    out = {}
    for line in script.read_text().splitlines():
        m = re.match(r"#SBATCH (--[\w-]+)(?:=(.*))?$", line)
        if m:
            value = m.group(2) or ""
            if len(value) > 1 and value[0] == value[-1] == '"':
                value = value[1:-1].replace('\\"', '"')
            out[m.group(1)] = value
    return out


def final_losses(sweep_dir: pathlib.Path) -> dict:
    """Every done point's final val loss, from its own done.json: point name -> loss."""
    return {p.name: json.loads((p / "done.json").read_text())["final_val_loss"]
            for p in sorted(sweep_dir.iterdir()) if (p / "done.json").exists()}
