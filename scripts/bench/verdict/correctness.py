"""The correctness stages: the CUDA tests (a process per suite), compute-sanitizer over
the kernel tests, and the parity runs (a kernel's 200 training steps against the same
run on ATen, or on its baseline's path)."""
import json
import pathlib
import re
import shutil
import statistics
import subprocess
import time

import verdict_table

from .ledger import BIN, ROOT, TESTS, Ledger, StageFailed
from .sizes import parity_size

# Every test that needs a GPU has "Cuda" in its name (skipped elsewhere), so a new one is
# run here without this list changing; the few CPU tests the pattern also matches are cheap.
CUDA_TESTS = "*Cuda*:SdpaBackend.*"
# The tests compute-sanitizer runs: the kernels called directly, at test sizes
# (the whole-model tests would take the stage's minutes many times over).
SANITIZER_TESTS = "KernelsCuda.RopeQkv*:KernelsCuda.AddNormForward*:KernelsCuda.CrossEntropy*:XsaCuda.Forward*:XsaCuda.Backward*"


def tests(v: Ledger, timeout):
    """Each CUDA test suite in its own process, so a sticky CUDA error (an illegal
    address poisons the context) is charged to its own suite; a suite whose process
    dies without a report runs again one test per process, to blame the right test."""
    t_end = time.monotonic() + timeout
    listing = v.sh("tests", [TESTS, f"--gtest_filter={CUDA_TESTS}", "--gtest_list_tests"], 60)
    out_dir = v.res / "tests"
    out_dir.mkdir(exist_ok=True)
    results = {}

    def run(filter_, report):
        try:
            p = v.procs.run([TESTS, f"--gtest_filter={filter_}", f"--gtest_output=json:{report}"],
                            max(1.0, t_end - time.monotonic()), ROOT, v.env)
            v.append_log(v.res / "tests.log", p.stdout + p.stderr)
            return p.returncode
        except subprocess.TimeoutExpired:
            return "timeout"

    for suite, names in parse_gtest_listing(listing).items():
        report = out_dir / f"{suite.replace('/', '_')}.json"
        rc = run(":".join(f"{suite}.{n}" for n in names), report)  # the listed tests only, not the suite's others
        got = gtest_results(report)
        if rc not in (0, 1) or not got:  # 1: failures, reported; anything else: it died
            for n in names:
                one = out_dir / f"{suite.replace('/', '_')}.{n.replace('/', '_')}.json"
                rc1 = run(f"{suite}.{n}", one)
                got.update(gtest_results(one) or {f"{suite}.{n}": "crash" if rc1 != "timeout" else "timeout"})
        results.update(got)
    (v.res / "cuda-tests.json").write_text(json.dumps(results, indent=1) + "\n")
    bad = sorted(n for n, r in results.items() if r not in ("pass", "skip"))
    if bad:
        raise StageFailed(f"{len(bad)} of {len(results)} failed: {', '.join(bad)[:200]}")


def sanitizer(v: Ledger, timeout):
    tool = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if not pathlib.Path(tool).exists():
        raise StageFailed("compute-sanitizer not found (part of the full CUDA toolkit; the GPU machine has it)")
    if v.dry:  # no GPU to check: show the tool is there and what would run
        v.sh("sanitizer", [tool, "--version"], timeout)
        return
    for kind in ("memcheck", "racecheck"):
        v.sh("sanitizer", [tool, "--tool", kind, "--error-exitcode", "9", str(TESTS),
                           f"--gtest_filter={SANITIZER_TESTS}"], timeout / 2)


def parse_gtest_listing(listing: str) -> dict[str, list[str]]:
    """--gtest_list_tests as {suite: [test, ...]}. A suite line is a name ending in '.'
    (a typed suite adds '  # TypeParam = ...'); a test line is indented. Anything else,
    such as gtest_main's "Running main() from ..." banner, is no suite."""
    suites, suite = {}, None
    for line in listing.splitlines():
        head = line.split("#")[0].rstrip()
        if re.fullmatch(r"[A-Za-z_][\w/]*\.", head):
            suite = head[:-1]
            suites[suite] = []
        elif suite and line.startswith(" ") and head.strip():
            suites[suite].append(head.strip())
        else:
            suite = None if line.strip() else suite
    return suites


def gtest_results(path: pathlib.Path) -> dict:
    """gtest's --gtest_output=json as {name: 'pass' | 'fail' | 'skip'}; {} if absent."""
    data = verdict_table.read_json(path)
    out = {}
    for suite in (data or {}).get("testsuites", []):
        for t in suite.get("testsuite", []):
            name = f"{suite['name']}.{t['name']}"
            out[name] = "fail" if t.get("failures") else "skip" if t.get("result") == "SKIPPED" else "pass"
    return out


def parity_args(v: Ledger, kernel: str) -> list[str]:
    size = parity_size(v)
    sets = {"model.base": size.pop("base"), "model.attention": "xsa", "train.ckpt_interval": 0,
            "train.keep_checkpoints": 1, "train.kernels": v.plan.train_kernels(kernel),
            **{f"train.{k}": x for k, x in size.items()},
            **{f"model.{k}": x for k, x in verdict_table.MODEL.get(kernel, {}).items()}}
    if v.broken == f"parity-{kernel}":
        sets["train.kernels"] = "broken-on-purpose"
    return [a for k, x in sets.items() for a in ("--set", f"{k}={x}")]


def parity(v: Ledger, kernel: str, timeout):
    """200 steps of gpt2-124m XSA with `kernel`, against the same run on ATen: final
    val loss, the largest parameter difference, tokens/s. The run's checkpoint (2 GB
    at 124M) is read once in scratch, then deleted; only JSON is kept."""
    import torch
    t_end = time.monotonic() + timeout
    # Parameters are compared with aten's, or with the baseline run's of the same
    # model for a kernel that needs another model (gelu against tanh).
    base = v.plan.baseline.get(kernel) if kernel in verdict_table.MODEL else None
    base = base if base in verdict_table.BASELINE_RUNS else "aten"
    ref = v.scratch / f"{base}-weights.pt"
    if kernel != "aten" and not ref.exists():  # a restarted machine lost it: make it again
        parity(v, base, timeout / 2)
    run = v.scratch / f"parity-{kernel}"
    v.sh(f"parity-{kernel}", [BIN, "train", "-c", "configs/runs/cpu-demo-sa.json", "--out", run, "--overwrite",
                              *parity_args(v, kernel)], t_end - time.monotonic())
    done = json.loads((run / "done.json").read_text())
    rates = [r["tokens_per_s"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
             if r.get("tokens_per_s") is not None]
    rates = rates[1:] or rates  # the first interval holds start-up
    ckpts = sorted((run / "checkpoints").glob("step_*.pt"))
    if not ckpts:
        raise StageFailed(f"{run}/checkpoints has no checkpoint")
    model = torch.load(ckpts[-1], weights_only=True, map_location="cpu")["model"]
    if kernel == "aten" or kernel in verdict_table.BASELINE_RUNS:
        torch.save(model, v.scratch / f"{kernel}-weights.pt")
    if kernel == "aten":
        diff = 0.0
    else:
        base = torch.load(ref, weights_only=True)
        if base.keys() != model.keys():
            raise StageFailed("the run's parameters differ in name from aten's")
        diff = max((model[k].double() - base[k].double()).abs().max().item() for k in model)
    summary = {"kernels": kernel, "val": done["final_val_loss"], "step": done.get("step"),
               "tok_s": statistics.median(rates) if rates else None, "max_param_diff": diff}
    (v.res / f"parity-{kernel}.json").write_text(json.dumps(summary, indent=1) + "\n")
    shutil.copy(run / "metrics.jsonl", v.res / f"parity-{kernel}.metrics.jsonl")
    shutil.rmtree(run)
