"""The sizes the stages run at: the device's (gpt2-124m, paper-0.7b) or, in a dry run,
two layers of tiny, which go through every code path the real sizes take at a fraction
of a CPU's time; and the model copies some runs need (model.gelu "tanh")."""
import json
import pathlib

from .ledger import ROOT, Ledger


def dry_model(v: Ledger) -> str:
    """The dry run's model, written to scratch once."""
    path = v.scratch / "nano.json"
    if not path.exists():
        v.scratch.mkdir(parents=True, exist_ok=True)
        cfg = json.loads((ROOT / "configs/model/tiny.json").read_text())
        path.write_text(json.dumps(dict(cfg, n_layer=2, d_model=64, n_head=2)))
    return str(path)


def tanh_model(v: Ledger, base: str) -> str:
    """`base` (a configs/model name or a path) with model.gelu "tanh", in scratch:
    the model the gelu kernel's step runs (bench takes a model file, not --set)."""
    src = pathlib.Path(base) if base.endswith(".json") else ROOT / "configs/model" / f"{base}.json"
    path = v.scratch / f"{src.stem}-tanh.json"
    v.scratch.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(json.loads(src.read_text()), gelu="tanh")))
    return str(path)


def parity_size(v: Ledger) -> dict:
    """A parity run's model and train.* settings: 200 steps of gpt2-124m on the device."""
    if v.dry:
        return dict(base=dry_model(v), max_steps=20, seq_len=64, micro_batch=4, warmup_steps=2, lr=3e-3,
                    eval_interval=20, eval_tokens=2048, log_interval=5)
    return dict(base="gpt2-124m", max_steps=200, seq_len=1024, micro_batch=16, warmup_steps=20, lr=6e-4,
                eval_interval=200, eval_tokens=65536, log_interval=25)


def step_shapes(v: Ledger) -> dict:
    """The timed shapes, {size: (model config, batch, T, warmup, iters, paired rounds)}:
    three rounds at 124M, where the kernel verdict reads its speed ratios; two at 0.7B,
    whose step is 0.2 s but whose every round builds a 0.7B model per attention. The
    dry run times its tiny model in both places."""
    if v.dry:
        tiny = (dry_model(v), "2", "64", "1", "2")
        return {"124m": (*tiny, "3"), "0.7b": (*tiny, "2")}
    return {"124m": ("gpt2-124m", "16", "1024", "3", "10", "3"),
            "0.7b": ("paper-0.7b", "8", "2048", "2", "6", "2")}


def profile_shapes(v: Ledger) -> dict:
    """The profiled shapes, {size: [model config, batch, T]}."""
    if v.dry:
        return {"dry": [dry_model(v), "2", "64"]}
    return {"124m": ["gpt2-124m", "16", "1024"], "0.7b": ["paper-0.7b", "8", "2048"]}


def pytorch_args(v: Ledger, size: str) -> list[str]:
    """bench_pytorch.py's shape arguments for one size."""
    if v.dry:
        return ["--config", dry_model(v), "-b", "2", "-t", "64", "--steps", "2", "--warmup", "1"]
    if size == "124m":
        return ["--config", "gpt2-124m", "-b", "16", "-t", "1024", "--steps", "20"]
    return ["--config", "paper-0.7b", "-b", "8", "-t", "2048", "--steps", "10"]
