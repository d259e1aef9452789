"""docs/architecture.md's source layout names every file of src/: a folder's entry
("src/sweep/  grid (...), run (...), ...") names each of its files by its stem
("grid" for grid.h and grid.cpp), its name ("stubs.cpp"), or a pattern that covers it
("kind_*", "*_cuda.cu"). A file the map does not name is one a reader cannot find
their way to, and the map falls behind the code one file at a time."""
import fnmatch
import re
from pathlib import Path

SOURCES = {".h", ".cpp", ".cu", ".cuh"}
ENTRY = re.compile(r"^src/([\w-]+)/\s")
WORD = re.compile(r"[\w*.]+")


def entries(page: str) -> dict[str, str]:
    """Each folder's entry in the source layout's block: its first line (from "src/NAME/")
    and the indented lines after it."""
    block = page.split("## Source layout", 1)[1].split("```")[1]
    out, folder = {}, None
    for line in block.splitlines():
        if m := ENTRY.match(line):
            folder = m.group(1)
            out[folder] = line[m.end():]
        elif folder and line.startswith(" "):
            out[folder] += " " + line
        else:
            folder = None
    return out


def named(path: Path, entry: str) -> bool:
    words = {w.rstrip(".") for w in WORD.findall(entry)}
    return path.stem in words or path.name in words or any(
        "*" in w and (fnmatch.fnmatch(path.stem, w) or fnmatch.fnmatch(path.name, w)) for w in words)


def unnamed(src: Path, page: str) -> list[str]:
    """Files of src/'s folders that their folder's entry does not name."""
    found = entries(page)
    return [p.relative_to(src.parent).as_posix() for p in sorted(src.glob("*/*"))
            if p.suffix in SOURCES and not named(p, found.get(p.parent.name, ""))]


def test_architecture_names_every_file_of_src(repo_root):
    src = repo_root / "src"
    page = (repo_root / "docs" / "architecture.md").read_text()
    folders = sorted(p.name for p in src.iterdir() if p.is_dir())
    assert len(folders) > 10 and set(entries(page)) >= set(folders), \
        f"folders of src/ without an entry in docs/architecture.md: {sorted(set(folders) - set(entries(page)))}"
    missing = unnamed(src, page)
    assert missing == [], f"files of src/ that docs/architecture.md's source layout does not name: {missing}"


def test_the_check_sees_an_unnamed_file(tmp_path):
    for name in ("grid.h", "grid.cpp", "kind_xsa.cpp", "add_cuda.cu", "stubs.cpp", "report.h"):
        folder = tmp_path / "src" / ("kernels" if "cuda" in name or "stubs" in name else "sweep")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("")
    page = ("# A\n\n## Source layout\n\n```\nsrc/sweep/      grid (the grid), kind_* (each kind)\n"
            "src/kernels/    fused ops (*_cuda.cu), stubs.cpp.\nconfigs/        report\n```\n")
    assert unnamed(tmp_path / "src", page) == ["src/sweep/report.h"]
