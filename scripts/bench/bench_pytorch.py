#!/usr/bin/env python3
"""Training-step throughput of the same architecture in plain PyTorch
(scripts/reference/model.py), eager and with torch.compile: the baseline xsagpt's
own step time (`xsagpt bench`) is compared against, in one session on one GPU.

The step matches xsagpt's trainer: bf16 autocast on CUDA (float32 on CPU), fused
AdamW (0.9, 0.95, wd 0.1 on matrices), global-norm clip 1.0, TF32 matmuls.

    .venv/bin/python scripts/bench/bench_pytorch.py --config gpt2-124m -b 16 -t 1024 [--compile] [--attention xsa]
Prints one JSON line per mode with tokens/s and step time (on a CPU also the median and
minimum of the steps, wall and CPU time, as `xsagpt bench --json` gives them).
"""
import argparse
import importlib.util
import json
import pathlib
import statistics
import sys
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load_reference_package(folder: pathlib.Path) -> None:
    """Makes `reference` the package in `folder` (scripts/reference/, the PyTorch model
    the tests check the C++ model against), loaded from its file: scripts/ is no package
    and this script changes no search path, so the same import works under a bare
    machine's system python3 (bench_gpu.sh). The tests find it through pytest.ini."""
    if "reference" in sys.modules:
        return
    spec = importlib.util.spec_from_file_location("reference", folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    sys.modules["reference"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules["reference"])


load_reference_package(ROOT / "scripts" / "reference")
from reference.model import ATTENTION_KINDS, GPT, GPTConfig  # noqa: E402


def load_model_config(name: str) -> dict:
    path = pathlib.Path(name)
    if not path.exists():
        path = ROOT / "configs" / "model" / (name if name.endswith(".json") else name + ".json")
    if not path.exists():
        sys.exit(f"bench_pytorch.py: model config '{name}' not found")
    return json.loads(path.read_text())


def bench(name: str, cfg: GPTConfig, batch: int, seq: int, steps: int, warmup: int, compile_: bool, device: str) -> dict:
    torch.manual_seed(0)
    model = GPT(cfg).to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    fwd = torch.compile(model) if compile_ else model
    bf16 = device == "cuda"
    x = torch.randint(0, cfg.vocab_size, (batch, seq), device=device)
    y = torch.randint(0, cfg.vocab_size, (batch, seq), device=device)

    def step():
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=bf16):
            _, loss = fwd(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(warmup):
        step()
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    # On a CPU each step is also timed alone, wall and process CPU time, as `xsagpt bench`
    # times its steps there: a median over steps and a CPU time that leaves out the waits for
    # a core on a shared machine. A GPU's steps run ahead of the host, so only the mean is
    # measured there.
    wall, cpu = [], []
    t0 = time.perf_counter()
    for _ in range(steps):
        w0, c0 = time.perf_counter(), time.process_time()
        step()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    if device == "cuda":
        torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / steps
    out = {"config": name, "mode": "compiled" if compile_ else "eager", "attention": cfg.attention, "batch": batch, "seq_len": seq,
           "step_s": dt, "tokens_per_s": batch * seq / dt, "device": torch.cuda.get_device_name() if bf16 else "cpu",
           "torch": torch.__version__}
    if device == "cuda":
        out["peak_mem_gib"] = torch.cuda.max_memory_allocated() / 2**30
    else:
        out.update(threads=torch.get_num_threads(), median_ms=1e3 * statistics.median(wall), min_ms=1e3 * min(wall),
                   cpu={"median_ms": 1e3 * statistics.median(cpu), "min_ms": 1e3 * min(cpu)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="gpt2-124m", help="name in configs/model/ or a JSON file")
    ap.add_argument("-b", "--batch", type=int, default=16)
    ap.add_argument("-t", "--seq-len", type=int, default=1024)
    ap.add_argument("--attention", choices=list(ATTENTION_KINDS), help="override the config's attention")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--compile", action="store_true", help="also time torch.compile")
    ap.add_argument("--compile-only", action="store_true",
                    help="time only torch.compile's step; with --steps 1 --warmup 1 it fills Inductor's cache for a "
                         "later timed run (the one-call GPU verdict's warm-up)")
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                    help="auto: CUDA when present (bf16 autocast), else the CPU (fp32)")
    ap.add_argument("--threads", type=int, help="CPU threads for ATen's ops (default: torch's, one per core); "
                    "1 to compare with `xsagpt bench --threads 1`")
    args = ap.parse_args()
    if args.threads is not None:
        if args.threads < 1:
            ap.error("--threads: must be >= 1")
        torch.set_num_threads(args.threads)
    d = load_model_config(args.config)
    if args.attention:
        d["attention"] = args.attention
    cfg = GPTConfig.from_dict(d, args.config)
    device = args.device if args.device != "auto" else "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: no CUDA device is available")
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    modes = [True] if args.compile_only else [False, True] if args.compile else [False]
    for compile_ in modes:
        print(json.dumps(bench(args.config, cfg, args.batch, args.seq_len, args.steps, args.warmup, compile_, device)), flush=True)


if __name__ == "__main__":
    main()
