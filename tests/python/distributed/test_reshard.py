"""A resume on another number of ranks, with the real binary on CPU (Gloo ranks under
torchrun): a run on 2 ranks continues on 1, then on 3, and with train.shard_optimizer
on 3 sharded ranks, then on 2, each keeping the 12 sequences of an optimizer step
split another way (micro_batch x accumulation x ranks). The sequences each step
trains on are the uninterrupted run's, rebuilt here from the shards and the order
data/loader.h specifies (not through the loader); the losses and weights follow the
uninterrupted run's within the tolerance of test_distributed.py; the resume says why
they are not bit-exact, and done.json records it. A step that cannot be kept is
refused, and the run directory is left as it was."""
import json
import shutil
import subprocess

import pytest

from distrun import TIMEOUT, run, torchrun, weights, worker_env, write_config
from shardio import read_shard, write_markov_shards
from tinyrun import metrics, snapshot

T, SEQUENCES, SEED, STEPS = 32, 12, 1234, 8
SHARD = "train.shard_optimizer=true"
M64 = 2**64 - 1


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Two small train shards (18 + 12 sequences: an epoch is 2.5 steps, so steps run across shard
    and epoch boundaries) and a val shard of 127 sequences."""
    return write_markov_shards(tmp_path_factory.mktemp("reshard_shards"), {
        "val_000000.bin": 4096, "train_000001.bin": 18 * T + 5, "train_000002.bin": 12 * T + 1}, seed=3)


# ---- the stream, from data/loader.h's specification ------------------------------

def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def derive_seed(seed, epoch, stream):
    s = splitmix64(seed)[1] ^ epoch
    s = splitmix64(s)[1] ^ stream
    return splitmix64(s)[1]


def permutation(n, key):
    p, state = list(range(n)), key
    for i in range(n - 1, 0, -1):
        state, r = splitmix64(state)
        j = (r * (i + 1)) >> 64
        p[i], p[j] = p[j], p[i]
    return p


def stream(shard_dir, count):
    """The first `count` sequences (T+1 token ids each) of the shuffled training stream."""
    files = [read_shard(f) for f in sorted(shard_dir.glob("train_*.bin"))]
    out, epoch = [], 0
    while len(out) < count:
        for f in permutation(len(files), derive_seed(SEED, epoch, 0)):
            n = (len(files[f]) - 1) // T
            for s in permutation(n, derive_seed(SEED, epoch, f + 1)):
                out.append(tuple(files[f][s * T:s * T + T + 1].tolist()))
        epoch += 1
    return out[:count]


def steps_read(trace_dir):
    """step -> the sequences the run's ranks trained on in it, from its batch trace."""
    steps = {}
    for path in trace_dir.glob("rank_*.jsonl"):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            steps.setdefault(rec["step"], []).extend(tuple(s) for s in rec["sequences"])
    return steps


# ---- the runs --------------------------------------------------------------------

@pytest.fixture(scope="module")
def runs(tmp_path_factory, shards, build_dir):
    """Straight: 8 steps on 2 ranks (micro_batch 3 x 2 accumulation). Resumed: its step 2 on 1 rank
    (4 x 3), that run's step 4 on 3 ranks (4 x 1), and, sharded, the 1-rank run's step 4 on 3 ranks
    (2 x 2), whose step 6 continues on 2 sharded ranks (6 x 1). Every run traces its batches."""
    d = tmp_path_factory.mktemp("reshard_runs")
    # 768 validation tokens: 24 sequences, whole batches for every split here (6, 4, 12, 12).
    cfg = write_config(d / "cfg.json", shards, max_steps=STEPS, batch_tokens=SEQUENCES * T, micro_batch=3,
                       seed=SEED, ckpt_interval=2, eval_interval=2, eval_tokens=768, keep_checkpoints=10)
    legs = [("straight", 2, 3, None, ()),
            ("one", 1, 4, ("straight", 2), ()),
            ("three", 3, 4, ("one", 4), ()),
            ("three_sharded", 3, 2, ("one", 4), (SHARD,)),
            ("two_sharded", 2, 6, ("three_sharded", 6), (SHARD,))]
    out = {"dir": d, "cfg": cfg, "logs": {}}
    for name, ranks, micro, start, sets in legs:
        trace = d / f"{name}_trace"
        trace.mkdir()
        args = ["-c", cfg, "--out", d / name, "--set", f"train.micro_batch={micro}"]
        for s in sets:
            args += ["--set", s]
        if start:
            args += ["--resume", d / start[0] / "checkpoints" / f"step_{start[1]:08d}.pt"]
        out["logs"][name] = run(torchrun(build_dir, *args, nproc=ranks), env={"XSAGPT_TEST_BATCH_TRACE": str(trace)})
        out[name] = d / name
    return out


RESUMED = {"one": 2, "three": 4, "three_sharded": 4, "two_sharded": 6}  # the step each resumed from


def test_each_step_trains_on_the_uninterrupted_runs_sequences(runs, shards):
    expected = stream(shards, STEPS * SEQUENCES)
    assert len(set(expected[:30])) == 30  # an epoch's sequences are distinct: a repeat would show
    assert len({tuple(s) for s in expected}) == 30  # ... and the 8 steps run through more than 3 epochs
    for name in ("straight", *RESUMED):
        read = steps_read(runs["dir"] / f"{name}_trace")
        assert sorted(read) == list(range(RESUMED.get(name, 0) + 1, STEPS + 1)), name
        for step, seqs in read.items():
            want = expected[(step - 1) * SEQUENCES:step * SEQUENCES]
            assert sorted(seqs) == sorted(want), (name, step)  # none skipped, none twice


def test_losses_and_weights_follow_the_uninterrupted_run(runs):
    straight = runs["straight"]
    losses = metrics(straight)
    assert len(set(losses.values())) == STEPS  # the run moves
    for name, start in RESUMED.items():
        for kind in ("train_loss", "val_loss"):
            a, b = metrics(straight, kind), metrics(runs[name], kind)
            assert sorted(b) == [s for s in sorted(a) if s > start], (name, kind)
            assert all(abs(a[s] - b[s]) < 1e-5 for s in b), (name, kind, a, b)
        wa, wb = (weights(d / "checkpoints" / f"step_{STEPS:08d}.pt") for d in (straight, runs[name]))
        assert max((wa[k] - wb[k]).abs().max().item() for k in wa) < 1e-5, name
    start = weights(straight / "checkpoints" / "step_00000002.pt")
    final = weights(straight / "checkpoints" / f"step_{STEPS:08d}.pt")
    assert max((final[k] - start[k]).abs().max().item() for k in final) > 1e-3, "the weights barely moved"


def test_the_resume_says_why_it_is_not_bit_exact_and_done_json_records_it(runs):
    log = runs["logs"]["three"]
    assert "step_00000004.pt was saved by 1 rank, this run has 3 ranks" in log
    assert ("(micro_batch 4 x seq_len 32 x 3 accumulation x 1 rank then, micro_batch 4 x seq_len 32 x 1 "
            "accumulation x 3 ranks now)") in log
    assert "not bit for bit: the gradient is summed over micro-batches and ranks in another order" in log
    assert "AdamW state sharded over 3 ranks" in runs["logs"]["three_sharded"]
    assert "AdamW state sharded over 2 ranks" in runs["logs"]["two_sharded"]
    assert "this one evaluates" not in log  # the same 24 validation sequences in every split
    done = {name: json.loads((runs[name] / "done.json").read_text()) for name in ("straight", *RESUMED)}
    assert "rank_changes" not in done["straight"]
    assert done["three"]["rank_changes"] == [{"step": 2, "from": 2, "to": 1}, {"step": 4, "from": 1, "to": 3}]
    assert done["two_sharded"]["rank_changes"] == [{"step": 2, "from": 2, "to": 1}, {"step": 4, "from": 1, "to": 3},
                                                   {"step": 6, "from": 3, "to": 2}]
    assert all(d["tokens"] == STEPS * SEQUENCES * T for d in done.values())


def test_a_step_that_cannot_be_kept_is_refused_leaving_the_run_as_it_was(runs, build_dir):
    """The 1-rank run, stopped at step 6, continued on 2 ranks with batch_tokens 0: micro_batch 4 x 32
    x 2 ranks would make its steps 256 tokens instead of 384."""
    out = runs["dir"] / "refused"
    shutil.copytree(runs["one"], out)
    (out / "checkpoints" / f"step_{STEPS:08d}.pt").unlink()
    (out / "done.json").unlink()
    before = snapshot(out)
    proc = subprocess.run(torchrun(build_dir, "-c", runs["cfg"], "--out", out, "--resume", "auto", "--set",
                                   "train.batch_tokens=0", "--set", "train.micro_batch=4"),
                          capture_output=True, text=True, env=worker_env(), timeout=TIMEOUT)
    assert proc.returncode != 0
    assert ("step_00000006.pt: saved by 1 rank, whose optimizer steps were 384 tokens (micro_batch 4 x seq_len 32 x "
            "3 accumulation x 1 rank), but this config makes them 256 tokens on 2 ranks") in proc.stderr, proc.stderr
    assert "set train.batch_tokens=384 and train.micro_batch=3 (micro_batch 3 x seq_len 32 x 2 accumulation x 2 " \
           "ranks)" in proc.stderr
    assert snapshot(out) == before
