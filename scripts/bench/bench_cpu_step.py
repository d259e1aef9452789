#!/usr/bin/env python3
"""xsagpt's CPU training step against the same step in plain PyTorch eager
(bench_pytorch.py), at the sizes of the CPU ladder, the two alternated.

The rungs are those of configs/sweeps/ladder-cpu.json: depth d, d_model 8 d, heads of 8,
a 2,048-word vocabulary, micro-batch 8 x 128 tokens, fp32 (its dry run prints them). Each
round starts one `xsagpt bench` process and one bench_pytorch.py process per rung, one
thread each, pinned to one core (--cpu), the side that goes first alternating from round
to round so that a drift in the machine's load falls on both. Each process times --steps
steps after --warmup; a round's figure is the median step. The table gives each side's
median over the rounds and its best round, and the speed-up (PyTorch's step time over
xsagpt's, above 1 where xsagpt is faster) from each, for wall time and for the process's
CPU time, which leaves out the time spent waiting for a core on a shared machine. The
load average is printed at the start and the end.

    .venv/bin/python scripts/bench/bench_cpu_step.py [--rungs 2,3,4,5,6] [--rounds 5] [--cpu 1] [--json out.json]
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]


def rung_model(depth: int, args) -> dict:
    d_model = depth * args.aspect
    return {"vocab_size": args.vocab, "block_size": args.seq_len, "n_layer": depth, "d_model": d_model,
            "n_head": d_model // args.head_dim, "head_dim": args.head_dim, "attention": args.attention}


def run(cmd: list, cpu) -> str:
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, preexec_fn=pin)
    if proc.returncode != 0:
        sys.exit(f"bench_cpu_step.py: {' '.join(map(str, cmd))} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return proc.stdout


def xsagpt_step(model: pathlib.Path, work: pathlib.Path, args) -> tuple:
    out = work / "xsagpt.json"
    run([args.xsagpt, "bench", "--device", "cpu", "--threads", 1, "--no-block", "--step-config", model,
         "--step-batch", args.batch, "--step-seq-len", args.seq_len, "--variants", args.attention,
         "--warmup", args.warmup, "--iters", args.steps, "--json", out], args.cpu)
    r = json.loads(out.read_text())["step"]["results"][args.attention]
    return r["median_ms"], r["cpu"]["median_ms"]


def pytorch_step(model: pathlib.Path, args) -> tuple:
    out = run([args.python, ROOT / "scripts" / "bench" / "bench_pytorch.py", "--config", model, "-b", args.batch,
               "-t", args.seq_len, "--device", "cpu", "--threads", 1, "--warmup", args.warmup, "--steps", args.steps],
              args.cpu)
    r = json.loads(out.strip().splitlines()[-1])
    return r["median_ms"], r["cpu"]["median_ms"]


def summary(xs: list, ts: list) -> dict:
    """Per side the median and best of the rounds' step times; the speed-ups from each."""
    xm, xb, tm, tb = statistics.median(xs), min(xs), statistics.median(ts), min(ts)
    return {"xsagpt_ms": {"median": xm, "best": xb, "rounds": xs},
            "pytorch_ms": {"median": tm, "best": tb, "rounds": ts},
            "speedup": {"median": tm / xm, "best": tb / xb}}


def cpu_model() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rungs", default="2,3,4,5,6", help="depths (ladder-cpu.json's by default)")
    ap.add_argument("--aspect", type=int, default=8, help="d_model = aspect x depth")
    ap.add_argument("--head-dim", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("-b", "--batch", type=int, default=8)
    ap.add_argument("-t", "--seq-len", type=int, default=128)
    ap.add_argument("--attention", default=None,
                    help="model.attention of both sides (default: the first kind `xsagpt config --json` lists)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per process")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--cpu", type=int, default=None, help="pin every process to this core (default: not pinned)")
    ap.add_argument("--xsagpt", type=pathlib.Path,
                    default=ROOT / os.environ.get("XSAGPT_BUILD_DIR", "build") / "xsagpt")
    ap.add_argument("--python", type=pathlib.Path, default=pathlib.Path(sys.executable),
                    help="the Python that runs bench_pytorch.py (default: this one)")
    ap.add_argument("--json", type=pathlib.Path, help="also write the results here")
    args = ap.parse_args()
    if args.attention is None:  # the model's default kind, read from the table rather than spelled here
        listed = subprocess.run([str(args.xsagpt), "config", "--json"], check=True, capture_output=True, text=True)
        args.attention = json.loads(listed.stdout)["attention_kinds"][0]["name"]
    try:
        rungs = [int(r) for r in args.rungs.split(",")]
    except ValueError:
        ap.error(f"--rungs: expected depths separated by commas, got {args.rungs!r}")
    if any(r < 1 for r in rungs) or args.rounds < 1 or args.steps < 1 or args.warmup < 0:
        ap.error("--rungs, --rounds and --steps must be >= 1, --warmup >= 0")
    if any((r * args.aspect) % args.head_dim for r in rungs):
        ap.error(f"--rungs: d_model = {args.aspect} x depth must be a multiple of --head-dim {args.head_dim}")
    if not args.xsagpt.is_file():
        ap.error(f"--xsagpt: {args.xsagpt} not found (bash scripts/setup.sh builds it)")

    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout
    head = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "commit": commit.strip(),
            "machine": cpu_model(), "load_start": load(),
            "pinned_cpu": args.cpu, "rounds": args.rounds, "steps": args.steps}
    print(f"bench_cpu_step: {head['date']}, commit {head['commit']}, {head['machine']}, {head['load_start']}", flush=True)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        models = {}
        for r in rungs:
            models[r] = work / f"d{r}.json"
            models[r].write_text(json.dumps(rung_model(r, args)))
        times = {r: {"xsagpt": [], "pytorch": []} for r in rungs}
        for k in range(args.rounds):
            for r in rungs:
                sides = [("xsagpt", lambda: xsagpt_step(models[r], work, args)),
                         ("pytorch", lambda: pytorch_step(models[r], args))]
                for side, measure in sides if k % 2 == 0 else sides[::-1]:
                    times[r][side].append(measure())
            print(f"  round {k + 1}/{args.rounds} done, {load()}", flush=True)
    for r in rungs:
        x, t = times[r]["xsagpt"], times[r]["pytorch"]
        results[f"d{r}"] = {"model": rung_model(r, args),
                            "wall": summary([w for w, _ in x], [w for w, _ in t]),
                            "cpu": summary([c for _, c in x], [c for _, c in t])}
    head["load_end"] = load()

    print(f"\nxsagpt's training step against PyTorch eager, {args.batch} x {args.seq_len} tokens, fp32, one thread, "
          f"{args.rounds} alternated rounds of {args.steps} steps (median of each), {args.attention}; "
          f"speed-up = PyTorch's time / xsagpt's")
    print("| rung | layers x d_model | xsagpt ms (median, best) | PyTorch ms (median, best) | speed-up (median, best) "
          "| CPU ms xsagpt | CPU ms PyTorch | CPU speed-up (median, best) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, res in results.items():
        w, c, m = res["wall"], res["cpu"], res["model"]
        print(f"| {name} | {m['n_layer']} x {m['d_model']} | {w['xsagpt_ms']['median']:.2f}, {w['xsagpt_ms']['best']:.2f} "
              f"| {w['pytorch_ms']['median']:.2f}, {w['pytorch_ms']['best']:.2f} "
              f"| {w['speedup']['median']:.3f}, {w['speedup']['best']:.3f} "
              f"| {c['xsagpt_ms']['median']:.2f} | {c['pytorch_ms']['median']:.2f} "
              f"| {c['speedup']['median']:.3f}, {c['speedup']['best']:.3f} |")
    print(f"{head['load_start']} at the start, {head['load_end']} at the end")
    if args.json:
        args.json.write_text(json.dumps({**head, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
