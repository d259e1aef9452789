"""Files an earlier release wrote keep reading as they did: tests/fixtures/outputs_8c221ac/
holds a sweep (summary.json, its points' config.json and metrics.jsonl) and an
analysis.json and loss_by_position.json, written by xsagpt at 8c221ac, before
analysis.json's "variant" became the model's variant name (its words moved to
"description"). plot.py's readers give what they gave then, and the figures draw; a
file the current binary writes is read by its new keys."""
import json
import pathlib
import shutil

import pytest

from plot_inputs import load_analysis, load_sweep, point_variant, sweep_variants
from plotfiles import check_png, plot_ok

OLD = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "outputs_8c221ac" / "sweep"
ANALYZED = OLD / "xsa-last1,train.seed=1"


def test_an_old_analysis_is_labelled_by_its_kind_as_before():
    data = json.loads((ANALYZED / "analysis.json").read_text())
    assert "description" not in data and data["variant"].startswith("xsa in layer 1")  # the older form: words
    a = load_analysis(ANALYZED / "analysis.json")
    # What 8c221ac's own plot_inputs gave for this file: the attention kind, the run's folder, the layers.
    assert (a.label, a.variant) == ("xsa-last1,train.seed=1", "xsa") == (ANALYZED.name, data["attention"])
    assert a.layers == sorted(data["layers"], key=lambda l: l["layer"]) and len(a.layers) == 2


def test_an_old_sweep_reads_its_variants_and_runs_as_before():
    summary = json.loads((OLD / "summary.json").read_text())
    s = load_sweep(OLD)
    assert sweep_variants(s) == (["sa", "xsa-last1"], "sa") == (summary["variants"], summary["baseline"])
    assert [point_variant(s, p) for p in s.summary["points"]] == ["sa", "xsa-last1", "sa", "xsa-last1"]
    # Each run by the name its config.json gave its model, as 8c221ac read it.
    runs = {name: r.variant for name, r in s.runs.items()}
    assert runs == {"sa,train.seed=1": "sa", "sa,train.seed=2": "sa",
                    "xsa-last1,train.seed=1": "xsa layers=last 1 gate=sa",
                    "xsa-last1,train.seed=2": "xsa layers=last 1 gate=sa"}
    for name, r in s.runs.items():
        assert r.variant == json.loads((OLD / name / "config.json").read_text())["variant"]
        assert len(r.val.loss) == 3 and len(r.train.loss) == 8  # val at steps 0, 4, 8


def test_old_files_still_draw(tmp_path):
    shutil.copytree(OLD, tmp_path / "sweep")
    for p in plot_ok(tmp_path / "sweep"):
        check_png(p)
    for p in plot_ok(tmp_path / "sweep" / "xsa-last1,train.seed=1" / "analysis.json"):
        check_png(p)


@pytest.fixture(scope="module")
def new_analysis(tmp_path_factory, xsagpt):
    """The same model trained and analysed by the current binary, from the fixture's config."""
    d = tmp_path_factory.mktemp("new")
    cfg = json.loads((ANALYZED / "config.json").read_text())
    from shardio import write_markov_shards
    data = write_markov_shards(d / "data", {"val_000000.bin": 1024, "train_000001.bin": 3000}, seed=0)
    cfg["data"] = {"train": str(data / "train_*.bin"), "val": str(data / "val_*.bin")}
    cfg["out_dir"] = str(d / "run")
    cfg.pop("variant")
    (d / "cfg.json").write_text(json.dumps(cfg))
    xsagpt("train", "-c", d / "cfg.json")
    xsagpt("analyze", d / "run", "--sequences", 4, "--device", "cpu", "--threads", 1)
    return d / "run" / "analysis.json"


def test_a_new_analysis_is_labelled_by_its_variant_name(new_analysis):
    data = json.loads(new_analysis.read_text())
    config = json.loads((new_analysis.parent / "config.json").read_text())
    assert data["variant"] == config["variant"] == "xsa layers=last 1 gate=sa"
    assert data["description"] == "xsa in layer 1, gated (starts as sa)"
    assert load_analysis(new_analysis).variant == data["variant"]
