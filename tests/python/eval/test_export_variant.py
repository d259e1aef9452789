"""scripts/eval/export.py and scripts/eval/load_export.py on an attention variant that is not the
plain "xsa" of every layer: XSA on the last layer only, with a learned gate that starts
as SA, an attention sink and the tanh GELU, in a run whose directory is named for the variant. The
export is read back by load_export (plain PyTorch, from config.json's conventions alone)
and its log-probabilities must equal `xsagpt score`'s of the same checkpoint within
2e-5; the same export read as plain XSA everywhere, or without the gate, must not. Every
kind's own round trip is in test_hf_export.py, by the kind checklist's cases.
"""
import copy
import json
import subprocess
import sys

import pytest
import torch

from load_export import ExportedGPT, load_export, logprob

ROOT = __import__("pathlib").Path(__file__).resolve().parents[3]

pytest.importorskip("safetensors")

VARIANT = {"attention": "xsa", "n_layer": 3, "xsa_layers": "last 1", "xsa_gate": "sa", "n_sink": 1, "gelu": "tanh"}
PAIRS = [("In the beginning God created", " the heaven and the earth."),
         ("The capital of France is", " Paris"),
         ("Question: what is two plus two? Answer:", " four")]


@pytest.fixture(scope="module")
def exported(tmp_path_factory, text_run):
    tmp = tmp_path_factory.mktemp("xsa-last1-gated")
    run = text_run(tmp, VARIANT, steps=16)
    out = tmp / "export"
    subprocess.run([sys.executable, ROOT / "scripts" / "eval" / "export.py", run, "--out", out], check=True,
                   capture_output=True)
    return run, out


def scores(model, pairs):
    return [logprob(model, o["context_ids"], o["continuation_ids"]) for o in pairs]


def test_export_of_a_variant_matches_the_binary(exported, xsagpt, gpt2_vocab_dir):
    run, out = exported
    config = json.loads((out / "config.json").read_text())
    conv = config["conventions"]
    assert conv["xsa"]["layers"] == [2] and conv["xsa"]["gate"] == "sa" and conv["n_sink"] == 1
    assert conv["mlp"]["activation"] == "gelu_tanh"
    model = load_export(out)
    gate = model.w["transformer.h.2.attn.xsa_gate"]
    assert gate.abs().max() > 1e-4  # trained away from the SA start: the gate changes the function
    assert not any(k.startswith(("transformer.h.0.attn.xsa_gate", "transformer.h.1.attn.xsa_gate")) for k in model.w)

    lines = "".join(json.dumps({"context": c, "continuation": k}) + "\n" for c, k in PAIRS)
    scored = [json.loads(line) for line in xsagpt("score", run, "--vocab", gpt2_vocab_dir, "--device", "cpu",
                                                  "--threads", 1, "--tokens", input=lines).stdout.splitlines()]
    want = [o["logprob"] for o in scored]
    assert len({round(w, 3) for w in want}) == len(PAIRS)  # distinct: the comparison says something
    assert scores(model, scored) == pytest.approx(want, abs=2e-5)  # both float32, the same arithmetic

    # The comparison tells the variant apart: the same weights read as ungated XSA in the
    # last layer (the gate, near its SA start, scales XSA's term down) or as XSA in every
    # layer score differently.
    ungated = {k: v for k, v in model.w.items() if not k.endswith("xsa_gate")}
    for layers in ([2], [0, 1, 2]):
        conv2 = copy.deepcopy(conv)
        conv2["xsa"].update(layers=layers, gate="off")
        diff = max(abs(a - b) for a, b in zip(scores(ExportedGPT(conv2, ungated).eval(), scored), want))
        assert diff > 1e-3, layers


def test_a_gate_the_weights_lack_is_refused(exported):
    _, out = exported
    model = load_export(out)
    conv = copy.deepcopy(model.conv)
    conv["xsa"]["layers"] = [1, 2]  # layer 1 has no gate weight in this export
    with pytest.raises(ValueError, match=r"transformer\.h\.1\.attn\.xsa_gate"):
        ExportedGPT(conv, model.w)
    conv["xsa"].update(layers=[2], gate="off")  # a gate weight the conventions do not use is refused too
    with pytest.raises(ValueError, match=r"transformer\.h\.2\.attn\.xsa_gate"):
        ExportedGPT(conv, model.w)
    conv["xsa"].update(gate="on")
    with pytest.raises(ValueError, match="conventions.xsa.gate"):
        ExportedGPT(conv, model.w)
    assert torch.is_tensor(model.w["transformer.h.2.attn.xsa_gate"])
