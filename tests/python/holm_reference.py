"""Holm's adjustment (Holm 1979) written from the procedure, the reference the tests hold
xsagpt's (src/stats/holm.h, and scripts/eval/table2.py's) against. At level alpha, with the
p-values sorted ascending, the procedure rejects while p_(k) <= alpha / (m - k + 1) and stops
at the first that is not; a hypothesis's adjusted p-value is the smallest alpha at which it is
rejected. Tests without a p-value (None) are no members of the family."""


def rejected_at(ps, alpha):
    """The hypotheses (indices into ps) Holm's sequential procedure rejects at level alpha,
    written as (m - k + 1) p_(k) against alpha so that the candidates below compare exactly."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    m, out = len(ps), set()
    for k, i in enumerate(order, start=1):
        if (m - k + 1) * ps[i] > alpha:
            break
        out.add(i)
    return out


def holm_by_definition(family):
    """(adjusted p-values in the order given, None where the input is None; m)."""
    idx = [i for i, p in enumerate(family) if p is not None]
    ps = [family[i] for i in idx]
    m = len(ps)
    # The smallest rejecting alpha is one of the values (m - k + 1) p_(k), capped at 1.
    candidates = sorted({min(1.0, (m - k) * p) for k, p in enumerate(sorted(ps))} | {1.0})
    adjusted = [None] * len(family)
    for j, i in enumerate(idx):
        adjusted[i] = next(a for a in candidates if j in rejected_at(ps, a) or a == 1.0)
    return adjusted, m
