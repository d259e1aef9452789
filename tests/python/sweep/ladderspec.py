"""The ladder sweep the ladder tests start from: tinyrun's model at depth rungs of d_model
32 L (heads of 16), two variants, seeds in the grid; and a GPT's parameters and FLOPs per
token written out from the architecture (not read from the program), which the tests
check the ladder's rules against."""
import json

from tinyrun import write_run_config

VOCAB, T, MICRO = 256, 32, 4  # tinyrun's model and batch
STEP_TOKENS = T * MICRO


def params(L: int, d: int, vocab: int = VOCAB) -> int:
    """A GPT's parameters: untied embedding and head, per layer 12 d^2 (q, k, v, o and the 4d MLP)
    and two norm gains, and the two outer norms (no biases)."""
    return 2 * vocab * d + L * (12 * d * d + 2 * d) + 2 * d


def flops_per_token(L: int, d: int, seq_len: int = T, vocab: int = VOCAB) -> float:
    """6 x the matmul parameters (blocks and LM head) + 12 L d T for attention (PaLM appendix B)."""
    return 6.0 * (L * 12 * d * d + vocab * d) + 12.0 * L * d * seq_len


def ladder_spec(tmp_path, shards, rungs=(1, 2), steps=2, lr=None, seeds=(1, 2), **extra):
    """A ladder of depths `rungs` (d_model 32 L, heads of 16) whose FLOP budget is `steps` steps."""
    base = write_run_config(tmp_path / "base.json", shards, tmp_path / "unused", max_steps=12, warmup_steps=2,
                            eval_interval=4, ckpt_interval=4, log_interval=1)
    flops = [steps * STEP_TOKENS * flops_per_token(L, 32 * L) for L in rungs]
    ladder = {"rungs": list(rungs), "aspect": 32, "head_dim": 16, "tokens": {"flops": flops},
              "lr": lr or {"width_exponent": -1, "anchor": {"d_model": 64, "lr": 1e-2}}}
    ladder.update(extra.pop("ladder", {}))
    spec = {"base": str(base), "variants": {"sa": {"model.attention": "sa"}, "xsa": {"model.attention": "xsa"}},
            "baseline": "sa", "grid": {"train.seed": list(seeds)}, "ladder": ladder,
            "out_dir": str(tmp_path / "sweep"), **extra}
    path = tmp_path / "ladder.json"
    path.write_text(json.dumps(spec))
    return path
