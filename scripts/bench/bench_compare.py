#!/usr/bin/env python3
"""Side-by-side table of training-step throughput: xsagpt (`xsagpt bench --json`
step results) against the same architecture in PyTorch (`scripts/bench/bench_pytorch.py`
JSON lines, eager and torch.compile), matched by config, batch and sequence length.
Ratios are within one machine and session; scripts/bench/bench_gpu.sh prints it last.

    .venv/bin/python scripts/bench/bench_compare.py out/gpu/step-*.json --pytorch out/gpu/pytorch.jsonl
"""
import argparse
import json
import pathlib
import sys


def fmt_rate(x):
    return f"{x / 1e3:,.1f}K" if x is not None else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("xsagpt_json", nargs="+", type=pathlib.Path, help="xsagpt bench --json files with a step result")
    ap.add_argument("--pytorch", type=pathlib.Path, help="bench_pytorch.py output (JSON lines)")
    args = ap.parse_args()

    torch_rows = {}
    if args.pytorch:
        for line in args.pytorch.read_text().splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                torch_rows[(r["config"], r["batch"], r["seq_len"], r["attention"], r["mode"])] = r["tokens_per_s"]

    print("| config | batch x T | variant | tokens/s | time / first | memory / first | MFU | PyTorch eager | "
          "PyTorch compiled | xsagpt / eager | xsagpt / compiled |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for path in args.xsagpt_json:
        data = json.loads(path.read_text())
        step = data.get("step")
        if not step:
            sys.exit(f"bench_compare.py: {path} has no training-step result (ran with --no-step?)")
        B, T, cfg = step["micro_batch"], step["seq_len"], step["config"]
        options = [f"checkpointing {step['recompute']}"] if step.get("recompute", "none") != "none" else []
        options += [f"loss chunk {step['loss_chunk']}"] if step.get("loss_chunk") else []
        label = f"{cfg} ({', '.join(options)})" if options else cfg
        for v, r in step["results"].items():
            # A variant is KIND[-IMPL][@KERNELS] (`xsagpt bench --help`): the PyTorch rows are by kind.
            attention = v.split("@")[0].split("-")[0]
            eager = torch_rows.get((cfg, B, T, attention, "eager"))
            compiled = torch_rows.get((cfg, B, T, attention, "compiled"))
            ratio = step.get("ratios", {}).get(v, {})
            mfu = f"{100 * r['mfu']:.1f}%" if r.get("mfu") is not None else "-"
            vs_eager = f"{r['tokens_per_s'] / eager:.3f}" if eager else "-"
            vs_compiled = f"{r['tokens_per_s'] / compiled:.3f}" if compiled else "-"
            print(f"| {label} | {B} x {T} | {v} | {fmt_rate(r['tokens_per_s'])} | "
                  f"{ratio.get('time', 1.0):.3f} | {ratio.get('memory') or 1.0:.3f} | {mfu} | "
                  f"{fmt_rate(eager)} | {fmt_rate(compiled)} | {vs_eager} | {vs_compiled} |")


if __name__ == "__main__":
    main()
