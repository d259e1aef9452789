#!/usr/bin/env python3
"""The whole GPU verdict in one call of a lent GPU (`bash scripts/bench/bench_gpu.sh lease`).

A lent GPU is 15 minutes of device time, the machine's start included, and one command
of at most 10. A cold build there takes about 200 s and torch.compile's first compiles
40-80 s a shape, so neither may sit on the critical path:

- the binaries come prebuilt for sm_90 from the CPU dev machine (`bench_gpu.sh pack`,
  carried as out/lease/) and run against the device's torch through LD_LIBRARY_PATH;
  only if they do not load is the project built there;
- phase A, correctness: the CUDA tests and the 200-step parity runs (aten, fused, the
  candidates fp8 and gelu, gelu after its baseline on a tanh-GELU model, then each
  kernel alone while time remains) run while torch.compile's first compiles of the
  PyTorch baseline fill Inductor's cache; nothing in it is timed for the table;
- phase B, timing, the GPU alone (PHASE_B): the default step against ATen at 124M and
  0.7B, the profile of fused beside fused+fp8, the kernels outside "auto" beside their
  baselines, the PyTorch steps eager and compiled (the cache now warm); then, if time
  remains, each kernel of "auto" alone, the gelu kernel's step, micro and the GPU demo.

On the H100 (2026-11-27 timings) the first call brings back the default's table, the
profile and the candidates' table in about 380 s of its 560, and the PyTorch stages
in most of the rest. Every stage is one of the verdict's (scripts/bench/verdict/), in the
order its needs allow (order_by_needs), with its state in out/gpu/. A stage that does
not fit the budget is `pending` and the table names the command that finishes it on
the warm machine; a failed stage leaves every other row. The budget (default 560 s)
keeps the command inside the device's 10 minutes with the bundle. Exit code 0 when
every stage asked for is done, 3 while one is pending, 1 when one failed; a signal
(`timeout`, Ctrl-C) or kill -9 takes the running stages' processes with it
(verdict/procs.py).

    python3 scripts/bench/lease.py [--budget S] [--only a,b] [--cpu-dry-run] [--retry-failed]
"""
import argparse
import glob
import os
import pathlib
import subprocess
import sys
import threading
import time

# The verdict's modules, in the package beside this file (verdict/__init__.py lists them).
from verdict import cli, machine, report
from verdict.ledger import BIN, ROOT, TESTS, Ledger, StageFailed
from verdict.procs import Stopped
from verdict.schedule import Verdict

PACK = ROOT / "out/lease"
# What the pack step lays out, linked into place on the device machine.
PACKED = ("build", "third_party", "data/kjv/shards")
# Phase B, in order of what the first call must bring back: the default against ATen
# at both sizes, the step's profile with fp8 beside fused, and the kernels outside
# "auto" beside their baselines; then the PyTorch baselines (eager and torch.compile on
# the cache phase A warmed), XSA first; then what was measured twice unchanged (each
# kernel of "auto" alone, on the H200 and the H100), the gelu kernel's step, the
# kernels in GB/s and the GPU demo, in this call if time remains or on the warm machine.
PHASE_B = ("step-124m", "step-0.7b", "profile", "step-candidates", "pytorch-124m-xsa", "pytorch-0.7b-xsa",
           "pytorch-124m-sa", "pytorch-0.7b-sa", "step-kernels", "step-gelu", "micro", "demo")
# torch.compile's first compile of each timed shape, (config, batch, T, attention), in
# streams that run at once: three above 100 GB of GPU memory (the two 0.7B compiles at
# ~35 GB each beside a 124M parity run), two below (one 0.7B compile at a time).
WARM_124M = (("gpt2-124m", 16, 1024, "xsa"), ("gpt2-124m", 16, 1024, "sa"))
WARM_07B = (("paper-0.7b", 8, 2048, "xsa"), ("paper-0.7b", 8, 2048, "sa"))
WARM_STREAMS = {3: (WARM_124M, WARM_07B[:1], WARM_07B[1:]), 2: (WARM_124M, WARM_07B)}
# Phase B's stages on a warm Inductor cache take seconds, not the minutes of a cold one.
WARM_ESTIMATES = {"pytorch-124m-sa": 30, "pytorch-124m-xsa": 40, "pytorch-0.7b-sa": 45, "pytorch-0.7b-xsa": 55}
# The two 0.7B compiles (52-77 s each, one after the other beside the rest) and the
# parity runs (aten, fused, fp8, tanh, gelu: 114 s on the H100, then single kernels)
# fit in it; at 140 s the second 0.7B compile was cut and its timed stage took 89 s.
PHASE_A_SECONDS = 150


def ranking(plan):
    """The lease's order of stages, as a key on their names for Verdict.stages (which
    then puts each after the stages it needs: a baseline run such as tanh just before
    its kernel): the tests and phase A's parity runs, the default's set and the kernels
    outside it first, then each kernel alone, those not yet through a verdict first;
    then phase B."""
    singles = sorted((k for k in plan.kernels if k != "fused" and k not in plan.baseline),
                     key=lambda k: k not in plan.candidates)
    names = ["preflight", "build", "tests", *(f"parity-{k}" for k in ("aten", "fused", *plan.baseline, *singles)),
             *PHASE_B]
    return lambda name: names.index(name) if name in names else len(names)


def link_pack() -> None:
    """Links the packed binaries, libraries and shards into place (before the
    preflight, which looks for them)."""
    for rel in PACKED:
        dst, src = ROOT / rel, PACK / rel
        if src.exists() and not dst.exists():
            if dst.is_symlink():  # left dangling by an earlier call
                dst.unlink()
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.symlink_to(src.resolve(), target_is_directory=True)


def device_env(v: Ledger) -> None:
    """Points the dynamic loader at the device's torch (its lib/ and the nvidia-* wheels'
    libraries), which the preflight has found importable."""
    import torch
    site = pathlib.Path(torch.__file__).resolve().parents[1]
    libs = [str(site / "torch/lib")] + sorted(glob.glob(str(site / "nvidia/*/lib")) +
                                              glob.glob(str(site / "nvidia/*/*/lib")))
    libs.append(str(ROOT / "third_party/usr/lib/x86_64-linux-gnu"))
    v.env["LD_LIBRARY_PATH"] = ":".join(libs + [v.env.get("LD_LIBRARY_PATH", "")]).rstrip(":")
    # The test binary was built elsewhere: its fixtures and xsagpt are found here.
    v.env["XSAGPT_SOURCE_DIR"] = str(ROOT)
    v.env["XSAGPT_BINARY"] = str(BIN)


def load_or_build(v: Ledger, timeout: float) -> None:
    """The build stage of a lease: the prebuilt binaries if they load and their device
    code runs on this GPU, else a build here (about 200 s on 16 cores)."""
    problem = binaries_problem(v)
    if problem is None:
        v.append_log(v.res / "build.log", "prebuilt binaries load and run here\n")
        return
    print(f"[lease] prebuilt binaries unusable ({problem}): building here", flush=True)
    if (ROOT / "build").is_symlink():
        (ROOT / "build").unlink()
    machine.build(v, timeout)
    if (problem := binaries_problem(v)) is not None:
        raise StageFailed(f"built, but {problem}")


def binaries_problem(v: Ledger) -> str | None:
    if not BIN.exists() or not TESTS.exists():
        return "no build/xsagpt or build/tests/xsagpt_tests (carry out/lease from `bench_gpu.sh pack`)"
    checks = [[BIN, "info", "-c", "tiny"], [TESTS, "--gtest_list_tests"]]
    if not v.dry:  # device code that does not fit this GPU shows only when a kernel runs
        checks.append([TESTS, "--gtest_filter=XsaCuda.ForwardMatchesFloat64FormulaInEveryLayout"])
    for cmd in checks:
        try:
            p = v.procs.run(cmd, 120, ROOT, v.env)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{pathlib.Path(str(cmd[0])).name}: {e}"
        out = p.stdout + p.stderr
        v.append_log(v.res / "build.log", f"$ {' '.join(map(str, cmd))}\n{out[-4000:]}")
        bad = [s for s in ("no kernel image", "invalid device function", "cannot open shared object",
                           "undefined symbol", "GLIBC") if s in out]
        # The kernel test's own verdict belongs to the tests stage: only a binary that
        # cannot load or run its device code here is a reason to build.
        if bad or (p.returncode != 0 and "--gtest_filter" not in str(cmd[-1])):
            return f"{pathlib.Path(str(cmd[0])).name} exited {p.returncode}{': ' + bad[0] if bad else ''}"
    return None


def warm_up(v: Ledger, deadline: float, wanted) -> list[threading.Thread]:
    """torch.compile's first compiles, concurrently with phase A, into the Inductor and
    AOTAutograd caches the timed pytorch stages then hit. Two streams on an 80 GB
    GPU, three above it (memory beside the parity runs). Outcomes go to warm.log."""
    if v.dry:
        return []  # no GPU: nothing to warm, and a CPU compile would take minutes
    import torch
    queues = WARM_STREAMS[3 if torch.cuda.get_device_properties(0).total_memory > 100 * 2**30 else 2]
    size = {"gpt2-124m": "124m", "paper-0.7b": "0.7b"}
    # Only the shapes whose timed stage this call may run.
    queues = [[w for w in q if wanted(f"pytorch-{size[w[0]]}-{w[3]}")] for q in queues]

    def log(line):
        with v.lock:  # streams append to one log
            v.append_log(v.res / "warm.log", line)

    def stream(queue):
        for cfg, b, t, attention in queue:
            left = deadline - time.monotonic()
            if left < 20:
                log(f"warm {cfg} {attention}: skipped, phase A's time is spent\n")
                continue
            t0 = time.monotonic()
            try:
                p = v.procs.run([v.py, "scripts/bench/bench_pytorch.py", "--config", cfg, "-b", str(b), "-t", str(t),
                                 "--attention", attention, "--compile-only", "--steps", "1", "--warmup", "1"],
                                left, ROOT, v.env)
                note = f"rc {p.returncode}" + ("" if p.returncode == 0 else f": {p.stderr.strip()[-300:]}")
            except subprocess.TimeoutExpired:
                note = f"stopped at phase A's end after {left:.0f} s (the timed stage compiles the rest)"
            except Stopped as e:
                note = str(e)
            log(f"warm {cfg} {b}x{t} {attention}: {time.monotonic() - t0:.0f} s, {note}\n")

    threads = [threading.Thread(target=stream, args=(q,), daemon=True) for q in queues]
    for th in threads:
        th.start()
    return threads


def lease(v: Verdict, only: list[str], retry_failed: bool, phase_a_seconds: float) -> int:
    head = {s.name: s for s in v.head()}
    head["build"].run = lambda t: load_or_build(v, t)
    head["build"].estimate = 20
    wanted = lambda name: not only or name in only

    if not v.dry:
        link_pack()
    if v.run_stage(head["preflight"], retry_failed) != "done":
        return v.finish(list(head), only)
    if not v.dry:
        device_env(v)
    if v.run_stage(head["build"], retry_failed) != "done":
        return v.finish(list(head), only)
    try:
        first = ranking(v.plan)
    except ValueError:
        first = None  # planned() names the problem
    planned = v.planned(False, only, first)
    if planned is None:
        return v.finish(list(head), only)
    stages = {s.name: s for s in planned}
    if not v.dry:
        for name, seconds in WARM_ESTIMATES.items():
            stages[name].estimate = seconds
    order = list(stages)
    phase_a = [n for n in order if n.startswith("parity-")]
    phase_b = [n for n in order if n not in (*head, "tests", *phase_a)]

    # Phase A: correctness beside the compiles. Parity runs one after another (each
    # holds a 124M model's training state), the tests in a thread beside them.
    deadline = time.monotonic() + phase_a_seconds
    warm = warm_up(v, deadline, lambda name: wanted(name) and v.state.get(name, {}).get("status") != "done")
    tests = threading.Thread(target=lambda: wanted("tests") and v.run_stage(stages["tests"], retry_failed, deadline))
    tests.start()
    for name in phase_a:
        if wanted(name):
            v.run_stage(stages[name], retry_failed, deadline)
    tests.join()
    for th in warm:
        th.join(max(0.0, deadline - time.monotonic()) + 5)
    print(f"[lease] phase A over at {v.budget - v.left():.0f} s; phase B: the timed stages, the GPU alone", flush=True)

    # Phase B: one stage at a time, in order of what the table needs most.
    report.save_results(v, order, only)
    for name in phase_b:
        if wanted(name) and v.run_stage(stages[name], retry_failed) != "pending":
            report.save_results(v, order, only)
    return v.finish(order, only)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.arguments(ap, 560, "preflight and build always run")
    ap.add_argument("--phase-a", type=float, help=f"seconds of phase A (default {PHASE_A_SECONDS}; dry run 120)")
    args = ap.parse_args()
    v = cli.open_results(Verdict, args, 560)
    v.command = "bash scripts/bench/bench_gpu.sh lease" + (" --cpu-dry-run" if v.dry else "")
    phase_a = args.phase_a if args.phase_a is not None else 120 if v.dry else PHASE_A_SECONDS
    sys.exit(lease(v, args.only, args.retry_failed, phase_a))


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
