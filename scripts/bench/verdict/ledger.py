"""The verdict's bookkeeping: where its results go, each stage's state (stages.json,
state.py), the time left of the call's budget, the kernel table it plans from, and the
one way a stage runs a command: in a process group of its own (procs.py), its output
appended to the stage's log."""
import datetime
import os
import pathlib
import subprocess
import sys
import threading
import time

import verdict_table

from .procs import Processes
from .state import read_state, tmp_path, write_state

ROOT = pathlib.Path(__file__).resolve().parents[3]
BIN = ROOT / "build" / "xsagpt"
TESTS = ROOT / "build" / "tests" / "xsagpt_tests"
# A dry run's default budget: its stages are the device's, planned with the device's
# estimates, but no 10-minute command limit applies on this CPU, where the tiny sizes
# take other times (torch.compile's CPU compiles take minutes), so one call does them all.
DRY_BUDGET = 1800
LOG_MAX = 128 << 10  # a stage's log keeps its last 128 KiB


class StageFailed(Exception):
    pass


def results_dir(args) -> pathlib.Path:
    return (args.out or ROOT / ("out/gpu-dry-run" if args.cpu_dry_run else "out/gpu")).resolve()


def scratch_dir(res: pathlib.Path) -> pathlib.Path:
    """Where runs leave what does not come back (checkpoints): beside the results."""
    return res.with_name(res.name + "-scratch")


class Ledger:
    def __init__(self, args):
        self.dry = args.cpu_dry_run
        self.res = results_dir(args)
        self.scratch = scratch_dir(self.res)
        self.budget, self.t0 = args.budget, time.monotonic()
        self.res.mkdir(parents=True, exist_ok=True)
        self.state_path = self.res / "stages.json"
        self.state = read_state(self.state_path)  # StateDamaged names what is wrong
        # A write cut off by kill -9 between its two steps: stages.json is the last whole state.
        tmp_path(self.state_path).unlink(missing_ok=True)
        self.py = sys.executable
        self.env = dict(os.environ, PYTHONUNBUFFERED="1")
        if not self.dry:  # Hopper machine code unless told otherwise
            self.env.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
        self.broken = os.environ.get("XSAGPT_VERDICT_BREAK", "")
        self.command = "bash scripts/bench/bench_gpu.sh verdict" + (" --cpu-dry-run" if self.dry else "")
        self.lock = threading.RLock()  # the one-call lease runs stages in threads
        self.procs = Processes()
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

    @property
    def plan_so_far(self) -> verdict_table.Plan | None:
        """The kernel table if this call has asked for it, without asking."""
        return self._plan

    def left(self) -> float:
        return self.budget - (time.monotonic() - self.t0)

    def status(self, name: str) -> str:
        return self.state.get(name, {}).get("status", "pending")

    def record(self, name, status, seconds=None, reason=""):
        entry = {"status": status, "reason": reason, "at": datetime.datetime.now().isoformat(timespec="seconds")}
        if seconds is not None:
            entry["seconds"] = round(seconds, 1)
        with self.lock:
            self.state[name] = entry
            write_state(self.state_path, self.state)

    def sh(self, name: str, cmd: list, timeout: float, log: str | None = None, check=True, cwd=ROOT) -> str:
        """Runs cmd, its output appended to RES/<log or name>.log (the last LOG_MAX
        bytes kept); raises StageFailed naming the command on a non-zero exit."""
        path = self.res / f"{log or name}.log"
        with path.open("a") as f:
            f.write(f"$ {' '.join(map(str, cmd))}\n")
        try:
            p = self.procs.run(cmd, max(1.0, timeout), cwd, self.env)
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
