"""Holm's adjustment as xsagpt computes it (src/stats/holm.h) against the procedure as Holm
(1979) defines it (tests/python/holm_reference.py: the smallest level at which the sequential
procedure rejects), on random families, and against hand-computed families that cover the
monotone step (a larger raw p whose Bonferroni factor is smaller), ties, the cap at 1 and the
tests without a p-value (not members of the family)."""

import numpy as np
import pytest

from holm_reference import holm_by_definition


@pytest.fixture(scope="module")
def holm(json_tool):
    tool = json_tool("xsagpt_paired_stats")
    return lambda families: tool({"holm": families})["holm"]


def same(got, want):
    """Equal lists of adjusted p-values: None where the other is None, else equal to float64 rounding."""
    return len(got) == len(want) and all(
        (g is None) == (w is None) and (w is None or g == pytest.approx(w, rel=1e-15, abs=0)) for g, w in zip(got, want))


def test_hand_computed_families(holm):
    families = {
        # sorted 0.005 0.01 0.03 0.04: x4 0.02, x3 0.03, x2 0.06, x1 0.04 -> held at 0.06 (monotone)
        "monotone": ([0.01, 0.04, 0.03, 0.005], [0.03, 0.06, 0.06, 0.02]),
        # a tie: 0.02 x3 = 0.06 and 0.02 x2 = 0.04 -> both 0.06
        "tie": ([0.02, 0.5, 0.02], [0.06, 0.5, 0.06]),
        # 0.6 x2 = 1.2 capped at 1, and 0.7 held at 1
        "cap": ([0.7, 0.6], [1.0, 1.0]),
        # no p (one seed, no spread): not in the family, m = 2
        "missing": ([None, 0.01, None, 0.03], [None, 0.02, None, 0.03]),
        "single": ([0.04], [0.04]),
        "none": ([None, None], [None, None]),
        "empty": ([], []),
    }
    got = holm([f for f, _ in families.values()])
    for (name, (family, want)), g in zip(families.items(), got):
        assert g["m"] == sum(p is not None for p in family), name
        assert same(g["adjusted"], want), name
        assert all(a is None or a >= p for a, p in zip(g["adjusted"], family) if p is not None), name


def test_random_families_match_the_procedure(holm):
    rng = np.random.default_rng(68)
    families = []
    for m in [2, 3, 4, 5, 8, 20]:
        for _ in range(6):
            # Raw values from a small set as well, so that ties are common.
            pool = rng.choice([0.001, 0.01, 0.02, 0.05, 0.2, 0.4], m) if rng.random() < 0.5 else rng.random(m) ** 3
            fam = [float(p) for p in pool]
            if rng.random() < 0.3:
                fam[int(rng.integers(m))] = None
            families.append(fam)
    got = holm(families)
    moved = capped = 0
    for fam, g in zip(families, got):
        want, m = holm_by_definition(fam)
        assert g["m"] == m
        assert same(g["adjusted"], want)
        raw = [(p, a) for p, a in zip(fam, g["adjusted"]) if p is not None]
        for (p1, a1) in raw:  # the order of the raw values is kept
            for (p2, a2) in raw:
                assert not (p1 <= p2 and a1 > a2)
        moved += sum(a > p for p, a in raw)
        capped += sum(a == 1.0 for _, a in raw)
    assert moved > 50 and capped > 5  # the comparison is not one of unadjusted or all-ones values


def test_a_p_value_outside_0_1_is_refused(holm):
    bad = holm([[0.1, 1.5], [-0.1]])
    assert all("not in [0, 1]" in b["error"] for b in bad)
