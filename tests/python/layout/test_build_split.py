"""src/ builds as two static libraries (CMakeLists.txt): xsagpt_lib, what a training
step runs and everything below it, at -O3, and xsagpt_tools, the tools above it
(XSAGPT_TOOL_FOLDERS: stats, sample, bench, eval, sweep, cli) at -O1. xsagpt_tools links
xsagpt_lib, never the other way, so a library file that included a tool's header would
fail to link, or link only by the order of the archives. This holds the split to the
includes."""
import re
from pathlib import Path

from test_layers import INCLUDE


def tool_folders(cmakelists: Path) -> set:
    m = re.search(r"^set\(XSAGPT_TOOL_FOLDERS ([^)]*)\)", cmakelists.read_text(), re.M)
    assert m, f"{cmakelists}: no set(XSAGPT_TOOL_FOLDERS ...)"
    return set(m.group(1).split())


def library_includes_of_tools(src: Path, tools: set):
    """(library file, tool header) for every include from a library folder into a tool
    folder, and the number of library files read."""
    bad, read = [], 0
    for f in sorted(p for p in src.rglob("*") if p.suffix in {".h", ".cpp", ".cu", ".cuh"}):
        rel = f.relative_to(src).as_posix()
        if "/" not in rel or rel.split("/")[0] in tools:
            continue  # the entry point and the tools may include anything below them
        read += 1
        bad += [(rel, inc) for inc in INCLUDE.findall(f.read_text()) if inc.split("/")[0] in tools]
    return bad, read


def test_no_library_file_includes_a_tool(repo_root):
    tools = tool_folders(repo_root / "CMakeLists.txt")
    src = repo_root / "src"
    assert tools and all((src / t).is_dir() for t in tools), f"XSAGPT_TOOL_FOLDERS names no src/ folder: {tools}"
    bad, read = library_includes_of_tools(src, tools)
    assert read > 100, f"only {read} library files read under {src}"
    assert not bad, "library files (-O3, xsagpt_lib) that include a tool's (xsagpt_tools) header:\n" + "\n".join(
        f"  src/{f} includes {inc}" for f, inc in bad)


def test_the_check_sees_a_library_file_including_a_tool(tmp_path):
    for d in ("train", "sweep"):
        (tmp_path / d).mkdir()
    (tmp_path / "sweep" / "plan.h").write_text("#pragma once\n")
    (tmp_path / "train" / "loop.cpp").write_text('#include "sweep/plan.h"\n#include "train/loop.h"\n')
    (tmp_path / "sweep" / "run.cpp").write_text('#include "train/loop.h"\n')
    assert library_includes_of_tools(tmp_path, {"sweep"}) == ([("train/loop.cpp", "sweep/plan.h")], 1)
