"""Student's t as xsagpt computes it (src/stats/paired.h: the closed form for integer
degrees of freedom, the quantile by bisection) against scipy.stats: two-sided p-values
and 95%/99% critical values over df 1..30 and 100, and the paired statistics (mean,
sd, 95% t interval, ttest_rel's t and p) of random differences of 2..31 and 101 seeds."""

import numpy as np
import pytest

stats = pytest.importorskip("scipy.stats")  # the eval extra (requirements-eval.txt); not on every GPU image

DFS = list(range(1, 31)) + [100]


@pytest.fixture(scope="module")
def tool(json_tool):
    return json_tool("xsagpt_paired_stats")


def test_p_values_and_critical_values_match_scipy(tool):
    ts = [0.0, 0.05, 0.5, 1.0, 1.96, 2.5, 4.0, 10.0, 50.0]
    got = tool({"p": [[t, df] for df in DFS for t in ts], "critical": [[lv, df] for df in DFS for lv in (0.95, 0.99)]})
    want_p = [2 * stats.t.sf(t, df) for df in DFS for t in ts]
    assert min(want_p) < 1e-10 and max(want_p) == 1.0  # the tails and the centre are both covered
    for g, w in zip(got["p"], want_p):
        assert g == pytest.approx(w, rel=1e-9, abs=1e-13)
    want_t = [stats.t.ppf(0.5 + lv / 2, df) for df in DFS for lv in (0.95, 0.99)]
    assert want_t[0] == pytest.approx(12.706, abs=1e-3)  # df 1: the familiar table value
    assert got["critical"] == pytest.approx(want_t, rel=1e-12)


def test_paired_statistics_match_ttest_rel_and_t_interval(tool):
    rng = np.random.default_rng(7)
    samples = []
    for n in [2, 3, 4, 5, 8] + list(range(9, 32, 5)) + [101]:
        base = rng.normal(3.5, 0.05, n)
        var = base + rng.normal(rng.choice([-0.02, 0.0, 0.01]), 0.01, n)
        samples.append((base, var))
    got = tool({"paired": [list(v - b) for b, v in samples] + [[0.25], []]})["paired"]
    for (b, v), g in zip(samples, got):
        d = v - b
        n = len(d)
        res = stats.ttest_rel(v, b)
        lo, hi = stats.t.interval(0.95, n - 1, loc=d.mean(), scale=stats.sem(d))
        assert g["n"] == n and g["mean"] == pytest.approx(d.mean(), abs=1e-15)
        assert g["sd"] == pytest.approx(d.std(ddof=1), rel=1e-12)
        assert g["t"] == pytest.approx(res.statistic, rel=1e-10)
        assert g["p"] == pytest.approx(res.pvalue, rel=1e-8, abs=1e-14)
        assert g["ci"] == pytest.approx([lo, hi], rel=1e-10, abs=1e-14)
    assert any(g["p"] < 0.01 for g in got[:-2]) and any(g["p"] > 0.2 for g in got[:-2])  # non-trivial p's
    one, none = got[-2:]
    assert one == {"n": 1, "mean": 0.25, "sd": None, "ci": None, "t": None, "p": None}  # one seed: no interval
    assert none["n"] == 0 and none["ci"] is None
