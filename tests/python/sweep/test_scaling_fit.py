"""The power-law fit L(C) = E + A C^-alpha of src/stats/scaling_fit.h against
scipy.optimize.curve_fit on the same points (E fitted, E = 0, one E shared by three
curves), and the least-squares line of src/stats/line_fit.h (the dial trend's slope
and its t interval) against scipy.stats.linregress. Synthetic ladders with chosen
parameters and seeded noise; xsagpt's fit needs no starting point, curve_fit is given
the true parameters as one (so both find the same least-squares minimum). The Huber fits
(src/stats/huber_fit.h, and huber_surface.h's loss surface across data ratios, Chinchilla's
L(N, D) = E + A N^-alpha + B D^-beta with its compute-optimal points) against
scipy.optimize.minimize on the same objective, and on surfaces with chosen parameters."""

import numpy as np
import pytest

optimize = pytest.importorskip("scipy.optimize")  # the eval extra (requirements-eval.txt)
stats = pytest.importorskip("scipy.stats")

COMPUTES = np.array([1e17, 4e17, 1.6e18, 6.4e18, 2.56e19, 1.024e20])
REF = 1e18  # scipy fits A at 1e18 FLOPs (well conditioned); A itself is A_ref * REF**alpha


@pytest.fixture(scope="module")
def tool(json_tool):
    return json_tool("xsagpt_scaling_fit")


def ladder(rng, E, excess, alpha, computes, seeds, noise):
    c = np.repeat(computes, seeds)
    return c, E + excess * (c / REF) ** -alpha + rng.normal(0, noise, c.size)


def law(c, E, a, alpha):
    return E + a * (c / REF) ** -alpha


def assert_same_fit(got, E, a_ref, alpha, rel=1e-3):
    assert "why" not in got, got
    assert got["alpha"] == pytest.approx(alpha, rel=rel)
    assert got["E"] == pytest.approx(E, rel=rel, abs=1e-9)
    assert got["A"] == pytest.approx(a_ref * REF ** alpha, rel=rel)


def test_power_law_fits_match_curve_fit(tool):
    rng = np.random.default_rng(3)
    cases = []
    for E, excess, alpha, seeds, noise in [(1.8, 1.2, 0.28, 5, 0.003), (2.4, 0.8, 0.15, 3, 0.002),
                                           (1.2, 2.0, 0.5, 8, 0.01), (3.1, 0.5, 0.35, 4, 0.001)]:
        cases.append((E, excess, alpha, *ladder(rng, E, excess, alpha, COMPUTES, seeds, noise)))
    got = tool({"fits": [{"compute": list(c), "loss": list(y), "e": None} for *_, c, y in cases] +
                        [{"compute": list(c), "loss": list(y), "e": 0} for *_, c, y in cases]})["fits"]
    free, zero = got[:len(cases)], got[len(cases):]
    for (E, excess, alpha, c, y), g, z in zip(cases, free, zero):
        p, _ = optimize.curve_fit(law, c, y, p0=[E, excess, alpha], bounds=([0, 0, 1e-4], [np.inf, np.inf, 10]),
                                  xtol=1e-14, ftol=1e-14, gtol=1e-14, max_nfev=100000)
        assert abs(p[2] / alpha - 1) > 1e-4  # the noise moved the fit off the chosen law: a real comparison
        assert_same_fit(g, *p)
        assert g["sse"] <= np.sum((y - law(c, *p)) ** 2) * (1 + 1e-9)  # ours is no worse a minimum
        q, _ = optimize.curve_fit(lambda c, a, al: law(c, 0.0, a, al), c, y, p0=[E + excess, 0.05],
                                  bounds=([0, 1e-4], [np.inf, 10]), xtol=1e-14, ftol=1e-14, gtol=1e-14)
        assert_same_fit(z, 0.0, *q)


def test_a_shared_e_matches_curve_fit_on_the_stacked_curves(tool):
    rng = np.random.default_rng(4)
    laws = [(1.0, 0.3), (0.9, 0.36), (1.15, 0.25)]
    curves = [ladder(rng, 1.7, ex, al, COMPUTES[[0, 2, 4]], 4, 0.004) for ex, al in laws]
    got = tool({"shared": [[{"compute": list(c), "loss": list(y)} for c, y in curves]]})["shared"][0]
    which = np.concatenate([np.full(c.size, i) for i, (c, _) in enumerate(curves)])
    cs, ys = np.concatenate([c for c, _ in curves]), np.concatenate([y for _, y in curves])

    def stacked(i_and_c, E, *ps):
        i, c = i_and_c
        a, al = np.array(ps[0::2])[i.astype(int)], np.array(ps[1::2])[i.astype(int)]
        return E + a * (c / REF) ** -al

    p0 = [1.7] + [v for ex_al in laws for v in ex_al]
    p, _ = optimize.curve_fit(stacked, (which, cs), ys, p0=p0, xtol=1e-14, ftol=1e-14, gtol=1e-14, maxfev=100000)
    assert abs(p[0] - 1.7) > 1e-4  # not the chosen E again
    for i, g in enumerate(got):
        assert_same_fit(g, p[0], p[1 + 2 * i], p[2 + 2 * i])


def test_least_squares_line_and_its_interval_match_linregress(tool):
    rng = np.random.default_rng(5)
    lines = []
    for n in [3, 4, 6, 12, 30]:
        x = np.log2(rng.choice([512, 1024, 2048, 4096, 8192, 16384], n))
        while len(set(x)) < 2:
            x = np.log2(rng.choice([512, 1024, 2048, 4096, 8192, 16384], n))
        lines.append((x, 0.01 - 0.004 * x + rng.normal(0, 0.003, n)))
    got = tool({"lines": [{"x": list(x), "y": list(y)} for x, y in lines] + [{"x": [1, 1, 1], "y": [1, 2, 3]}]})
    for (x, y), g in zip(lines, got["lines"]):
        r = stats.linregress(x, y)
        half = stats.t.ppf(0.975, len(x) - 2) * r.stderr
        assert half > 1e-4  # a real spread
        assert g["slope"] == pytest.approx(r.slope, rel=1e-10)
        assert g["intercept"] == pytest.approx(r.intercept, rel=1e-10, abs=1e-13)
        assert g["se"] == pytest.approx(r.stderr, rel=1e-9)
        assert g["ci"] == pytest.approx([r.slope - half, r.slope + half], rel=1e-9)
    assert got["lines"][-1] is None  # one value of x: no line


def huber_objective(params, logc, logy, delta=1e-3):
    """Chinchilla's Approach 3 on a curve: the Huber loss of log(E + A x^-alpha) - log(loss), x = C / REF,
    written with E = exp(e), A = exp(a) as the fit is parameterised."""
    e, a, alpha = params
    r = np.logaddexp(a - alpha * logc, e) - logy
    return float(np.sum(np.where(np.abs(r) <= delta, 0.5 * r * r, delta * (np.abs(r) - 0.5 * delta))))


def test_the_huber_fit_matches_scipy_minimize_on_the_same_objective(tool):
    rng = np.random.default_rng(6)
    cases = [ladder(rng, E, ex, al, COMPUTES, seeds, noise)
             for E, ex, al, seeds, noise in [(1.8, 1.2, 0.28, 3, 0.003), (2.4, 0.8, 0.15, 2, 0.002),
                                             (1.2, 2.0, 0.5, 4, 0.01)]]
    got = tool({"huber": [{"compute": list(c), "loss": list(y)} for c, y in cases]})["huber"]
    for (c, y), g, true in zip(cases, got, [(1.8, 1.2, 0.28), (2.4, 0.8, 0.15), (1.2, 2.0, 0.5)]):
        assert "why" not in g, g
        assert not g["e_capped"]  # these curves' floors lie below every loss: the cap does not bind
        logc, logy = np.log(c / REF), np.log(y)
        start = [np.log(true[0]), np.log(true[1]), true[2]]
        best = optimize.minimize(huber_objective, start, args=(logc, logy), method="L-BFGS-B",
                                 options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10000})
        ours = [np.log(g["E"]), np.log(g["A"] * REF ** -g["alpha"]), g["alpha"]]
        assert abs(best.x[2] / true[2] - 1) > 1e-4  # the noise moved the fit off the chosen law
        assert g["objective"] == pytest.approx(huber_objective(ours, logc, logy), rel=1e-9)
        assert g["objective"] <= best.fun * (1 + 1e-6) + 1e-15  # no worse a minimum than scipy's
        assert g["alpha"] == pytest.approx(best.x[2], rel=2e-3)
        assert g["E"] == pytest.approx(np.exp(best.x[0]), rel=2e-3)


# Chinchilla's fitted surface (Hoffmann et al. 2022, Approach 3): E 1.69, A 406.4, alpha 0.34,
# B 410.7, beta 0.28; and a smaller ladder's own.
SURFACES = [(1.69, 406.4, 0.34, 410.7, 0.28), (2.1, 60.0, 0.3, 300.0, 0.35)]
SIZES = np.array([1e7, 3e7, 1e8, 3e8, 1e9])
RATIOS = np.array([5.0, 10.0, 20.0])


def surface_points(rng, E, A, alpha, B, beta, seeds=1, noise=0.0):
    n = np.repeat(np.repeat(SIZES, RATIOS.size), seeds)
    d = n * np.repeat(np.tile(RATIOS, SIZES.size), seeds)
    return n, d, E + A * n ** -alpha + B * d ** -beta + rng.normal(0, noise, n.size)


def surface_objective(params, logn, logd, logy, delta=1e-3):
    """The Huber loss of log(E + A N^-alpha + B D^-beta) - log(loss) with E = exp(e), A = exp(a), B = exp(b)."""
    e, a, alpha, b, beta = params
    r = np.logaddexp(np.logaddexp(a - alpha * logn, b - beta * logd), e) - logy
    return float(np.sum(np.where(np.abs(r) <= delta, 0.5 * r * r, delta * (np.abs(r) - 0.5 * delta))))


def test_the_surface_fit_recovers_chosen_surfaces_and_their_compute_optimal_points(tool):
    rng = np.random.default_rng(7)
    budgets = [1e18, 1e20, 1e22]
    cases = [surface_points(rng, *s) for s in SURFACES]
    got = tool({"surfaces": [{"params": list(n), "tokens": list(d), "loss": list(y), "budgets": budgets}
                             for n, d, y in cases]})["surfaces"]
    for (E, A, alpha, B, beta), g in zip(SURFACES, got):
        assert "why" not in g, g
        assert (g["E"], g["A"], g["alpha"], g["B"], g["beta"]) == pytest.approx((E, A, alpha, B, beta), rel=1e-4)
        for c, opt in zip(budgets, g["optimal"]):
            # The minimum of L along 6 N D = C, found by scipy over log N, against the closed form.
            along = lambda logn: E + A * np.exp(-alpha * logn) + B * (c / 6 / np.exp(logn)) ** -beta
            m = optimize.minimize_scalar(along, bounds=(np.log(1e3), np.log(c / 6)), method="bounded",
                                         options={"xatol": 1e-10})
            assert opt["params"] == pytest.approx(np.exp(m.x), rel=1e-4)
            assert opt["tokens"] * opt["params"] * 6 == pytest.approx(c, rel=1e-12)
            assert opt["loss"] == pytest.approx(m.fun, rel=1e-9)
    # Non-trivial: the two surfaces put a budget's optimum at different ratios of tokens to parameters.
    ratios = [g["optimal"][1]["tokens"] / g["optimal"][1]["params"] for g in got]
    assert abs(ratios[0] / ratios[1] - 1) > 0.5


def test_the_surface_fit_matches_scipy_minimize_on_the_same_objective(tool):
    rng = np.random.default_rng(8)
    cases = [surface_points(rng, *s, seeds=2, noise=0.004) for s in SURFACES]
    got = tool({"surfaces": [{"params": list(n), "tokens": list(d), "loss": list(y)} for n, d, y in cases]})["surfaces"]
    for (n, d, y), g, true in zip(cases, got, SURFACES):
        assert "why" not in g, g
        logn, logd, logy = np.log(n), np.log(d), np.log(y)
        start = [np.log(true[0]), np.log(true[1]), true[2], np.log(true[3]), true[4]]
        best = optimize.minimize(surface_objective, start, args=(logn, logd, logy), method="L-BFGS-B",
                                 options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 20000})
        ours = [np.log(g["E"]), np.log(g["A"]), g["alpha"], np.log(g["B"]), g["beta"]]
        assert abs(best.x[2] / true[2] - 1) > 1e-4  # the noise moved the fit off the chosen surface
        assert g["objective"] == pytest.approx(surface_objective(ours, logn, logd, logy), rel=1e-9)
        assert g["objective"] <= best.fun * (1 + 1e-6) + 1e-15  # no worse a minimum than scipy's
        assert (g["alpha"], g["beta"]) == pytest.approx((best.x[2], best.x[4]), rel=2e-2)


def test_a_surface_the_points_cannot_pin_down_is_refused_with_why(tool):
    n, d, y = surface_points(np.random.default_rng(9), *SURFACES[0])
    two_sizes = n <= 3e7
    got = tool({"surfaces": [{"params": list(n[two_sizes]), "tokens": list(d[two_sizes]), "loss": list(y[two_sizes])},
                             {"params": list(n[:5]), "tokens": list(d[:5]), "loss": list(y[:5])}]})["surfaces"]
    assert got[0] == {"why": "3 distinct parameter counts and 3 distinct token counts needed, 2 and 6 here"}
    assert got[1] == {"why": "6 points needed to fit E, A, alpha, B and beta with a residual, 5 here"}
