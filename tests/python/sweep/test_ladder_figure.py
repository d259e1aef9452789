"""plot.py on a ladder sweep's summary.json, written here in the shape `xsagpt sweep` gives
its ladder section (src/sweep/ladder_summary.cpp): a section of another shape (a key
missing, a string where a list belongs, a compute below zero) or with a number JSON cannot
hold is refused in one line naming it, before anything is drawn; and sweep_ladder.png says
in words when no curve could be fitted, with tick labels that tell the ticks apart over a
narrow range of losses."""
import copy
import json

import pytest

from fig_ladder import ladder_figure
from finite_json import NON_FINITE
from plot_inputs import load_sweep

VARIANTS, SEEDS = ("sa", "xsa"), (1, 2)


def ladder_section(losses: dict, e_rule: str | None = "zero") -> dict:
    """A ladder section over rungs d1, d2, ... whose observed losses are losses[(variant,
    rung index, seed)], fitted (e_rule) as a power law through them, or with no fit."""
    n = 1 + max(r for _, r, _ in losses)
    compute = [1e12 * 4 ** r for r in range(n)]
    rungs = [{"name": f"d{r + 1}", "n_layer": r + 1, "d_model": 64, "n_head": 1, "params": 50_000 * (r + 1),
              "tokens": 8192 * (r + 1), "steps": 8, "warmup_steps": 2, "flops": compute[r], "lr": 1e-3}
             for r in range(n)]
    obs = [{"point": f"{v},d{r + 1},s{s}", "variant": v, "rung": f"d{r + 1}", "seed": s, "lr_mult": 1.0,
            "compute": compute[r], "loss": loss} for (v, r, s), loss in losses.items()]
    if e_rule is None:
        analysis = {"baseline": "sa", "e_rule": None, "e_rule_why": "the baseline sa has results at 1 rung(s): no "
                    "curve to compare with", "fits": {v: {"points": 2, "why": "no curve"} for v in VARIANTS},
                    "rungs": [{"rung": r, "baseline": {"compute": compute[r]}, "variants": {"xsa": {
                        "compute": compute[r], "why": "no curve for the baseline sa"}}} for r in range(n)]}
    else:
        analysis = {"baseline": "sa", "e_rule": e_rule, "e_rule_why": "2 rungs, the fewest of any fitted curve",
                    "fits": {"sa": {"E": 0.0, "A": 21.0, "alpha": 0.06}, "xsa": {"E": 0.0, "A": 20.7, "alpha": 0.06}},
                    "rungs": [{"rung": r, "baseline": {"compute": compute[r]}, "variants": {"xsa": {
                        "compute": compute[r], "multiplier": 0.6 + 0.01 * r, "multiplier_ci95": [0.5, 0.7]}}}
                              for r in range(n)]}
    return {"rules": {}, "rungs": rungs, "observations": obs, "left_out": [], "analysis": analysis}


def write_ladder(d, section: dict, text=None):
    """A ladder sweep folder: its summary.json (points without run folders, as after a copy
    of the summary alone) around `section`, or the summary's `text` as given."""
    d.mkdir(parents=True, exist_ok=True)
    points = [{"name": o["point"], "dir": o["point"], "variant": o["variant"],
               "values": {"ladder.rung": o["rung"], "train.seed": o["seed"]}, "status": "done",
               "final_val_loss": o["loss"]} for o in section["observations"]]
    summary = {"keys": ["ladder.rung", "train.seed"], "variants": list(VARIANTS), "baseline": "sa",
               "points": points, "ladder": section}
    (d / "summary.json").write_text(text if text is not None else json.dumps(summary, indent=1))
    return d


FITTED = {(v, r, s): 4.0 - 0.3 * r - (0.05 if v == "xsa" else 0) + 0.01 * s for v in VARIANTS for r in range(3)
          for s in SEEDS}


def test_a_ladder_of_the_trainers_shape_draws(tmp_path):
    fig = ladder_figure(load_sweep(write_ladder(tmp_path / "ladder", ladder_section(FITTED))))
    assert fig is not None and len(fig.axes) == 2
    assert "E rule: zero" in fig.axes[0].get_title()
    assert len(fig.axes[1].lines) > 1  # the multipliers were drawn


def test_extrapolated_multipliers_are_drawn_flagged_and_a_missing_interval_is_explained(tmp_path):
    section = ladder_section(FITTED)
    section["analysis"]["extrapolation"] = {"xsa": [
        {"name": "paper-0.7b", "compute": 1e15, "extrapolation": True, "multiplier": 0.4, "ci95": [0.3, 0.5],
         "trend_multiplier": 0.45, "trend_ci95": None},
        {"name": "paper-1.4b", "compute": 1e21, "extrapolation": True, "multiplier": None, "ci95": None,
         "trend_multiplier": None, "trend_ci95": None, "why": "6.8 decades past the ladder"}]}
    section["analysis"]["bootstrap"] = {"none": "one seed: no interval"}
    ax = ladder_figure(load_sweep(write_ladder(tmp_path / "ladder", section))).axes[1]
    # The curves' value and the trend's at paper-0.7b, flagged; nothing at paper-1.4b, past the decades allowed.
    assert [t.get_text() for t in ax.texts].count("?") == 2
    assert sum("past the ladder?" in t.get_text() for t in ax.get_legend().get_texts()) == 1
    assert ax.get_title() == "multiplier at each rung; no interval: one seed: no interval"


def test_a_multiplier_where_the_baseline_has_no_run_is_drawn_open_and_flagged(tmp_path):
    section = ladder_section(FITTED)
    top = section["analysis"]["rungs"][2]
    top["baseline"] = None  # the baseline's top rung failed
    top["variants"]["xsa"].update(extrapolation=True, decades_past_baseline=0.6)
    ax = ladder_figure(load_sweep(write_ladder(tmp_path / "ladder", section))).axes[1]
    # Before: the top rung's multiplier was drawn on the measured line, as if measured.
    assert [t.get_text() for t in ax.texts].count("?") == 1
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sum("has no run?" in t for t in labels) == 1 and "xsa / sa" in labels
    measured = next(c for c in ax.containers if c.get_label() == "xsa / sa")
    assert len(measured.lines[0].get_xdata()) == 2  # the two rungs where sa was measured, joined; the third apart


def cut(path: str):
    """A change to a section: the key at a dotted path (list indices as numbers) deleted, or set."""
    def at(section, value, delete):
        *parents, last = [int(k) if k.isdigit() else k for k in path.split(".")]
        node = section
        for k in parents:
            node = node[k]
        if delete:
            del node[last]
        else:
            node[last] = value
    return at


DAMAGE = [
    # (what to change, value or None to delete, the path named, what it says): before, each a traceback.
    ("analysis", None, "ladder.analysis is missing; expected an object"),  # KeyError
    ("analysis.rungs", "d1,d2,d3", 'ladder.analysis.rungs is "d1,d2,d3"; expected a list of objects'),  # TypeError
    ("rungs", "d1", 'ladder.rungs is "d1"; expected a list of objects'),
    ("observations.0.compute", "1e12", 'ladder.observations[0].compute is "1e12"; expected a number > 0'),
    ("observations.1.loss", -3.5, "ladder.observations[1].loss is -3.5; expected a number > 0"),
    ("analysis.fits.xsa", [0.0, 39.0], "ladder.analysis.fits.xsa is [0.0, 39.0]; expected an object"),
    ("analysis.rungs.1.rung", 7, "ladder.analysis.rungs[1].rung is 7; expected a rung's index, 0 to 2"),
    ("analysis.rungs.0.variants.xsa.multiplier_ci95", "wide",
     'ladder.analysis.rungs[0].variants.xsa.multiplier_ci95 is "wide"; expected null or a list of two numbers'),
    ("rungs.2.tokens", -8192, "ladder.rungs[2].tokens is -8192; expected a number >= 0"),
    ("analysis.rungs.0.variants.xsa.time_multiplier_ci95", [0.5],
     "ladder.analysis.rungs[0].variants.xsa.time_multiplier_ci95 is [0.5]; expected null or a list of two numbers"),
    ("analysis.extrapolation", {"xsa": [{"name": "paper-0.7b", "compute": "far"}]},
     'ladder.analysis.extrapolation.xsa[0].compute is "far"; expected a number > 0'),
]


@pytest.mark.parametrize("path, value, why", DAMAGE, ids=[d[0] for d in DAMAGE])
def test_a_ladder_section_of_another_shape_is_refused_by_name(tmp_path, plot_module, capsys, path, value, why):
    section = copy.deepcopy(ladder_section(FITTED))
    cut(path)(section, value, value is None)
    d = write_ladder(tmp_path / "ladder", section)
    assert plot_module.main([str(d), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"plot.py: error: {d / 'summary.json'}: {why}") and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("old, new, why", [
    ('"multiplier": 0.61', '"multiplier": NaN', NON_FINITE),
    ('"alpha": 0.06', '"alpha": Infinity', NON_FINITE),
    ('"alpha": 0.06', '"alpha": 1e999', "a number past a double's range (1e999) is not finite; the trainer writes null"),
])
def test_a_number_json_cannot_hold_in_a_ladder_is_refused_by_line(tmp_path, plot_module, capsys, old, new, why):
    text = json.dumps(json.loads((write_ladder(tmp_path / "good", ladder_section(FITTED)) / "summary.json")
                                 .read_text()), indent=1)
    assert old in text
    d = write_ladder(tmp_path / "ladder", ladder_section(FITTED), text.replace(old, new, 1))
    line = 1 + text[:text.index(old)].count("\n")
    # Before: exit 0, the NaN multiplier and the infinite alpha drawn.
    assert plot_module.main([str(d), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"plot.py: error: {d / 'summary.json'}:{line}: {why}\n"


def visible_labels(ax) -> list[str]:
    """The y tick labels of an axis as drawn: major and minor, within its limits, not blank."""
    ax.figure.canvas.draw()
    lo, hi = ax.get_ylim()
    labels = []
    for locs, fmt in ((ax.yaxis.get_majorticklocs(), ax.yaxis.get_major_formatter()),
                      (ax.yaxis.get_minorticklocs(), ax.yaxis.get_minor_formatter())):
        inside = [x for x in locs if lo <= x <= hi]
        labels += [t for t in fmt.format_ticks(inside) if t.strip()]
    return labels


def test_a_ladder_without_a_fit_says_why_and_tells_its_ticks_apart(tmp_path):
    # Every point near ln(50257) = 10.825, the loss of a model that learned nothing, at one rung.
    flat = {(v, 0, s): 10.80 + 0.01 * i for i, (v, s) in enumerate((v, s) for v in VARIANTS for s in SEEDS)}
    fig = ladder_figure(load_sweep(write_ladder(tmp_path / "ladder", ladder_section(flat, e_rule=None))))
    title = fig.axes[0].get_title()
    # Before: "... (E rule: None)", and the loss axis labelled 10.8 six times.
    assert "None" not in title and "no fitted curve" in title and "the baseline sa has results at 1 rung" in title
    labels = visible_labels(fig.axes[0])
    assert len(labels) >= 3 and len(set(labels)) == len(labels), labels
    assert all(10.7 < float(t) < 10.9 for t in labels), labels


def test_the_ticks_of_a_ladder_over_decades_stay_short(tmp_path):
    wide = {(v, r, s): 40.0 / 3 ** r + 0.01 * s for v in VARIANTS for r in range(4) for s in SEEDS}
    fig = ladder_figure(load_sweep(write_ladder(tmp_path / "ladder", ladder_section(wide))))
    labels = visible_labels(fig.axes[0])
    assert len(labels) >= 2 and len(set(labels)) == len(labels), labels
    assert all(len(t) <= 4 for t in labels), labels  # 1, 10, not 10.000
