"""The timed stages: `xsagpt bench`'s training step in paired rounds (the default against
ATen, each kernel of "auto" alone, the kernels outside it beside their baselines, the gelu
kernel on tanh-GELU models), each kernel alone in GB/s, and the GPU demo's sweep."""
import json
import shutil
import time

import verdict_table

from .ledger import BIN, ROOT, Ledger
from .sizes import dry_model, step_shapes, tanh_model


def variants(v: Ledger) -> dict[str, str]:
    """The bench variants of the step stages, by the file each writes:
    - step-124m, step-0.7b: the default (`sa`, `xsa`: train.kernels "auto") against ATen
      at both sizes, and at 124M "fused" too, for the kernel table's speed column;
    - kernels-124m (step-kernels): each kernel of "auto" alone against ATen;
    - candidates-*: the kernels outside "auto" beside their baselines (aten for a kernel
      inside "fused", fused for one outside it), in a bench process of their own (one
      that fails, or leaves the GPU in an error, cannot take the default's numbers with
      it); 124M for the kernel table's ratios, 0.7B where GEMMs and launches weigh as
      they do in training, SA and XSA. gelu, which needs a tanh-GELU model, has its
      own stage (step-gelu).
    - profile: `fused` beside `fused` with each kernel outside it that runs the shipped
      models (fp8), SA and XSA, so FP8's GEMMs stand against the kernels that feed them."""
    pl = v.plan
    rows = {r["name"]: r for r in pl.rows}
    tried = [k for k in pl.kernels if k != "fused" and k not in pl.candidates]
    new = [k for k in pl.kernels if k != "fused" and k in pl.candidates and k not in verdict_table.MODEL]
    outside = [k for k in new if k in pl.baseline and rows[k]["default_model"]]
    both = lambda kernels: ",".join(pl.variant(k, a) for a in ("sa", "xsa") for k in kernels)
    return {"step-124m": "sa@aten,sa,xsa@aten,xsa," + pl.variant("fused"),
            "step-0.7b": "sa@aten,sa,xsa@aten,xsa",
            "kernels-124m": ",".join(pl.variant(k) for k in ("aten", *tried)),
            "candidates-124m": ",".join(pl.variant(k) for k in ("aten", "fused", *new)),
            "candidates-0.7b": both(("fused", *outside)),
            "profile": both(("fused", *outside))}


def bench_step(v: Ledger, stage, size, variants_, out, timeout, model=None):
    """`xsagpt bench`'s training step of `variants_` at one of step_shapes()'s sizes
    (on `model`, a config derived from that size's, when given) into res/`out`."""
    cfg, b, t, warmup, iters, rounds = step_shapes(v)[size]
    if v.broken == stage:
        variants_ += ",broken-on-purpose"
    v.sh(stage, [BIN, "bench", "--no-block", "--variants", variants_, "--step-config", model or cfg,
                 "--step-batch", b, "--step-seq-len", t, "--warmup", warmup, "--iters", iters,
                 "--repeat", rounds, "--json", v.res / out], timeout)


def step(v: Ledger, which, timeout):
    bench_step(v, f"step-{which}", which, variants(v)[f"step-{which}"], f"step-{which}.json", timeout)


def step_kernels(v: Ledger, timeout):
    """Each kernel of "auto" alone against ATen at 124M, paired rounds, for the
    kernel table's speed column. Every ratio measured twice unchanged (H200
    2026-11-26, H100 2026-11-27), so it comes after the questions of the day."""
    bench_step(v, "step-kernels", "124m", variants(v)["kernels-124m"], "kernels-124m.json", timeout)


def step_candidates(v: Ledger, timeout):
    """The kernels outside "auto" beside their baselines (variants()), in bench
    processes of their own, at both sizes as the step stages run them."""
    t_end = time.monotonic() + timeout
    for size in ("124m", "0.7b"):
        bench_step(v, "step-candidates", size, variants(v)[f"candidates-{size}"], f"candidates-{size}.json",
                   t_end - time.monotonic())


def step_gelu(v: Ledger, timeout):
    """The gelu kernel's speed on tanh-GELU models (it runs no other): XSA with
    `fused` against `fused,gelu`, at both sizes as the step stages run them."""
    t_end = time.monotonic() + timeout
    pair = ",".join(map(v.plan.variant, ("tanh", "gelu")))
    for size, (cfg, *_) in step_shapes(v).items():
        bench_step(v, "step-gelu", size, pair, f"gelu-step-{size}.json", t_end - time.monotonic(),
                   model=tanh_model(v, cfg))


def micro(v: Ledger, timeout):
    shapes = f"{dry_model(v)}:2x64" if v.dry else "gpt2-124m:16x1024,paper-0.7b:8x2048"
    v.sh("micro", [BIN, "bench", "--micro", shapes, "--iters", "3" if v.dry else "20",
                   "--json", v.res / "micro.json"], timeout)


def demo(v: Ledger, timeout):
    """The GPU demo's sweep (configs/sweeps/gpu-demo.json: 124M SA against XSA, two
    seeds, the default kernels) into scratch; its report.md and summary come back."""
    spec = json.loads((ROOT / "configs/sweeps/gpu-demo.json").read_text())
    base = ROOT / "configs/sweeps" / spec["base"]
    sets = ["train.keep_checkpoints=1", "train.ckpt_interval=0"]  # one 2 GB checkpoint per run, not three
    if v.dry:
        base = ROOT / "configs/runs/cpu-demo-sa.json"
        sets += [f"model.base={dry_model(v)}", "train.max_steps=10", "train.eval_interval=5",
                 "train.log_interval=5", "train.seq_len=64", "train.micro_batch=2", "train.warmup_steps=2"]
    out = v.scratch / "gpu-demo"
    sweep = v.scratch / "gpu-demo.json"
    v.scratch.mkdir(parents=True, exist_ok=True)
    sweep.write_text(json.dumps(dict(spec, base=str(base), set=sets, out_dir=str(out))))
    v.sh("demo", [BIN, "sweep", "-c", sweep, "--no-plot"], timeout)
    for name in ("report.md", "summary.json"):
        if (out / name).exists():
            shutil.copy(out / name, v.res / f"demo-{name}")
    shutil.rmtree(out, ignore_errors=True)  # four 124M runs' checkpoints: nothing to bring back
