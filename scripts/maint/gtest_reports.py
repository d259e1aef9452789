#!/usr/bin/env python3
"""The C++ suite's slowest tests and its skipped ones, from the googletest JSON reports
that ctest's processes write (one per suite, tests/CMakeLists.txt). ctest itself sees a
process per suite, so a test's own time and a skip inside a suite that also passed
are read here. scripts/test.sh prints this after ctest's summary.

    .venv/bin/python scripts/maint/gtest_reports.py build/gtest-reports --slowest 15
"""
import argparse
import json
import pathlib
import sys


def read_reports(folder: pathlib.Path) -> list[tuple[str, str, float]]:
    """(suite.test, 'pass' | 'fail' | 'skip', seconds) for every test in the reports."""
    tests = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except ValueError:
            print(f"gtest_reports: {path} is not JSON (its process died while writing it?)", file=sys.stderr)
            continue
        for suite in data.get("testsuites", []):
            for t in suite.get("testsuite", []):
                result = "fail" if t.get("failures") else "skip" if t.get("result") == "SKIPPED" else "pass"
                tests.append((f"{suite['name']}.{t['name']}", result, float(t.get("time", "0s").rstrip("s"))))
    return tests


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=pathlib.Path, help="the reports' folder (the build folder's gtest-reports/)")
    ap.add_argument("--slowest", type=int, default=15, help="how many of the slowest tests to list (default 15)")
    args = ap.parse_args()
    tests = read_reports(args.folder)
    if not tests:
        print(f"gtest_reports: no test reports in {args.folder}", file=sys.stderr)
        return 1
    for name, _, seconds in sorted(tests, key=lambda t: -t[2])[:args.slowest]:
        print(f"{seconds:8.2f} s  {name}")
    skipped = [name for name, result, _ in tests if result == "skip"]
    print(f"{len(tests)} tests in the reports: {sum(r == 'pass' for _, r, _ in tests)} passed, "
          f"{sum(r == 'fail' for _, r, _ in tests)} failed, {len(skipped)} skipped"
          + (f" ({', '.join(skipped[:8])}{', ...' if len(skipped) > 8 else ''})" if skipped else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
