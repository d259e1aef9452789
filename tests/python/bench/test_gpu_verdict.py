"""The GPU verdict (scripts/bench/lease.py over the stages of scripts/bench/verdict/) rehearsed on the
CPU: what one call of a lent GPU depends on. A stage broken on purpose leaves the
others' rows and the table comes back; correctness runs before the timed stages; a
second call skips what is done; a call with no time left starts nothing and says
`pending` with the command that finishes it; the results bundle is text under 1 MiB,
and a binary file in it is refused by name; stages run after the stages they need,
in either entry point; a Python without torch is named in one line. A few stages at
tiny sizes keep it short; every stage runs in the manual dry run (docs/gpu-machine.md)."""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile

import pytest

import lease as lease_script
from verdict.correctness import parse_gtest_listing
from verdict.schedule import Stage, Verdict, order_by_needs


def verdict(repo_root, out, *args, env_extra=None):
    env = None
    if env_extra:
        import os
        env = dict(os.environ, **env_extra)
    return subprocess.run([sys.executable, str(repo_root / "scripts/bench/bench_verdict.py"), "--cpu-dry-run", "--out",
                           str(out), *args], cwd=repo_root, capture_output=True, text=True, env=env, timeout=900)


def table_rows(text: str) -> dict:
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) > 2:
            rows.setdefault(cells[0], cells)
    return rows


def test_no_time_left_starts_nothing(repo_root, tmp_path, kjv, build_dir):
    out = tmp_path / "gpu-dry-run"
    out.mkdir()
    # An earlier call built; this one has room for the preflight (a few seconds, however
    # loaded the machine), not for a parity run (~25 s planned).
    built = {"build": {"status": "done", "reason": "", "at": "2026-01-01T00:00:00"}}
    (out / "stages.json").write_text(json.dumps(built))
    proc = verdict(repo_root, out, "--only", "parity-aten,micro", "--budget", "24")
    assert proc.returncode == 3, proc.stdout + proc.stderr  # pending: call again
    rows = table_rows(proc.stdout)
    assert rows["parity-aten"][1] == "pending" and rows["micro"][1] == "pending"
    assert "parity-aten: pending (needs" in proc.stdout and rows["weights"][2] == "pending"


def test_a_binary_file_in_the_results_is_refused(repo_root, tmp_path, kjv, build_dir):
    out = tmp_path / "gpu-dry-run"
    out.mkdir()
    (out / "model.pt").write_bytes(b"\0" * 100)
    proc = verdict(repo_root, out, "--only", "preflight", "--budget", "60")
    assert proc.returncode != 0 and "model.pt" in proc.stderr and "not text or JSON" in proc.stderr


# The one-call lease (scripts/bench/lease.py), rehearsed: phase A (correctness) then
# phase B (timing), a stage broken on purpose, and the table back in one call.
LEASE_STAGES = ("tests,parity-aten,parity-fused,parity-tanh,parity-gelu,parity-norm,step-0.7b,profile,step-candidates,"
                "step-kernels,step-gelu,micro,demo")


def lease(repo_root, out, *args, env_extra=None):
    import os
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([sys.executable, str(repo_root / "scripts/bench/lease.py"), "--cpu-dry-run", "--out",
                           str(out), *args], cwd=repo_root, capture_output=True, text=True, env=env, timeout=900)


@pytest.fixture(scope="module")
def broken_lease(repo_root, kjv, build_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("lease") / "gpu-dry-run"
    return out, lease(repo_root, out, "--only", LEASE_STAGES, env_extra={"XSAGPT_VERDICT_BREAK": "parity-norm"})


def test_a_lease_returns_the_whole_table_with_a_broken_stage(broken_lease):
    out, proc = broken_lease
    assert proc.returncode == 1, proc.stdout + proc.stderr  # a stage failed; the call still ended with its table
    rows = table_rows(proc.stdout)
    assert rows["parity-norm"][1] == "failed" and "train.kernels" in rows["parity-norm"][3]
    for done in ("preflight", "build", "tests", "parity-aten", "parity-fused", "step-0.7b", "profile", "step-kernels",
                 "micro", "demo"):
        assert rows[done][1] == "done", rows[done]
    # Correctness first, then the timed stages alone: the default, the profile and the
    # candidates before what was measured twice unchanged (each kernel alone).
    running = [proc.stdout.index(f"{s}: running") for s in ("step-0.7b", "profile", "step-candidates", "step-kernels")]
    assert proc.stdout.index("[lease] phase A over") < running[0] and running == sorted(running)
    assert proc.stdout.index("parity-fused: done") < proc.stdout.index("[lease] phase A over")
    # The default's table (what a user gets), the kernel table and the profile, from one call.
    assert "The default, `train.kernels`" in proc.stdout and rows["fused"][2].startswith(("+", "-"))
    assert "(n=" in rows["norm"][4]  # its speed from step-kernels' own bench process
    assert "Where the step's time goes" in proc.stdout
    assert (out / "demo-report.md").exists() and (out / "demo-summary.json").exists()
    # What did not get done says how to finish it.
    assert "Not done: parity-norm" in proc.stdout and "lease --cpu-dry-run --only parity-norm --retry-failed" in proc.stdout
    assert 0 < (out.parent / f"{out.name}-results.tgz").stat().st_size < 1 << 20


def test_the_gelu_kernel_is_judged_on_a_tanh_gelu_model(broken_lease):
    """gelu needs model.gelu "tanh": its parity run and its step run on such a model,
    against fused on the same model (the baseline run "tanh"), never on the shipped one."""
    out, proc = broken_lease
    rows = table_rows(proc.stdout)
    for done in ("parity-tanh", "parity-gelu", "step-gelu"):
        assert rows[done][1] == "done", rows[done]
    assert rows["gelu"][2].startswith(("+", "-")) and "(n=" in rows["gelu"][4]
    assert "The gelu kernel on models with model.gelu" in proc.stdout
    log = (out / "parity-gelu.log").read_text()
    assert "model.gelu=tanh" in log and "train.kernels=fused,gelu" in log
    assert "model.gelu=tanh" in (out / "parity-tanh.log").read_text()
    step = json.loads((out / "gelu-step-124m.json").read_text())["step"]
    assert step["model"]["gelu"] == "tanh" and set(step["results"]) == {"xsa@fused", "xsa@fused+gelu"}


def test_the_kernels_outside_auto_are_timed_in_a_bench_process_of_their_own(broken_lease):
    """A candidate kernel that fails, or leaves the GPU in an error, must not take the
    default's numbers with it: its step runs beside its baseline in another process."""
    out, proc = broken_lease
    rows = table_rows(proc.stdout)
    assert rows["step-candidates"][1] == "done", rows["step-candidates"]
    step = json.loads((out / "candidates-124m.json").read_text())["step"]
    assert set(step["results"]) == {"xsa@aten", "xsa@fused", "xsa@norm_regs", "xsa@clip", "xsa@fused+fp8",
                                    "xsa@fused+fp8_all"}
    assert "The kernels outside \"auto\"" in proc.stdout and "| xsa@fused+fp8 |" in proc.stdout
    assert "(n=" in rows["fp8"][4] and "(n=" in rows["clip"][4] and "(n=" in rows["norm_regs"][4]
    assert set(json.loads((out / "candidates-0.7b.json").read_text())["step"]["results"]) == {
        "sa@fused", "sa@fused+fp8", "sa@fused+fp8_all", "xsa@fused", "xsa@fused+fp8", "xsa@fused+fp8_all"}


def test_the_profile_sets_fp8_beside_fused_with_its_casts_in_a_category_of_their_own(broken_lease):
    """FP8's time is its GEMMs and the kernels that make their operands: the profile
    stage runs fused+fp8 beside fused, SA and XSA, and the table has a quantize column
    (on a CPU the casts are ATen ops without a type in their name: the column is there,
    the kernel names are classified on CUDA, tests/cpp/bench/test_step_profile.cpp)."""
    out, proc = broken_lease
    profile = json.loads((out / "profile-dry.json").read_text())["profile"]["results"]
    assert set(profile) == {"sa@fused", "sa@fused+fp8", "sa@fused+fp8_all", "xsa@fused", "xsa@fused+fp8",
                            "xsa@fused+fp8_all"}
    for p in profile.values():
        assert "quantize" in p["categories"] and p["total_ms"] > 0
    # The FP8 GEMM runs where FP8 takes a product: fp8_all's every product; fp8's layer
    # filter takes none of the dry run's small model, whose steps are then fused's.
    scaled = lambda v: [k for k in profile[v]["kernels"] if k["name"] == "aten::_scaled_mm"]
    assert scaled("xsa@fused+fp8_all") and all(k["category"] == "gemm" for k in scaled("xsa@fused+fp8_all"))
    assert not scaled("xsa@fused+fp8") and not scaled("xsa@fused")
    header = next(l for l in proc.stdout.splitlines() if l.startswith("| model | variant | total |"))
    assert "| gemm | quantize |" in header
    assert "| xsa@fused+fp8 |" in proc.stdout


def test_a_second_call_skips_what_is_done_and_retries_on_request(repo_root, broken_lease):
    out, _ = broken_lease
    again = lease(repo_root, out, "--only", LEASE_STAGES)
    assert again.returncode == 1
    assert "parity-aten: done earlier, skipped" in again.stdout and "step-0.7b: done earlier, skipped" in again.stdout
    assert "parity-norm: failed earlier" in again.stdout and "--retry-failed" in again.stdout
    retry = lease(repo_root, out, "--only", LEASE_STAGES, "--retry-failed")
    rows = table_rows(retry.stdout)
    assert retry.returncode == 0, retry.stdout + retry.stderr
    assert rows["parity-norm"][1] == "done" and rows["norm"][2].startswith(("+", "-"))
    with tarfile.open(out.parent / f"{out.name}-results.tgz") as tar:
        names = tar.getnames()
    assert f"{out.name}/verdict.md" in names and f"{out.name}/stages.json" in names
    assert all(n.endswith((".json", ".jsonl", ".md", ".txt", ".log")) for n in names if "." in n.split("/")[-1])


def test_a_lease_with_no_time_left_names_what_is_pending(repo_root, tmp_path, kjv, build_dir):
    out = tmp_path / "gpu-dry-run"
    # Room for preflight and the packed-binary check, not for phase B's stages.
    proc = lease(repo_root, out, "--only", "parity-aten,step-124m,demo", "--budget", "25", "--phase-a", "1")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    rows = table_rows(proc.stdout)
    assert rows["step-124m"][1] == "pending" and rows["demo"][1] == "pending"
    assert "Not done: parity-aten, step-124m, demo" in proc.stdout


def test_the_gtest_listing_parser_takes_no_banner_for_a_suite():
    listing = ("Running main() from /usr/src/googletest/googletest/src/gtest_main.cc\n"
               "XsaCuda.\n  ForwardMatchesFloat64FormulaInEveryLayout\n  BackwardMatches\n"
               "Typed/0.  # TypeParam = float\n  Works\n")
    assert parse_gtest_listing(listing) == {
        "XsaCuda": ["ForwardMatchesFloat64FormulaInEveryLayout", "BackwardMatches"], "Typed/0": ["Works"]}


def dry_verdict(out: pathlib.Path) -> Verdict:
    return Verdict(argparse.Namespace(cpu_dry_run=True, out=out, budget=60))


def test_stages_come_after_what_they_need_in_both_entry_points(tmp_path, build_dir):
    """One rule (order_by_needs) orders the verdict's stages and the lease's: each after
    every stage it needs, a baseline run pulled in just before its kernel (tanh before
    gelu, whatever order the table lists them in); a cycle is refused."""
    listed = [Stage("b", None, 1, needs=("a", "outside")), Stage("c", None, 1, needs=("d",)), Stage("a", None, 1),
              Stage("d", None, 1, needs=("a",))]
    assert [s.name for s in order_by_needs(listed)] == ["a", "b", "d", "c"]
    with pytest.raises(ValueError, match="cycle"):
        order_by_needs([Stage("x", None, 1, needs=("y",)), Stage("y", None, 1, needs=("x",))])
    v = dry_verdict(tmp_path / "gpu-dry-run")
    for stages in (v.stages(sanitizer=True), v.stages(sanitizer=False, first=lease_script.ranking(v.plan))):
        names = [s.name for s in stages]
        assert len(names) == len(set(names)) and {"parity-tanh", "parity-gelu", "step-kernels"} <= set(names)
        for i, st in enumerate(stages):
            for need in st.needs:
                assert need in names[:i], f"{st.name} needs {need}, ordered after it: {names}"
        assert names.index("parity-tanh") < names.index("parity-gelu")
    lease_order = [s.name for s in stages]
    phase_b = [n for n in lease_order if n.startswith(("step-", "profile", "pytorch-", "micro", "demo"))]
    assert phase_b[:4] == ["step-124m", "step-0.7b", "profile", "step-candidates"]
    assert lease_order.index("parity-tanh") + 1 == lease_order.index("parity-gelu")


def test_a_fresh_verdict_runs_gelu_after_its_baseline_and_completes(repo_root, tmp_path, kjv, build_dir):
    """From a clean results folder, in one call: parity-gelu needs parity-tanh, which
    the kernel table lists after it; sorted by needs, both run and the call ends 0."""
    out = tmp_path / "gpu-dry-run"
    proc = verdict(repo_root, out, "--only", "preflight,build,parity-aten,parity-tanh,parity-gelu", "--budget", "400")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert proc.stdout.index("parity-tanh: done") < proc.stdout.index("parity-gelu: running")
    assert "waits for" not in proc.stdout and "Not done" not in proc.stdout


@pytest.mark.parametrize("script", ["bench_verdict.py", "lease.py"])
def test_a_python_without_torch_is_named_in_one_line(repo_root, tmp_path, script):
    """The preflight exists to name what the machine lacks: a Python that cannot import
    torch is that one line and a non-zero exit, not a traceback (on the GPU path, which
    needs the GPU's name from torch, and in the lease, which imports torch itself)."""
    fake = tmp_path / "site"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch/__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    env = dict(os.environ, PYTHONPATH=str(fake))
    # The scripts copied into an empty tree: the lease links a pack it finds into its
    # tree, and this one must not touch the checkout's.
    tree = tmp_path / "tree"
    (tree / "scripts/bench").mkdir(parents=True)
    for name in ("bench_verdict.py", "lease.py", "verdict_table.py"):
        (tree / "scripts/bench" / name).write_text((repo_root / "scripts/bench" / name).read_text())
    shutil.copytree(repo_root / "scripts/bench/verdict", tree / "scripts/bench/verdict",
                    ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run([sys.executable, str(tree / "scripts/bench" / script), "--out", str(tmp_path / "gpu"),
                           "--only", "preflight"], cwd=tree, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [l for l in proc.stderr.splitlines() if "cannot import torch" in l]
    assert len(lines) == 1 and "preflight failed" in lines[0] and "No module named 'torch'" in lines[0], proc.stderr


def test_every_kernel_row_names_cuda_tests_the_test_binary_has(build_dir):
    """The verdict judges a kernel by the CUDA tests its row names (`config --json`):
    each pattern must match tests that exist, so a renamed suite cannot leave a kernel
    silently without tests (and never default-worthy for it)."""
    import fnmatch
    import verdict_table
    plan = verdict_table.Plan(verdict_table.config_json(build_dir / "xsagpt"))
    listing = subprocess.run([str(build_dir / "tests/xsagpt_tests"), "--gtest_list_tests"], capture_output=True,
                             text=True, check=True).stdout
    tests = [f"{suite}.{t}" for suite, names in parse_gtest_listing(listing).items() for t in names]
    assert len(tests) > 100
    for kernel, patterns in plan.tests.items():
        assert patterns, kernel
        for p in patterns:
            assert any(fnmatch.fnmatchcase(t, p) for t in tests), f"{kernel}: {p} matches no test"
    # "fused" is spoken for by every test of a kernel in it, the whole-model tests once.
    assert set(plan.tests["fused"]) >= set(plan.tests["norm"]) | set(plan.tests["xsa"])
    assert len(plan.tests["fused"]) == len(set(plan.tests["fused"]))
