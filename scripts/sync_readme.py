#!/usr/bin/env python3
"""Regenerates the configuration reference in README.md from `xsagpt config`
(the table between the config-reference markers). With --check, exits 1 if the
README is out of date instead of rewriting it."""
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- config-reference:begin -->", "<!-- config-reference:end -->"


def expected_readme(binary: pathlib.Path) -> tuple[str, str]:
    table = subprocess.run([str(binary), "config"], check=True, capture_output=True, text=True).stdout
    readme = (ROOT / "README.md").read_text()
    block = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not block.search(readme):
        sys.exit("README.md: config-reference markers not found")
    return readme, block.sub(lambda _: f"{BEGIN}\n{table}{END}", readme)


def main() -> int:
    binary = ROOT / os.environ.get("XSAGPT_BUILD_DIR", "build") / "xsagpt"
    current, wanted = expected_readme(binary)
    if "--check" in sys.argv:
        if current != wanted:
            print("README.md's configuration reference is out of date: run scripts/sync_readme.py", file=sys.stderr)
            return 1
        return 0
    (ROOT / "README.md").write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
