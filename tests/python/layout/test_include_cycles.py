"""Within src/, the files of a concern (a header and its .cpp: one unit, "sweep/grid")
depend on each other in one direction: no chain of includes leads from a unit back to
itself. The layer check (test_layers.py) sees only includes that point up between
folders; a loop inside one folder passes it. Such a loop (sweep's ladder included its
plan, which included the grid, which included the ladder) means no file of it can be
read, built or tested without the others, and the next include that closes it is a
compile error only when it happens to need a complete type.

The same holds for the Python modules beside each other in a folder of data/ and
scripts/, which import each other by name: a loop there (compact.py imported
prepare.py for the shard format, which imported compact.py back) means neither runs
alone, and a script that is run as __main__ is imported a second time under its name."""
import re
from pathlib import Path

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
IMPORT = re.compile(r"^\s*(?:import\s+(\w+)|from\s+(\w+)\s+import\b)", re.M)
SOURCES = {".h", ".cpp", ".cu", ".cuh"}
# The one loop left, with its reason; the test fails once it is gone, so that the
# exception goes with it. exec.h's norm() takes a LayerNorm (model/layers.h) and the MLP
# there runs through Exec: breaking it puts LayerNorm in a file of its own, a change to
# headers that every model file includes.
KNOWN = [["model/exec", "model/layers"]]


def unit_of(rel: str) -> str:
    """The unit of a path relative to src/: the path without its extension."""
    return rel.rsplit(".", 1)[0]


def include_graph(src: Path) -> dict[str, set[str]]:
    """unit -> the other units whose headers its files include (includes that name a file
    of src/; the system's and the libraries' are not followed)."""
    graph: dict[str, set[str]] = {}
    for f in sorted(p for p in src.rglob("*") if p.suffix in SOURCES):
        unit = unit_of(f.relative_to(src).as_posix())
        graph.setdefault(unit, set())
        for inc in INCLUDE.findall(f.read_text()):
            if (src / inc).is_file() and unit_of(inc) != unit:
                graph[unit].add(unit_of(inc))
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of units that reach each other (strongly connected, more than one
    unit), each sorted: Tarjan's algorithm, iterative so that no depth limit applies."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    u = stack.pop()
                    on_stack.discard(u)
                    group.append(u)
                    if u == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return sorted(found)


def test_no_include_cycle(repo_root):
    graph = include_graph(repo_root / "src")
    edges = sum(len(v) for v in graph.values())
    assert len(graph) > 100 and edges > 300, f"{len(graph)} units, {edges} edges: is the scan reading src/?"
    found = cycles(graph)
    new = [c for c in found if c not in KNOWN]
    assert new == [], "units of src/ that include each other in a loop:\n" + "\n".join(
        "  " + " <-> ".join(c) for c in new)
    assert [c for c in KNOWN if c not in found] == [], "a known loop is gone: remove it from KNOWN"


def test_the_check_sees_a_loop(tmp_path):
    # The sweep's old loop: ladder.cpp -> ladder_plan.h -> grid.h -> ladder.h; text_table
    # hangs off it without being part of it.
    (tmp_path / "sweep").mkdir()
    files = {"ladder.h": "", "ladder.cpp": '#include "sweep/ladder.h"\n#include "sweep/ladder_plan.h"\n',
             "ladder_plan.h": '#include "sweep/grid.h"\n', "grid.h": '#include "sweep/ladder.h"\n#include <vector>\n',
             "grid.cpp": '#include "sweep/grid.h"\n#include "sweep/text_table.h"\n', "text_table.h": ""}
    for name, text in files.items():
        (tmp_path / "sweep" / name).write_text(text)
    assert cycles(include_graph(tmp_path)) == [["sweep/grid", "sweep/ladder", "sweep/ladder_plan"]]
    (tmp_path / "sweep" / "ladder.cpp").write_text('#include "sweep/ladder.h"\n')
    assert cycles(include_graph(tmp_path)) == []


def import_graph(folder: Path) -> dict[str, set[str]]:
    """module -> the modules beside it (in the same folder) that it imports by name."""
    names = {p.stem for p in folder.glob("*.py")}
    return {p.stem: {a or b for a, b in IMPORT.findall(p.read_text())} & names - {p.stem}
            for p in sorted(folder.glob("*.py"))}


def test_no_import_cycle_among_the_python_modules(repo_root):
    folders = [repo_root / "data", *sorted(p for p in (repo_root / "scripts").rglob("*") if p.is_dir())]
    graphs = {f.relative_to(repo_root).as_posix(): import_graph(f) for f in folders}
    edges = sum(len(v) for g in graphs.values() for v in g.values())
    assert edges > 30 and graphs["data"]["prepare"], f"{edges} imports found: is the scan reading the modules?"
    found = {name: cycles(g) for name, g in graphs.items() if cycles(g)}
    assert found == {}, f"modules that import each other in a loop: {found}"


def test_the_python_check_sees_a_loop(tmp_path):
    (tmp_path / "prepare.py").write_text("import numpy\nimport compact  # noqa\n")
    (tmp_path / "compact.py").write_text("from prepare import read_shard\n")
    (tmp_path / "shard_format.py").write_text("import os\n")
    assert cycles(import_graph(tmp_path)) == [["compact", "prepare"]]
    (tmp_path / "compact.py").write_text("from shard_format import read_shard\n")
    assert cycles(import_graph(tmp_path)) == []
