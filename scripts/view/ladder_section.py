"""The ladder section of a sweep's summary.json (src/sweep/ladder_summary.cpp and
ladder_analysis.cpp write it), checked whole when plot.py reads the summary, so that
fig_ladder.py draws from the shapes it reads: the rungs, the observations (every seed's
compute and loss, both positive: the axes are logarithmic), what was left out, and the
analysis (its fits, its E rule, the multiplier at each rung in compute and in time, and the
multipliers carried past the ladder) or the error that stopped it. A section of another shape (a key missing, a string where a list belongs, a compute
below zero) was edited or damaged; it is named by its path (ladder.analysis.rungs[1].rung)
and what was expected, in one line, rather than ending in a traceback or a wrong figure."""
from __future__ import annotations

import json

from metrics_record import is_number


class _Bad(Exception):
    pass


_MISSING = object()  # a key not there, told apart from null


def _shown(v) -> str:
    if v is _MISSING:
        return "missing"
    text = json.dumps(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _need(ok: bool, where: str, v, expected: str) -> None:
    if not ok:
        raise _Bad(f"{where} is {_shown(v)}; expected {expected}")


def _get(obj: dict, key: str, where: str, kind, expected: str, optional: bool = False):
    """obj[key], which must be a `kind` (missing or null passes where optional: None)."""
    v = obj.get(key, _MISSING)
    if optional and v in (_MISSING, None):
        return None
    _need(isinstance(v, kind) and not isinstance(v, bool), f"{where}.{key}", v, expected)
    return v


def _number(obj: dict, key: str, where: str, positive: bool = False, optional: bool = False) -> None:
    """obj[key] must be a number, >= 0 or, with positive, > 0 (missing or null passes where optional)."""
    v = obj.get(key, _MISSING)
    if optional and v in (_MISSING, None):
        return
    ok = is_number(v) and (v > 0 if positive else v >= 0)
    _need(ok, f"{where}.{key}", v, "a number > 0" if positive else "a number >= 0")


def _objects(obj: dict, key: str, where: str) -> list[tuple[str, dict]]:
    """The objects of the list obj[key], each with its path."""
    items = _get(obj, key, where, list, "a list of objects")
    for i, item in enumerate(items):
        _need(isinstance(item, dict), f"{where}.{key}[{i}]", item, "an object")
    return [(f"{where}.{key}[{i}]", item) for i, item in enumerate(items)]


def _check_rungs(ladder: dict) -> int:
    rungs = _objects(ladder, "rungs", "ladder")
    for where, r in rungs:
        _get(r, "name", where, str, "the rung's name")
        for key in ("params", "tokens", "steps", "flops"):  # counts
            _number(r, key, where, optional=True)
    return len(rungs)


def _check_observations(ladder: dict) -> None:
    for where, o in _objects(ladder, "observations", "ladder"):
        _get(o, "variant", where, str, "a variant's name")
        _get(o, "rung", where, str, "a rung's name")
        _number(o, "compute", where, positive=True)
        _number(o, "loss", where, positive=True)
    _get(ladder, "left_out", "ladder", list, "a list of the points left out")


def _check_analysis(ladder: dict, n_rungs: int) -> None:
    a = _get(ladder, "analysis", "ladder", dict, "an object (the fits, or the error that stopped them)")
    if "error" in a:
        _get(a, "error", "ladder.analysis", str, "a message")
        return
    _get(a, "e_rule", "ladder.analysis", str, "the E rule's name, or null", optional=True)
    _get(a, "e_rule_why", "ladder.analysis", str, "a sentence", optional=True)
    for var, fit in _get(a, "fits", "ladder.analysis", dict, "an object of fits by variant").items():
        where = f"ladder.analysis.fits.{var}"
        _need(isinstance(fit, dict), where, fit, "an object")
        for key in ("E", "A", "alpha"):  # absent where the variant has no curve
            v = fit.get(key)
            _need(v is None or is_number(v), f"{where}.{key}", v, "a number or null")
    for where, r in _objects(a, "rungs", "ladder.analysis"):
        rung = r.get("rung", _MISSING)
        _need(is_number(rung) and isinstance(rung, int) and 0 <= rung < n_rungs, f"{where}.rung", rung,
              f"a rung's index, 0 to {n_rungs - 1}")
        if (base := _get(r, "baseline", where, dict, "an object or null", optional=True)) is not None:
            _number(base, "compute", f"{where}.baseline", positive=True, optional=True)
        variants = _get(r, "variants", where, dict, "an object of variants", optional=True) or {}
        for var, m in variants.items():
            at = f"{where}.variants.{var}"
            _need(isinstance(m, dict), at, m, "an object")
            _number(m, "compute", at, positive=True, optional=True)
            for key in ("multiplier", "time_multiplier"):
                _number(m, key, at, positive=True, optional=True)
                _interval(m, f"{key}_ci95", at)
    _check_extrapolation(a)


def _interval(obj: dict, key: str, where: str) -> None:
    ci = obj.get(key)
    _need(ci is None or (isinstance(ci, list) and len(ci) == 2 and all(map(is_number, ci))),
          f"{where}.{key}", ci, "null or a list of two numbers")


def _check_extrapolation(a: dict) -> None:
    """Each variant's targets past the ladder, as the figure draws them (absent: none asked)."""
    ex = _get(a, "extrapolation", "ladder.analysis", dict, "an object of targets by variant", optional=True) or {}
    for var in ex:
        for where, t in _objects(ex, var, "ladder.analysis.extrapolation"):
            _number(t, "compute", where, positive=True)
            for key, ci in (("multiplier", "ci95"), ("trend_multiplier", "trend_ci95")):
                _number(t, key, where, optional=True)
                _interval(t, ci, where)


def ladder_problem(ladder) -> str | None:
    """Why a summary's ladder section cannot be drawn, naming the path; None when it can."""
    try:
        _need(isinstance(ladder, dict), "ladder", ladder, "an object")
        n_rungs = _check_rungs(ladder)
        _check_observations(ladder)
        _check_analysis(ladder, n_rungs)
    except _Bad as e:
        return str(e)
    return None
