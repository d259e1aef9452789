"""Shared pytest fixtures, for the tests in every folder below: where the repository, the
build and GPT-2's vocabulary are; the KJV corpus, prepared under a lock that test
processes side by side share (pytest-xdist's workers); the tiny runs' shards, also ones a test may change;
a trained GPT-2-vocabulary model; xsagpt processes in the background, also held at a
test stop point (util/test_stop.h). Helpers that are functions rather than fixtures
live in the modules beside this file (shardio, tinyrun, gpt2_tiktoken; kind_checklist
and kind_flops, the attention kinds' cases and hand FLOP counts)."""
import contextlib
import fcntl
import os
import pathlib
import shutil
import signal
import subprocess
import time

import pytest

from shardio import write_markov_shards
from tinyrun import train_tiny

ROOT = pathlib.Path(__file__).resolve().parents[2]
MARKOV_SHARDS = {"val_000000.bin": 4096, "train_000001.bin": 20000, "train_000002.bin": 15000}  # tokens per file

# xsagpt's OpenMP default, given here so that the binary's computing commands start
# once instead of executing themselves again to apply it (util/device.h); the default
# itself is tested with a clean environment in train/test_train.py.
if "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ:
    os.environ["OMP_WAIT_POLICY"] = "passive"
# Under pytest-xdist (the test command runs one worker per core) each worker's binaries
# and in-process torch take one thread, so that two workers do not fight over the cores;
# a test that asks for a count (--threads, train.threads) still gets it. Set before any
# test module imports torch, which reads it once.
if os.environ.get("PYTEST_XDIST_WORKER") and "OMP_NUM_THREADS" not in os.environ:
    os.environ["OMP_NUM_THREADS"] = "1"


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


@contextlib.contextmanager
def _kjv_locked():
    """Held while data/kjv/prepare.sh may write the checkout's data/kjv/shards, so that
    test processes running side by side (pytest-xdist's workers) never read a shard
    another is writing: an exclusive lock on the script file itself, which every
    checkout has and nothing else locks."""
    with open(ROOT / "data" / "kjv" / "prepare.sh") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def kjv_lock():
    """`with kjv_lock():` around anything that runs data/kjv/prepare.sh on the checkout."""
    return _kjv_locked


@pytest.fixture(scope="session")
def kjv_shards(repo_root, gpt2_vocab_dir, kjv_lock):
    """The offline KJV corpus (data/kjv/prepare.sh), GPT-2 tokenized; prepared once."""
    env = dict(os.environ, XSAGPT_GPT2_VOCAB=str(gpt2_vocab_dir))
    with kjv_lock():
        subprocess.run(["bash", repo_root / "data" / "kjv" / "prepare.sh"], check=True, env=env, capture_output=True)
    return repo_root / "data" / "kjv" / "shards"


@pytest.fixture(scope="session")
def markov_shards(tmp_path_factory):
    """The tiny runs' corpus (a val shard and two train shards of a noisy Markov chain)."""
    return write_markov_shards(tmp_path_factory.mktemp("markov"), MARKOV_SHARDS, seed=0)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """The same corpus, written once per test module rather than once per session."""
    return write_markov_shards(tmp_path_factory.mktemp("shards"), MARKOV_SHARDS, seed=0)


@pytest.fixture(scope="session")
def gpt2_enc(gpt2_vocab_dir):
    """tiktoken's GPT-2 encoding from the local vocabulary files (offline)."""
    pytest.importorskip("tiktoken")
    from gpt2_tiktoken import gpt2_encoding
    return gpt2_encoding(gpt2_vocab_dir)


TEXT_BLOCK = 32  # block_size and seq_len of text_run's models


@pytest.fixture(scope="session")
def text_run(xsagpt, gpt2_enc):
    """text_run(tmp, model_overrides, steps=12) trains a tiny GPT-2-vocabulary model
    (2 layers, d_model 32, block TEXT_BLOCK) on the local lm-eval task texts, GPT-2
    tokenized, so that `xsagpt score`, sample and the exports can be compared on real
    text; returns the run directory, tmp/run."""
    import json

    import numpy as np
    from shardio import write_shard

    tasks = ROOT / "tests" / "lm_eval_tasks"

    def train(tmp: pathlib.Path, overrides: dict, steps: int = 12) -> pathlib.Path:
        text = (tasks / "tiny_text.jsonl").read_text() + (tasks / "tiny_mc.jsonl").read_text()
        toks = np.array(gpt2_enc.encode(text * 8), dtype=np.int64)
        for name in ("train_000001.bin", "val_000000.bin"):
            write_shard(tmp / name, toks)
        model = {"base": "tiny", "vocab_size": 50304, "block_size": TEXT_BLOCK, "n_layer": 2, "d_model": 32,
                 "n_head": 2, "head_dim": 16, **overrides}
        cfg = {"model": model, "data": {"train": str(tmp / "train_*.bin"), "val": str(tmp / "val_*.bin")},
               "train": {"max_steps": steps, "warmup_steps": 0, "lr": 1e-2, "seq_len": TEXT_BLOCK, "micro_batch": 4,
                         "eval_interval": steps // 2, "eval_tokens": 128, "threads": 1, "seed": 7},
               "out_dir": str(tmp / "run")}
        (tmp / "cfg.json").write_text(json.dumps(cfg))
        xsagpt("train", "-c", tmp / "cfg.json")
        return tmp / "run"
    return train


@pytest.fixture
def own_shards(tmp_path, markov_shards):
    """A private copy of markov_shards in tmp_path/data, for a test that rewrites or truncates them."""
    return pathlib.Path(shutil.copytree(markov_shards, tmp_path / "data"))


@pytest.fixture(scope="module")
def gpt2_run(tmp_path_factory, xsagpt):
    """A GPT-2-vocabulary model (50304 rows, 1 layer, one sink) trained one step (tinyrun.train_tiny)."""
    return train_tiny(tmp_path_factory.mktemp("gpt2"), xsagpt, 50304, n_sink=1)


def _state(pid):
    """The process state letter of /proc/PID/stat ('T': stopped), or None once it is gone."""
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return None


@pytest.fixture
def spawn(build_dir):
    """spawn(*args, stop_at=None, env=None) starts `xsagpt ARGS` in the background (text pipes).
    With stop_at it is held where the binary's test stop point of that name is
    (XSAGPT_TEST_STOP_AT): spawn returns once it stopped there; continue it with
    SIGCONT. Whatever still runs when the test ends is continued and killed."""
    procs = []

    def start(*args, stop_at=None, env=None):
        env = {**os.environ, **(env or {})}
        if stop_at:
            env["XSAGPT_TEST_STOP_AT"] = stop_at
        proc = subprocess.Popen([str(build_dir / "xsagpt"), *map(str, args)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
        procs.append(proc)
        t0 = time.time()
        while stop_at and _state(proc.pid) != "T":
            if proc.poll() is not None:
                out, err = proc.communicate()
                raise AssertionError(f"xsagpt {' '.join(map(str, args))} exited {proc.returncode} before "
                                     f"reaching {stop_at}\n{out}\n{err}")
            assert time.time() - t0 < 120, f"xsagpt never reached {stop_at}"
            time.sleep(0.005)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.communicate()
