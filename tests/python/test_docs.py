"""The README shows what the code does now: its configuration reference equals
`xsagpt config`, and it names every subcommand `xsagpt --help` lists."""
import subprocess
import sys


def test_readme_config_reference_is_current(repo_root, build_dir):
    proc = subprocess.run([sys.executable, repo_root / "scripts" / "sync_readme.py", "--check"],
                          capture_output=True, text=True, env={"XSAGPT_BUILD_DIR": str(build_dir)})
    assert proc.returncode == 0, proc.stderr


def test_readme_names_every_command(repo_root, xsagpt):
    readme = (repo_root / "README.md").read_text()
    commands = [l.split()[0] for l in xsagpt("--help").stdout.splitlines() if l.startswith("  ")]
    assert len(commands) >= 5
    for c in commands:
        assert f"xsagpt {c}" in readme, c
