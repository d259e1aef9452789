#!/usr/bin/env python3
"""Regenerates docs/config-reference.md's table from `xsagpt config` (the table
between the config-reference markers). With --check, exits 1 if the page is out of
date instead of rewriting it. XSAGPT_BUILD_DIR picks the build (default build)."""
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "config-reference.md"
BEGIN, END = "<!-- config-reference:begin -->", "<!-- config-reference:end -->"


def expected_page(binary: pathlib.Path) -> tuple[str, str]:
    table = subprocess.run([str(binary), "config"], check=True, capture_output=True, text=True).stdout
    page = PAGE.read_text()
    block = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not block.search(page):
        sys.exit(f"{PAGE}: config-reference markers not found")
    return page, block.sub(lambda _: f"{BEGIN}\n{table}{END}", page)


def main() -> int:
    binary = ROOT / os.environ.get("XSAGPT_BUILD_DIR", "build") / "xsagpt"
    current, wanted = expected_page(binary)
    if "--check" in sys.argv:
        if current != wanted:
            print(f"{PAGE.relative_to(ROOT)} is out of date: run scripts/maint/sync_config_reference.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
