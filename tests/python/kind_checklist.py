"""The checklist every attention kind passes, and the one list of kinds its tests take.

The kinds are the rows of `xsagpt config --json`'s "attention_kinds" (the C++ table,
src/config/attention_kinds.cpp), read from the built binary when the tests are collected.
Besides its C++ file and row, each kind needs:
  reference  cases against the PyTorch reference model, in float32 and float64
             (tests/python/model/test_reference_model.py);
  export     an export round trip: export.py, then transformers and load_export.py
             against `xsagpt score` (tests/python/eval/test_hf_export.py), unless its row
             carries "not_exportable" with the reason;
  info       `xsagpt info`'s parameter count against the reference model's, and its FLOPs
             against the hand count (tests/python/config/test_info.py);
  flops      that hand count of the kind's own products (kind_flops.STEP_MATMUL);
  docs       its row in docs/sweeps-and-plots.md's table of attention kinds;
  mup        a case under model.parametrization "mup" (against the reference model, and its
             rates against torch.optim.AdamW: tests/python/train/test_mup.py), with the kind's
             hidden matrices named in scripts/reference/config.py (MUP_HIDDEN_STEP_PARAMETERS),
             apart from its C++ row's declarations, which tests/cpp/model/test_attention_kind.cpp
             asks of every parameter.
The cases are here, a block per kind, and those tests take them from here for the kinds
the binary lists, so a kind written only in C++ has no case anywhere and
tests/python/layout/test_kind_checklist.py fails it in one line naming each missing item.
"""
import functools
import json
import os
import pathlib
import subprocess

import kind_flops
from reference.config import MUP_HIDDEN_STEP_PARAMETERS

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "sweeps-and-plots.md"

# μP at a width multiplier of 3 on the reference tests' models (d_model 48): every rule moves.
MUP = {"parametrization": "mup", "mup_base_width": 16}

# Per kind, per item: model overrides besides model.attention (which is the kind), by case
# name for the reference and export cases (names are unique over all kinds; the tests use
# them as ids), as a list for `xsagpt info` (set on configs/model/tiny.json with --set).
CASES = {
    "sa": {
        "reference": {"sa": {}},
        "export": {"sa-untied": {}},
        "info": [{}],
        "mup": {"sa_mup": {**MUP, "mup_base_head_dim": 8}},
    },
    "xsa": {
        "reference": {"xsa": {}, "xsa_layer_list": {"n_layer": 3, "xsa_layers": [0, 2]},
                      "xsa_last_n": {"n_layer": 3, "xsa_layers": "last 1"}, "xsa_gate": {"xsa_gate": "sa"}},
        "export": {"xsa-some-gate-sinks-tied": {"xsa_layers": [1], "xsa_gate": "xsa", "n_sink": 2,
                                                "tie_embeddings": True, "bias": True, "rope_theta": 500.0,
                                                "head_dim": 8},
                   "xsa-all-untied-tanh": {"n_sink": 1, "gelu": "tanh"}},
        "info": [{"xsa_gate": "sa", "xsa_layers": "last 2"}],
        "mup": {"xsa_mup": {**MUP, "xsa_gate": "sa"}},
    },
    "gated": {
        "reference": {"gated": {}, "gated_elementwise": {"out_gate": "elementwise", "n_sink": 1}},
        # The kinds with gates read from the token: generation's cache feeds them one token at a time.
        "export": {"gated-elementwise-sinks": {"out_gate": "elementwise", "n_sink": 1}},
        "info": [{}, {"out_gate": "elementwise"}],
        "mup": {"gated_mup": {**MUP}},
    },
    "xsa_token": {
        "reference": {"xsa_token": {}, "xsa_token_layers": {"n_layer": 3, "xsa_layers": [1]}},
        "export": {"xsa_token-layer1": {"xsa_layers": [1]}},
        "info": [{"xsa_layers": "last 2"}],
        "mup": {"xsa_token_mup": {**MUP}},
    },
}

# What each item asks for, and where it goes: the words of a failure.
ITEMS = {
    "reference": "a reference-model case (kind_checklist.CASES[kind]['reference'], run in float32 and float64 by "
                 "tests/python/model/test_reference_model.py)",
    "export": "an export round trip (kind_checklist.CASES[kind]['export'], run by "
              "tests/python/eval/test_hf_export.py) or \"not_exportable\": \"<reason>\" in its row",
    "info": "an `xsagpt info` case (kind_checklist.CASES[kind]['info'], run by tests/python/config/test_info.py)",
    "flops": "a hand count of its own FLOPs (kind_flops.STEP_MATMUL[kind])",
    "docs": "a row in the table of docs/sweeps-and-plots.md#attention-kinds",
    "mup": "a μP case (kind_checklist.CASES[kind]['mup'], run by tests/python/model/test_reference_model.py and "
           "tests/python/train/test_mup.py) and its hidden matrices in scripts/reference/config.py "
           "(MUP_HIDDEN_STEP_PARAMETERS)",
}


def xsagpt_binary() -> pathlib.Path:
    """The binary the tests run (conftest.py's build_dir: $XSAGPT_BUILD_DIR, default build/)."""
    return ROOT / os.environ.get("XSAGPT_BUILD_DIR", "build") / "xsagpt"


@functools.cache
def shipped() -> tuple:
    """`xsagpt config --json`'s attention_kinds, once per test session."""
    binary = xsagpt_binary()
    if not binary.exists():
        raise RuntimeError(f"{binary} not built: run scripts/setup.sh first (the tests take the attention kinds "
                           "from it)")
    out = subprocess.run([str(binary), "config", "--json"], capture_output=True, text=True, check=True).stdout
    return tuple(json.loads(out)["attention_kinds"])


def row(kind: str) -> dict:
    return next(r for r in shipped() if r["name"] == kind)


def own_keys(row: dict) -> list[str]:
    """The model.* keys a kind owns, as its row lists them (names, or entries with a name)."""
    out = []
    for field in ("keys", "options"):
        out += [k["name"] if isinstance(k, dict) else k for k in row.get(field, [])]
    return out


def step_layers(row: dict, config: dict) -> int:
    """How many layers of a model (its config) take the kind's step: those model.xsa_layers
    selects where the kind owns that key, else every layer; none without a step."""
    if not row["step"]:
        return 0
    sel = config.get("xsa_layers") if "xsa_layers" in own_keys(row) else None
    if sel is None:
        return config["n_layer"]
    return int(sel[len("last "):]) if isinstance(sel, str) else len(sel)


def missing(row: dict, cases: dict = CASES, step_matmul: dict = kind_flops.STEP_MATMUL, docs: str | None = None,
            mup_hidden: dict = MUP_HIDDEN_STEP_PARAMETERS):
    """The items the kind of `row` lacks, in ITEMS' words (empty when it has them all)."""
    kind, mine = row["name"], cases.get(row["name"], {})
    docs = DOCS.read_text() if docs is None else docs
    out = [ITEMS["reference"]] if not mine.get("reference") else []
    reason = row.get("not_exportable")
    if reason is None and not mine.get("export"):
        out.append(ITEMS["export"])
    elif reason is not None and (not isinstance(reason, str) or not reason.strip()):
        out.append("a reason in its row's \"not_exportable\" (a sentence, not empty)")
    elif reason is not None and mine.get("export"):
        out.append(f"either its export cases or its \"not_exportable\" mark ({reason}), not both")
    out += [ITEMS["info"]] if not mine.get("info") else []
    out += [ITEMS["flops"]] if kind not in step_matmul else []
    out += [ITEMS["docs"]] if f"| `{kind}` |" not in docs else []
    out += [ITEMS["mup"]] if not mine.get("mup") or kind not in mup_hidden else []
    return out


def failures(rows, cases: dict = CASES, step_matmul: dict = kind_flops.STEP_MATMUL, docs: str | None = None,
             mup_hidden: dict = MUP_HIDDEN_STEP_PARAMETERS):
    """One line per kind that lacks an item, naming each; and one per kind the checklist
    holds cases for that the binary does not list (a kind renamed or removed)."""
    out = []
    for r in rows:
        lacks = missing(r, cases, step_matmul, docs, mup_hidden)
        if lacks:
            out.append(f"attention kind {r['name']!r} (in `xsagpt config --json`) lacks: {'; '.join(lacks)}")
    listed = {r["name"] for r in rows}
    for where, names in (("kind_checklist.CASES", cases), ("kind_flops.STEP_MATMUL", step_matmul),
                         ("reference MUP_HIDDEN_STEP_PARAMETERS", mup_hidden)):
        out += [f"{where} has {k!r}, which `xsagpt config --json` does not list" for k in names if k not in listed]
    return out


def named_cases(item: str) -> dict[str, tuple[str, dict]]:
    """The reference, export or mup cases of every kind the binary lists: case name ->
    (kind, model overrides with model.attention)."""
    return {name: (r["name"], {"attention": r["name"], **over}) for r in shipped()
            for name, over in CASES.get(r["name"], {}).get(item, {}).items()}


def info_cases() -> dict[str, tuple[str, dict]]:
    """The `xsagpt info` cases of every kind the binary lists: an id (the kind and its
    keys) -> (kind, --set overrides with model.attention)."""
    return {"-".join([r["name"], *(f"{k}={v}" for k, v in over.items())]): (r["name"], {"attention": r["name"], **over})
            for r in shipped() for over in CASES.get(r["name"], {}).get("info", [])}
