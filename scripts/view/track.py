#!/usr/bin/env python3
"""Mirrors training runs into TensorBoard or Weights & Biases as they train.

    .venv/bin/python scripts/view/track.py runs/xsa-1.4b --tensorboard tb/        # then: tensorboard --logdir tb/
    .venv/bin/python scripts/view/track.py runs/sweep-lr --wandb xsagpt            # every point its own W&B run
    .venv/bin/python scripts/view/track.py runs/a runs/b --tensorboard tb/ --once  # finished runs, then exit

metrics.jsonl stays the source of truth; this follows it (src/run/metrics.h: train lines
carry train_loss, lr, grad_norm, tokens_per_s, mfu; val lines val_loss, the similarity bias
cos_y_v per layer and, for a gated model, xsa_gate per layer; both step and tokens) and logs
train/loss, train/lr, train/grad_norm, train/tokens_per_s, train/mfu, train/tokens, val/loss,
similarity/cos_y_v/layer_N and xsa_gate/layer_N/{mean,min,max} (over the layer's heads)
against the step. A PATH is a run directory or a sweep directory
(sweep.json; every point, as it appears, is its own run, its grid values and resolved
config as the run's config). It stops by itself once every run has done.json or
failed.json (and a sweep's summary.json says every point ended) and everything logged
before it is mirrored; --once mirrors what is there now and exits.

It follows metrics.jsonl by record, not by byte offset: a file replaced by a resumed run
(another inode) or cut shorter is read again from its start, and the last step mirrored
per tag skips what was seen. A line that is no record (not JSON; a literal NaN or Infinity,
which the trainer writes as null; a step that is no integer or is outside 0..2^63-1; a
negative tokens or time_s; a value that is not what the trainer writes: a loss, a rate or a
layer's cos_y_v or xsa_gate that is no number or null, such as true; metrics_record.py, the
reader shared with plot.py) is skipped and named on stderr as FILE:LINE: why, as plot.py
names it, and the rest is mirrored; the count is printed at exit, and the exit code is then
1, so that a caller can tell a history mirrored whole from one with lines left out. A metrics.jsonl that is not a file, a
--tensorboard that names a file, or a TensorBoard folder that cannot be made (under a file, under /proc or /sys, on a
read-only disk; out_folder.py, shared with plot.py) is a one-line error (exit 2).

Restarting never duplicates a point: TensorBoard's own event files (read back with
tensorboard's reader) say which steps each tag has; for W&B a small state file in
--wandb-dir, written before the points go to W&B, does. A run that resumes from a checkpoint and logs its steps again (with
the same values: resuming is exact) has them skipped. W&B runs offline when there is no
network or no API key (--wandb-mode auto): `wandb sync WANDB_DIR/wandb/offline-run-*`
uploads them later. Needs requirements-track.txt (scripts/setup.sh --track).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import socket
import sys
import time

from metrics_record import is_number, parse_line  # beside this file: the same reader as plot.py's
from out_folder import folder_problem  # plot.py's rule for the folders it writes

TRAIN_TAGS = {"train_loss": "train/loss", "lr": "train/lr", "grad_norm": "train/grad_norm",
              "tokens_per_s": "train/tokens_per_s", "mfu": "train/mfu", "tokens": "train/tokens"}
VAL_TAGS = {"val_loss": "val/loss"}


def dotted(config: dict, key: str):
    for part in key.split("."):
        config = config.get(part) if isinstance(config, dict) else None
    return config


class TrackError(Exception):
    """A path that cannot be followed (metrics.jsonl a directory, say): one line, exit 2."""


class Run:
    """One run directory, followed by record: the complete lines metrics.jsonl has gained
    since the last poll. A resumed run renames a rewritten metrics.jsonl into place, whose
    lines may differ from the old file's at any byte offset, so a new file (another inode)
    or a shorter one is read again from its start; the steps already mirrored per tag
    (self.last) then filter what was seen."""

    def __init__(self, path: pathlib.Path, name: str, group: str | None, grid_keys: list[str]):
        self.path, self.name, self.group, self.grid_keys = path, name, group, grid_keys
        self.offset, self.buffer, self.inode, self.lineno = 0, b"", None, 0
        self.last: dict[str, int] = {}  # tag -> the last step mirrored (a kill can come between two tags)
        self.damaged: dict[int, str] = {}  # line number -> why, for lines that are no record (named once)
        self.sink = None

    def config(self) -> dict:
        try:
            cfg = json.loads((self.path / "config.json").read_text())
        except (OSError, ValueError):
            cfg = {}
        values = {k: dotted(cfg, k) for k in self.grid_keys}
        return {"run_dir": str(self.path), **({"sweep_values": values} if values else {}), **cfg}

    def ended(self) -> bool:
        return (self.path / "done.json").exists() or (self.path / "failed.json").exists()

    def new_records(self) -> list[dict]:
        f = self.path / "metrics.jsonl"
        try:
            st = f.stat()
        except OSError:
            return []
        if not f.is_file():
            raise TrackError(f"{f}: not a regular file (a directory?); expected the run's metrics.jsonl")
        if st.st_ino != self.inode or st.st_size < self.offset:  # replaced or rewritten: read it from the start
            self.offset, self.buffer, self.inode, self.lineno = 0, b"", st.st_ino, 0
        try:
            with open(f, "rb") as fh:
                if os.fstat(fh.fileno()).st_ino != self.inode:  # replaced between stat and open: next poll
                    return []
                fh.seek(self.offset)
                data = fh.read()
        except OSError as e:
            raise TrackError(f"{f}: cannot read: {e.strerror or e}") from None
        self.offset += len(data)
        *lines, self.buffer = (self.buffer + data).split(b"\n")  # the last piece may be a line still being written
        out = []
        for line in lines:
            self.lineno += 1
            rec, why = parse_line(line)
            if why is None:
                out.append(rec)
            elif self.damaged.get(self.lineno) != why:
                self.damaged[self.lineno] = why
                print(f"[track] {f}:{self.lineno}: {why}; skipped", file=sys.stderr)
        return out


class TensorBoardSink:
    def __init__(self, logdir: pathlib.Path, run: Run):
        from torch.utils.tensorboard import SummaryWriter
        self.dir = logdir / run.name
        if why := folder_problem(self.dir, "TensorBoard folder"):  # a file in its place, say
            raise TrackError(why)
        run.last.update(last_steps(self.dir))
        fresh = not run.last
        self.writer = SummaryWriter(log_dir=str(self.dir))
        if fresh:
            self.writer.add_text("config", "```\n" + json.dumps(run.config(), indent=2) + "\n```", 0)

    def begin(self) -> None:
        pass  # the event files themselves say what is logged

    def log(self, values: dict, step: int) -> None:
        for tag, v in values.items():
            self.writer.add_scalar(tag, v, step)

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def last_steps(logdir: pathlib.Path) -> dict[str, int]:
    """tag -> the last step of its scalars in a TensorBoard log directory, as tensorboard
    reads them (a record cut off by a kill is not read)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    if not logdir.is_dir():
        return {}
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: max(e.step for e in acc.Scalars(tag)) for tag in acc.Tags()["scalars"]}


class WandbSink:
    def __init__(self, project: str, wandb_dir: pathlib.Path, mode: str, run: Run):
        import wandb
        run_id = "xsagpt-" + hashlib.sha1(str(run.path.resolve()).encode()).hexdigest()[:12]
        self.state = wandb_dir / "xsagpt-track" / f"{run_id}.json"
        try:
            run.last.update(json.loads(self.state.read_text()))
        except (OSError, ValueError):
            pass
        self.run_last = run.last
        self.run = wandb.init(project=project, id=run_id, name=run.name, group=run.group, config=run.config(),
                              dir=str(wandb_dir), mode=mode, resume="allow", reinit="create_new")

    def begin(self) -> None:
        # The state first: a kill before W&B has the points can lose them, never repeat them.
        self.state.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.run_last))
        os.replace(tmp, self.state)

    def log(self, values: dict, step: int) -> None:
        self.run.log(values, step=step)

    def flush(self) -> None:
        pass  # W&B's own process writes its files

    def close(self) -> None:
        self.run.finish()


def wandb_mode(requested: str) -> str:
    if requested != "auto":
        return requested
    if os.environ.get("WANDB_MODE") in ("offline", "disabled", "online"):
        return os.environ["WANDB_MODE"]
    import wandb
    try:
        has_key = bool(wandb.Api(timeout=5).api_key)
    except Exception:  # noqa: BLE001  no key, no config: nothing to upload with
        has_key = False
    if has_key:
        try:
            socket.create_connection(("api.wandb.ai", 443), timeout=3).close()
            return "online"
        except OSError:
            pass
    return "offline"


def discover(paths: list[pathlib.Path]) -> tuple[list[tuple[pathlib.Path, str, str | None, list[str]]], bool,
                                                 list[pathlib.Path]]:
    """(run dir, name, group, grid keys) of every run there is now; whether every sweep has
    ended; and the paths that are neither a run nor a sweep yet (a directory the trainer
    or the sweep has made but not yet written its config.json or sweep.json into)."""
    found, sweeps_ended, pending = [], True, []
    for p in paths:
        if not p.is_dir():
            pending.append(p)
        elif (p / "sweep.json").exists():
            try:
                keys = sorted(json.loads((p / "sweep.json").read_text()).get("grid", {}))
            except (OSError, ValueError):
                keys = []
            for d in sorted(q for q in p.iterdir() if q.is_dir() and (q / "config.json").exists()):
                found.append((d, f"{p.name}/{d.name}", p.name, keys))
            try:
                points = json.loads((p / "summary.json").read_text())["points"]
                sweeps_ended &= all(pt.get("status") in ("done", "failed", "invalid") for pt in points)
            except (OSError, ValueError, KeyError, TypeError):
                sweeps_ended = False  # no point has ended yet
        elif (p / "config.json").exists() or (p / "metrics.jsonl").exists():
            found.append((p, p.name, None, []))
        else:
            pending.append(p)
    return found, sweeps_ended, pending


def record_values(rec: dict) -> dict:
    """tag -> value of one metrics line; nulls (not measured: on a CPU the MFU, in a diverged
    run the loss and the similarity bias) and layers without a gate left out."""
    tags = TRAIN_TAGS if "train_loss" in rec else VAL_TAGS
    values = {tag: float(rec[k]) for k, tag in tags.items() if is_number(rec.get(k))}
    if "train_loss" in rec:
        return values
    for i, c in enumerate(rec.get("cos_y_v") or []):
        if is_number(c):
            values[f"similarity/cos_y_v/layer_{i}"] = float(c)
    for i, g in enumerate(rec.get("xsa_gate") or []):
        if isinstance(g, dict):
            values.update({f"xsa_gate/layer_{i}/{k}": float(g[k]) for k in ("mean", "min", "max") if is_number(g.get(k))})
    return values


def mirror(run: Run) -> int:
    batch = []
    for rec in run.new_records():
        step = rec["step"]
        values = {tag: v for tag, v in record_values(rec).items() if step > run.last.get(tag, -1)}
        if values:
            batch.append((values, step))
            run.last.update(dict.fromkeys(values, step))
    if batch:
        run.sink.begin()
        for values, step in batch:
            run.sink.log(values, step)
        run.sink.flush()
    return len(batch)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("paths", nargs="+", type=pathlib.Path, metavar="RUN_OR_SWEEP_DIR")
    to = ap.add_mutually_exclusive_group(required=True)
    to.add_argument("--tensorboard", type=pathlib.Path, metavar="DIR", help="TensorBoard log directory")
    to.add_argument("--wandb", metavar="PROJECT", help="Weights & Biases project")
    ap.add_argument("--wandb-dir", type=pathlib.Path, default=pathlib.Path("."),
                    help="where W&B keeps its files (its wandb/ folder) and this tracker its state (default .)")
    ap.add_argument("--wandb-mode", choices=["auto", "online", "offline"], default="auto",
                    help="auto: online with an API key and a network, else offline (default auto)")
    ap.add_argument("--once", action="store_true", help="mirror what the runs hold now and exit")
    ap.add_argument("--interval", type=float, default=5.0, help="seconds between polls (default 5)")
    args = ap.parse_args(argv)
    if args.interval <= 0:
        ap.error("--interval: must be > 0")
    if args.tensorboard and args.tensorboard.exists() and not args.tensorboard.is_dir():
        ap.error(f"--tensorboard {args.tensorboard}: not a directory (TensorBoard writes a folder of event files)")
    if args.tensorboard and (why := folder_problem(args.tensorboard, "TensorBoard folder")):
        print(f"track.py: error: {why}; name another with --tensorboard", file=sys.stderr)
        return 2
    for p in args.paths:
        if p.exists() and not p.is_dir():
            ap.error(f"{p}: not a run or sweep directory")
        if not p.exists() and args.once:
            ap.error(f"{p}: no such run or sweep directory")
    mode = wandb_mode(args.wandb_mode) if args.wandb else None
    if mode == "offline":
        print(f"[track] W&B offline: upload later with `wandb sync {args.wandb_dir / 'wandb'}/offline-run-*`",
              file=sys.stderr)

    runs: dict[pathlib.Path, Run] = {}
    waiting = set()
    try:
        while True:
            found, sweeps_ended, missing = discover(args.paths)
            for path, name, group, keys in found:
                if path not in runs:
                    run = Run(path, name, group, keys)
                    run.sink = (TensorBoardSink(args.tensorboard, run) if args.tensorboard else
                                WandbSink(args.wandb, args.wandb_dir, mode, run))
                    runs[path] = run
                    print(f"[track] {path} -> {name}", file=sys.stderr)
            # Ended is read before the lines: whatever preceded done.json is in this read.
            ended = {path: run.ended() for path, run in runs.items()}
            for run in runs.values():
                mirror(run)
            for p in set(missing) - waiting:
                print(f"[track] waiting for {p} to become a run or sweep directory", file=sys.stderr)
            waiting = set(missing)
            if args.once or (not missing and runs and all(ended.values()) and sweeps_ended):
                break
            time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    except TrackError as e:
        print(f"track.py: error: {e}", file=sys.stderr)
        return 2
    finally:
        for run in runs.values():
            run.sink.close()
    damaged = sum(len(run.damaged) for run in runs.values())
    print(f"[track] mirrored {len(runs)} run(s)" + (f"; skipped {damaged} damaged line(s), each named above"
                                                   if damaged else ""), file=sys.stderr)
    return 1 if damaged else 0


if __name__ == "__main__":
    sys.exit(main())
