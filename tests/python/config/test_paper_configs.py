"""The paper's model configs state their LM head in the file, so a reader of a result
knows which head it was trained with without knowing xsagpt's defaults, and the
nanoGPT-faithful override that docs/training.md gives does tie the head."""
import json

import pytest

PAPER_SIZES = ["paper-0.7b", "paper-1.4b", "paper-2.7b"]


@pytest.mark.parametrize("name", PAPER_SIZES)
def test_paper_config_states_its_head(repo_root, name):
    model = json.loads((repo_root / "configs" / "model" / f"{name}.json").read_text())
    assert model.get("tie_embeddings") is False, f"{name}.json: model.tie_embeddings must be stated"
    assert model.get("head_init") == "normal", f"{name}.json: model.head_init must be stated"


@pytest.mark.parametrize("name", PAPER_SIZES)
def test_nanogpt_head_override_ties_the_head(xsagpt, name):
    untied = json.loads(xsagpt("info", "-c", name, "--json").stdout)
    tied = json.loads(xsagpt("info", "-c", name, "--json", "--set", "model.tie_embeddings=true").stdout)
    cfg = untied["config"]
    assert untied["config"]["tie_embeddings"] is False and tied["config"]["tie_embeddings"] is True
    # Tying removes exactly the head's own vocab x d_model matrix, nothing else.
    assert untied["params_total"] - tied["params_total"] == cfg["vocab_size"] * cfg["d_model"] > 0
