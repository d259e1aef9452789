"""scripts/eval/export.py against the binary, for every attention kind `xsagpt config --json`
lists, by the export cases the kind checklist holds for it (tests/python/kind_checklist.py:
SA with an untied head; XSA on some layers with a gate, sinks, biases and a tied head;
XSA in every layer with an untied head and the tanh GELU; the gated kinds): tiny models
trained here are exported (--format hf) and loaded by transformers'
AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True) in a fresh Python
process that has no xsagpt code on its path. There:

- log-likelihoods of (context, continuation) pairs, split as `xsagpt score --tokens`
  splits them, equal `xsagpt score`'s within 1e-4;
- greedy generate() (its key/value cache, the padding ids suppressed by the export's
  generation_config.json) gives `xsagpt sample --temperature 0`'s tokens;
- AutoTokenizer, from the exported GPT-2 files, encodes as xsagpt does;
- lm-eval's own `hf` model on a local multiple-choice task gives `xsagpt eval`'s acc and
  acc_norm (one variant: it is the slowest part).
The same checkpoints exported as plain safetensors are read back by load_export.py, whose
log-likelihoods equal `xsagpt score`'s within 2e-5 (both float32), and which scores
otherwise when the conventions drop the kind's step.
Everything runs on the CPU, offline (HF_HUB_OFFLINE).
"""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from kind_checklist import named_cases, row

pytest.importorskip("transformers", reason="transformers is not installed (requirements-eval.txt; scripts/setup.sh "
                                           "--eval, which the test command runs)")
tiktoken = pytest.importorskip("tiktoken")
import export as export_script  # noqa: E402 (scripts/eval/export.py; after the skips: it imports torch)

ROOT = pathlib.Path(__file__).resolve().parents[3]
TASKS = ROOT / "tests" / "lm_eval_tasks"
BLOCK = 32  # conftest's TEXT_BLOCK: the models text_run trains

CASES = named_cases("export")  # case name -> (kind, model overrides)
VARIANTS = {name: over for name, (_, over) in CASES.items()}

PAIRS = [
    ("In the beginning God created", " the heaven and the earth."),
    ("The capital of France is", " Paris"),
    ("The capital of France is ", "Paris"),  # the trailing space moves to the continuation
    ("", "An empty context"),  # the end-of-text token stands in
    ("A context longer than the window of these models, so that it is cut on the left: one two three "
     "four five six seven eight nine ten eleven twelve thirteen", " and the end"),
]
PROMPTS = ["In the beginning God created", "The capital of France is", "Question: what is two plus two?"]
NEW_TOKENS = 10


@pytest.fixture(scope="module")
def enc(gpt2_enc):
    return gpt2_enc


@pytest.fixture(scope="module")
def exports(tmp_path_factory, text_run):
    out = {}
    for name, overrides in VARIANTS.items():
        tmp = tmp_path_factory.mktemp(name)
        # A tied head needs longer before greedy text is more than one token repeated.
        run = text_run(tmp, overrides, steps=40 if overrides.get("tie_embeddings") else 12)
        for fmt in ("hf", "safetensors"):  # in this process: export.py's command line is test_export_checks.py's
            export_script.main([str(run), "--format", fmt, "--out", str(tmp / fmt)])
        out[name] = (run, tmp / "hf")
        out[name, "safetensors"] = tmp / "safetensors"
    return out


# Runs in a fresh interpreter, in an empty folder, with only the venv's packages: what
# someone with the export and transformers (and no xsagpt) can do. One interpreter reads
# every variant's folder (importing torch and transformers takes most of a case's time);
# an error in one folder is that variant's, and the others still run.
HF_SIDE = r"""
import json, sys, traceback
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, AutoTokenizer
assert not any("xsagpt" in m for m in sys.modules), sorted(sys.modules)

def read(folder, request):
    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval()
    tok = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    out = {"class": type(model).__module__ + "." + type(model).__name__, "logprobs": [], "greedy": [], "encoded": []}
    with torch.no_grad():
        for ctx, cont in request["pairs"]:
            inp = torch.tensor([(ctx + cont)[:-1]])
            logp = F.log_softmax(model(inp).logits[0, len(ctx) - 1:].double(), dim=-1)
            out["logprobs"].append(logp.gather(1, torch.tensor(cont)[:, None]).sum().item())
        for prompt in request["prompts"]:
            ids = tok(prompt, return_tensors="pt").input_ids
            out["encoded"].append(ids[0].tolist())
            gen = model.generate(ids, max_new_tokens=request["n"], do_sample=False, eos_token_id=None, pad_token_id=0)
            out["greedy"].append(gen[0, ids.size(1):].tolist())
        tok.pad_token, tok.padding_side = tok.eos_token, "left"  # one batch, the shorter prompts padded on the left
        batch = tok(request["prompts"], return_tensors="pt", padding=True)
        gen = model.generate(**batch, max_new_tokens=request["n"], do_sample=False, eos_token_id=None)
        out["batched"] = gen[:, batch.input_ids.size(1):].tolist()
    return out

results = {}
for name, (folder, request) in json.loads(sys.stdin.read()).items():
    try:
        results[name] = read(folder, request)
    except Exception:
        results[name] = {"error": traceback.format_exc()}
print(json.dumps(results))
"""


def run_hf_side(requests: dict, tmp_path) -> dict:
    """{variant: (folder, request)} -> {variant: what transformers read from the folder}."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=str(tmp_path / "hf_home"),
               TOKENIZERS_PARALLELISM="false")
    cwd = tmp_path / "elsewhere"
    cwd.mkdir(exist_ok=True)
    proc = subprocess.run([sys.executable, "-I", "-c", HF_SIDE], input=json.dumps(requests), cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def binary_side(exports, xsagpt, gpt2_vocab_dir):
    """Each variant's `xsagpt score` of PAIRS and greedy `xsagpt sample` of PROMPTS."""
    out = {}
    for variant in VARIANTS:
        run = exports[variant][0]
        greedy = [json.loads(xsagpt("sample", run, "--vocab", gpt2_vocab_dir, "--device", "cpu", "--threads", 1,
                                    "--prompt", p, "--ids", "-n", NEW_TOKENS, "--temperature", 0).stdout)
                  for p in PROMPTS]
        out[variant] = score(xsagpt, run, gpt2_vocab_dir), greedy
    return out


def window_pairs(scored) -> list:
    """xsagpt's window cut on the left, as `xsagpt score` did (context + continuation <= block + 1)."""
    pairs = []
    for o in scored:
        ids = (o["context_ids"] + o["continuation_ids"])[-(BLOCK + 1):]
        pairs.append((ids[:len(ids) - len(o["continuation_ids"])], o["continuation_ids"]))
    return pairs


@pytest.fixture(scope="module")
def hf_side(exports, binary_side, tmp_path_factory):
    requests = {v: (str(exports[v][1]), {"pairs": window_pairs(binary_side[v][0]), "prompts": PROMPTS,
                                          "n": NEW_TOKENS}) for v in VARIANTS}
    return run_hf_side(requests, tmp_path_factory.mktemp("hf_side"))


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_transformers_model_matches_the_binary(variant, exports, binary_side, hf_side, enc):
    run, folder = exports[variant]
    files = {p.name for p in folder.iterdir()}
    assert {"config.json", "model.safetensors", "configuration_xsagpt.py", "modeling_xsagpt.py", "vocab.json",
            "merges.txt", "tokenizer_config.json", "generation_config.json", "README.md"} <= files
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "xsagpt" and config["tie_word_embeddings"] == VARIANTS[variant].get(
        "tie_embeddings", False)
    tanh = VARIANTS[variant].get("gelu") == "tanh"
    assert config["hidden_act"] == ("gelu_pytorch_tanh" if tanh else "gelu")
    assert config["conventions"]["mlp"]["activation"] == ("gelu_tanh" if tanh else "gelu_exact")

    scored, greedy = binary_side[variant]
    # The comparison means something: distinct scores, and text that depends on the prompt.
    assert len({round(o["logprob"], 3) for o in scored}) == len(PAIRS) - 1  # the two Paris pairs are one request
    assert len({tuple(g) for g in greedy}) > 1
    assert len(scored[-1]["context_ids"]) + len(scored[-1]["continuation_ids"]) > BLOCK + 1  # the cut happens

    hf = hf_side[variant]
    assert "error" not in hf, hf.get("error")
    assert hf["class"].startswith("transformers_modules.") and hf["class"].endswith("XsagptForCausalLM")
    assert hf["logprobs"] == pytest.approx([o["logprob"] for o in scored], abs=1e-4)
    assert hf["encoded"] == [enc.encode(p) for p in PROMPTS]
    assert hf["greedy"] == greedy
    assert len({len(e) for e in hf["encoded"]}) > 1 and hf["batched"] == greedy  # left padding changes nothing


def score(xsagpt, run, gpt2_vocab_dir) -> list[dict]:
    lines = "".join(json.dumps({"context": c, "continuation": k}) + "\n" for c, k in PAIRS)
    return [json.loads(line) for line in xsagpt("score", run, "--vocab", gpt2_vocab_dir, "--device", "cpu",
                                                "--threads", 1, "--tokens", input=lines).stdout.splitlines()]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_load_export_matches_the_binary(variant, exports, binary_side):
    """load_export.py (plain PyTorch, from config.json's conventions alone) on the plain
    export of the same checkpoint; read without the kind's step (no XSA layers, no
    output gate, no gate weights), the export scores otherwise."""
    from load_export import ExportedGPT, load_export, logprob
    kind = CASES[variant][0]
    model = load_export(exports[variant, "safetensors"])
    scored = binary_side[variant][0]
    want = [o["logprob"] for o in scored]
    got = [logprob(model, o["context_ids"], o["continuation_ids"]) for o in scored]
    assert len({round(w, 3) for w in want}) == len(PAIRS) - 1  # distinct (the two Paris pairs are one request)
    assert got == pytest.approx(want, abs=2e-5)
    if row(kind)["step"]:
        conv = json.loads(json.dumps(model.conv))
        conv.pop("out_gate", None)
        conv["xsa"].update(layers=[], gate="off")
        plain = {k: v for k, v in model.w.items() if not k.endswith(("gate", "gate_bias"))}
        stepless = ExportedGPT(conv, plain).eval()
        diff = max(abs(logprob(stepless, o["context_ids"], o["continuation_ids"]) - w) for o, w in zip(scored, want))
        assert diff > 1e-3, diff


def test_model_card_names_its_sources(exports):
    run, folder = exports["xsa-some-gate-sinks-tied"]
    card = (folder / "README.md").read_text()
    val = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    last_val = [m for m in val if "val_loss" in m][-1]
    assert last_val["step"] == 40
    assert f"{last_val['val_loss']:.4f} nats/token at step 40" in card and str(run / "metrics.jsonl") in card
    assert f"{40 * 4 * BLOCK:,} (step 40)" in card  # tokens: steps x micro-batch x sequence
    assert "Exclusive Self Attention (XSA) in layers 1 of 2, gated per head" in card
    assert "2 learned sink vectors" in card and "tied to the token embedding" in card


def test_lm_eval_hf_model_matches_xsagpt_eval(exports, xsagpt, gpt2_vocab_dir, tmp_path):
    """lm-eval's `hf` model (HFLM: its own tokenizer calls, batching and scoring) on the
    exported folder, against `xsagpt eval` on the same local task file."""
    pytest.importorskip("lm_eval", reason="lm-eval is not installed (requirements-eval.txt)")
    run, folder = exports["xsa-some-gate-sinks-tied"]
    report = tmp_path / "report.json"
    xsagpt("eval", run, "--task", TASKS / "tiny_mc.jsonl", "--out", report, "--vocab", gpt2_vocab_dir,
           "--device", "cpu", "--threads", 1)
    (ours,) = json.loads(report.read_text())["models"]
    ours = ours["results"]["tiny_mc"]
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf_home"),
           "TOKENIZERS_PARALLELISM": "false"}
    out_dir = tmp_path / "lm_eval_out"
    proc = subprocess.run(
        [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args",
         f"pretrained={folder},trust_remote_code=True,dtype=float32", "--device", "cpu", "--batch_size", "4",
         "--tasks", "xsagpt_tiny_mc", "--include_path", TASKS, "--output_path", out_dir, "--log_samples"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    (results_file,) = out_dir.rglob("results_*.json")
    lm = json.loads(results_file.read_text())["results"]["xsagpt_tiny_mc"]
    # No near-tie that float32 in another batching could resolve otherwise.
    (samples_file,) = out_dir.rglob("samples_xsagpt_tiny_mc_*.jsonl")
    for s in map(json.loads, samples_file.read_text().splitlines()):
        lls = np.array([float(r[0][0]) for r in s["resps"]])
        lens = np.array([float(len(e)) for e in s["doc"]["endings"]])
        for v in (lls, lls / lens):
            top = np.sort(v)[::-1]
            assert top[0] - top[1] > 1e-4, s["doc_id"]
    assert ours["n"] == 12 and 0 < ours["acc"] < 1  # some right, some wrong
    assert lm["acc,none"] == pytest.approx(ours["acc"]) and lm["acc_norm,none"] == pytest.approx(ours["acc_norm"])
