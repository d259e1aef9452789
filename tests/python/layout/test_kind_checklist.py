"""The checklist every attention kind passes (tests/python/kind_checklist.py): each kind
`xsagpt config --json` lists has a reference-model case, an export round trip (or a
"not_exportable" reason in its row), an `xsagpt info` case, a hand count of its FLOPs, its
docs row and a μP case with its hidden matrices named in the reference. The tests that run those cases take the kinds from the same list, so a kind
written only in C++ runs in none of them and fails here, in one line naming what it lacks."""
import pytest

import kind_checklist
from kind_checklist import ITEMS, failures, missing, shipped


@pytest.mark.parametrize("row", shipped(), ids=lambda r: r["name"])
def test_every_kind_passes_the_checklist(row):
    lacks = missing(row)
    assert not lacks, f"attention kind {row['name']!r} lacks: {'; '.join(lacks)}"


def test_the_checklist_holds_only_kinds_the_binary_lists():
    assert len(shipped()) >= 2
    assert failures(shipped()) == []


# A kind added only to the C++ table: its row as `xsagpt config --json` would list it.
THROWAWAY = {"name": "throwaway", "help": "a kind that exists only in this test", "keys": [], "options": {},
             "step": True}


def test_a_kind_written_only_in_cpp_fails_in_one_line_naming_each_missing_item():
    rows = [*shipped(), THROWAWAY]
    (line,) = failures(rows)
    assert "\n" not in line and line.startswith("attention kind 'throwaway' (in `xsagpt config --json`) lacks: ")
    assert line.endswith("; ".join(ITEMS.values()))  # every item, each with where it goes
    # Marked not exportable, with its reason, it lacks the rest and no export.
    (line,) = failures([*shipped(), {**THROWAWAY, "not_exportable": "its step reads the future"}])
    assert line.endswith("; ".join(v for k, v in ITEMS.items() if k != "export"))
    (line,) = failures([*shipped(), {**THROWAWAY, "not_exportable": " "}])
    assert "a reason in its row's \"not_exportable\"" in line


def test_each_item_is_asked_for_alone():
    """With the throwaway kind's cases and formula given one item at a time held back,
    exactly that item is named; a shipped kind whose docs row is gone is named for it."""
    full = {"reference": {"throwaway": {}}, "export": {"throwaway-export": {}}, "info": [{}],
            "mup": {"throwaway_mup": {}}}
    docs = kind_checklist.DOCS.read_text() + "\n| `throwaway` | a step | | | |\n"
    flops = {**kind_checklist.kind_flops.STEP_MATMUL, "throwaway": lambda m: 0}
    hidden = {**kind_checklist.MUP_HIDDEN_STEP_PARAMETERS, "throwaway": ()}
    cases = {**kind_checklist.CASES, "throwaway": full}
    assert missing(THROWAWAY, cases, flops, docs, hidden) == []
    for item in ("reference", "export", "info", "mup"):
        held = {**cases, "throwaway": {k: v for k, v in full.items() if k != item}}
        assert missing(THROWAWAY, held, flops, docs, hidden) == [ITEMS[item]]
    assert missing(THROWAWAY, cases, kind_checklist.kind_flops.STEP_MATMUL, docs, hidden) == [ITEMS["flops"]]
    assert missing(THROWAWAY, cases, flops, docs.replace("| `throwaway` |", ""), hidden) == [ITEMS["docs"]]
    # Its μP case without its hidden matrices named in the reference: the same item.
    assert missing(THROWAWAY, cases, flops, docs) == [ITEMS["mup"]]
    sa = shipped()[0]
    assert missing(sa, docs=docs.replace(f"| `{sa['name']}` |", "")) == [ITEMS["docs"]]
    # Cases for a kind the binary does not list (renamed, removed) are named too.
    assert failures(shipped(), cases, flops, docs, hidden) == [
        "kind_checklist.CASES has 'throwaway', which `xsagpt config --json` does not list",
        "kind_flops.STEP_MATMUL has 'throwaway', which `xsagpt config --json` does not list",
        "reference MUP_HIDDEN_STEP_PARAMETERS has 'throwaway', which `xsagpt config --json` does not list"]
