"""scripts/view/track.py against real runs of the binary: it follows metrics.jsonl while a run
trains, survives being killed and restarted without duplicating a point, stops by itself
when the run (or every point of a sweep) has ended, and what it wrote, read back with
tensorboard's own event reader and from W&B's offline run files, holds every logged step
exactly once with the values metrics.jsonl has. The command `xsagpt train` prints at
start is the one that works."""
import glob
import json
import os
import pathlib
import shlex
import struct
import subprocess
import sys
import time

import pytest

from shardio import write_markov_shards
from tinyrun import write_run_config

pytest.importorskip("tensorboard", reason="tensorboard is not installed (requirements-track.txt; scripts/setup.sh "
                                          "--track, which the test command runs)")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
TRACK = ROOT / "scripts" / "view" / "track.py"


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    return write_markov_shards(tmp_path_factory.mktemp("shards"), {"val_000000.bin": 4096,
                                                                   "train_000001.bin": 20000}, seed=0)


def logged(run_dir):
    """metrics.jsonl's train and val lines, step -> line."""
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return ({m["step"]: m for m in lines if "train_loss" in m}, {m["step"]: m for m in lines if "val_loss" in m})


def events(logdir):
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def track(*args, **kw):
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}  # only what the test says
    env["WANDB_SILENT"] = "true"
    return subprocess.Popen([sys.executable, TRACK, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**env, **kw.pop("env", {})}, **kw)


def wait_until(predicate, what, timeout=120):
    t0 = time.time()
    while not predicate():
        if time.time() - t0 > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_follows_a_training_run_and_restarts_without_duplicates(shards, xsagpt, build_dir, tmp_path):
    cfg = write_run_config(tmp_path / "cfg.json", shards, model={"xsa_gate": "sa"}, max_steps=150, eval_interval=50,
                           ckpt_interval=50)
    run, tb = tmp_path / "run", tmp_path / "tb"
    train = subprocess.Popen([build_dir / "xsagpt", "train", "-c", cfg, "--out", run], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: (run / "metrics.jsonl").exists() and (run / "metrics.jsonl").stat().st_size > 0,
                   "the first metrics line")
        assert not (run / "done.json").exists()  # the tracker starts while the run trains
        first = track(run, "--tensorboard", tb, "--interval", 0.05)
        # Killed (no clean exit) once it has mirrored something: the restart must carry on.
        wait_until(lambda: first.poll() is not None or ((tb / "run").is_dir() and
                                                         "train/loss" in events(tb / "run").Tags()["scalars"]),
                   "the first tracker's points")
        first.kill()
        first.wait()
        second = track(run, "--tensorboard", tb, "--interval", 0.05)
        _, err = train.communicate(timeout=300)
        assert train.returncode == 0, err
        second.wait(timeout=120)  # stops by itself: done.json
    finally:
        train.kill()
    assert second.returncode == 0, second.stderr.read()
    # The command `xsagpt train` printed is this tracker's, for this run.
    (line,) = [ln for ln in err.splitlines() if "watch it live: " in ln]
    printed = shlex.split(line.split("watch it live: ")[1].split("  (or")[0])
    assert printed[1:] == [str(TRACK), str(run), "--tensorboard", str(tmp_path / "tb")]

    train_lines, val_lines = logged(run)
    assert sorted(train_lines) == list(range(1, 151)) and sorted(val_lines) == [0, 50, 100, 150]
    acc = events(tb / "run")
    for tag, key, lines in (("train/loss", "train_loss", train_lines), ("train/lr", "lr", train_lines),
                            ("train/grad_norm", "grad_norm", train_lines),
                            ("train/tokens_per_s", "tokens_per_s", train_lines),
                            ("train/tokens", "tokens", train_lines), ("val/loss", "val_loss", val_lines)):
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        want = {s: float(m[key]) for s, m in lines.items() if m[key] is not None}  # null: not measured
        assert len(want) > 0.9 * len(lines), tag
        assert sorted(s for s, _ in got) == sorted(want), tag  # every step, once
        assert dict(got) == pytest.approx(want, rel=1e-6), tag
    # The val lines' diagnostics, a tag per layer: the similarity bias and the gate over its heads.
    for layer in range(2):
        tags = {f"similarity/cos_y_v/layer_{layer}": lambda m: m["cos_y_v"][layer]}
        tags.update({f"xsa_gate/layer_{layer}/{k}": lambda m, k=k: m["xsa_gate"][layer][k] for k in ("mean", "min", "max")})
        for tag, value in tags.items():
            got = {e.step: e.value for e in acc.Scalars(tag)}
            assert got == pytest.approx({s: value(m) for s, m in val_lines.items()}, rel=1e-6, abs=1e-7), tag
    assert len({m["cos_y_v"][0] for m in val_lines.values()}) == len(val_lines)  # real, changing values
    assert len(set(train_lines[s]["train_loss"] for s in train_lines)) > 100  # real, changing values
    assert "train/mfu" not in acc.Tags()["scalars"]  # null on a CPU: not plotted as zero

    # Mirroring the finished run again adds nothing.
    again = track(run, "--tensorboard", tb, "--once")
    again.wait(timeout=120)
    assert again.returncode == 0
    assert sorted(e.step for e in events(tb / "run").Scalars("train/loss")) == list(range(1, 151))


def wandb_records(path):
    """The records of one W&B run file (.wandb), in the LevelDB log format W&B writes:
    a 7-byte header, then 32 KiB blocks of records, each record in one or more pieces."""
    from wandb.proto import wandb_internal_pb2 as pb
    data = pathlib.Path(path).read_bytes()
    assert data[:4] == b":W&B"
    pos, part, out = 7, b"", []
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if left < 7 or kind == 0:
            pos += left  # the block's zero padding
            continue
        part += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a whole record, or the last piece of one
            rec = pb.Record()
            rec.ParseFromString(part)
            out.append(rec)
            part = b""
    return out


def wandb_runs(wandb_dir):
    """run id -> (history rows [(step, {key: value})], config {key: value}) over every offline
    run directory (a restarted tracker resumes the same id in a new one)."""
    runs = {}
    for f in sorted(glob.glob(str(wandb_dir / "wandb" / "offline-run-*" / "run-*.wandb"))):
        rows, config = runs.setdefault(pathlib.Path(f).stem.removeprefix("run-"), ([], {}))
        for rec in wandb_records(f):
            kind = rec.WhichOneof("record_type")
            if kind == "history":
                rows.append((rec.history.step.num,  # "train/loss" is stored as the nested key [train, loss]
                             {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item}))
            elif kind in ("run", "config"):  # the config as the run started, then any updates
                updates = rec.run.config.update if kind == "run" else rec.config.update
                config.update({i.key: json.loads(i.value_json) for i in updates})
    return runs


def test_sweep_points_are_runs_in_wandb_offline(shards, xsagpt, build_dir, tmp_path):
    pytest.importorskip("wandb", reason="wandb is not installed (requirements-track.txt)")
    base = write_run_config(tmp_path / "base.json", shards, max_steps=8, eval_interval=4, ckpt_interval=0)
    sweep_dir = tmp_path / "sweep"
    (tmp_path / "sweep_file.json").write_text(json.dumps(
        {"base": str(base), "grid": {"model.attention": ["sa", "xsa"]}, "out_dir": str(sweep_dir)}))
    wb = tmp_path / "wb"
    env = {"WANDB_CONFIG_DIR": str(tmp_path / "wbconfig"), "WANDB_CACHE_DIR": str(tmp_path / "wbcache"),
           "WANDB_DATA_DIR": str(tmp_path / "wbdata")}
    cmd = [sweep_dir, "--wandb", "xsagpt-test", "--wandb-dir", wb, "--wandb-mode", "offline"]
    # Started before the sweep: waits for it, takes each point as it appears, ends with the sweep.
    follower = track(*cmd, "--interval", 0.05, env=env)
    proc = xsagpt("sweep", "-c", tmp_path / "sweep_file.json", "--no-plot")
    assert "watch it live: " in proc.stderr and str(sweep_dir) in proc.stderr
    _, err = follower.communicate(timeout=180)
    assert follower.returncode == 0, err
    # Restarted on the finished sweep, it logs nothing again.
    again = track(*cmd, "--once", env=env)
    _, err = again.communicate(timeout=120)
    assert again.returncode == 0, err

    runs = wandb_runs(wb)
    assert len(runs) == 2 and len(glob.glob(str(wb / "wandb" / "offline-run-*"))) == 4  # two sessions each
    by_point = {cfg["sweep_values"]["model.attention"]: (rows, cfg) for rows, cfg in runs.values()}
    assert sorted(by_point) == ["sa", "xsa"]
    for attention, (rows, cfg) in by_point.items():
        point = sweep_dir / f"model.attention={attention}"
        assert cfg["model"]["attention"] == attention and cfg["run_dir"] == str(point)
        train_lines, val_lines = logged(point)
        assert sorted(train_lines) == list(range(1, 9)) and sorted(val_lines) == [0, 4, 8]
        steps = [s for s, _ in rows]
        assert sorted(steps) == list(range(0, 9))  # one row per step (val only at 0), none from the restart
        values = dict(rows)
        assert {s: v["train/loss"] for s, v in values.items() if "train/loss" in v} == pytest.approx(
            {s: m["train_loss"] for s, m in train_lines.items()}, rel=1e-6)
        assert {s: v["val/loss"] for s, v in values.items() if "val/loss" in v} == pytest.approx(
            {s: m["val_loss"] for s, m in val_lines.items()}, rel=1e-6)
