"""The verdict table on xsagpt's fused kernels, from whatever the stages of
the GPU verdict (scripts/bench/verdict/) have left in its results folder so far.

A kernel is default-worthy when every CUDA test that speaks for it passed (none
skipped), its 200-step run lands within LOSS_TOL of the same run on the ATen path,
and it is faster than ATen in every round of the step benchmark (the lower end of
its speed ratio is >= 1.0: one noisy run cannot flip a 1-2% kernel into the default).
A cell whose stage has not run says `pending`; one whose stage failed says
`FAILED (reason)`; the other cells of the row still stand.

A kernel that changes the arithmetic (fp8: FP8 GEMMs) is judged against the bf16
step it joins instead of ATen: its runs use train.kernels "fused,fp8", and its loss
and speed are compared with fused's, the loss within its own tolerance (0.02).

A kernel that needs another model (gelu: the tanh GELU of cuBLASLt's epilogues, so
model.gelu "tanh") is judged against "fused" on that same model: the baseline run
"tanh" (fused, model.gelu "tanh"; a parity run, no table row) and "fused,gelu" on the
same model, the parameter difference taken against tanh's; its speed comes from its
own step stage (step-gelu: fused against fused,gelu on tanh models at 124M and 0.7B).

The rows, and the CUDA tests that speak for each, are the program's kernel table as
`xsagpt config --json` lists it (Plan): read from the binary under test once it is
built or unpacked, and kept in the results folder (kernels.json) for the table.
"""
import fnmatch
import json
import pathlib

# The plan and the results folder (verdict/plan.py, in the package beside this file); MODEL,
# BASELINE_RUNS and config_json are read here by the verdict's stages and the tests too.
from verdict.plan import BASELINE_RUNS, MODEL, Plan, Results, config_json, read_json  # noqa: F401

ROOT = pathlib.Path(__file__).resolve().parents[2]
LOSS_TOL, SPEED_MIN = 0.01, 1.0
# Loss tolerances where they are not LOSS_TOL: FP8's rounding moves the loss more.
LOSS_TOLS = {"fp8": 0.02}
# The stage that writes each bench --json file the table reads speed ratios from.
FILE_STAGE = {"step-124m": "step-124m", "kernels-124m": "step-kernels", "candidates-124m": "step-candidates",
              "candidates-0.7b": "step-candidates", "gelu-step-124m": "step-gelu", "gelu-step-0.7b": "step-gelu"}


def tests_cell(kernel: str, r: Results) -> tuple[str, bool]:
    if (m := r.missing("tests")) and not (r.res / "cuda-tests.json").exists():
        return m, False
    results = read_json(r.res / "cuda-tests.json") or {}
    patterns = r.plan.tests.get(kernel, ())
    mine = [v for n, v in results.items() if any(fnmatch.fnmatchcase(n, p) for p in patterns)]
    if not mine:
        return "none ran", False
    bad = {s: mine.count(s) for s in ("fail", "crash", "skip") if mine.count(s)}
    cell = f"{mine.count('pass')}/{len(mine)} pass" + "".join(f", {n} {s.upper()}" for s, n in bad.items())
    return cell, not bad


def parity(kernel: str, r: Results) -> dict | str:
    """The parity run's summary, or the text its cells show."""
    return r.missing(f"parity-{kernel}") or read_json(r.res / f"parity-{kernel}.json") or "FAILED (no summary)"


def speed_ratios(kernel: str, r: Results, file: str | None = None) -> list[float] | str:
    """The baseline's step time (aten's, or fused's for fp8 and gelu) over the kernel's,
    one per round of the 124M step benchmark (or of `file`)."""
    file = file or r.plan.step_file.get(kernel, "step-124m")
    if m := r.missing(FILE_STAGE.get(file, "step-124m")):
        return m
    step = (read_json(r.res / f"{file}.json") or {}).get("step", {})
    results = step.get("results", {})
    base, mine = results.get(r.plan.variant(r.plan.baseline.get(kernel, "aten"))), results.get(r.plan.variant(kernel))
    if not base or not mine:
        return "FAILED (variant missing)"
    return [b / k for b, k in zip(base.get("round_ms", [base["median_ms"]]), mine.get("round_ms", [mine["median_ms"]]))]


def kernel_rows(r: Results, dry_run: bool) -> list[str]:
    rows = ["| kernel | tests | loss Δ | max param Δ | speed ratio (rounds) | verdict |", "|---|---|---|---|---|---|"]
    for k in r.plan.kernels:
        base = parity(r.plan.baseline.get(k, "aten"), r)
        tests, tests_ok = tests_cell(k, r)
        p = parity(k, r)
        if isinstance(p, str) or isinstance(base, str):
            dloss, dparam, loss_ok = (p if isinstance(p, str) else base), "-", None
        else:
            d = p["val"] - base["val"]
            dloss, dparam, loss_ok = f"{d:+.4f}", f"{p['max_param_diff']:.3g}", abs(d) <= LOSS_TOLS.get(k, LOSS_TOL)
        sr = speed_ratios(k, r)
        if isinstance(sr, str):
            speed, speed_ok = sr, None
        else:
            speed = f"{min(sr):.3f}–{max(sr):.3f} (n={len(sr)})" if len(sr) > 1 else f"{sr[0]:.3f} (n=1)"
            speed_ok = min(sr) >= SPEED_MIN and len(sr) >= 3
        if dry_run:
            verdict = "dry run"
        elif tests_ok and loss_ok and speed_ok:
            verdict = "**default-worthy**"
        elif loss_ok is None or speed_ok is None or tests.startswith("pending"):
            verdict = "pending"
        else:
            why = [w for w, ok in (("tests", tests_ok), ("loss", loss_ok), ("speed", speed_ok)) if not ok]
            verdict = "not yet (" + ", ".join(why) + ")"
        rows.append(f"| {k} | {tests} | {dloss} | {dparam} | {speed} | {verdict} |")
    return rows


def candidate_rows(r: Results) -> list[str]:
    """The kernels outside "auto" at both sizes, each against its baseline in the same
    bench process (aten for one inside "fused", fused for one outside): tokens/s and the
    paired rounds' ratio, baseline time / kernel time."""
    rows = []
    for size in ("124m", "0.7b"):
        step = (read_json(r.res / f"candidates-{size}.json") or {}).get("step") or {}
        res = step.get("results", {})
        if not res:
            continue
        if not rows:
            rows = ['The kernels outside "auto", each against its baseline (`aten` for one inside "fused", `fused` '
                    "for one outside), tokens/s:", "",
                    "| model, batch x T | variant | tokens/s | baseline | baseline tokens/s | ratio (rounds) | MFU |",
                    "|---|---|---|---|---|---|---|"]
        shape = f"{pathlib.Path(str(step.get('config'))).stem}, {step.get('micro_batch')} x {step.get('seq_len')}"
        for v, t in res.items():
            attention, _, kernels = v.partition("@")
            if kernels in ("aten", "fused"):
                continue
            base_name = f"{attention}@{'fused' if '+' in kernels else 'aten'}"
            base = res.get(base_name)
            if not base:
                continue
            ratios = [b / k for b, k in zip(base.get("round_ms", [base["median_ms"]]), t.get("round_ms", [t["median_ms"]]))]
            ratio = f"{min(ratios):.3f}–{max(ratios):.3f} (n={len(ratios)})"
            mfu = f"{100 * t['mfu']:.1f}%" if t.get("mfu") is not None else "-"
            rows.append(f"| {shape} | {v} | {t['tokens_per_s'] / 1e3:,.1f}K | {base_name} | "
                        f"{base['tokens_per_s'] / 1e3:,.1f}K | {ratio} | {mfu} |")
    return rows


def gelu_rows(r: Results) -> list[str]:
    """The gelu kernel on tanh-GELU models at both sizes: fused+gelu against fused,
    tokens/s and the paired rounds' ratios."""
    rows = []
    for size in ("124m", "0.7b"):
        step = (read_json(r.res / f"gelu-step-{size}.json") or {}).get("step") or {}
        res = step.get("results", {})
        base, mine = res.get(r.plan.variant("tanh")), res.get(r.plan.variant("gelu"))
        if not base or not mine:
            continue
        if not rows:
            rows = ['The gelu kernel on models with model.gelu "tanh", `fused` against `fused,gelu` (XSA), '
                    "tokens/s:", "", "| model, batch x T | `fused` | `fused,gelu` | ratio (rounds) |", "|---|---|---|---|"]
        sr = speed_ratios("gelu", r, f"gelu-step-{size}")
        ratio = "-" if isinstance(sr, str) else f"{min(sr):.3f}–{max(sr):.3f} (n={len(sr)})"
        rows.append(f"| {pathlib.Path(str(step.get('config'))).stem}, {step.get('micro_batch')} x {step.get('seq_len')} | "
                    f"{base['tokens_per_s'] / 1e3:,.1f}K | {mine['tokens_per_s'] / 1e3:,.1f}K | {ratio} |")
    return rows


def stage_rows(r: Results, order: list[str]) -> list[str]:
    rows = ["| stage | status | seconds | note |", "|---|---|---|---|"]
    for name in order:
        s = r.stages.get(name, {})
        secs = f"{s['seconds']:.0f}" if "seconds" in s else "-"
        rows.append(f"| {name} | {s.get('status', 'pending')} | {secs} | {s.get('reason', '')} |")
    return rows


def micro_rows(r: Results) -> list[str]:
    micro = (read_json(r.res / "micro.json") or {}).get("micro")
    if not micro:
        return []
    rows = [f"Each kernel alone ({micro['implementation']}), against a device copy at "
            f"{micro['copy_gb_per_s']:.0f} GB/s (read + written):", "",
            "| kernel | shape | MiB moved | ms | GB/s | of copy |", "|---|---|---|---|---|---|"]
    for m in micro["rows"]:
        rows.append(f"| {m['kernel']} | {m['shape']} | {m['bytes'] / 2**20:.1f} | {m['ms']:.4f} | "
                    f"{m['gb_per_s']:.0f} | {100 * m['of_copy']:.0f}% |")
    return rows


def pytorch_rates(r: Results) -> dict:
    """{(config, attention, mode): tokens/s} from the pytorch-* stages' JSON lines."""
    rates = {}
    for path in sorted(r.res.glob("pytorch-*.jsonl")):
        for line in path.read_text().splitlines():
            if line.startswith("{"):
                row = json.loads(line)
                rates[(row["config"], row["attention"], row["mode"])] = row["tokens_per_s"]
    return rates


def default_rows(r: Results) -> list[str]:
    """What a user gets: the default kernels (`auto`) against ATen, PyTorch eager and
    torch.compile, SA and XSA at each size measured, and XSA's cost over SA."""
    torch_rates = pytorch_rates(r)
    rows = []
    for path in sorted(r.res.glob("step-*.json")):
        data = read_json(path) or {}
        step = data.get("step") or {}
        res = step.get("results", {})
        if not res:
            continue
        if not rows:
            rows = [f"The default, `train.kernels` \"auto\" (here: {data.get('kernels', '?')}), tokens/s:", "",
                    "| model, batch x T | attention | `aten` | default | MFU | PyTorch eager | torch.compile | "
                    "default / compile | XSA / SA time |", "|---|---|---|---|---|---|---|---|---|"]
        cfg, shape = step.get("config"), f"{step.get('micro_batch')} x {step.get('seq_len')}"
        for attention in ("sa", "xsa"):
            mine, aten = res.get(attention), res.get(f"{attention}@aten")
            if not mine:
                continue
            eager, compiled = (torch_rates.get((cfg, attention, m)) for m in ("eager", "compiled"))
            fmt = lambda x: f"{x / 1e3:,.1f}K" if x else "pending"
            vs = f"{mine['tokens_per_s'] / compiled:.3f}" if compiled else "pending"
            cost = "-"
            if attention == "xsa" and res.get("sa"):
                cost = f"{mine['median_ms'] / res['sa']['median_ms']:.3f}"
            mfu = f"{100 * mine['mfu']:.1f}%" if mine.get("mfu") is not None else "-"
            rows.append(f"| {cfg}, {shape} | {attention} | {fmt(aten and aten['tokens_per_s'])} | "
                        f"{fmt(mine['tokens_per_s'])} | {mfu} | {fmt(eager)} | {fmt(compiled)} | {vs} | {cost} |")
    return rows


def profile_rows(r: Results) -> list[str]:
    """The profiled steps' device time by category (`xsagpt bench --profile`): each
    variant the profile stage ran, `fused` beside `fused+fp8`, so that FP8's GEMMs stand
    against the quantize kernels that feed them."""
    profiles = []
    for path in sorted(r.res.glob("profile-*.json")):
        data = read_json(path) or {}
        for variant, p in sorted(((data.get("profile") or {}).get("results") or {}).items()):
            profiles.append((data["profile"].get("config", path.stem), variant, p))
    if not profiles:
        return []
    # The program's categories in its order; any this list lacks after them.
    cats = list(CATEGORIES) + sorted({c for *_, p in profiles for c in p.get("categories", {})} - set(CATEGORIES))
    rows = ["Where the step's time goes (`xsagpt bench --profile`), ms per step:", "",
            "| model | variant | total | " + " | ".join(cats) + " |", "|---|---|---|" + "---|" * len(cats)]
    for config, variant, p in profiles:
        got, total = p.get("categories", {}), p.get("total_ms") or 0
        cells = [f"{got.get(c, 0):.2f} ({100 * got.get(c, 0) / total:.0f}%)" if total else "-" for c in cats]
        rows.append(f"| {config} | {variant} | {total:.2f} | " + " | ".join(cells) + " |")
    return rows


# The profile's categories, in the order its table lists them (kProfileCategories in
# src/bench/step_profile.h).
CATEGORIES = ("gemm", "quantize", "attention", "norm", "elementwise", "optimizer", "copies", "other")


def render(res: pathlib.Path, order: list[str], dry_run: bool, header: list[str], plan: Plan | None = None) -> str:
    r = Results(res, plan)
    md = header + ["", f"Default-worthy: every CUDA test of the kernel passes, the final val loss of a 200-step XSA "
                       f"run on the KJV shards is within {LOSS_TOL} of `aten`'s (same seed), and the 124M step is "
                       f"faster than `aten`'s in every one of at least 3 paired rounds (ratio = aten time / kernel "
                       f"time, lowest round >= {SPEED_MIN}).", ""]
    if defaults := default_rows(r):
        md += defaults + [""]
    md += kernel_rows(r, dry_run) if r.plan else [
        "No kernel rows yet: they come from the built program (`xsagpt config --json`), after the build stage."]
    if candidates := candidate_rows(r):
        md += [""] + candidates
    if r.plan and (gelu := gelu_rows(r)):
        md += [""] + gelu
    if prof := profile_rows(r):
        md += [""] + prof
    if micro := micro_rows(r):
        md += [""] + micro
    summary = res / "summary.md"
    if summary.exists():
        md += ["", "Training step beside PyTorch (scripts/bench/bench_compare.py):", "", summary.read_text().strip()]
    md += ["", "Stages:", ""] + stage_rows(r, order)
    return "\n".join(md) + "\n"
