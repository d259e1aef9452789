"""Shared pytest fixtures: where the repository, the build and GPT-2's vocabulary are."""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# xsagpt's OpenMP default, given here so that the binary's computing commands start
# once instead of executing themselves again to apply it (util/device.h); the default
# itself is tested with a clean environment in test_train.py.
if "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ:
    os.environ["OMP_WAIT_POLICY"] = "passive"


@pytest.fixture(scope="session")
def repo_root() -> pathlib.Path:
    return ROOT


@pytest.fixture(scope="session")
def build_dir() -> pathlib.Path:
    d = ROOT / os.environ.get("XSAGPT_BUILD_DIR", "build")
    if not (d / "xsagpt").exists():
        pytest.fail(f"{d}/xsagpt not built: run scripts/setup.sh first")
    return d


@pytest.fixture(scope="session")
def xsagpt(build_dir):
    """Runs the real binary; returns CompletedProcess (text, captured)."""
    def run(*args, check=True, **kw):
        proc = subprocess.run([str(build_dir / "xsagpt"), *map(str, args)], capture_output=True, text=True, **kw)
        if check and proc.returncode != 0:
            raise AssertionError(f"xsagpt {' '.join(map(str, args))} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc
    return run


@pytest.fixture(scope="session")
def gpt2_vocab_dir() -> pathlib.Path:
    """GPT-2's encoder.json and vocab.bpe for offline tiktoken: $XSAGPT_GPT2_VOCAB,
    data/gpt2/ in the repo, or the team's ../shared/data/gpt2 beside it."""
    for cand in (os.environ.get("XSAGPT_GPT2_VOCAB"), ROOT / "data" / "gpt2", ROOT.parent / "shared" / "data" / "gpt2"):
        if cand and (pathlib.Path(cand) / "encoder.json").exists() and (pathlib.Path(cand) / "vocab.bpe").exists():
            return pathlib.Path(cand)
    pytest.skip("GPT-2 vocabulary files not found (set XSAGPT_GPT2_VOCAB)")


@pytest.fixture(scope="session")
def kjv_shards(repo_root, gpt2_vocab_dir):
    """The offline KJV corpus (data/kjv/prepare.sh), GPT-2 tokenized; prepared once."""
    env = dict(os.environ, XSAGPT_GPT2_VOCAB=str(gpt2_vocab_dir))
    subprocess.run(["bash", repo_root / "data" / "kjv" / "prepare.sh"], check=True, env=env, capture_output=True)
    return repo_root / "data" / "kjv" / "shards"
