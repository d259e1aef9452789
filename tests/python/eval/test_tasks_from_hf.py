"""scripts/eval/tasks_from_hf.py's row converters on self-written rows, against the prompts
lm-eval 0.4.13's task configs render, written out here by hand (the end-to-end check
against lm-eval itself is test_eval.py::test_table2_tasks_match_lm_eval). No model, no
network, no lm-eval needed."""
import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
import tasks_from_hf as t

FIXTURES = ROOT / "tests" / "fixtures" / "lm_eval"


def test_multiple_choice_prompts():
    arc = {"question": "Which is hot?", "choices": {"text": ["fire", "ice"], "label": ["1", "2"]}, "answerKey": "1"}
    assert t.arc_easy(arc) == {"context": "Question: Which is hot?\nAnswer:", "endings": ["fire", "ice"], "label": 0}
    assert t.boolq({"passage": "P.", "question": "is it", "label": 1}) == {
        "context": "P.\nQuestion: is it?\nAnswer:", "endings": ["no", "yes"], "label": 1}
    assert t.piqa({"goal": "Dry hands", "sol1": "towel", "sol2": "water", "label": 0}) == {
        "context": "Question: Dry hands\nAnswer:", "endings": ["towel", "water"], "label": 0}
    siqa = {"context": "Sam left.", "question": "Why?", "answerA": "a", "answerB": "b", "answerC": "c", "label": "3"}
    assert t.social_iqa(siqa) == {"context": "Q: Sam left. Why?\nA:", "endings": ["a", "b", "c"], "label": 2}
    obqa = {"question_stem": "Sun is", "choices": {"text": ["hot", "cold"], "label": ["A", "B"]}, "answerKey": " B"}
    assert t.openbookqa(obqa) == {"context": "Sun is", "endings": ["hot", "cold"], "label": 1}


def test_hellaswag_cleans_like_lm_eval():
    row = {"activity_label": "Home", "ctx_a": "[header] Fix it [title] Look.", "ctx_b": "then  he", "label": "1",
           "endings": [" goes [step] away. ", "stays  here."]}
    # preprocess: strip, " [title]" -> ". ", [..] removed, double spaces halved once; ctx_b capitalised.
    assert t.hellaswag(row) == {"context": "Home: Fix it. Look. Then he", "endings": ["goes away.", "stays here."],
                                "label": 1}


def test_lambada_and_winogrande_shapes():
    assert t.lambada_openai({"text": "and there was light"}) == {"context": "and there was", "continuation": " light"}
    row = {"sentence": "The cup broke because the _ was thin.", "option1": "cup", "option2": "table", "answer": "2"}
    assert t.winogrande(row) == {"contexts": ["The cup broke because the cup", "The cup broke because the table"],
                                 "continuation": "was thin.", "label": 1}


def test_every_fixture_row_converts_to_a_valid_item():
    for task in t.TASKS:
        rows = [json.loads(line) for line in (FIXTURES / f"{task}.jsonl").read_text().splitlines()]
        items = t.convert(task, rows)
        assert len(items) == len(rows) >= 4 and all(it["name"] == task for it in items)
        for it in items:  # lm-eval's rendering: no space where the delimiter goes
            assert not it.get("context", "x").endswith(" ")
            assert not any(e.startswith(" ") for e in it.get("endings", []))
            if "label" in it:
                assert 0 <= it["label"] < len(it.get("endings") or it["contexts"])


def test_unknown_task_is_named(tmp_path):
    proc = subprocess.run([sys.executable, ROOT / "scripts" / "eval" / "tasks_from_hf.py", "--out", tmp_path, "--tasks",
                           "arc_easy,arc_hard"], capture_output=True, text=True)
    assert proc.returncode != 0 and "--tasks: unknown ['arc_hard']" in proc.stderr
    assert not list(tmp_path.iterdir())
