"""The library and the C++ tests compile in unity batches (CMakeLists.txt,
tests/CMakeLists.txt): the .cpp files of one folder (src/model/, tests/cpp/model/,
...) share a translation unit, and so their anonymous namespaces. Two files defining
one file-local name either fail to compile or, worse, overload each other:
test_device's error_of once lost to test_data's, which caught another exception type. So within a folder, a name defined
at the top level of one .cpp file is defined in no other."""
import collections
import re
from pathlib import Path

# A function defined in an anonymous namespace: a line at the top level (not
# indented) with an unqualified name before '(' that does not end in ';'.
DEFINITION = re.compile(r"^(?!TEST|INSTANTIATE|#|//|}|using|return|template)[^\s(][^(=]*?(?<!::)\b(\w+)\s*\(")


def top_level_names(path: Path) -> set:
    """Names of the functions a file defines in its anonymous namespaces."""
    names, local = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("namespace {"):
            local = True
        elif line.startswith("}  // namespace") or line.startswith("} // namespace"):
            local = False
        elif local:
            m = DEFINITION.match(line)
            if m and not line.rstrip().endswith(";") and m.group(1) not in {"if", "for", "while", "switch"}:
                names.add(m.group(1))
    return names


def shared_names(folder: Path) -> dict:
    where = collections.defaultdict(list)
    for f in sorted(folder.glob("*.cpp")):
        for name in top_level_names(f):
            where[name].append(f.name)
    return {n: fs for n, fs in where.items() if len(fs) > 1}


def test_no_file_local_name_is_defined_twice_in_a_folder(repo_root):
    folders = [d for root in ("src", "tests/cpp") for d in (repo_root / root).iterdir() if d.is_dir()]
    assert any(f.name == "test_model.cpp" for d in folders for f in d.glob("*.cpp")), "tests/cpp's folders unread"
    seen = sum(len(top_level_names(f)) for d in folders for f in d.glob("*.cpp"))
    assert seen > 100, f"only {seen} definitions found: is the scan reading the files?"
    clashes = {f"{d.relative_to(repo_root)}: {n}": fs for d in folders for n, fs in shared_names(d).items()}
    assert not clashes, "names defined in two files of one folder (one unity batch):\n" + "\n".join(
        f"  {k} in {', '.join(v)}" for k, v in sorted(clashes.items()))


def test_the_scan_sees_a_clash(tmp_path):
    (tmp_path / "a.cpp").write_text("namespace {\nstd::string error_of(const json& j) {\n  return {};\n}\n}\n")
    (tmp_path / "b.cpp").write_text("namespace {\ntemplate <class F>\nstd::string error_of(F&& f) {\n  return {};\n}\n"
                                    "}  // namespace\n")
    assert shared_names(tmp_path) == {"error_of": ["a.cpp", "b.cpp"]}
