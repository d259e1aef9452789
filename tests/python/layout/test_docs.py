"""The docs show what the code does now: the configuration reference equals
`xsagpt config` (and the kernel list the scripts read equals `xsagpt config --json`),
every section of the sweep file has its key table in docs/, equal to `xsagpt config
--sweep SECTION`,
the README names every subcommand `xsagpt --help` lists, every relative link in
README.md and docs/ leads to a file (and a heading) that exists, the README links
every page of docs/, and it stays a page a newcomer reads in two minutes."""
import json
import re
import subprocess
import sys

LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def anchors(path) -> set:
    lines, fenced = [], False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            lines.append(slug(line.lstrip("#")))
    return set(lines)


def broken_links(repo_root) -> list:
    bad = []
    for page in [repo_root / "README.md", *sorted((repo_root / "docs").glob("*.md"))]:
        for target in LINK.findall(page.read_text()):
            if re.match(r"(https?:|mailto:)", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                bad.append(f"{page.relative_to(repo_root)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                bad.append(f"{page.relative_to(repo_root)}: {target} (no such heading)")
    return bad


def test_config_reference_is_current(repo_root, build_dir, xsagpt):
    proc = subprocess.run([sys.executable, repo_root / "scripts" / "maint" / "sync_config_reference.py", "--check"],
                          capture_output=True, text=True, env={"XSAGPT_BUILD_DIR": str(build_dir)})
    assert proc.returncode == 0, proc.stderr
    # The kernels as the program lists them (`config --json`, from kKernelTable) are what
    # the verdict's scripts read, from the program, and what bench's help names: one
    # list, no copies.
    import verdict_table
    kernels = json.loads(xsagpt("config", "--json").stdout)["kernels"]
    assert len(kernels) >= 6 and any(not k["fused"] for k in kernels) and any(k["auto"] for k in kernels)
    assert all(k["help"] and k["tests"] for k in kernels)
    assert verdict_table.config_json(build_dir / "xsagpt") == kernels
    # The kernels the shipped models cannot run (the program's own check) are those the
    # verdict runs on another model, and only those.
    assert {k["name"] for k in kernels if not k["default_model"]} == \
        set(verdict_table.MODEL) - set(verdict_table.BASELINE_RUNS) == {"gelu"}
    # cxxopts wraps the help at its column, inside a word if it must: unwrap it first
    bench_help = re.sub(r"\n\s+", "", xsagpt("bench", "--help").stdout)
    assert f"({','.join(k['name'] for k in kernels)})" in bench_help


def test_every_sweep_file_section_has_its_table(repo_root, xsagpt):
    """The sweep file's keys are declared once (src/sweep/sweep_file.h); each section's
    table in docs/ is printed from the declaration (test_config_reference_is_current
    holds the tables' text to it), and no section is left without one."""
    sections = json.loads(xsagpt("config", "--json").stdout)["sweep_file_sections"]
    assert {"sweep", "ladder", "slurm"} <= set(sections)
    marked = [m for p in (repo_root / "docs").glob("*.md")
              for m in re.findall(r"<!-- sweep-file:([a-z_]+):begin -->", p.read_text())]
    assert sorted(marked) == sorted(sections)
    # A key of each part is in its table, as the program prints it.
    slurm = xsagpt("config", "--sweep", "slurm").stdout
    assert "| `slurm.time` | time limit" in slurm and "| required |" in slurm
    assert "| `slurm.signal_s` | integer | `120` |" in slurm
    assert "| `ladder.extrapolate_decades` | number | `1.0` |" in xsagpt("config", "--sweep", "ladder").stdout
    proc = xsagpt("config", "--sweep", "nope", check=False)
    assert proc.returncode != 0 and "--sweep: expected a section of the sweep file" in proc.stderr


def test_readme_names_every_command(repo_root, xsagpt):
    readme = (repo_root / "README.md").read_text()
    commands = [l.split()[0] for l in xsagpt("--help").stdout.splitlines() if l.startswith("  ")]
    assert len(commands) >= 5
    for c in commands:
        assert f"xsagpt {c}" in readme, c


def test_every_relative_link_resolves(repo_root):
    pages = [repo_root / "README.md", *(repo_root / "docs").glob("*.md")]
    n_links = sum(len(LINK.findall(p.read_text())) for p in pages)
    assert n_links > 25, f"only {n_links} links found: is the scan reading the pages?"
    assert broken_links(repo_root) == []


def test_the_link_check_sees_a_broken_link(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## Its part\n")
    (tmp_path / "README.md").write_text("[ok](docs/a.md#its-part) [gone](docs/b.md) [heading](docs/a.md#nope)\n")
    assert broken_links(tmp_path) == ["README.md: docs/b.md (no such file)", "README.md: docs/a.md#nope (no such heading)"]


def test_readme_indexes_every_doc(repo_root):
    """The README's documentation table is the way into docs/: a page missing from it is lost."""
    linked = set(LINK.findall((repo_root / "README.md").read_text()))
    missing = [p.name for p in sorted((repo_root / "docs").glob("*.md")) if f"docs/{p.name}" not in linked]
    assert missing == [], f"docs/ pages the README does not link: {missing}"


def test_readme_is_short(repo_root):
    lines = (repo_root / "README.md").read_text().count("\n")
    assert lines < 170, f"README.md has {lines} lines: move detail into docs/"
