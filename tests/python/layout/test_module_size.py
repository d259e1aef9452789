"""Python modules stay small (the guide: under ~350 lines, one concern to a module): a
module of scripts/ or data/ past the limit is split where it has seams, into modules
beside it, which a script imports by name (docs/architecture.md: a script imports only
modules beside it)."""
from pathlib import Path

LIMIT = 350


def long_modules(root: Path, limit: int = LIMIT) -> list[tuple[str, int]]:
    """(path relative to root, lines) of every .py file under root longer than limit."""
    out = []
    for path in sorted(root.rglob("*.py")):
        n = len(path.read_text().splitlines())
        if n > limit:
            out.append((path.relative_to(root).as_posix(), n))
    return out


def test_no_module_in_scripts_or_data_is_over_the_limit(repo_root):
    for folder, least in (("scripts", 30), ("data", 3)):
        root = repo_root / folder
        n = sum(1 for _ in root.rglob("*.py"))
        assert n > least, f"only {n} modules found under {root}: is the scan reading the tree?"
        assert long_modules(root) == [], f"modules of {folder}/ over {LIMIT} lines: split them where they have seams"


def test_the_check_sees_a_long_module(tmp_path):
    (tmp_path / "group").mkdir()
    (tmp_path / "group" / "long.py").write_text("x = 1\n" * (LIMIT + 1))
    (tmp_path / "group" / "short.py").write_text("x = 1\n" * LIMIT)
    assert long_modules(tmp_path) == [("group/long.py", LIMIT + 1)]
