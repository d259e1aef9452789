"""The scheduler: the verdict's stages (Stage) in the order their needs allow, each run
unless done earlier or its estimate does not fit the time left, and the call's end
(the table, the bundle, the exit code).

A call's exit code speaks for the stages it was asked for (--only, or every stage): 0
when each is done, 1 when one failed (or the preflight or build this call ran), 3 while
one is pending (call again), 128 + the signal's number when a signal stopped it."""
import pathlib
import subprocess
import sys
import time

import verdict_table

from . import correctness, machine, profile, pytorch, report, timing
from .ledger import ROOT, Ledger, StageFailed
from .procs import Stopped


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


class Verdict(Ledger):
    def __init__(self, args):
        super().__init__(args)
        self.outcome = {}  # what this call's run_stage said of each stage it was given

    def head(self) -> list[Stage]:
        """The stages every call starts with, which need no kernel table."""
        return [Stage("preflight", lambda t: machine.preflight(self, t), 10, 60),
                Stage("build", lambda t: machine.build(self, t), 20 if (ROOT / "build/xsagpt").exists() else 200)]

    def stages(self, sanitizer: bool, first=None) -> list[Stage]:
        """Every stage, in the verdict's order (or by `first`, a key on stage names that
        ranks them, stable), then sorted by their needs (order_by_needs). Estimates are
        seconds measured on the H100 lease of 2026-11-27 (stages.json there)."""
        pl = self.plan
        s = self.head()
        s.append(Stage("tests", lambda t: correctness.tests(self, t), 45, 180, needs=("build",)))
        # A parity run took 19-28 s on the H100 beside phase A's compiles: planned at 25.
        # A kernel outside "fused" is judged against its baseline's run (fused, or tanh
        # for gelu), whose parameters it is compared with.
        for k in ("aten", *pl.kernels, *verdict_table.BASELINE_RUNS):
            base = pl.baseline.get(k)
            s.append(Stage(f"parity-{k}", lambda t, k=k: correctness.parity(self, k, t), 25, 300,
                           needs=("build",) if k == "aten" else
                           ("build", "parity-aten", *([f"parity-{base}"] if base else []))))
        # step-124m: 5 variants x 3 rounds (43 s for 11); step-0.7b: 4 x 2 rounds, 71 s;
        # candidates: 4 x 3 at 124M and 4 x 2 at 0.7B (93 s for 5 and 6); profile: 8
        # profiled variants (30 s for 4); step-gelu 53 s; the demo's sweep 82 s.
        s += [Stage("step-124m", lambda t: timing.step(self, "124m", t), 25, needs=("build",)),
              Stage("step-0.7b", lambda t: timing.step(self, "0.7b", t), 70, needs=("build",)),
              Stage("step-candidates", lambda t: timing.step_candidates(self, t), 70, 240, needs=("build",)),
              Stage("step-kernels", lambda t: timing.step_kernels(self, t), 30, 240, needs=("build",)),
              Stage("step-gelu", lambda t: timing.step_gelu(self, t), 55, 240, needs=("build",)),
              Stage("micro", lambda t: timing.micro(self, t), 60, 240, needs=("build",))]
        for size in ("124m", "0.7b"):
            for a in ("sa", "xsa"):
                s.append(Stage(f"pytorch-{size}-{a}", lambda t, size=size, a=a: pytorch.pytorch(self, size, a, t),
                               140 if size == "124m" else 200))
        s += [Stage("profile", lambda t: profile.profile(self, t), 60, 240, needs=("build",)),
              Stage("demo", lambda t: timing.demo(self, t), 90, 300, needs=("build",))]
        if sanitizer:
            s.append(Stage("sanitizer", lambda t: correctness.sanitizer(self, t), 240, needs=("build",)))
        if first:
            s.sort(key=lambda st: first(st.name))
        return order_by_needs(s)

    def time_for(self, deadline: float | None) -> float:
        """Seconds left before `deadline` (monotonic) or, without one, the call's budget."""
        return self.left() if deadline is None else min(self.left(), deadline - time.monotonic())

    def run_stage(self, st: Stage, retry_failed: bool, deadline: float | None = None) -> str:
        """Runs one stage unless it is done, failed earlier (without retry_failed), waits
        for another, its estimate does not fit before `deadline` (monotonic seconds;
        default: the call's budget), or the call is stopping. Returns its status; safe
        to call from threads."""
        status = self.skipped(st, retry_failed, deadline) or self.run_now(st, deadline)
        self.outcome[st.name] = status
        return status

    def skipped(self, st: Stage, retry_failed: bool, deadline: float | None) -> str | None:
        """The stage's status when it is not to run now, else None."""
        if self.procs.signum:
            return "pending"  # stopping: nothing starts (finish says so)
        prev = self.state.get(st.name, {}).get("status")
        always = st.name in ("preflight", "build")  # cheap, and a restarted machine has no build/
        if prev == "done" and not always:
            print(f"[verdict] {st.name}: done earlier, skipped", flush=True)
            return "done"
        if prev == "failed" and not retry_failed and not always:
            print(f"[verdict] {st.name}: failed earlier ({self.state[st.name].get('reason')}); "
                  f"--retry-failed runs it again", flush=True)
            return "failed"
        blocked = [n for n in st.needs if self.status(n) != "done"]
        if blocked:
            print(f"[verdict] {st.name}: waits for {', '.join(blocked)}", flush=True)
            return "pending"
        if st.estimate > (left := self.time_for(deadline)):
            print(f"[verdict] {st.name}: pending (needs ~{st.estimate} s, {max(left, 0):.0f} s left)", flush=True)
            return "pending"
        return None

    def run_now(self, st: Stage, deadline: float | None) -> str:
        left = self.time_for(deadline)
        # Inside a phase (deadline given) a stage that started in time may run on a little past it.
        timeout = min(st.cap, self.left(), left if deadline is None else left + st.estimate / 2)
        print(f"[verdict] {st.name}: running (at most {timeout:.0f} s)", flush=True)
        t = time.monotonic()
        try:
            st.run(timeout)
            self.record(st.name, "done", time.monotonic() - t)
        except Stopped as e:
            self.record(st.name, "pending", time.monotonic() - t, str(e))
        except subprocess.TimeoutExpired:
            out_of_call = timeout < st.cap
            self.record(st.name, "pending" if out_of_call else "failed", time.monotonic() - t,
                        "stopped: this call's time ran out" if out_of_call else f"timed out after {st.cap} s")
        except (StageFailed, OSError, ValueError, KeyError) as e:
            # A stage whose processes a signal killed under it is not done, whatever it then hit.
            stopped = f"stopped: this call got {self.procs.stopping}" if self.procs.signum else ""
            self.record(st.name, "pending" if stopped else "failed", time.monotonic() - t,
                        stopped or str(e).replace("|", "/")[:300])
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
            self.outcome["build"] = "failed"
            print(f"[verdict] build: failed: {self.state['build']['reason']}", flush=True)
            return None
        names = [s.name for s in stages]
        if unknown := [n for n in only if n not in names]:
            sys.exit(f"{pathlib.Path(sys.argv[0]).name}: --only: unknown stage(s) {', '.join(unknown)} "
                     f"(stages: {', '.join(names)})")
        return stages

    def finish(self, order: list[str], only: list[str]) -> int:
        """Every call's end, whatever happened: the summary, the table with what is known
        so far, the bundle, and the exit code (the module's docstring). A failed
        preflight is the one line that names what is missing: nothing else ran."""
        # The stages asked for that a call which ended early never reached are pending too.
        order = [*order, *(n for n in only if n not in order)]
        table = report.save_results(self, order, only)
        if self.status("preflight") == "failed":
            print(f"{pathlib.Path(sys.argv[0]).name}: preflight failed: {self.state['preflight']['reason']}",
                  file=sys.stderr, flush=True)
            return 1
        print("\n" + table, flush=True)
        if self.procs.signum:
            print(f"{pathlib.Path(sys.argv[0]).name}: stopped by {self.procs.stopping}: the stages it stopped are "
                  f"recorded pending, their processes killed, and none started after it", file=sys.stderr, flush=True)
            return 128 + self.procs.signum
        # The stages asked for, and the preflight and build as this call found them (done
        # in an earlier call is not done in this one).
        asked = [n for n in order if not only or n in only]
        statuses = [self.outcome.get(n) or self.status(n) for n in dict.fromkeys([*asked, *self.outcome])]
        if "failed" in statuses:
            return 1
        return 0 if all(s == "done" for s in statuses) else 3
