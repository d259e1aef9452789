#!/usr/bin/env python3
"""The GPU verdict on xsagpt's fused kernels (scripts/bench_gpu.sh verdict): for each
kernel alone and for `fused`, whether its CUDA tests pass, how far a 200-step run with
it lands from the same run on the ATen path (final val loss, largest parameter
difference) and how fast it trains relative to that run. A kernel is default-worthy
when its tests pass, its loss is within 0.01 of ATen's and its speed ratio is >= 1.0.
Prints one table and writes it, with the step benchmark beside PyTorch, to verdict.md.

    python3 scripts/bench_verdict.py out/gpu --kernels weights,norm,rope,loss,xsa,xsa_wide,fused
"""
import argparse
import datetime
import json
import pathlib
import statistics
import subprocess
import sys

import torch

# Which CUDA tests speak for which kernel (gtest names, by prefix). The whole-model
# and training-step tests cover every kernel.
WHOLE = ("KernelsCuda.WholeModel", "KernelsCuda.TrainingSteps", "KernelsCuda.Resume")
TESTS = {
    "weights": ("KernelsCuda.CachedLinear",) + WHOLE,
    "norm": ("KernelsCuda.AddNorm",) + WHOLE,
    "rope": ("KernelsCuda.RopeQkv",) + WHOLE,
    "loss": ("KernelsCuda.CrossEntropy", "KernelsCuda.LMHeadLoss") + WHOLE,
    "xsa": ("XsaCuda.",) + WHOLE,
    "xsa_wide": ("XsaCuda.",) + WHOLE,
    "fused": ("KernelsCuda.", "XsaCuda."),
}
LOSS_TOL, SPEED_MIN = 0.01, 1.0


def test_results(path: pathlib.Path) -> dict:
    """gtest's --gtest_output=json: {name: 'pass' | 'fail' | 'skip'}."""
    out = {}
    data = json.loads(path.read_text())
    for suite in data.get("testsuites", []):
        for t in suite.get("testsuite", []):
            name = f"{suite['name']}.{t['name']}"
            if t.get("failures"):
                out[name] = "fail"
            elif t.get("result") == "SKIPPED":
                out[name] = "skip"
            else:
                out[name] = "pass"
    return out


def tests_cell(kernel: str, results: dict) -> tuple[str, bool]:
    mine = [v for n, v in results.items() if any(n.startswith(p) for p in TESTS[kernel])]
    if not mine:
        return "none ran", False
    passed, failed, skipped = mine.count("pass"), mine.count("fail"), mine.count("skip")
    cell = f"{passed}/{len(mine)} pass" + (f", {failed} FAIL" if failed else "") + (f", {skipped} skipped" if skipped else "")
    return cell, failed == 0 and skipped == 0


def run_summary(run: pathlib.Path) -> dict:
    done = json.loads((run / "done.json").read_text())
    rates = []
    for line in (run / "metrics.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("tokens_per_s") is not None:
            rates.append(r["tokens_per_s"])
    rates = rates[1:] or rates  # the first interval holds start-up and compilation
    ckpts = sorted((run / "checkpoints").glob("step_*.pt"))
    if not ckpts:
        sys.exit(f"bench_verdict.py: {run}/checkpoints has no checkpoint")
    model = torch.load(ckpts[-1], weights_only=True, map_location="cpu")["model"]
    return {"val": done["final_val_loss"], "tok_s": statistics.median(rates) if rates else None, "model": model,
            "step": done.get("step")}


def max_param_diff(a: dict, b: dict) -> float:
    if a.keys() != b.keys():
        sys.exit("bench_verdict.py: the runs' checkpoints hold different parameters")
    return max((a[k].double() - b[k].double()).abs().max().item() for k in a)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("res", type=pathlib.Path, help="results folder (out/gpu): parity-*/ runs, cuda-tests.json, step-*.json")
    ap.add_argument("--kernels", default="weights,norm,rope,loss,xsa,xsa_wide,fused")
    ap.add_argument("--dry-run", action="store_true", help="a CPU rehearsal: say so, decide nothing")
    args = ap.parse_args()
    res = args.res

    results = test_results(res / "cuda-tests.json")
    base = run_summary(res / "parity-aten")
    rows, details = [], []
    for k in args.kernels.split(","):
        r = run_summary(res / f"parity-{k}")
        tests, tests_ok = tests_cell(k, results)
        dloss = r["val"] - base["val"]
        ratio = r["tok_s"] / base["tok_s"] if r["tok_s"] and base["tok_s"] else float("nan")
        worthy = tests_ok and abs(dloss) <= LOSS_TOL and ratio >= SPEED_MIN
        verdict = "dry run" if args.dry_run else ("default-worthy" if worthy else "not yet")
        rows.append(f"| {k} | {tests} | {dloss:+.4f} | {ratio:.3f} | {verdict} |")
        details.append(f"| {k} | {r['val']:.4f} | {max_param_diff(r['model'], base['model']):.3g} | "
                       f"{r['tok_s']:,.0f} | {ratio:.3f} |")

    table = ["| kernel | tests | loss Δ | speed ratio | verdict |", "|---|---|---|---|---|"] + rows
    print("\n".join(table))

    gpu = "; ".join((res / "gpu.txt").read_text().split("\n")).strip("; ") if (res / "gpu.txt").exists() else "unknown"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    md = [f"### Fused kernels: the verdict{' (CPU dry run: nothing decided)' if args.dry_run else ''}", "",
          f"{datetime.date.today().isoformat()}, commit {commit or 'unknown'}. Machine: {gpu}.",
          "Command: `bash scripts/bench_gpu.sh verdict" + (" --cpu-dry-run" if args.dry_run else "") + "`.", "",
          f"Default-worthy: CUDA tests pass, final val loss within {LOSS_TOL} of `aten`, training speed >= "
          f"{SPEED_MIN}x `aten`. Runs: {base['step']} steps each, same seed, XSA on the KJV shards.", ""]
    md += table + ["", f"Parity runs (`aten`: val loss {base['val']:.4f}, {base['tok_s']:,.0f} tokens/s):", "",
                   "| kernels | final val loss | max abs parameter difference to aten | tokens/s | ratio |",
                   "|---|---|---|---|---|"] + details
    summary = res / "summary.md"
    if summary.exists():
        md += ["", "Training step beside PyTorch (scripts/bench_compare.py):", "", summary.read_text().strip()]
    (res / "verdict.md").write_text("\n".join(md) + "\n")
    print(f"\nwrote {res / 'verdict.md'}")


if __name__ == "__main__":
    main()
