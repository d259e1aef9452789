#!/usr/bin/env python3
"""The GPU verdict on xsagpt's fused kernels, in stages that fit a lent GPU's
10-minute command limit (`bash scripts/bench/bench_gpu.sh verdict` runs this).

A lent GPU comes rarely, for about 30 minutes, 10 minutes a command, and goes back
30 s after a call ends. So the verdict is a list of named stages, each bounded
(at most 6 minutes on a bare 16-core H200, the build included), whose results stay
in the results folder: running the same command again skips the stages already
done and does the next ones, so two or three calls in a row give the whole
verdict. A call starts no stage its remaining time cannot hold; every call ends by
printing the table with what is known so far (scripts/bench/verdict_table.py), missing
cells `pending`, failed ones `FAILED (reason)`. A failing stage never hides the
others' results. Nothing large is kept: parity runs' checkpoints live in a scratch
folder only until their parameter differences are taken, and the results folder
holds only text and JSON, so its bundle (in $OUT when the device tool sets it)
stays under 1 MiB; the bundler refuses anything else.

    python3 scripts/bench/bench_verdict.py [--cpu-dry-run] [--budget S] [--only a,b] [--retry-failed] [--sanitizer]

With --cpu-dry-run the same stages run here at tiny sizes (the CUDA tests skip,
nothing is decided), into out/gpu-dry-run/. XSAGPT_VERDICT_BREAK=STAGE breaks that
stage on purpose (its run gets an invalid setting), to see the others survive.
"""
import argparse
import datetime
import io
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import threading
import time

import verdict_table

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = ROOT / "build" / "xsagpt"
TESTS = ROOT / "build" / "tests" / "xsagpt_tests"
# A dry run's default budget: its stages are the device's, planned with the device's
# estimates, but no 10-minute command limit applies on this CPU, where the tiny sizes
# take other times (torch.compile's CPU compiles take minutes), so one call does them all.
DRY_BUDGET = 1800
BUNDLE_MAX = 1 << 20        # the results bundle: what comes back from the device machine
LOG_MAX = 128 << 10         # a stage's log keeps its last 128 KiB
TEXT = {".json", ".jsonl", ".md", ".txt", ".log"}
# Every test that needs a GPU has "Cuda" in its name (skipped elsewhere), so a new one is
# run here without this list changing; the few CPU tests the pattern also matches are cheap.
CUDA_TESTS = "*Cuda*:SdpaBackend.*"
# The tests compute-sanitizer runs: the kernels called directly, at test sizes
# (the whole-model tests would take the stage's minutes many times over).
SANITIZER_TESTS = "KernelsCuda.RopeQkv*:KernelsCuda.AddNormForward*:KernelsCuda.CrossEntropy*:XsaCuda.Forward*:XsaCuda.Backward*"

class StageFailed(Exception):
    pass


class Stage:
    """A named step: `estimate` seconds on a lent H100 or H200 (what the scheduler plans
    with), at most `cap` seconds (then it is stopped and marked failed), after the
    stages it `needs`."""

    def __init__(self, name, run, estimate, cap=360, needs=()):
        self.name, self.run, self.estimate, self.cap, self.needs = name, run, estimate, cap, needs


def order_by_needs(stages: list[Stage]) -> list[Stage]:
    """The stages in the order given, except that each comes after every stage it needs,
    a need not placed yet being placed just before it: the one rule by which both entry
    points, the verdict and the lease, order their stages. A need outside the list does
    not hold a stage back here (run_stage waits for it); a cycle is an error."""
    by_name = {st.name: st for st in stages}
    out, placed, open_ = [], set(), []

    def place(st: Stage):
        if st.name in placed:
            return
        if st.name in open_:
            raise ValueError(f"stages that need each other in a cycle: {' -> '.join(open_ + [st.name])}")
        open_.append(st.name)
        for need in st.needs:
            if need in by_name:
                place(by_name[need])
        open_.pop()
        placed.add(st.name)
        out.append(st)

    for st in stages:
        place(st)
    return out


class Verdict:
    def __init__(self, args):
        self.dry = args.cpu_dry_run
        self.res = (args.out or ROOT / ("out/gpu-dry-run" if self.dry else "out/gpu")).resolve()
        self.scratch = self.res.with_name(self.res.name + "-scratch")
        self.budget, self.t0 = args.budget, time.monotonic()
        self.res.mkdir(parents=True, exist_ok=True)
        self.state_path = self.res / "stages.json"
        self.state = verdict_table.read_json(self.state_path) or {}
        self.py = sys.executable
        self.env = dict(os.environ, PYTHONUNBUFFERED="1")
        if not self.dry:  # Hopper machine code unless told otherwise
            self.env.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
        self.broken = os.environ.get("XSAGPT_VERDICT_BREAK", "")
        self.command = "bash scripts/bench/bench_gpu.sh verdict" + (" --cpu-dry-run" if self.dry else "")
        self.lock = threading.Lock()
        self._plan = None

    @property
    def plan(self) -> verdict_table.Plan:
        """The kernel table of the binary under test (`xsagpt config --json`), saved
        beside the results for the table. Asked once the build stage has made or
        unpacked the binary: a bare machine has none before it, so the stages that
        depend on the rows are planned after the build. ValueError when it cannot be asked."""
        if self._plan is None:
            self._plan = verdict_table.Plan(verdict_table.config_json(BIN, self.env))
            self._plan.save(self.res)
        return self._plan

    def variants(self) -> dict[str, str]:
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
        pl = self.plan
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

    # ---- bookkeeping ---------------------------------------------------------
    def left(self) -> float:
        return self.budget - (time.monotonic() - self.t0)

    def record(self, name, status, seconds=None, reason=""):
        with self.lock:  # the one-call lease runs stages in threads
            self._record(name, status, seconds, reason)

    def _record(self, name, status, seconds, reason):
        entry = {"status": status, "reason": reason, "at": datetime.datetime.now().isoformat(timespec="seconds")}
        if seconds is not None:
            entry["seconds"] = round(seconds, 1)
        self.state[name] = entry
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=1) + "\n")
        tmp.replace(self.state_path)

    def sh(self, name: str, cmd: list, timeout: float, log: str | None = None, check=True, cwd=ROOT) -> str:
        """Runs cmd, its output appended to RES/<log or name>.log (the last LOG_MAX
        bytes kept); raises StageFailed naming the command on a non-zero exit."""
        path = self.res / f"{log or name}.log"
        with path.open("a") as f:
            f.write(f"$ {' '.join(map(str, cmd))}\n")
        try:
            p = subprocess.run([str(c) for c in cmd], cwd=cwd, env=self.env, capture_output=True, text=True,
                               timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired as e:
            self.append_log(path, (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""))
            raise
        self.append_log(path, p.stdout + p.stderr)
        if check and p.returncode != 0:
            last = [l for l in (p.stderr or p.stdout).strip().splitlines() if l.strip()][-1:] or ["no output"]
            raise StageFailed(f"{pathlib.Path(str(cmd[0])).name} exited {p.returncode}: {last[0][:160]}")
        return p.stdout

    @staticmethod
    def append_log(path: pathlib.Path, text: str):
        data = (path.read_text(errors="replace") if path.exists() else "") + text
        if len(data) > LOG_MAX:
            data = f"[... first {len(data) - LOG_MAX} characters dropped]\n" + data[-LOG_MAX:]
        path.write_text(data)

    # ---- stages --------------------------------------------------------------
    def preflight(self, timeout):
        """Everything a call needs, checked in seconds before anything is built."""
        missing = []
        try:
            p = subprocess.run([self.py, "-c", "import torch; print(torch.__version__, torch.version.cuda); "
                                "print(torch.cuda.get_device_name() if torch.cuda.is_available() else '')"],
                               capture_output=True, text=True, timeout=60)
            lines, why = p.stdout.splitlines(), (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        except (OSError, subprocess.TimeoutExpired) as e:
            lines, why = [], str(e)
        version, gpu = (lines + ["", ""])[:2]
        if not version:
            missing.append(f"{self.py} cannot import torch ({why[:160]})")
        elif not self.dry and not gpu:
            missing.append(f"no CUDA GPU visible to {self.py}'s torch (on a machine without one: --cpu-dry-run)")
        nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if pathlib.Path("/usr/local/cuda/bin/nvcc").exists() else None)
        if not nvcc and not self.dry:
            missing.append("nvcc not found (the CUDA toolkit)")
        if not self.dry and not (ROOT / "third_party/usr").is_dir():
            missing.append("third_party/ missing: run `bash scripts/maint/vendor_deps.sh` here and carry third_party")
        shards = ROOT / "data/kjv/shards"
        if not (shards / "val_000000.bin").exists() or not list(shards.glob("train_*.bin")):
            missing.append("data/kjv/shards/ missing: run `bash data/kjv/prepare.sh` here and carry data/kjv/shards")
        need_gb = 2 if self.dry else 20
        free_gb = shutil.disk_usage(ROOT).free / 2**30
        if free_gb < need_gb:
            missing.append(f"{free_gb:.0f} GiB free on disk, need {need_gb} (parity checkpoints, build, Inductor cache)")
        machine = (f"CPU dry run: {os.cpu_count()} cores" if self.dry else gpu or "no GPU") + f"; torch {version or '-'}"
        (self.res / "machine.txt").write_text(machine + "\n")
        if missing:
            raise StageFailed("; ".join(missing))

    def build(self, timeout):
        t = time.monotonic()
        if not (ROOT / "build/build.ninja").exists() or not self.dry:
            self.sh("build", ["cmake", "-S", ".", "-B", "build", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-Wno-dev"],
                    timeout)
        self.sh("build", ["cmake", "--build", "build", f"-j{os.cpu_count()}", "--target", "xsagpt", "xsagpt_tests"],
                timeout - (time.monotonic() - t))

    def tests(self, timeout):
        """Each CUDA test suite in its own process, so a sticky CUDA error (an illegal
        address poisons the context) is charged to its own suite; a suite whose process
        dies without a report runs again one test per process, to blame the right test."""
        t_end = time.monotonic() + timeout
        listing = self.sh("tests", [TESTS, f"--gtest_filter={CUDA_TESTS}", "--gtest_list_tests"], 60)
        suites = parse_gtest_listing(listing)
        out_dir = self.res / "tests"
        out_dir.mkdir(exist_ok=True)
        results = {}

        def run(filter_, report):
            try:
                p = subprocess.run([str(TESTS), f"--gtest_filter={filter_}", f"--gtest_output=json:{report}"],
                                   cwd=ROOT, env=self.env, capture_output=True, text=True,
                                   timeout=max(1.0, t_end - time.monotonic()))
                self.append_log(self.res / "tests.log", p.stdout + p.stderr)
                return p.returncode
            except subprocess.TimeoutExpired:
                return "timeout"

        for suite, names in suites.items():
            report = out_dir / f"{suite.replace('/', '_')}.json"
            rc = run(":".join(f"{suite}.{n}" for n in names), report)  # the listed tests only, not the suite's others
            got = gtest_results(report)
            if rc not in (0, 1) or not got:  # 1: failures, reported; anything else: it died
                for n in names:
                    one = out_dir / f"{suite.replace('/', '_')}.{n.replace('/', '_')}.json"
                    rc1 = run(f"{suite}.{n}", one)
                    got.update(gtest_results(one) or {f"{suite}.{n}": "crash" if rc1 != "timeout" else "timeout"})
            results.update(got)
        (self.res / "cuda-tests.json").write_text(json.dumps(results, indent=1) + "\n")
        bad = sorted(n for n, v in results.items() if v not in ("pass", "skip"))
        if bad:
            raise StageFailed(f"{len(bad)} of {len(results)} failed: {', '.join(bad)[:200]}")

    def sanitizer(self, timeout):
        tool = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
        if not pathlib.Path(tool).exists():
            raise StageFailed("compute-sanitizer not found (part of the full CUDA toolkit; the GPU machine has it)")
        if self.dry:  # no GPU to check: show the tool is there and what would run
            self.sh("sanitizer", [tool, "--version"], timeout)
            return
        for kind in ("memcheck", "racecheck"):
            self.sh("sanitizer", [tool, "--tool", kind, "--error-exitcode", "9", str(TESTS),
                                  f"--gtest_filter={SANITIZER_TESTS}"], timeout / 2)

    def dry_model(self) -> str:
        """The dry run's model: two layers of tiny, enough to go through every code path
        the real sizes take, at a fraction of a CPU's time."""
        path = self.scratch / "nano.json"
        if not path.exists():
            self.scratch.mkdir(parents=True, exist_ok=True)
            cfg = json.loads((ROOT / "configs/model/tiny.json").read_text())
            path.write_text(json.dumps(dict(cfg, n_layer=2, d_model=64, n_head=2)))
        return str(path)

    def tanh_model(self, base: str) -> str:
        """`base` (a configs/model name or a path) with model.gelu "tanh", in scratch:
        the model the gelu kernel's step runs (bench takes a model file, not --set)."""
        src = pathlib.Path(base) if base.endswith(".json") else ROOT / "configs/model" / f"{base}.json"
        path = self.scratch / f"{src.stem}-tanh.json"
        self.scratch.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dict(json.loads(src.read_text()), gelu="tanh")))
        return str(path)

    def parity_args(self, kernel):
        if self.dry:
            size = dict(base=self.dry_model(), max_steps=20, seq_len=64, micro_batch=4, warmup_steps=2, lr=3e-3,
                        eval_interval=20, eval_tokens=2048, log_interval=5)
        else:
            size = dict(base="gpt2-124m", max_steps=200, seq_len=1024, micro_batch=16, warmup_steps=20, lr=6e-4,
                        eval_interval=200, eval_tokens=65536, log_interval=25)
        sets = {"model.base": size.pop("base"), "model.attention": "xsa", "train.ckpt_interval": 0,
                "train.keep_checkpoints": 1, "train.kernels": self.plan.train_kernels(kernel),
                **{f"train.{k}": v for k, v in size.items()},
                **{f"model.{k}": v for k, v in verdict_table.MODEL.get(kernel, {}).items()}}
        if self.broken == f"parity-{kernel}":
            sets["train.kernels"] = "broken-on-purpose"
        return [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]

    def parity(self, kernel, timeout):
        """200 steps of gpt2-124m XSA with `kernel`, against the same run on ATen: final
        val loss, the largest parameter difference, tokens/s. The run's checkpoint (2 GB
        at 124M) is read once in scratch, then deleted; only JSON is kept."""
        import torch
        t_end = time.monotonic() + timeout
        # Parameters are compared with aten's, or with the baseline run's of the same
        # model for a kernel that needs another model (gelu against tanh).
        base = self.plan.baseline.get(kernel) if kernel in verdict_table.MODEL else None
        base = base if base in verdict_table.BASELINE_RUNS else "aten"
        ref = self.scratch / f"{base}-weights.pt"
        if kernel != "aten" and not ref.exists():  # a restarted machine lost it: make it again
            self.parity(base, timeout / 2)
        run = self.scratch / f"parity-{kernel}"
        self.sh(f"parity-{kernel}", [BIN, "train", "-c", "configs/runs/cpu-demo-sa.json", "--out", run, "--overwrite",
                                     *self.parity_args(kernel)], t_end - time.monotonic())
        done = json.loads((run / "done.json").read_text())
        rates = [r["tokens_per_s"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
                 if r.get("tokens_per_s") is not None]
        rates = rates[1:] or rates  # the first interval holds start-up
        ckpts = sorted((run / "checkpoints").glob("step_*.pt"))
        if not ckpts:
            raise StageFailed(f"{run}/checkpoints has no checkpoint")
        model = torch.load(ckpts[-1], weights_only=True, map_location="cpu")["model"]
        if kernel == "aten" or kernel in verdict_table.BASELINE_RUNS:
            torch.save(model, self.scratch / f"{kernel}-weights.pt")
        if kernel == "aten":
            diff = 0.0
        else:
            base = torch.load(ref, weights_only=True)
            if base.keys() != model.keys():
                raise StageFailed("the run's parameters differ in name from aten's")
            diff = max((model[k].double() - base[k].double()).abs().max().item() for k in model)
        summary = {"kernels": kernel, "val": done["final_val_loss"], "step": done.get("step"),
                   "tok_s": statistics.median(rates) if rates else None, "max_param_diff": diff}
        (self.res / f"parity-{kernel}.json").write_text(json.dumps(summary, indent=1) + "\n")
        shutil.copy(run / "metrics.jsonl", self.res / f"parity-{kernel}.metrics.jsonl")
        shutil.rmtree(run)

    def step_shapes(self) -> dict:
        """The timed shapes, {size: (model config, batch, T, warmup, iters, paired rounds)}:
        three rounds at 124M, where the kernel verdict reads its speed ratios; two at 0.7B,
        whose step is 0.2 s but whose every round builds a 0.7B model per attention. The
        dry run times its tiny model in both places."""
        if self.dry:
            tiny = (self.dry_model(), "2", "64", "1", "2")
            return {"124m": (*tiny, "3"), "0.7b": (*tiny, "2")}
        return {"124m": ("gpt2-124m", "16", "1024", "3", "10", "3"),
                "0.7b": ("paper-0.7b", "8", "2048", "2", "6", "2")}

    def bench_step(self, stage, size, variants, out, timeout, model=None):
        """`xsagpt bench`'s training step of `variants` at one of step_shapes()'s sizes
        (on `model`, a config derived from that size's, when given) into res/`out`."""
        cfg, b, t, warmup, iters, rounds = self.step_shapes()[size]
        if self.broken == stage:
            variants += ",broken-on-purpose"
        self.sh(stage, [BIN, "bench", "--no-block", "--variants", variants, "--step-config", model or cfg,
                        "--step-batch", b, "--step-seq-len", t, "--warmup", warmup, "--iters", iters,
                        "--repeat", rounds, "--json", self.res / out], timeout)

    def step(self, which, timeout):
        self.bench_step(f"step-{which}", which, self.variants()[f"step-{which}"], f"step-{which}.json", timeout)

    def step_kernels(self, timeout):
        """Each kernel of "auto" alone against ATen at 124M, paired rounds, for the
        kernel table's speed column. Every ratio measured twice unchanged (H200
        2026-11-26, H100 2026-11-27), so it comes after the questions of the day."""
        self.bench_step("step-kernels", "124m", self.variants()["kernels-124m"], "kernels-124m.json", timeout)

    def step_candidates(self, timeout):
        """The kernels outside "auto" beside their baselines (variants()), in bench
        processes of their own, at both sizes as the step stages run them."""
        t_end = time.monotonic() + timeout
        for size in ("124m", "0.7b"):
            variants = self.variants()[f"candidates-{size}"]
            self.bench_step("step-candidates", size, variants, f"candidates-{size}.json", t_end - time.monotonic())

    def step_gelu(self, timeout):
        """The gelu kernel's speed on tanh-GELU models (it runs no other): XSA with
        `fused` against `fused,gelu`, at both sizes as the step stages run them."""
        t_end = time.monotonic() + timeout
        variants = ",".join(map(self.plan.variant, ("tanh", "gelu")))
        for size, (cfg, *_) in self.step_shapes().items():
            self.bench_step("step-gelu", size, variants, f"gelu-step-{size}.json", t_end - time.monotonic(),
                            model=self.tanh_model(cfg))

    def micro(self, timeout):
        shapes = f"{self.dry_model()}:2x64" if self.dry else "gpt2-124m:16x1024,paper-0.7b:8x2048"
        self.sh("micro", [BIN, "bench", "--micro", shapes, "--iters", "3" if self.dry else "20",
                          "--json", self.res / "micro.json"], timeout)

    def profile(self, timeout):
        """Where the step spends its device time, by kernel and category (`xsagpt bench
        --profile`): `fused` beside `fused+fp8` (variants()), SA and XSA at both sizes."""
        t_end = time.monotonic() + timeout
        shapes = {"dry": [self.dry_model(), "2", "64"]} if self.dry else {
            "124m": ["gpt2-124m", "16", "1024"], "0.7b": ["paper-0.7b", "8", "2048"]}
        for size, (cfg, b, t) in shapes.items():
            self.sh("profile", [BIN, "bench", "--no-block", "--no-step", "--profile", "--variants", self.variants()["profile"],
                                "--step-config", cfg,
                                "--step-batch", b, "--step-seq-len", t, "--json", self.res / f"profile-{size}.json"],
                    t_end - time.monotonic())

    def demo(self, timeout):
        """The GPU demo's sweep (configs/sweeps/gpu-demo.json: 124M SA against XSA, two
        seeds, the default kernels) into scratch; its report.md and summary come back."""
        spec = json.loads((ROOT / "configs/sweeps/gpu-demo.json").read_text())
        base = ROOT / "configs/sweeps" / spec["base"]
        sets = ["train.keep_checkpoints=1", "train.ckpt_interval=0"]  # one 2 GB checkpoint per run, not three
        if self.dry:
            base = ROOT / "configs/runs/cpu-demo-sa.json"
            sets += [f"model.base={self.dry_model()}", "train.max_steps=10", "train.eval_interval=5",
                     "train.log_interval=5", "train.seq_len=64", "train.micro_batch=2", "train.warmup_steps=2"]
        out = self.scratch / "gpu-demo"
        sweep = self.scratch / "gpu-demo.json"
        self.scratch.mkdir(parents=True, exist_ok=True)
        sweep.write_text(json.dumps(dict(spec, base=str(base), set=sets, out_dir=str(out))))
        self.sh("demo", [BIN, "sweep", "-c", sweep, "--no-plot"], timeout)
        for name in ("report.md", "summary.json"):
            if (out / name).exists():
                shutil.copy(out / name, self.res / f"demo-{name}")
        shutil.rmtree(out, ignore_errors=True)  # four 124M runs' checkpoints: nothing to bring back

    def pytorch(self, size, attention, timeout):
        if self.dry:
            args = ["--config", self.dry_model(), "-b", "2", "-t", "64", "--steps", "2", "--warmup", "1"]
        elif size == "124m":
            args = ["--config", "gpt2-124m", "-b", "16", "-t", "1024", "--steps", "20"]
        else:
            args = ["--config", "paper-0.7b", "-b", "8", "-t", "2048", "--steps", "10"]
        out = self.sh(f"pytorch-{size}-{attention}", [self.py, "scripts/bench/bench_pytorch.py", *args, "--attention",
                                                       attention, "--compile"], timeout, check=False)
        lines = [l for l in out.splitlines() if l.startswith("{")]
        # bench_compare.py matches rows by config name; the dry run's are tiny's
        (self.res / f"pytorch-{size}-{attention}.jsonl").write_text("".join(l + "\n" for l in lines))
        if len(lines) < 2:
            raise StageFailed(f"{'eager and compiled' if not lines else 'compiled'} step missing: see "
                              f"pytorch-{size}-{attention}.log")

    def head(self) -> list[Stage]:
        """The stages every call starts with, which need no kernel table."""
        return [Stage("preflight", lambda t: self.preflight(t), 10, 60),
                Stage("build", lambda t: self.build(t), 20 if (ROOT / "build/xsagpt").exists() else 200)]

    def stages(self, sanitizer: bool, first=None) -> list[Stage]:
        """Every stage, in the verdict's order (or by `first`, a key on stage names that
        ranks them, stable), then sorted by their needs (order_by_needs). Estimates are
        seconds measured on the H100 lease of 2026-11-27 (stages.json there)."""
        pl = self.plan
        s = self.head()
        s.append(Stage("tests", lambda t: self.tests(t), 45, 180, needs=("build",)))
        # A parity run took 19-28 s on the H100 beside phase A's compiles: planned at 25.
        # A kernel outside "fused" is judged against its baseline's run (fused, or tanh
        # for gelu), whose parameters it is compared with.
        for k in ("aten", *pl.kernels, *verdict_table.BASELINE_RUNS):
            base = pl.baseline.get(k)
            s.append(Stage(f"parity-{k}", lambda t, k=k: self.parity(k, t), 25, 300,
                           needs=("build",) if k == "aten" else
                           ("build", "parity-aten", *([f"parity-{base}"] if base else []))))
        # step-124m: 5 variants x 3 rounds (43 s for 11); step-0.7b: 4 x 2 rounds, 71 s;
        # candidates: 4 x 3 at 124M and 4 x 2 at 0.7B (93 s for 5 and 6); profile: 8
        # profiled variants (30 s for 4); step-gelu 53 s; the demo's sweep 82 s.
        s += [Stage("step-124m", lambda t: self.step("124m", t), 25, needs=("build",)),
              Stage("step-0.7b", lambda t: self.step("0.7b", t), 70, needs=("build",)),
              Stage("step-candidates", lambda t: self.step_candidates(t), 70, 240, needs=("build",)),
              Stage("step-kernels", lambda t: self.step_kernels(t), 30, 240, needs=("build",)),
              Stage("step-gelu", lambda t: self.step_gelu(t), 55, 240, needs=("build",)),
              Stage("micro", lambda t: self.micro(t), 60, 240, needs=("build",))]
        for size in ("124m", "0.7b"):
            for a in ("sa", "xsa"):
                s.append(Stage(f"pytorch-{size}-{a}", lambda t, size=size, a=a: self.pytorch(size, a, t),
                               140 if size == "124m" else 200))
        s += [Stage("profile", lambda t: self.profile(t), 60, 240, needs=("build",)),
              Stage("demo", lambda t: self.demo(t), 90, 300, needs=("build",))]
        if sanitizer:
            s.append(Stage("sanitizer", lambda t: self.sanitizer(t), 240, needs=("build",)))
        if first:
            s.sort(key=lambda st: first(st.name))
        return order_by_needs(s)

    # ---- the call ------------------------------------------------------------
    def run_stage(self, st: Stage, retry_failed: bool, deadline: float | None = None) -> str:
        """Runs one stage unless it is done, failed earlier (without retry_failed), waits
        for another, or its estimate does not fit before `deadline` (monotonic seconds;
        default: the call's budget). Returns its status; safe to call from threads."""
        prev = self.state.get(st.name, {}).get("status")
        always = st.name in ("preflight", "build")  # cheap, and a restarted machine has no build/
        if prev == "done" and not always:
            print(f"[verdict] {st.name}: done earlier, skipped", flush=True)
            return "done"
        if prev == "failed" and not retry_failed and not always:
            print(f"[verdict] {st.name}: failed earlier ({self.state[st.name].get('reason')}); "
                  f"--retry-failed runs it again", flush=True)
            return "failed"
        blocked = [n for n in st.needs if self.state.get(n, {}).get("status") != "done"]
        if blocked:
            print(f"[verdict] {st.name}: waits for {', '.join(blocked)}", flush=True)
            return "pending"
        left = self.left() if deadline is None else min(self.left(), deadline - time.monotonic())
        if st.estimate > left:
            print(f"[verdict] {st.name}: pending (needs ~{st.estimate} s, {max(left, 0):.0f} s left)", flush=True)
            return "pending"
        # Inside a phase (deadline given) a stage that started in time may run on a little past it.
        timeout = min(st.cap, self.left(), left if deadline is None else left + st.estimate / 2)
        print(f"[verdict] {st.name}: running (at most {timeout:.0f} s)", flush=True)
        t = time.monotonic()
        try:
            st.run(timeout)
            self.record(st.name, "done", time.monotonic() - t)
        except subprocess.TimeoutExpired:
            out_of_call = timeout < st.cap
            self.record(st.name, "pending" if out_of_call else "failed", time.monotonic() - t,
                        "stopped: this call's time ran out" if out_of_call else f"timed out after {st.cap} s")
        except (StageFailed, OSError, ValueError, KeyError) as e:
            self.record(st.name, "failed", time.monotonic() - t, str(e).replace("|", "/")[:300])
        entry = self.state[st.name]
        print(f"[verdict] {st.name}: {entry['status']} in {time.monotonic() - t:.0f} s"
              + (f": {entry['reason']}" if entry.get("reason") else ""), flush=True)
        return entry["status"]

    def call(self, only, retry_failed, sanitizer) -> int:
        head = self.head()
        for st in head:
            if only and st.name not in only and st.name != "preflight":
                continue
            if self.run_stage(st, retry_failed) != "done" and st.name == "preflight":
                return self.finish([s.name for s in head], only)
        stages = self.planned(sanitizer, only)
        if stages is None:
            return self.finish([s.name for s in head], only)
        for st in stages:
            if st.name in (h.name for h in head) or (only and st.name not in only):
                continue
            self.run_stage(st, retry_failed)
        return self.finish([s.name for s in stages], only)

    def planned(self, sanitizer: bool, only, first=None) -> list[Stage] | None:
        """Every stage (stages()), once the build stage has left a binary to ask for the
        kernel table; None, with the build marked failed, when it cannot be asked. An
        --only naming no stage ends the call here."""
        try:
            stages = self.stages(sanitizer, first)
        except ValueError as e:
            self.record("build", "failed", reason=f"the kernel table: {e}".replace("|", "/")[:300])
            print(f"[verdict] build: failed: {self.state['build']['reason']}", flush=True)
            return None
        names = [s.name for s in stages]
        if unknown := [n for n in only if n not in names]:
            sys.exit(f"{pathlib.Path(sys.argv[0]).name}: --only: unknown stage(s) {', '.join(unknown)} "
                     f"(stages: {', '.join(names)})")
        return stages

    def finish(self, order: list[str], only: list[str]) -> int:
        """Every call's end, whatever happened: the summary, the table with what is known
        so far, the bundle. Exit code 0: all done, 3: some pending (call again), 1: a failure.
        A failed preflight is the one line that names what is missing: nothing else ran."""
        table = self.save_results(order, only)
        if self.state.get("preflight", {}).get("status") == "failed":
            print(f"{pathlib.Path(sys.argv[0]).name}: preflight failed: {self.state['preflight']['reason']}",
                  file=sys.stderr, flush=True)
            return 1
        print("\n" + table, flush=True)
        statuses = [self.state.get(n, {}).get("status", "pending") for n in order if not only or n in only]
        if "failed" in statuses:
            return 1
        return 0 if all(s == "done" for s in statuses) else 3

    def save_results(self, order: list[str], only=()) -> str:
        """The summary, the table and the bundle as they stand: written after every stage
        of a lease too, so a call cut off by the device's limit still returns them."""
        self.summary()
        table = self.table(order, only)
        self.bundle(quiet=True)
        return table

    def summary(self):
        steps = sorted(self.res.glob("step-*.json"))
        if not steps:
            return
        torch_rows = self.res / "pytorch.jsonl"
        torch_rows.write_text("".join(p.read_text() for p in sorted(self.res.glob("pytorch-*.jsonl"))))
        p = subprocess.run([self.py, "scripts/bench/bench_compare.py", *map(str, steps), "--pytorch", str(torch_rows)],
                           cwd=ROOT, capture_output=True, text=True)
        (self.res / "summary.md").write_text(p.stdout if p.returncode == 0 else f"bench_compare.py failed: {p.stderr}")

    def table(self, order, only=()) -> str:
        packed = ROOT / "out/lease/COMMIT"  # the packed binaries' commit (scripts/bench/pack.sh)
        commit = packed.read_text().strip() if packed.exists() else subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip() or "unknown"
        machine = (self.res / "machine.txt").read_text().strip() if (self.res / "machine.txt").exists() else "unknown"
        header = [f"### Fused kernels: the verdict{' (CPU dry run: nothing decided)' if self.dry else ''}", "",
                  f"{datetime.date.today().isoformat()}, commit {commit}. Machine: {machine}.",
                  f"Command: `{self.command}`."]
        text = verdict_table.render(self.res, order, self.dry, header, self._plan)
        left = [n for n in order if (not only or n in only)
                and self.state.get(n, {}).get("status", "pending") in ("pending", "failed")]
        if left:
            retry = " --retry-failed" if any(self.state.get(n, {}).get("status") == "failed" for n in left) else ""
            text += (f"\nNot done: {', '.join(left)}. On the warm machine (it keeps out/ for 30 s after a call), "
                     f"`{self.command} --only {','.join(left)}{retry}` runs them; on a fresh one, unpack this "
                     f"bundle into out/ here and carry out/gpu beside out/lease.\n")
        (self.res / "verdict.md").write_text(text)
        return text

    def bundle(self, quiet=False):
        """RES as a gzipped tar, text only and under BUNDLE_MAX: into $OUT when set
        (the device tool brings it back), else beside RES. Anything else is refused
        by name, so a large or binary file can never ride along unseen."""
        files = sorted(p for p in self.res.rglob("*") if p.is_file())
        odd = [str(p.relative_to(self.res)) for p in files if p.suffix not in TEXT]
        if odd:
            sys.exit(f"bench_verdict.py: {self.res} holds files that are not text or JSON: {', '.join(odd)}")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            tar.add(self.res, arcname=self.res.name)
        size = buf.getbuffer().nbytes
        if size >= BUNDLE_MAX:
            sys.exit(f"bench_verdict.py: the results bundle is {size} bytes, over {BUNDLE_MAX}")
        dest = pathlib.Path(os.environ["OUT"]) if os.environ.get("OUT") else self.res.parent
        (dest / f"{self.res.name}-results.tgz").write_bytes(buf.getvalue())
        if os.environ.get("OUT"):
            shutil.copy(self.res / "verdict.md", dest / "verdict.md")
        if not quiet:
            print(f"[verdict] bundle: {dest / (self.res.name + '-results.tgz')} ({size} bytes)", flush=True)


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu-dry-run", action="store_true", help="the same stages at tiny sizes on this CPU")
    ap.add_argument("--budget", type=float,
                    help="seconds this call may spend on stages (default 540: a 600 s command with time to bundle; "
                         f"with --cpu-dry-run {DRY_BUDGET}, no device limit to keep)")
    ap.add_argument("--only", default="", help="comma-separated stage names to consider (preflight always runs)")
    ap.add_argument("--retry-failed", action="store_true", help="run stages that failed in an earlier call again")
    ap.add_argument("--sanitizer", action="store_true", help="add compute-sanitizer (memcheck, racecheck) over the "
                                                             "kernel tests")
    ap.add_argument("--reset", action="store_true", help="forget every earlier stage result first")
    ap.add_argument("--out", type=pathlib.Path, help="results folder (default out/gpu, or out/gpu-dry-run); "
                                                      "checkpoints go to a sibling ending in -scratch")
    args = ap.parse_args()
    args.budget = args.budget if args.budget is not None else DRY_BUDGET if args.cpu_dry_run else 540
    v = Verdict(args)
    if args.reset:
        shutil.rmtree(v.res, ignore_errors=True)
        shutil.rmtree(v.scratch, ignore_errors=True)
        v = Verdict(args)
    sys.exit(v.call([s for s in args.only.split(",") if s], args.retry_failed, args.sanitizer))


if __name__ == "__main__":
    main()
