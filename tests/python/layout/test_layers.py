"""The source layers point one way (docs/architecture.md): a file under src/ may
include only headers of its own layer or of layers below it. Bottom to top:
util, data, kernels, stats; config; model, tokenizer; distributed, optim; run; train, analysis,
sample; bench, eval, sweep; cli; main.cpp. The optimizers and the run directory sit
below the training loop, so the tools (cli/, sweep/) that read a run reach it
without the loop."""
import re
from pathlib import Path

LAYERS = [["util", "data", "kernels", "stats"], ["config"], ["model", "tokenizer"], ["distributed", "optim"], ["run"],
          ["train", "analysis", "sample"], ["bench", "eval", "sweep"], ["cli"], ["main.cpp"]]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(rel: str):
    """The layer of a path relative to src/ ("model/gpt.h" -> 2); None for files
    outside the layers (the precompiled header)."""
    return RANK.get(rel.split("/")[0])


def upward_includes(src: Path):
    """(file, included header, file's layer, header's layer) for every include that
    points up, and the number of project includes seen."""
    bad, seen = [], 0
    for f in sorted(p for p in src.rglob("*") if p.suffix in {".h", ".cpp", ".cu", ".cuh"}):
        rel = f.relative_to(src).as_posix()
        own = layer_of(rel)
        for inc in INCLUDE.findall(f.read_text()):
            target = layer_of(inc)
            if target is None:
                continue
            seen += 1
            if own is not None and target > own:
                bad.append((rel, inc, own, target))
    return bad, seen


def test_no_include_points_up(repo_root):
    src = repo_root / "src"
    bad, seen = upward_includes(src)
    assert seen > 200, f"only {seen} project includes found under {src}: is the scan reading the tree?"
    for d in sorted(p.name for p in src.iterdir() if p.is_dir()):
        assert d in RANK, f"src/{d}/ is in no layer: add it to LAYERS here and to docs/architecture.md"
    assert not bad, "includes that point up the layers:\n" + "\n".join(
        f"  src/{f} (layer {a}) includes {inc} (layer {b})" for f, inc, a, b in bad)


def test_the_check_sees_an_upward_include(tmp_path):
    # The scan itself can fail: a model file that reaches up into train/ is caught.
    (tmp_path / "model").mkdir()
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "state.h").write_text("#pragma once\n")
    (tmp_path / "model" / "gpt.cpp").write_text('#include "train/state.h"\n#include <vector>\n')
    bad, seen = upward_includes(tmp_path)
    assert seen == 1
    assert bad == [("model/gpt.cpp", "train/state.h", 2, 5)]
