"""JSON read as xsagpt writes it: every number finite. JSON has no NaN or Infinity, and the
trainer, `sweep` and `analyze` write a value they could not measure as null; Python's json
module nevertheless accepts the literals NaN, Infinity and -Infinity by default (and reads
1e999 as inf), which a reader would then draw, fit or mirror as a number. Here such a
literal is a damaged line, in the words the C++ readers use for it, and a number past a
double's range likewise; the error carries the line it stands on, so that
every caller (metrics_record.py, plot_inputs.py) names the file and the line."""
from __future__ import annotations

import json
import math
import re

NON_FINITE = "a non-finite literal (NaN/Infinity) is not valid JSON; the trainer writes null"
OUT_OF_RANGE = "a number past a double's range ({}) is not finite; the trainer writes null"

# A JSON string (skipped whole, so a "NaN" inside one is text) or a token that may be refused.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)|(-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)')


class NotFinite(ValueError):
    """A number JSON cannot hold: str() says why, `lineno` is its line (from 1) in the text."""

    def __init__(self, why: str, lineno: int):
        super().__init__(why)
        self.lineno = lineno


class _Refused(Exception):
    pass


def _literal(name: str):
    raise _Refused(name)


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Refused(text)
    return value


def _refused_at(text: str) -> tuple[str, int]:
    """The first refused token outside strings and its line: the text parsed as JSON up to it."""
    for m in _TOKEN.finditer(text):
        if m.group(1) or (m.group(2) and math.isinf(float(m.group(2)))):
            return m.group(1) or m.group(2), text.count("\n", 0, m.start()) + 1
    return "", 1  # not reached: the parser met the token it refused


def loads(text: str | bytes):
    """json.loads, with every number finite; NotFinite names the first that is not."""
    try:
        return json.loads(text, parse_constant=_literal, parse_float=_float)
    except _Refused:
        token, lineno = _refused_at(text.decode("utf-8", "replace") if isinstance(text, bytes) else text)
        raise NotFinite(OUT_OF_RANGE.format(token) if token[-1:].isdigit() else NON_FINITE, lineno) from None
