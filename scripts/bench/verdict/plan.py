"""The GPU verdict's plan and its results folder as the table reads them: the kernel
table's rows as `xsagpt config --json` lists them (config_json), the verdict's rows and
runs made from them (Plan), and what the stages have left in a results folder so far
(Results). verdict_table.py renders the table from these; the stages beside this module
run what the plan says.
"""
import json
import os
import pathlib
import subprocess

# Runs on another model than the shipped one: model.* settings by kernel. "tanh" is
# gelu's baseline: fused on a tanh-GELU model, a parity run without a table row.
MODEL = {"gelu": {"gelu": "tanh"}, "tanh": {"gelu": "tanh"}}
BASELINE_RUNS = ("tanh",)
# The program's kernel table as a results folder last saw it (`xsagpt config --json`).
TABLE_FILE = "kernels.json"


def config_json(binary: pathlib.Path, env: dict | None = None) -> list[dict]:
    """train.kernels' rows, in order, as the program lists them (`xsagpt config --json`,
    from kKernelTable in src/config/runtime.cpp): [{"name", "help", "auto", "fused",
    "default_model", "tests"}]. The program is asked, not its source: the table is what
    the binary under test was built with, and the CUDA tests each row names are its own."""
    try:
        p = subprocess.run([str(binary), "config", "--json"], capture_output=True, text=True, timeout=60,
                           env=env or dict(os.environ))
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ValueError(f"{binary} config --json: {e}") from None
    if p.returncode != 0:
        raise ValueError(f"{binary} config --json exited {p.returncode}: {(p.stderr.strip().splitlines() or [''])[-1]}")
    rows = json.loads(p.stdout)["kernels"]
    if not rows or any(not {"name", "auto", "fused", "default_model", "tests"} <= set(r) for r in rows):
        raise ValueError(f"{binary} config --json: no kernel rows with name, auto, fused, default_model and tests")
    return rows


class Plan:
    """The verdict's rows and runs, from the kernel table's rows (config_json).

    The verdict's rows: each kernel inside "fused", "fused" (the set the default takes),
    then each kernel outside it (fp8, gelu), judged against the bf16 step it joins
    instead of ATen: its runs use train.kernels "fused,NAME"."""

    def __init__(self, rows: list[dict]):
        self.rows = rows
        fused = tuple(r["name"] for r in rows if r["fused"])
        outside = tuple(r["name"] for r in rows if not r["fused"])
        self.kernels = fused + ("fused",) + outside
        self.baseline = {k: "tanh" if k in MODEL else "fused" for k in outside}
        self.spec = {**{k: f"fused,{k}" for k in self.baseline}, "tanh": "fused"}
        # The kernels not yet through a verdict (outside "auto"): a lease runs them first.
        self.candidates = tuple(r["name"] for r in rows if not r["auto"])
        # Which gtest names (filter patterns) speak for which kernel; "fused" is spoken
        # for by every test of a kernel in it. A kernel with none is never default-worthy.
        self.tests = {r["name"]: tuple(r["tests"]) for r in rows}
        self.tests["fused"] = tuple(dict.fromkeys(t for r in rows if r["fused"] for t in r["tests"]))
        # Where a kernel's paired speed rounds are read from (bench --json): each kernel of
        # "auto" alone from kernels-124m (step-kernels), "fused" from step-124m, those
        # outside "auto" from their own bench process, gelu from its tanh-GELU models'.
        self.step_file = {**{k: "kernels-124m" for k in fused if k not in self.candidates},
                          **{k: "candidates-124m" for k in self.candidates if k not in MODEL},
                          **{k: "gelu-step-124m" for k in MODEL if k in self.baseline}}

    @classmethod
    def of(cls, res: pathlib.Path) -> "Plan | None":
        """The plan a results folder was last made with, or None."""
        rows = read_json(res / TABLE_FILE)
        return cls(rows) if rows else None

    def save(self, res: pathlib.Path) -> None:
        (res / TABLE_FILE).write_text(json.dumps(self.rows, indent=1) + "\n")

    def train_kernels(self, kernel: str) -> str:
        """train.kernels for a kernel's runs."""
        return self.spec.get(kernel, kernel)

    def variant(self, kernel: str, attention: str = "xsa") -> str:
        """The bench variant of a kernel's step ('+' joins kernel names there)."""
        return f"{attention}@" + self.train_kernels(kernel).replace(",", "+")


def read_json(path: pathlib.Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class Results:
    """What one results folder holds: stage states and the stages' outputs."""

    def __init__(self, res: pathlib.Path, plan: Plan | None = None):
        self.res = res
        self.stages = read_json(res / "stages.json") or {}
        self.plan = plan or Plan.of(res)

    def state(self, stage: str) -> tuple[str, str]:
        s = self.stages.get(stage, {})
        return s.get("status", "pending"), s.get("reason", "")

    def missing(self, stage: str) -> str | None:
        """None when the stage is done, else the text its cells show."""
        status, reason = self.state(stage)
        if status == "done":
            return None
        return f"FAILED ({reason})" if status == "failed" else "pending"
