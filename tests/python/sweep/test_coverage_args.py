"""scripts/study/coverage.py's arguments: each one checked by name (exit 2, no traceback) before
anything is simulated, and a small valid simulation read back from its --json."""
import json
import math
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
COVERAGE = ROOT / "scripts" / "study" / "coverage.py"


def coverage(*args, build_dir=None):
    env = {**os.environ, "XSAGPT_BUILD_DIR": str(build_dir)} if build_dir else None
    return subprocess.run([sys.executable, str(COVERAGE), *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.mark.parametrize("args, named", [
    (["--noise", "-1"], "--noise"), (["--noise", "nan"], "--noise"), (["--noise", "inf"], "--noise"),
    (["--noise", "0"], "--noise"), (["--noise", "1", "x"], "--noise"),
    (["--rng-seed", "-1"], "--rng-seed"), (["--rng-seed", "1.5"], "--rng-seed"),
    (["--seeds", "1"], "--seeds"), (["--ladders", "0"], "--ladders"), (["--replicates", "1"], "--replicates"),
    (["--json", "/nonexistent-folder/coverage.json"], "--json"),
])
def test_each_bad_argument_is_refused_by_name_before_any_simulation(args, named, tmp_path):
    proc = coverage(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"argument {named}" in proc.stderr, proc.stderr
    assert proc.stdout == ""  # no table: nothing was simulated


def test_a_json_path_that_is_a_folder_is_refused(tmp_path):
    proc = coverage("--json", tmp_path)
    assert proc.returncode == 2 and "argument --json" in proc.stderr and "Traceback" not in proc.stderr


def test_a_small_simulation_writes_the_table_it_prints(build_dir, tmp_path):
    out = tmp_path / "rows.json"
    proc = coverage("--seeds", 2, "--ladders", 3, "--replicates", 20, "--noise", 0.5, "--json", out,
                    build_dir=build_dir)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(out.read_text())
    assert [(r["seeds"], r["noise"], r["ladders"]) for r in rows] == [(2, 0.5, 3)]
    r = rows[0]
    assert 0 < r["with_intervals"] <= 3  # some simulated ladder had intervals to count
    for key in ("top_rung", "every_rung", "trend"):
        assert 0 <= r[key] <= 1 and not math.isnan(r[key])
    assert f"{r['top_rung']:.3f}" in proc.stdout
