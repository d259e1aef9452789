"""The GPU verdict (scripts/bench/lease.py over bench_verdict.py's stages) rehearsed on the
CPU: what one call of a lent GPU depends on. A stage broken on purpose leaves the
others' rows and the table comes back; correctness runs before the timed stages; a
second call skips what is done; a call with no time left starts nothing and says
`pending` with the command that finishes it; the results bundle is text under 1 MiB,
and a binary file in it is refused by name. A few stages at tiny sizes keep it short;
every stage runs in the manual dry run (docs/gpu-machine.md)."""
import json
import pathlib
import subprocess
import sys
import tarfile

import pytest

@pytest.fixture(scope="module")
def kjv(repo_root):
    shards = repo_root / "data/kjv/shards"
    if not (shards / "val_000000.bin").exists():
        subprocess.run(["bash", str(repo_root / "data/kjv/prepare.sh")], check=True, capture_output=True)
    return shards


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
    # Room for preflight and the (already built) build, not for a parity run (~25 s planned).
    proc = verdict(repo_root, out, "--only", "preflight,build,parity-aten,micro", "--budget", "24")
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
                "step-gelu,micro,demo")


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
    for done in ("preflight", "build", "tests", "parity-aten", "parity-fused", "step-0.7b", "profile", "micro", "demo"):
        assert rows[done][1] == "done", rows[done]
    # Correctness first, then the timed stages alone.
    assert proc.stdout.index("[lease] phase A over") < proc.stdout.index("step-0.7b: running")
    assert proc.stdout.index("parity-fused: done") < proc.stdout.index("[lease] phase A over")
    # The default's table (what a user gets), the kernel table and the profile, from one call.
    assert "The default, `train.kernels`" in proc.stdout and rows["fused"][2].startswith(("+", "-"))
    assert "Where the default step's time goes" in proc.stdout
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
    assert {"xsa@aten", "xsa@fused", "xsa@clip", "xsa@fused+graphs"} <= set(step["results"])
    assert "The kernels outside \"auto\"" in proc.stdout and "| xsa@fused+graphs |" in proc.stdout
    assert "(n=" in rows["graphs"][4] and "(n=" in rows["clip"][4]


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
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "scripts/bench"))
    import bench_verdict
    listing = ("Running main() from /usr/src/googletest/googletest/src/gtest_main.cc\n"
               "XsaCuda.\n  ForwardMatchesFloat64FormulaInEveryLayout\n  BackwardMatches\n"
               "Typed/0.  # TypeParam = float\n  Works\n")
    assert bench_verdict.parse_gtest_listing(listing) == {
        "XsaCuda": ["ForwardMatchesFloat64FormulaInEveryLayout", "BackwardMatches"], "Typed/0": ["Works"]}
