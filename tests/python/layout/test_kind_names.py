"""An attention kind's name is spelled in its rows (src/config/attention_kinds.cpp, and the
model's half of the table, src/model/attention_kinds.cpp, kept in step with it by a C++
test) and its own file (src/model/kind_*.cpp), and read everywhere else: from the table
(config/attention_kinds.h in C++, `xsagpt config --json` in the scripts) or from a run's
config.json ("variant"). This test fails on a string literal equal to a kind's name
anywhere else in src/ or scripts/, so that a new kind is one file and one row, not a hunt
through the tools. Comments and docstrings may name kinds; code may not.

The exceptions, each for a reason:
- independent implementations of each kind's formula, which must know the kinds they
  implement: the PyTorch reference model the tests check the C++ model against, and the
  export (export.py writes each kind's formula into config.json's conventions, through
  export_conventions.py, and export_hf.py into the transformers folder's; load_export.py
  and the transformers code under hf/ rebuild it where xsagpt is not installed);
- studies and GPU benchmarks whose subject is two named kinds, SA against XSA
  (scripts/study/, the GPU verdict and the warm-up list of the lease);
- values of other keys that coincide with kind names: model.xsa_gate's starts ("sa",
  "xsa": the kind it starts as) and the train.kernels row "xsa" (the kernel, not the kind).
"""
import io
import re
import tokenize
from pathlib import Path

ROW_FILE = "src/config/attention_kinds.cpp"
ROW_FILES = {ROW_FILE, "src/model/attention_kinds.cpp"}
EXEMPT = {
    "scripts/reference/model.py", "scripts/reference/config.py",
    "scripts/eval/export.py", "scripts/eval/export_conventions.py", "scripts/eval/export_hf.py",
    "scripts/eval/load_export.py",
    "scripts/eval/hf/modeling_xsagpt.py", "scripts/eval/hf/configuration_xsagpt.py",
    "scripts/study/study_head.py", "scripts/study/study_muon.py",
    "scripts/bench/verdict/correctness.py", "scripts/bench/verdict/schedule.py", "scripts/bench/verdict/timing.py",
    "scripts/bench/verdict_table.py", "scripts/bench/verdict/plan.py", "scripts/bench/bench_gpu.sh",
    "scripts/bench/lease.py",
}
# C++ lines where a kind's name is the value of another key: (file, a substring of the line).
OTHER_KEYS = [("src/config/attention_kinds.h", "XsaGate::"), ("src/config/runtime.cpp", "Kernels& k")]


def kind_names(repo_root: Path) -> list[str]:
    """The names of the table's rows: each row opens with {"name", (a kind's keys open the
    same way, nested deeper in their row)."""
    found = re.findall(r'^(\s*)\{"([a-z0-9_]+)",', (repo_root / ROW_FILE).read_text(), re.M)
    depth = min(len(indent) for indent, _ in found)
    return [name for indent, name in found if len(indent) == depth]


def cpp_spellings(path: Path, rel: str, names: set[str]):
    for n, line in enumerate(path.read_text().splitlines(), 1):
        code = re.sub(r"//.*", "", line)
        for lit in re.findall(r'"((?:[^"\\]|\\.)*)"', code):
            if lit in names and not any(rel == f and key in line for f, key in OTHER_KEYS):
                yield f"{rel}:{n}: \"{lit}\""


def python_spellings(path: Path, rel: str, names: set[str]):
    source = path.read_text()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.STRING:
            body = re.sub(r"^[rbuRBU]*", "", tok.string)
            if len(body) >= 2 and body[0] == body[-1] and body[0] in "'\"" and body[1:-1] in names:
                yield f"{rel}:{tok.start[0]}: {tok.string}"


def shell_spellings(path: Path, rel: str, names: set[str]):
    for n, line in enumerate(path.read_text().splitlines(), 1):
        code = re.sub(r"(^|\s)#.*", "", line)
        for lit in re.findall(r'"([^"]*)"|\'([^\']*)\'', code):
            if any(x in names for x in lit):
                yield f"{rel}:{n}: {line.strip()}"


def spellings(repo_root: Path, names: set[str]) -> list[str]:
    found = []
    for path in sorted((repo_root / "src").rglob("*")):
        rel = path.relative_to(repo_root).as_posix()
        if path.suffix in {".h", ".cpp", ".cu", ".cuh"} and rel not in ROW_FILES and not path.name.startswith("kind_"):
            found += cpp_spellings(path, rel, names)
    for path in sorted((repo_root / "scripts").rglob("*")):
        rel = path.relative_to(repo_root).as_posix()
        if rel in EXEMPT:
            continue
        if path.suffix == ".py":
            found += python_spellings(path, rel, names)
        elif path.suffix == ".sh":
            found += shell_spellings(path, rel, names)
    return found


def test_the_table_has_rows(repo_root):
    names = kind_names(repo_root)
    assert len(names) >= 2 and len(set(names)) == len(names), names


def test_no_kind_is_spelled_outside_its_row(repo_root):
    found = spellings(repo_root, set(kind_names(repo_root)))
    assert not found, ("attention kinds spelled outside their row (read them from the table, "
                       "`xsagpt config --json` or config.json's variant):\n" + "\n".join(found))


def test_the_check_sees_a_spelling(repo_root, tmp_path):
    """The scanner itself finds what it must, so a pass above means something."""
    names = set(kind_names(repo_root))
    name = sorted(names)[0]
    cpp, py = tmp_path / "a.cpp", tmp_path / "a.py"
    cpp.write_text(f'auto k = "{name}";  // "{name}" in a comment is fine\n')
    py.write_text(f'"""{name} in a docstring is fine"""\nkind = "{name}"  # and in a comment\n')
    assert [s.split(": ", 1)[1] for s in cpp_spellings(cpp, "a.cpp", names)] == [f'"{name}"']
    assert len(list(python_spellings(py, "a.py", names))) == 1


def test_config_json_lists_the_rows_each_with_its_docs_line(repo_root, xsagpt):
    """`xsagpt config --json` lists the table's rows in order (what the scripts read), each
    kind's keys and options, and every kind has its line in the docs' table of kinds."""
    import json
    kinds = json.loads(xsagpt("config", "--json").stdout)["attention_kinds"]
    assert [k["name"] for k in kinds] == kind_names(repo_root)
    assert all(k["help"] for k in kinds)
    assert not kinds[0]["step"] and all(k["step"] for k in kinds[1:])  # the default is plain attention
    # Every shipped kind is exportable: the mark appears only on a row with a reason.
    assert not any("not_exportable" in k for k in kinds)
    for k in kinds:
        for key, spec in k["keys"].items():
            assert spec["type"] in {"choice", "layers", "bool", "integer", "number"} and spec["help"], (k["name"], key)
            assert spec["type"] != "choice" or spec["default"] in spec["choices"], (k["name"], key)
    docs = (repo_root / "docs" / "sweeps-and-plots.md").read_text()
    for k in kinds:
        assert f"| `{k['name']}` |" in docs, k["name"]
        for key in k["keys"]:
            assert f"`{key}`" in docs, (k["name"], key)
