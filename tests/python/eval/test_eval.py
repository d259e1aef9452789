"""Downstream evaluation end to end, against independent references:

- `xsagpt score` splits (context, continuation) pairs into exactly the tokens that
  lm-evaluation-harness's own TemplateLM code gives (with tiktoken's GPT-2 encoding
  as its tokenizer), including trailing whitespace moved to the continuation and an
  empty context; rolling windows equal the harness's get_rolling_token_windows;
- log-probabilities equal a float64 computation by the plain-PyTorch reference
  model (scripts/reference/model.py) on the checkpoint's weights, with the harness's
  left truncation, within 1e-5 relative (the C++ model runs in float32 on the CPU);
- `xsagpt eval` gives the accuracies the reference log-probabilities give under the
  harness's acc / acc_norm definitions (ending joined with the target delimiter " ",
  acc_norm over the ending's length without it) and lm-eval's standard errors; bad
  task files, old-form ones (two spaces) and requests lm-eval refuses fail naming
  file and line;
- the real `lm_eval` pipeline, with the `xsagpt` model class and the local YAML
  tasks in tests/lm_eval_tasks/, gives the same accuracy as `xsagpt eval`;
- scripts/eval/export.py writes safetensors the reference model loads back, and
  scripts/eval/table2.py prints the paper's averages.
Tiny GPT-2-vocabulary models (block_size 32, so truncation and several rolling
windows happen on short texts), trained a few steps; everything is computed on the
CPU (--device cpu), also on a machine with a GPU, except where a test says otherwise.
"""
import json
import math
import os
import re
import pathlib
import subprocess
import sys
import types

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from shardio import write_shard

from reference.model import GPT

tiktoken = pytest.importorskip("tiktoken")
from gpt2_tiktoken import EOT_ID, gpt2_encoding  # noqa: E402
pytest.importorskip("lm_eval", reason="lm-eval is not installed (requirements-eval.txt; scripts/setup.sh --eval, which the test command runs)")
from lm_eval.api.model import TemplateLM  # noqa: E402
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
TASKS = ROOT / "tests" / "lm_eval_tasks"
BLOCK = 32
EOT = EOT_ID

PAIRS = [
    ("The capital of France is", " Paris"),
    ("The capital of France is ", "Paris"),            # trailing space moves to the continuation
    ("Question: two plus two?\nAnswer:\n\n", "four"),   # newlines too
    ("tabs\t \t", "x"),
    ("Unicode spaces\u00a0\u3000\u2009", "end"),       # what Python's str.isspace() accepts
    ("Ein Café in Köln serviert", " Crêpes ✓"),
    ("hel", "lo world"),                                # BPE merges across the boundary
    ("", "An empty context"),                           # the end-of-text token stands in
    ("", "<|endoftext|>starts with the prefix token"),
    ("A context far longer than the window of the test models, so that it is cut on the left: "
     "one two three four five six seven eight nine ten eleven twelve", " and the end"),
]


@pytest.fixture(scope="module")
def enc(gpt2_vocab_dir):
    return gpt2_encoding(gpt2_vocab_dir)


class SplitOnly(TemplateLM):
    """lm-eval's own request splitting (TemplateLM.loglikelihood, _encode_pair) with
    tiktoken as the tokenizer; returns the token lists instead of scoring them."""

    def __init__(self, enc):
        super().__init__()
        self.enc = enc

    @property
    def eot_token_id(self):
        return EOT

    def tok_encode(self, string, add_special_tokens=None, **kw):
        return self.enc.encode(string, allowed_special="all")  # GPT-2's HF tokenizer reads the special token

    def _loglikelihood_tokens(self, requests, **kw):
        return [(ctx, cont) for _, ctx, cont in requests]

    def loglikelihood_rolling(self, requests, disable_tqdm=False):
        raise NotImplementedError

    def generate_until(self, requests, disable_tqdm=False):
        raise NotImplementedError


def lm_eval_split(enc, context, continuation):
    return SplitOnly(enc).loglikelihood([types.SimpleNamespace(args=(context, continuation))], disable_tqdm=True)[0]


def train_run(tmp, xsagpt, enc, attention, n_sink=0, tie=True):
    text = (TASKS / "tiny_text.jsonl").read_text() + (TASKS / "tiny_mc.jsonl").read_text()
    toks = np.array(enc.encode(text * 8), dtype=np.int64)
    for name in ("train_000001.bin", "val_000000.bin"):
        write_shard(tmp / name, toks)
    cfg = {
        "model": {"base": "tiny", "vocab_size": 50304, "block_size": BLOCK, "n_layer": 2, "d_model": 32,
                  "n_head": 2, "head_dim": 16, "attention": attention, "n_sink": n_sink,
                  # Tied: an untied zero-initialised head gives every token unseen in
                  # training the same logit, and endings made of them exactly tied scores.
                  "tie_embeddings": tie},
        "data": {"train": str(tmp / "train_*.bin"), "val": str(tmp / "val_*.bin")},
        "train": {"max_steps": 12, "warmup_steps": 0, "lr": 1e-2, "seq_len": BLOCK, "micro_batch": 4,
                  "eval_interval": 0, "eval_tokens": 128, "threads": 1, "seed": 7},
        "out_dir": str(tmp / "run"),
    }
    (tmp / "cfg.json").write_text(json.dumps(cfg))
    xsagpt("train", "-c", tmp / "cfg.json")
    return tmp / "run"


@pytest.fixture(scope="module")
def runs(tmp_path_factory, xsagpt, enc):
    """An SA model and an XSA model with an attention sink, otherwise alike."""
    return {"sa": train_run(tmp_path_factory.mktemp("sa"), xsagpt, enc, "sa", n_sink=1),
            "xsa": train_run(tmp_path_factory.mktemp("xsa"), xsagpt, enc, "xsa", n_sink=1)}


def newest_checkpoint(run):
    return sorted((run / "checkpoints").glob("step_*.pt"))[-1]


@pytest.fixture(scope="module")
def reference(runs):
    """The float64 reference model of each run, from the checkpoint's weights."""
    out = {}
    for kind, run in runs.items():
        ck = torch.load(newest_checkpoint(run), weights_only=True)
        out[kind] = GPT.from_checkpoint_dict(ck, dtype=torch.float64).eval()
    return out


@torch.no_grad()
def ref_score(model, context, continuation):
    """log p(continuation | context) as lm-eval's HFLM computes it: the input is the last
    block_size+1 tokens of context+continuation without the last one."""
    if not continuation:
        return 0.0, True
    inp = (context + continuation)[-(BLOCK + 1):][:-1]
    logits, _ = model(torch.tensor([inp]))
    logp = F.log_softmax(logits[0, len(inp) - len(continuation):], dim=-1)
    target = torch.tensor(continuation)
    return logp.gather(1, target[:, None]).sum().item(), bool((logp.argmax(-1) == target).all())


def score(xsagpt, run, vocab, lines, *args, check=True):
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    proc = xsagpt("score", run, "--vocab", vocab, "--device", "cpu", "--threads", 1, *args, input=text, check=check)
    if not check:
        return proc
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_split_is_lm_evals(runs, xsagpt, gpt2_vocab_dir, enc):
    out = score(xsagpt, runs["sa"], gpt2_vocab_dir, [{"context": c, "continuation": k} for c, k in PAIRS], "--tokens")
    assert len(out) == len(PAIRS)
    for (c, k), o in zip(PAIRS, out):
        ctx, cont = lm_eval_split(enc, c, k)
        assert (o["context_ids"], o["continuation_ids"]) == (ctx, cont), (c, k)
        assert o["n_tokens"] == len(cont)
    # What the cases are for, stated directly: the moved space is the continuation's, the
    # empty context is the end-of-text token, the long context does not fit the window.
    assert out[1]["continuation_ids"] == enc.encode(" Paris") and out[1]["context_ids"] == out[0]["context_ids"]
    assert out[7]["context_ids"] == [EOT] and out[8]["context_ids"] == [EOT]
    assert out[8]["continuation_ids"][0] != EOT
    long = out[-1]
    assert len(long["context_ids"]) + len(long["continuation_ids"]) > BLOCK + 1


def test_whitespace_only_context_is_an_empty_one(runs, xsagpt, gpt2_vocab_dir, enc):
    # lm-eval would leave the first token unconditioned here (its context becomes no tokens);
    # xsagpt conditions it on the end-of-text token as for an empty context.
    o = score(xsagpt, runs["sa"], gpt2_vocab_dir, [{"context": " ", "continuation": "word"}], "--tokens")[0]
    assert o["context_ids"] == [EOT] and o["continuation_ids"] == enc.encode(" word")


@pytest.mark.parametrize("kind", ["sa", "xsa"])
def test_logprobs_match_float64_reference(kind, runs, reference, xsagpt, gpt2_vocab_dir, enc):
    out = score(xsagpt, runs[kind], gpt2_vocab_dir, [{"context": c, "continuation": k} for c, k in PAIRS])
    for (c, k), o in zip(PAIRS, out):
        ctx, cont = lm_eval_split(enc, c, k)
        lp, greedy = ref_score(reference[kind], ctx, cont)
        assert o["logprob"] == pytest.approx(lp, rel=1e-5, abs=1e-9), (c, k)
        assert o["is_greedy"] == greedy and o["n_tokens"] == len(cont)
    assert sum(o["is_greedy"] for o in out if o["n_tokens"]) < len(out) - 1  # a model that is not all-greedy


def test_batching_leaves_scores_unchanged(runs, xsagpt, gpt2_vocab_dir):
    lines = [{"context": c, "continuation": k} for c, k in PAIRS]
    one = score(xsagpt, runs["xsa"], gpt2_vocab_dir, lines, "--batch-tokens", 1)     # one request per pass
    many = score(xsagpt, runs["xsa"], gpt2_vocab_dir, lines, "--batch-tokens", 4096)  # all in one padded pass
    for a, b in zip(one, many):
        assert a["logprob"] == pytest.approx(b["logprob"], rel=1e-5, abs=1e-9)
        assert a["n_tokens"] == b["n_tokens"]


def test_rolling_windows_and_logprobs(runs, reference, xsagpt, gpt2_vocab_dir, enc):
    texts = [json.loads(line)["text"] for line in (TASKS / "tiny_text.jsonl").read_text().splitlines()]
    texts += ["", "x", "<|endoftext|> special " * 24]
    assert max(len(enc.encode(t, allowed_special="all")) for t in texts) > 2 * BLOCK  # three windows or more
    out = score(xsagpt, runs["xsa"], gpt2_vocab_dir, [{"text": t} for t in texts], "--rolling", "--tokens")
    for t, o in zip(texts, out):
        tokens = enc.encode(t, allowed_special="all")
        windows = [make_disjoint_window(w) for w in get_rolling_token_windows(tokens, EOT, BLOCK, 1)]
        assert [(w["context_ids"], w["continuation_ids"]) for w in o["windows"]] == windows
        assert o["n_tokens"] == len(tokens)
        ref = sum(ref_score(reference["xsa"], ctx, cont)[0] for ctx, cont in windows)
        assert o["logprob"] == pytest.approx(ref, rel=1e-5, abs=1e-9)


def test_generation_is_greedy_sampling_cut_at_the_stop_string(runs, xsagpt, gpt2_vocab_dir, enc):
    prompt = "In the beginning God created"
    greedy = json.loads(xsagpt("sample", runs["sa"], "--vocab", gpt2_vocab_dir, "--device", "cpu", "--prompt", prompt,
                               "--ids", "-n", 12, "--temperature", 0).stdout)
    full = enc.decode(greedy)
    stop = full[len(full) // 2:][:2]  # a string the greedy text contains
    o = score(xsagpt, runs["sa"], gpt2_vocab_dir,
              [{"prompt": prompt, "until": [stop], "max_new_tokens": 12}, {"prompt": prompt, "max_new_tokens": 12}])
    assert o[0]["text"] == full[:full.index(stop)]
    assert o[0]["n_tokens"] < 12
    assert o[1] == {"text": full, "n_tokens": 12}


@pytest.mark.parametrize("line,message", [
    ('{"context": "a"', "malformed JSON"),
    ('["a", "b"]', "expected a JSON object"),
    ('{"context": "a"}', 'needs both "context" and "continuation"'),
    ('{"context": 1, "continuation": "b"}', '"context": expected a string'),
    ('{"question": "a"}', 'got the keys ["question"]'),
    ('{"prompt": "a", "max_new_tokens": 0}', '"max_new_tokens": expected an integer >= 1'),
    ('{"prompt": "a", "temperature": -1}', '"temperature": expected 0 (greedy) or a finite number > 0'),
    ("[" * 100000 + "]" * 100000, "JSON nested more than 64 levels deep"),  # before: exit 139
])
def test_score_names_the_bad_line(line, message, runs, xsagpt, gpt2_vocab_dir):
    good = json.dumps({"context": "a", "continuation": " b"})
    proc = xsagpt("score", runs["sa"], "--vocab", gpt2_vocab_dir, "--device", "cpu",
                  input=f"{good}\n\n{line}\n", check=False)
    assert proc.returncode == 2
    (error,) = [line for line in proc.stderr.splitlines() if "[error]" in line]
    assert "<stdin>:3: " in error and message in error
    assert len(proc.stdout.splitlines()) == 1  # the group before the empty line was answered


def test_score_bounds_max_new_tokens_by_the_context_window(runs, xsagpt, gpt2_vocab_dir):
    # Before: accepted, and generated for hours with no output.
    proc = xsagpt("score", runs["sa"], "--vocab", gpt2_vocab_dir, "--device", "cpu", "--threads", 1,
                  input=json.dumps({"prompt": "a", "max_new_tokens": 10**12}) + "\n", check=False, timeout=120)
    assert proc.returncode == 2
    assert f'<stdin>:1: "max_new_tokens": expected 1..{BLOCK} (the model\'s context window, block_size), ' \
        f"got {10**12}" in proc.stderr
    # The window itself is allowed, and a request without the key gets min(256, block_size).
    (o,) = score(xsagpt, runs["sa"], gpt2_vocab_dir, [{"prompt": "a", "max_new_tokens": BLOCK}])
    assert o["n_tokens"] == BLOCK
    (o,) = score(xsagpt, runs["sa"], gpt2_vocab_dir, [{"prompt": "a"}])
    assert o["n_tokens"] == min(256, BLOCK)


def test_score_refusals(runs, xsagpt, gpt2_vocab_dir, tmp_path):
    f = tmp_path / "req.jsonl"
    f.write_text(json.dumps({"context": "a", "continuation": " b"}) + "\n")
    proc = xsagpt("score", runs["sa"], f, "--rolling", "--vocab", gpt2_vocab_dir, "--device", "cpu", check=False)
    assert proc.returncode == 2 and f"{f}:1: --rolling expects" in proc.stderr
    f.write_text(json.dumps({"context": "a", "continuation": " b" * (BLOCK + 1)}) + "\n")
    proc = xsagpt("score", runs["sa"], f, "--vocab", gpt2_vocab_dir, "--device", "cpu", check=False)
    assert proc.returncode == 2 and f"{f}:1: the continuation has {BLOCK + 1} tokens" in proc.stderr
    # What lm-eval refuses (its HF model asserts): no continuation tokens of its own.
    for pair, message in [(("hell", "o"), 'the continuation "o" has no tokens of its own: GPT-2\'s BPE merges it'),
                          (("x", ""), "the continuation is empty"),
                          (("", "<|endoftext|>"), 'the continuation "<|endoftext|>" has no tokens of its own')]:
        f.write_text(json.dumps({"context": "a", "continuation": " b"}) + "\n" +
                     json.dumps({"context": pair[0], "continuation": pair[1]}) + "\n")
        proc = xsagpt("score", runs["sa"], f, "--vocab", gpt2_vocab_dir, "--device", "cpu", check=False)
        assert proc.returncode == 2 and f"{f}:2: {message}" in proc.stderr, proc.stderr


def mc_items(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def reference_accuracy(model, enc, items):
    """acc and acc_norm as lm-eval's multiple_choice construct_requests / process_results define
    them (continuation: target delimiter " " + ending; acc_norm divides by len(ending)), from
    float64 log-probabilities; also the smallest margin between the best and second-best ending."""
    acc, acc_norm, margin = [], [], math.inf
    for it in items:
        lls = np.array([ref_score(model, *lm_eval_split(enc, it["context"], " " + e))[0] for e in it["endings"]])
        norm = lls / np.array([float(len(e)) for e in it["endings"]])
        acc.append(float(np.argmax(lls) == it["label"]))
        acc_norm.append(float(np.argmax(norm) == it["label"]))
        for v in (lls, norm):
            top = np.sort(v)[::-1]
            margin = min(margin, top[0] - top[1]) if len(top) > 1 else margin
    return np.mean(acc), np.mean(acc_norm), margin, np.std(acc, ddof=1) / math.sqrt(len(acc))


@pytest.fixture(scope="module")
def eval_report(runs, xsagpt, gpt2_vocab_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("eval")
    named = d / "named.jsonl"
    named.write_text("\n".join(json.dumps({"name": "other", "context": f"Count: {i},", "endings": [f"{i + 1}", "zero"],
                                           "label": 0}) for i in range(5)) + "\n\n")
    out = d / "report.json"
    proc = xsagpt("eval", runs["sa"], runs["xsa"], "--task", TASKS / "tiny_mc.jsonl", "--task", named,
                  "--out", out, "--vocab", gpt2_vocab_dir, "--device", "cpu", "--threads", 1)
    return json.loads(out.read_text()), proc.stdout, named


def test_eval_accuracy_matches_reference(eval_report, reference, enc):
    report, table, named = eval_report
    assert report["tasks"] == ["tiny_mc", "other"]
    for m, kind in zip(report["models"], ("sa", "xsa")):
        assert m["attention"] == kind and m["seed"] == 7  # train.seed of train_run, for pairing seeds
        for task, path in (("tiny_mc", TASKS / "tiny_mc.jsonl"), ("other", named)):
            items = mc_items(path)
            acc, acc_norm, margin, acc_se = reference_accuracy(reference[kind], enc, items)
            assert margin > 1e-4  # no near-tie that float32 could resolve differently
            got = m["results"][task]
            assert (got["acc"], got["acc_norm"], got["n"]) == (pytest.approx(acc), pytest.approx(acc_norm), len(items))
            assert got["acc_stderr"] == pytest.approx(acc_se)
        avg = {k: np.mean([m["results"][t][k] for t in report["tasks"]]) for k in ("acc", "acc_norm")}
        assert {k: m["average"][k] for k in avg} == pytest.approx(avg)
    (d,) = report["differences"]
    assert (d["baseline"], d["model"]) == (0, 1) and report["baseline"] == "sa sinks=1"  # the first model's variant
    sa, xsa = report["models"]
    for t in report["tasks"]:
        assert d["results"][t]["acc"] == pytest.approx(xsa["results"][t]["acc"] - sa["results"][t]["acc"])
    assert d["average"]["acc_norm"] == pytest.approx(xsa["average"]["acc_norm"] - sa["average"]["acc_norm"])
    # The table: both models, both tasks, the average and the difference columns.
    assert "[1]" in table and "[2]-[1] acc" in table and "±" in table
    avg_line = next(line for line in table.splitlines() if line.startswith("average"))
    assert f"{sa['average']['acc']:.4f}" in avg_line and f"{d['average']['acc']:+.4f}" in avg_line


def test_an_unknown_baseline_is_refused_before_any_model_is_scored(runs, xsagpt, gpt2_vocab_dir):
    base = ["--task", TASKS / "tiny_mc.jsonl", "--vocab", gpt2_vocab_dir, "--device", "cpu", "--threads", 1]
    # Run directories, a checkpoint file inside one, and a NAME= label: every variant is
    # known before loading, so a typo costs nothing instead of a whole evaluation.
    for models in ([runs["sa"], runs["xsa"]], [newest_checkpoint(runs["sa"]), f"mine={runs['xsa']}"]):
        proc = xsagpt("eval", *models, *base, "--baseline", "xsa", check=False)
        assert proc.returncode != 0
        assert "--baseline: 'xsa' is none of the models' variants" in proc.stderr
        assert "sa sinks=1" in proc.stderr  # the names it could have been
        assert "[1/2]" not in proc.stderr, "a model was scored before the refusal"
    ok = xsagpt("eval", runs["sa"], f"mine={runs['xsa']}", *base, "--baseline", "mine")
    assert json.loads(ok.stdout)["baseline"] == "mine"


@pytest.mark.parametrize("lines,line_no,message", [
    (['{"context": "a", "endings": ["b"], "label": 0}', '{"context": "a", "endings": ["b"], "label": 0'],
     2, "malformed JSON"),
    (['{"context": "a", "label": 0}'], 1, 'missing key "endings"'),
    (['', '{"endings": ["b"], "label": 0}'], 2, 'missing key "context"'),
    (['{"context": "a", "endings": ["b", "c"], "label": 2}'], 1, '"label" 2 is out of range for 2 endings (0..1)'),
    (['{"context": "a", "endings": ["b"], "label": -1}'], 1, '"label" -1 is out of range'),
    (['{"context": "a", "endings": [], "label": 0}'], 1, '"endings" is empty'),
    (['{"context": "a", "endings": ["b", ""], "label": 0}'], 1, '"endings"[1] is empty'),
    (['{"context": "a", "endings": "b", "label": 0}'], 1, '"endings": expected a list of strings'),
    (['{"context": "a", "endings": ["b"], "label": true}'], 1, '"label": expected an integer'),
    (['{"context": "a", "endings": ["b"], "label": 0, "name": 3}'], 1, '"name": expected a non-empty string'),
    # The old form: the space in the ending (or the context) as well as in the delimiter.
    (['{"context": "a", "endings": ["b"], "label": 0}', '{"context": "a", "endings": ["b", " c"], "label": 0}'], 2,
     '"endings"[1] starts with whitespace and target_delimiter " " adds more: two spaces would be scored. '
     'This is the old task-file form; convert it by removing the leading space'),
    (['{"context": "Answer: ", "endings": ["b"], "label": 0}'], 1,
     '"context" ends with whitespace and target_delimiter " " adds more'),
    (['{"contexts": ["a", "b"], "continuation": " c", "label": 0}'], 1, '"continuation" starts with whitespace'),
    (['{"context": "a", "endings": ["b"], "label": 0}', '{"context": "a", "continuation": " b"}'], 2,
     'an item of shape {"context", "continuation"} (greedy loglikelihood) in task "bad"'),
    (['{"context": "a", "continuation": " b", "label": 0}'], 1,
     'a {"context", "continuation"} item is scored as written, with no "target_delimiter" or "label"'),
    (['{"contexts": ["a", "b"], "continuation": "c", "label": 2}'], 1, '"label" 2 is out of range for 2 contexts'),
    # What lm-eval refuses: no continuation tokens of its own (BPE merges "hell" + "o").
    (['{"context": "hell", "endings": ["o", "p"], "label": 0, "target_delimiter": ""}'], 1,
     'choice 0: the continuation "o" has no tokens of its own'),
    (['{"context": "a", "endings": ["b"], "label": 0}', "[" * 100000 + "]" * 100000], 2,
     "JSON nested more than 64 levels deep"),  # before: exit 139
])
def test_bad_task_files_are_named_with_their_line(lines, line_no, message, runs, xsagpt, gpt2_vocab_dir, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    out = tmp_path / "report.json"
    proc = xsagpt("eval", runs["sa"], "--task", bad, "--out", out, "--vocab", gpt2_vocab_dir, check=False)
    assert proc.returncode == 2
    assert f"{bad}:{line_no}: {message}" in proc.stderr
    assert not out.exists()


def test_empty_task_file_and_missing_file(runs, xsagpt, gpt2_vocab_dir, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    proc = xsagpt("eval", runs["sa"], "--task", empty, "--vocab", gpt2_vocab_dir, check=False)
    assert proc.returncode == 2 and f"{empty}: no items" in proc.stderr
    # Commas separate files: the second one is opened (and named) on its own.
    proc = xsagpt("eval", runs["sa"], "--task", f"{TASKS / 'tiny_mc.jsonl'},{tmp_path / 'nope.jsonl'}",
                  "--vocab", gpt2_vocab_dir, check=False)
    assert proc.returncode == 2 and f"{tmp_path / 'nope.jsonl'}: cannot open task file" in proc.stderr


def run_lm_eval(run, tasks, include_path, build_dir, vocab, tmp_path):
    """lm-eval itself, offline, through scripts/eval/lm_eval_xsagpt.py with `xsagpt score`
    on `run`'s checkpoint; returns its --output_path (with --log_samples)."""
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"),
           "XSAGPT_BINARY": str(build_dir / "xsagpt"), "TOKENIZERS_PARALLELISM": "false"}
    out_dir = tmp_path / "lm_eval_out"
    proc = subprocess.run(
        [sys.executable, ROOT / "scripts" / "eval" / "lm_eval_xsagpt.py", "--model", "xsagpt",
         "--model_args", f"checkpoint={run},threads=1,vocab={vocab}", "--device", "cpu",
         "--tasks", tasks, "--include_path", include_path, "--output_path", out_dir, "--log_samples"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return out_dir


def test_lm_eval_end_to_end(runs, eval_report, xsagpt, gpt2_vocab_dir, build_dir, tmp_path, enc):
    """The real lm_eval pipeline (task loading from local YAML + JSON lines, the model
    registry, request building, metrics) with the xsagpt model class."""
    out_dir = run_lm_eval(runs["xsa"], "xsagpt_tiny_mc,xsagpt_tiny_rolling,xsagpt_tiny_gen", TASKS, build_dir,
                          gpt2_vocab_dir, tmp_path)
    (results_file,) = out_dir.rglob("results_*.json")
    assert results_file.parent == out_dir / runs["xsa"].name  # named after the run, not at random
    data = json.loads(results_file.read_text())
    results = data["results"]
    assert data["config"]["xsagpt"]["model"]["attention"] == "xsa"  # for scripts/eval/table2.py

    # Multiple choice: the accuracy of `xsagpt eval` on the same file.
    mc = eval_report[0]["models"][1]["results"]["tiny_mc"]
    assert results["xsagpt_tiny_mc"]["acc,none"] == pytest.approx(mc["acc"])
    assert results["xsagpt_tiny_mc"]["acc_norm,none"] == pytest.approx(mc["acc_norm"])

    # Rolling: bits per byte from `xsagpt score --rolling` on the same texts.
    texts = [json.loads(line)["text"] for line in (TASKS / "tiny_text.jsonl").read_text().splitlines()]
    lls = [o["logprob"] for o in score(xsagpt, runs["xsa"], gpt2_vocab_dir, [{"text": t} for t in texts])]
    bpb = -sum(lls) / sum(len(t.encode()) for t in texts) / math.log(2)
    assert results["xsagpt_tiny_rolling"]["bits_per_byte,none"] == pytest.approx(bpb, rel=1e-6)

    # Generation: greedy text from `xsagpt sample`, cut at the first stop string, prompt cut
    # on the left to leave room for max_gen_toks as the harness does.
    (samples_file,) = out_dir.rglob("samples_xsagpt_tiny_gen_*.jsonl")
    samples = [json.loads(line) for line in samples_file.read_text().splitlines()]
    assert len(samples) == 3
    for s in samples:
        prompt = enc.encode(s["doc"]["context"])[-(BLOCK - 8):]
        ids = json.loads(xsagpt("sample", runs["xsa"], "--vocab", gpt2_vocab_dir, "--device", "cpu",
                                "--prompt-ids", ",".join(map(str, prompt)), "--ids", "-n", 8, "--temperature", 0,
                                "--vocab-limit", 50257).stdout)
        text = enc.decode(ids, errors="replace")
        for stop in ("\n", ".", "<|endoftext|>"):
            text = text.split(stop)[0]
        assert s["resps"][0][0] == text


def test_bridge_from_python(runs, xsagpt, gpt2_vocab_dir, build_dir, monkeypatch):
    """The model class used directly (lm_eval.simple_evaluate's route), sending requests in
    several groups, with the device lm-eval passes when told nothing (cuda:0, which must work
    on a machine without a GPU too; with one, the GPU's float32 is compared with the CPU's)."""
    import lm_eval_xsagpt
    from lm_eval.api.registry import get_model
    assert get_model("xsagpt") is lm_eval_xsagpt.XsagptLM
    monkeypatch.setattr(lm_eval_xsagpt, "GROUP", 3)  # 3 groups for 7 requests
    lm = lm_eval_xsagpt.XsagptLM(checkpoint=str(runs["sa"]), device="cuda:0", binary=str(build_dir / "xsagpt"),
                                 vocab=str(gpt2_vocab_dir), threads=1, precision="fp32")
    try:
        pairs = PAIRS[:7]
        got = lm.loglikelihood([types.SimpleNamespace(args=p) for p in pairs], disable_tqdm=True)
        rolled = lm.loglikelihood_rolling([types.SimpleNamespace(args=("In the beginning " * 20,))], disable_tqdm=True)
    finally:
        lm.engine.close()
    want = score(xsagpt, runs["sa"], gpt2_vocab_dir, [{"context": c, "continuation": k} for c, k in pairs])
    assert [lp for lp, _ in got] == pytest.approx([o["logprob"] for o in want], rel=1e-5, abs=1e-9)
    if not torch.cuda.is_available():
        assert [g for _, g in got] == [o["is_greedy"] for o in want]
    (o,) = score(xsagpt, runs["sa"], gpt2_vocab_dir, [{"text": "In the beginning " * 20}])
    assert rolled == pytest.approx([o["logprob"]], rel=1e-5)


def test_export_round_trip(runs, reference, xsagpt, gpt2_vocab_dir, tmp_path, enc):
    safetensors = pytest.importorskip("safetensors.torch")
    # An untied head (the default) is exported as lm_head.weight of its own.
    (tmp_path / "untied").mkdir()
    untied = train_run(tmp_path / "untied", xsagpt, enc, "xsa", tie=False)
    subprocess.run([sys.executable, ROOT / "scripts" / "eval" / "export.py", untied, "--out", tmp_path / "untied_export"],
                   check=True, capture_output=True)
    ck = torch.load(newest_checkpoint(untied), weights_only=True)
    state = safetensors.load_file(tmp_path / "untied_export" / "model.safetensors")
    assert state.keys() == ck["model"].keys() - {"rope_cos", "rope_sin"}
    assert not torch.equal(state["lm_head.weight"], state["transformer.wte.weight"])
    out = tmp_path / "export"
    cmd = [sys.executable, ROOT / "scripts" / "eval" / "export.py", runs["xsa"], "--out", out]
    subprocess.run(cmd, check=True, capture_output=True)
    state = safetensors.load_file(out / "model.safetensors")
    config = json.loads((out / "config.json").read_text())
    ck = torch.load(newest_checkpoint(runs["xsa"]), weights_only=True)
    assert config["model"] == ck["config"]["model"] and config["step"] == ck["step"]
    assert config["model"]["tie_embeddings"] and "lm_head.weight" not in state  # tied: stored once
    for name, t in state.items():
        assert torch.equal(t, ck["model"][name]), name
    # Self-describing: the conventions are in config.json and in the safetensors metadata.
    conv = config["conventions"]
    assert conv["rope"]["layout"] == "rotate_half" and conv["mlp"]["activation"] == "gelu_exact"
    assert conv["vocab"] == {"padded": 50304, "real": 50257, "tokenizer": "gpt2", "softmax_over": "padded"}
    assert conv["xsa"]["layers"] == [0, 1] and conv["tied_embeddings"] and conv["n_sink"] == 1
    from safetensors import safe_open
    with safe_open(out / "model.safetensors", "pt") as f:
        meta = f.metadata()
    assert meta["xsagpt.rope.theta"] == json.dumps(conv["rope"]["theta"]) and meta["xsagpt.xsa.eps"] == "1e-06"
    assert json.loads(meta["xsagpt.model"]) == config["model"]
    # Files as the user's umask makes them (this process's umask; safetensors alone writes 0600).
    umask = os.umask(0)
    os.umask(umask)
    for f in ("model.safetensors", "config.json"):
        assert (out / f).stat().st_mode & 0o777 == 0o666 & ~umask, f
    # Rebuilt from the export alone by scripts/eval/load_export.py (plain PyTorch, float32 like the C++
    # model on the CPU), it reproduces `xsagpt score` within 1e-4, tied (sink, XSA) and untied.
    from load_export import load_export, logprob
    for run, folder in ((runs["xsa"], out), (untied, tmp_path / "untied_export")):
        model = load_export(folder)
        got = score(xsagpt, run, gpt2_vocab_dir, [{"context": c, "continuation": k} for c, k in PAIRS], "--tokens")
        assert len({round(o["logprob"], 3) for o in got}) > 3  # distinct, non-trivial scores
        for o in got:
            assert logprob(model, o["context_ids"], o["continuation_ids"]) == pytest.approx(o["logprob"], abs=1e-4)
    # An existing export is kept unless --force; bfloat16 halves it.
    before = (out / "model.safetensors").stat().st_mtime_ns
    proc = subprocess.run(cmd + ["--dtype", "bfloat16"], capture_output=True, text=True)
    assert proc.returncode != 0 and "--force" in proc.stderr
    assert (out / "model.safetensors").stat().st_mtime_ns == before
    subprocess.run(cmd + ["--dtype", "bfloat16", "--force"], check=True, capture_output=True)
    assert safetensors.load_file(out / "model.safetensors")["transformer.wte.weight"].dtype == torch.bfloat16
    assert not list(out.glob("*.tmp"))
    # Non-finite weights are not exported; the good export stays.
    bad_ck = torch.load(newest_checkpoint(runs["xsa"]), weights_only=True)
    bad_ck["model"]["transformer.h.1.mlp.c_fc.weight"][0, 0] = float("nan")
    torch.save(bad_ck, tmp_path / "nan.pt")
    before = (out / "model.safetensors").read_bytes()
    proc = subprocess.run([sys.executable, ROOT / "scripts" / "eval" / "export.py", tmp_path / "nan.pt", "--out", out, "--force"],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "transformer.h.1.mlp.c_fc.weight holds non-finite values" in proc.stderr
    assert (out / "model.safetensors").read_bytes() == before


def test_table2_seeds_errors_and_paired_difference(tmp_path):
    """lm-eval result files (as the bridge writes them under --output_path) for two seeds of
    an SA and of an XSA model: each score with its standard error, the mean and spread over
    seeds, and the paired XSA - SA difference with its combined error, recomputed here."""
    rng = np.random.default_rng(3)
    tasks = ["arc_easy", "boolq", "hellaswag", "lambada_openai", "openbookqa", "piqa", "social_iqa", "winogrande"]
    paper_metric = {"boolq": "acc", "lambada_openai": "acc", "social_iqa": "acc", "winogrande": "acc"}
    out = tmp_path / "results"
    want = {}  # (attention, seed) -> ([(score, se)] per task in percent)
    for kind in ("sa", "xsa"):
        for seed in (2, 1):  # given out of order: pairing goes by seed value
            run = tmp_path / f"{kind}-s{seed}"
            run.mkdir()
            (run / "config.json").write_text(json.dumps({"model": {"attention": kind, "n_layer": 2},
                                                         "train": {"seed": seed}}))
            res, cells = {}, []
            for t in tasks:
                acc, acc_norm = rng.uniform(0.2, 0.8, size=2)
                se = rng.uniform(0.005, 0.02, size=2)
                res[t] = {"alias": t, "acc,none": acc, "acc_stderr,none": se[0], "acc_norm,none": acc_norm,
                          "acc_norm_stderr,none": se[1]}
                m = paper_metric.get(t, "acc_norm")
                cells.append((100 * res[t][f"{m},none"], 100 * res[t][f"{m}_stderr,none"]))
            want[kind, seed] = cells
            folder = out / run.name
            folder.mkdir(parents=True)
            (folder / "results_2026-01-01T00-00-00.json").write_text(json.dumps(
                {"results": res, "config": {"model": "xsagpt", "model_args": f"checkpoint={run},device=cpu"}}))
    # An older results file beside a newer one is not read (and is named on stderr).
    old = out / "sa-s1" / "results_2025-01-01T00-00-00.json"
    old.write_text(json.dumps({"results": {}}))
    os.utime(old, (1, 1))
    proc = subprocess.run([sys.executable, ROOT / "scripts" / "eval" / "table2.py", out], check=True, capture_output=True,
                          text=True)
    assert "sa-s1: reading results_2026-01-01T00-00-00.json, the newest of 2" in proc.stderr
    lines = proc.stdout.splitlines()
    pm = r"([-+]?[0-9.]+)±([0-9.]+)"
    # One row per run, each cell "score±se".
    for (kind, seed), cells in want.items():
        (line,) = [ln for ln in lines if ln.startswith(f"{kind}-s{seed} ") and not ln.rstrip().endswith("[2]")]
        got = [(float(a), float(b)) for a, b in re.findall(pm, line)]
        assert len(got) == 9
        assert np.ravel(got[:8]) == pytest.approx(np.ravel(cells), abs=0.006)
        avg = (np.mean([c[0] for c in cells]), math.sqrt(sum(c[1] ** 2 for c in cells)) / 8)
        assert got[8] == pytest.approx(tuple(map(float, avg)), abs=0.006)

    def column(kind, seed, i):
        cells = want[kind, seed]
        return cells[i] if i < 8 else (np.mean([c[0] for c in cells]), math.sqrt(sum(c[1] ** 2 for c in cells)) / 8)

    # Over seeds: mean and spread.
    for kind in ("sa", "xsa"):
        (line,) = [ln for ln in lines if ln.startswith(f"{kind}-s") and ln.rstrip().endswith("[2]")]
        got = [(float(a), float(b)) for a, b in re.findall(pm, line)]
        for i in range(9):
            vals = [column(kind, s, i)[0] for s in (1, 2)]
            assert got[i] == pytest.approx((float(np.mean(vals)), float(np.std(vals, ddof=1))), abs=0.006)
    # Paired difference: per seed XSA - SA, averaged; error sqrt(se_sa^2 + se_xsa^2 + var(delta)/2).
    (line,) = [ln for ln in lines if ln.startswith("delta")]
    got = [(float(a), float(b)) for a, b in re.findall(pm, line)]
    assert len(got) == 9
    within = 0
    for i in range(9):
        d = [column("xsa", s, i)[0] - column("sa", s, i)[0] for s in (1, 2)]
        err = math.sqrt(np.mean([column("sa", s, i)[1] ** 2 for s in (1, 2)]) +
                        np.mean([column("xsa", s, i)[1] ** 2 for s in (1, 2)]) + np.var(d, ddof=1) / 2)
        assert got[i] == pytest.approx((float(np.mean(d)), float(err)), abs=0.006)
        within += abs(np.mean(d)) <= err
    assert 0 < within < 9  # both kinds of cell occur, so the marks below are tested
    assert line.count("~") == within and "~ |delta| is within the combined error" in proc.stdout


# The eight Table 2 tasks: lm-eval 0.4.13's own task configs (the YAML files it ships),
# pointed at self-written rows in each dataset's schema (tests/fixtures/lm_eval/), with
# the split lm-eval evaluates.
TABLE2_SPLITS = {"arc_easy": ("arc/arc_easy.yaml", "test"), "boolq": ("super_glue/boolq/default.yaml", "validation"),
                 "hellaswag": ("hellaswag/hellaswag.yaml", "validation"),
                 "lambada_openai": ("lambada/lambada_openai.yaml", "test"),
                 "openbookqa": ("openbookqa/openbookqa.yaml", "test"), "piqa": ("piqa/piqa.yaml", "validation"),
                 "social_iqa": ("siqa/siqa.yaml", "validation"),
                 "winogrande": ("winogrande/default.yaml", "validation")}
FIXTURES = ROOT / "tests" / "fixtures" / "lm_eval"


def local_task_configs(folder):
    """YAML files that include lm-eval's real config for each task and change only where
    the rows come from (and the task's name, so it does not clash with the built-in one)."""
    import lm_eval
    tasks_dir = pathlib.Path(lm_eval.__file__).parent / "tasks"
    for task, (yaml_path, split) in TABLE2_SPLITS.items():
        splits = {k: None for k in ("training_split", "validation_split", "test_split", "fewshot_split")}
        splits[f"{split}_split"] = split
        cfg = {"include": str(tasks_dir / yaml_path), "task": f"local_{task}", "tag": [], "dataset_path": "json",
               "dataset_name": None, "dataset_kwargs": {"data_files": {split: str(FIXTURES / f"{task}.jsonl")}},
               **splits}
        (folder / f"local_{task}.yaml").write_text(json.dumps(cfg))  # JSON is YAML


def test_table2_tasks_match_lm_eval(runs, xsagpt, gpt2_vocab_dir, build_dir, tmp_path):
    """lm-eval on its real configs for all eight tasks (default target delimiter) through the
    bridge, and `xsagpt eval` on the rows scripts/eval/tasks_from_hf.py converts: the same requests
    and the same acc, acc_norm and standard errors."""
    import tasks_from_hf
    cfg_dir = tmp_path / "configs"
    cfg_dir.mkdir()
    local_task_configs(cfg_dir)
    files = []
    for task in TABLE2_SPLITS:
        rows = [json.loads(line) for line in (FIXTURES / f"{task}.jsonl").read_text().splitlines()]
        items = [{**it, "name": f"local_{task}"} for it in tasks_from_hf.convert(task, rows)]
        files.append(tmp_path / f"{task}.jsonl")
        files[-1].write_text("".join(json.dumps(it, ensure_ascii=False) + "\n" for it in items))

    out_dir = run_lm_eval(runs["xsa"], ",".join(f"local_{t}" for t in TABLE2_SPLITS), cfg_dir, build_dir,
                          gpt2_vocab_dir, tmp_path)
    (results_file,) = out_dir.rglob("results_*.json")
    lm = json.loads(results_file.read_text())["results"]

    report_file = tmp_path / "report.json"
    xsagpt("eval", runs["xsa"], "-t", ",".join(map(str, files)), "--out", report_file, "--vocab", gpt2_vocab_dir,
           "--device", "cpu", "--threads", 1)
    (model,) = json.loads(report_file.read_text())["models"]
    ours = model["results"]

    accs = []
    for task, file in zip(TABLE2_SPLITS, files):
        name = f"local_{task}"
        # The requests: what lm-eval sent for each document is what the task file asks for.
        (samples_file,) = out_dir.rglob(f"samples_{name}_*.jsonl")
        samples = sorted((json.loads(line) for line in samples_file.read_text().splitlines()),
                         key=lambda s: s["doc_id"])
        items = [json.loads(line) for line in file.read_text().splitlines()]
        assert len(samples) == len(items) == ours[name]["n"]
        for s, it in zip(samples, items):
            if "endings" in it:
                want = [[it["context"], " " + e] for e in it["endings"]]
            elif "contexts" in it:
                want = [[c, " " + it["continuation"]] for c in it["contexts"]]
            else:
                want = [[it["context"], it["continuation"]]]
            args = s["arguments"]  # {"gen_args_0": {"arg_0": context, "arg_1": continuation}, ...}
            got = [[args[f"gen_args_{k}"]["arg_0"], args[f"gen_args_{k}"]["arg_1"]] for k in range(len(args))]
            assert got == want, (task, s["doc_id"])
            # No near-tie that a different batching of the same requests could resolve otherwise.
            lls = np.array([float(r[0][0]) for r in s["resps"]])
            if len(lls) > 1:
                lens = np.array([float(len(c)) for c in (it.get("endings") or it["contexts"])])
                for v in (lls, lls / lens):
                    top = np.sort(v)[::-1]
                    assert top[0] - top[1] > 1e-4, (task, s["doc_id"])
        # The numbers.
        assert ours[name]["acc"] == lm[name]["acc,none"], task
        assert ours[name]["acc_stderr"] == pytest.approx(lm[name]["acc_stderr,none"]), task
        if "acc_norm,none" in lm[name]:
            assert ours[name]["acc_norm"] == lm[name]["acc_norm,none"], task
            assert ours[name]["acc_norm_stderr"] == pytest.approx(lm[name]["acc_norm_stderr,none"]), task
        if task == "lambada_openai":
            assert ours[name]["perplexity"] == pytest.approx(lm[name]["perplexity,none"], rel=1e-6)
        accs.append(ours[name]["acc"])
    # Not a comparison of constants: the model gets some items right and some wrong.
    assert 0 < sum(accs) < len(accs)
