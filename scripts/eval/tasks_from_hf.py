#!/usr/bin/env python3
"""Task files for `xsagpt eval` from the public datasets of the paper's Table 2.

Each converter turns one dataset row into one task-file line (src/eval/task_file.h)
with the prompt lm-evaluation-harness 0.4.13's task config renders for it
(doc_to_text, doc_to_choice, doc_to_target; zero-shot, default target delimiter
" "), so `xsagpt eval` on the output scores exactly the requests lm-eval sends:

    .venv/bin/python scripts/eval/tasks_from_hf.py --out tasks/            # all eight, needs `datasets` + internet
    .venv/bin/python scripts/eval/tasks_from_hf.py --out tasks/ --tasks arc_easy,piqa
    build/xsagpt eval runs/sa runs/xsa -t tasks/arc_easy.jsonl,tasks/piqa.jsonl

The datasets, configs and splits are lm-eval's (TASKS below); docs/evaluation.md says
why these variants. The converters are plain functions of a row (a dict in the
dataset's own schema), tested on self-written rows in tests/fixtures/lm_eval/.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys


def arc_easy(doc: dict) -> dict:
    return {"context": f"Question: {doc['question']}\nAnswer:", "endings": list(doc["choices"]["text"]),
            "label": list(doc["choices"]["label"]).index(doc["answerKey"])}


def boolq(doc: dict) -> dict:
    return {"context": f"{doc['passage']}\nQuestion: {doc['question']}?\nAnswer:", "endings": ["no", "yes"],
            "label": int(doc["label"])}


def _hellaswag_clean(text: str) -> str:
    # lm-eval's hellaswag/utils.py preprocess: WikiHow's bracketed artefacts removed.
    text = text.strip().replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    return text.replace("  ", " ")


def hellaswag(doc: dict) -> dict:
    ctx = doc["ctx_a"] + " " + doc["ctx_b"].capitalize()
    return {"context": _hellaswag_clean(doc["activity_label"] + ": " + ctx),
            "endings": [_hellaswag_clean(e) for e in doc["endings"]], "label": int(doc["label"])}


def lambada_openai(doc: dict) -> dict:
    # A loglikelihood task: the last word with its space is the continuation, no delimiter.
    words = doc["text"].split(" ")
    return {"context": " ".join(words[:-1]), "continuation": " " + words[-1]}


def openbookqa(doc: dict) -> dict:
    return {"context": doc["question_stem"], "endings": list(doc["choices"]["text"]),
            "label": list(doc["choices"]["label"]).index(doc["answerKey"].lstrip())}


def piqa(doc: dict) -> dict:
    return {"context": f"Question: {doc['goal']}\nAnswer:", "endings": [doc["sol1"], doc["sol2"]],
            "label": int(doc["label"])}


def social_iqa(doc: dict) -> dict:
    return {"context": f"Q: {doc['context']} {doc['question']}\nA:",
            "endings": [doc["answerA"], doc["answerB"], doc["answerC"]], "label": int(doc["label"]) - 1}


def winogrande(doc: dict) -> dict:
    # Partial scoring: each option fills the blank in the context; the rest of the
    # sentence is the one continuation scored after each.
    cut = doc["sentence"].index("_")
    return {"contexts": [doc["sentence"][:cut] + opt for opt in (doc["option1"], doc["option2"])],
            "continuation": doc["sentence"][cut + 1:].strip(), "label": {"1": 0, "2": 1}[doc["answer"]]}


# lm-eval task -> (converter, dataset path, dataset config, the split lm-eval evaluates).
TASKS = {
    "arc_easy": (arc_easy, "allenai/ai2_arc", "ARC-Easy", "test"),
    "boolq": (boolq, "aps/super_glue", "boolq", "validation"),
    "hellaswag": (hellaswag, "Rowan/hellaswag", None, "validation"),
    "lambada_openai": (lambada_openai, "EleutherAI/lambada_openai", "default", "test"),
    "openbookqa": (openbookqa, "allenai/openbookqa", "main", "test"),
    "piqa": (piqa, "baber/piqa", None, "validation"),
    "social_iqa": (social_iqa, "lighteval/siqa", None, "validation"),
    "winogrande": (winogrande, "allenai/winogrande", "winogrande_xl", "validation"),
}


def convert(task: str, rows) -> list[dict]:
    """Task-file items (with "name": task) for an iterable of dataset rows."""
    fn = TASKS[task][0]
    return [{"name": task, **fn(dict(row))} for row in rows]


def write_jsonl(path: pathlib.Path, items: list[dict]) -> None:
    tmp = path.with_name(path.name + ".tmp")  # never half a task file where a whole one was
    tmp.write_text("".join(json.dumps(it, ensure_ascii=False) + "\n" for it in items), encoding="utf-8")
    tmp.replace(path)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=pathlib.Path, required=True, help="folder for TASK.jsonl files")
    ap.add_argument("--tasks", default=",".join(TASKS), help="comma-separated lm-eval task names (default: all eight)")
    ap.add_argument("--limit", type=int, default=0, help="first N rows of each (0: all)")
    args = ap.parse_args(argv)
    tasks = [t for t in args.tasks.split(",") if t]
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        sys.exit(f"--tasks: unknown {unknown}; known: {', '.join(TASKS)}")
    try:
        import datasets
    except ImportError:
        sys.exit("tasks_from_hf.py needs the `datasets` package (pip install datasets) and internet access")
    args.out.mkdir(parents=True, exist_ok=True)
    for task in tasks:
        _, path, name, split = TASKS[task]
        rows = datasets.load_dataset(path, name, split=split)
        if args.limit > 0:
            rows = rows.select(range(min(args.limit, len(rows))))
        items = convert(task, rows)
        write_jsonl(args.out / f"{task}.jsonl", items)
        print(f"{task}: {len(items)} items from {path}{'/' + name if name else ''} [{split}] -> "
              f"{args.out / (task + '.jsonl')}")


if __name__ == "__main__":
    main()
