#!/usr/bin/env python3
"""Regenerates the key tables that docs/ prints from the program: docs/config-reference.md's
run-config table from `xsagpt config` (between the config-reference markers), and each
table of the sweep file's keys from `xsagpt config --sweep SECTION`, wherever a page of
docs/ marks one (between "<!-- sweep-file:SECTION:begin -->" and its end marker). With
--check, exits 1 if a page is out of date instead of rewriting it. XSAGPT_BUILD_DIR picks
the build (default build)."""
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "config-reference.md"
BEGIN, END = "<!-- config-reference:begin -->", "<!-- config-reference:end -->"
SWEEP_BLOCK = re.compile(r"(<!-- sweep-file:([a-z_]+):begin -->\n).*?(<!-- sweep-file:\2:end -->)", re.S)


def run(binary: pathlib.Path, *args: str) -> str:
    return subprocess.run([str(binary), "config", *args], check=True, capture_output=True, text=True).stdout


def expected_pages(binary: pathlib.Path) -> dict[pathlib.Path, tuple[str, str]]:
    """Each page with a generated table: (its text now, its text as the program gives it)."""
    pages = {}
    page = PAGE.read_text()
    block = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not block.search(page):
        sys.exit(f"{PAGE}: config-reference markers not found")
    table = run(binary)
    pages[PAGE] = (page, block.sub(lambda _: f"{BEGIN}\n{table}{END}", page))
    for doc in sorted((ROOT / "docs").glob("*.md")):
        text = pages[doc][1] if doc in pages else doc.read_text()
        wanted = SWEEP_BLOCK.sub(lambda m: m.group(1) + run(binary, "--sweep", m.group(2)) + m.group(3), text)
        if wanted != text or doc in pages:
            pages[doc] = (pages[doc][0] if doc in pages else text, wanted)
    return pages


def main() -> int:
    binary = ROOT / os.environ.get("XSAGPT_BUILD_DIR", "build") / "xsagpt"
    pages = expected_pages(binary)
    stale = [page for page, (current, wanted) in pages.items() if current != wanted]
    if "--check" in sys.argv:
        for page in stale:
            print(f"{page.relative_to(ROOT)} is out of date: run scripts/maint/sync_config_reference.py", file=sys.stderr)
        return 1 if stale else 0
    for page in stale:
        page.write_text(pages[page][1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
