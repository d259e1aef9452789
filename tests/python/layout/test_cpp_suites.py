"""ctest runs the C++ tests a process per googletest suite (tests/CMakeLists.txt,
cmake/GTestSuites.cmake), so what ctest did per test is now the test binary's and the
reports' (tests/cpp/main.cpp, scripts/maint/gtest_reports.py): every suite is a ctest
test, a test that runs past its limit ends its process naming itself, a process whose
every test skipped says so for ctest to report it skipped, and the reports give each
test's time and result."""
import json
import re
import subprocess
import sys

import torch


def run_tests(build_dir, *args, env=None, **kw):
    return subprocess.run([str(build_dir / "tests" / "xsagpt_tests"), *args], capture_output=True, text=True,
                          env=env, timeout=300, **kw)


def test_every_googletest_suite_is_one_ctest_test(build_dir):
    listing = run_tests(build_dir, "--gtest_list_tests").stdout
    suites = {m.group(1) for m in re.finditer(r"^([A-Za-z_][\w/]*)\.(?:  #.*)?$", listing, re.M)}
    tests = re.findall(r"^  \S", listing, re.M)
    assert len(suites) > 50 and len(tests) > 2 * len(suites), (len(suites), len(tests))
    shown = subprocess.run(["ctest", "--test-dir", str(build_dir), "-N"], capture_output=True, text=True,
                           check=True).stdout
    declared = set(re.findall(r"Test +#\d+: (\S+)", shown))
    assert declared == suites, (sorted(declared - suites), sorted(suites - declared))


def test_a_test_past_its_limit_ends_the_process_with_its_name(build_dir, tmp_path):
    test = "HeadInit.ScaledPassesGradientsEverywhereAndZeroNormToTheFinalGain"  # builds and steps a model: > 10 ms
    env = {"XSAGPT_TEST_TIME_LIMIT": "0.01", "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    late = run_tests(build_dir, f"--gtest_filter={test}", env=env)
    assert late.returncode == 124 and f"[  TIMEOUT ] {test} ran past its limit" in late.stderr, late
    on_time = run_tests(build_dir, f"--gtest_filter={test}", env={**env, "XSAGPT_TEST_TIME_LIMIT": "300"})
    assert on_time.returncode == 0 and "[       OK ]" in on_time.stdout and "TIMEOUT" not in on_time.stderr, on_time


def test_a_process_whose_tests_all_skipped_says_so_and_one_that_ran_does_not(build_dir):
    skips_without_gpu = run_tests(build_dir, "--gtest_filter=SdpaBackend.*Cuda:ClipFoldCuda.*")
    assert skips_without_gpu.returncode == 0, skips_without_gpu
    ran = int(re.search(r"Running (\d+) tests?", skips_without_gpu.stdout).group(1))
    assert ran > 0, skips_without_gpu.stdout
    assert ("[ALL SKIPPED]" in skips_without_gpu.stdout) == (not torch.cuda.is_available()), skips_without_gpu.stdout
    passes = run_tests(build_dir, "--gtest_filter=HeadInit.Impossible*")
    assert passes.returncode == 0 and "[ALL SKIPPED]" not in passes.stdout, passes


def test_the_reports_give_each_tests_time_and_result(build_dir, repo_root, tmp_path):
    reports = tmp_path / "reports"
    run_tests(build_dir, "--gtest_filter=HeadInit.Scaled*:HeadInit.Impossible*:SdpaBackend.*Cuda", f"--gtest_output=json:{reports}/a.json",
              check=True)
    data = json.loads((reports / "a.json").read_text())
    by_name = {f"{s['name']}.{t['name']}": t for s in data["testsuites"] for t in s["testsuite"]}
    skipped = sorted(n for n, t in by_name.items() if t.get("result") == "SKIPPED")
    assert len(by_name) == 3 and any(n.startswith("HeadInit.") for n in by_name)
    out = subprocess.run([sys.executable, str(repo_root / "scripts/maint/gtest_reports.py"), str(reports),
                          "--slowest", "2"], capture_output=True, text=True, check=True).stdout.splitlines()
    assert len(out) == 3 and all(re.fullmatch(r" *\d+\.\d\d s  \S+\.\S+", line) for line in out[:2]), out
    slowest = max(by_name, key=lambda n: float(by_name[n]["time"].rstrip("s")))
    assert out[0].endswith(f"  {slowest}"), (out, slowest)
    assert out[2].startswith(f"{len(by_name)} tests in the reports: {len(by_name) - len(skipped)} passed, 0 failed, "
                             f"{len(skipped)} skipped"), out
    for name in skipped:
        assert name in out[2], (name, out[2])
