#!/usr/bin/env python3
"""Tokens per second of `xsagpt score` beside the training step of the same model.

    .venv/bin/python scripts/bench/bench_score.py --config paper-0.7b            # random weights, on the GPU
    .venv/bin/python scripts/bench/bench_score.py runs/xsa-1.4b --seq-len 2048

Scoring is a forward pass without autograd, about a third of a training step's
work, so `score` should process at least the step's tokens/s. The script keeps one
`xsagpt score` process alive (as the lm-eval bridge does), sends a warm-up group,
then --texts texts of about --seq-len tokens each as rolling (whole-text) requests,
and times their answers: tokens/s = tokens scored / wall time. It then runs
`xsagpt bench --no-block` for the training step of the same model config at
micro-batch --step-batch x --seq-len and prints both (JSON with --json).
With --config and no checkpoint, a checkpoint of that size is made first by one
training step on random tokens (weights do not change the speed).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]


def write_shard(path: pathlib.Path, tokens: np.ndarray) -> None:
    header = np.zeros(256, dtype="<i4")
    header[:3] = (20240520, 1, len(tokens))
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype("<u2").tobytes())


def make_checkpoint(xsagpt: str, config: str, seq_len: int, device: str, tmp: pathlib.Path) -> pathlib.Path:
    rng = np.random.default_rng(0)
    for name in ("train_000001.bin", "val_000000.bin"):
        write_shard(tmp / name, rng.integers(0, 50257, size=4 * seq_len + 1))
    cfg = {"model": config,
           "data": {"train": str(tmp / "train_*.bin"), "val": str(tmp / "val_*.bin")},
           "train": {"max_steps": 1, "warmup_steps": 0, "seq_len": seq_len, "micro_batch": 1, "eval_interval": 0,
                     "eval_tokens": seq_len, "ckpt_interval": 0, "device": device},
           "out_dir": str(tmp / "run")}
    (tmp / "run.json").write_text(json.dumps(cfg))
    subprocess.run([xsagpt, "train", "-c", str(tmp / "run.json")], check=True)
    return tmp / "run"


def model_config_of(run: pathlib.Path) -> dict:
    for cand in (run / "config.json", run.parent.parent / "config.json"):
        if cand.is_file():
            return json.loads(cand.read_text())["model"]
    sys.exit(f"{run}: no config.json beside the checkpoint (needed for the training-step benchmark)")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", nargs="?", type=pathlib.Path, help="checkpoint file or run directory")
    ap.add_argument("--config", help="model config (configs/model name) for a random-weight checkpoint")
    ap.add_argument("--seq-len", type=int, default=2048, help="tokens per text and per training sequence")
    ap.add_argument("--texts", type=int, default=64, help="texts timed")
    ap.add_argument("--step-batch", type=int, default=8, help="micro-batch of the training step compared")
    ap.add_argument("--batch-tokens", type=int, default=0, help="xsagpt score --batch-tokens (0: its default)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--binary", default=str(ROOT / "build" / "xsagpt"))
    ap.add_argument("--vocab", help="folder with GPT-2's encoder.json and vocab.bpe")
    ap.add_argument("--json", type=pathlib.Path, help="also write the figures here")
    args = ap.parse_args(argv)
    if (args.checkpoint is None) == (args.config is None):
        sys.exit("give a checkpoint or --config NAME (not both)")
    vocab = ["--vocab", args.vocab] if args.vocab else []

    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        run = args.checkpoint or make_checkpoint(args.binary, args.config, args.seq_len, args.device, tmp)
        model = model_config_of(run if run.is_dir() else run)
        # Text of random GPT-2 tokens: decoded once, cut into --texts pieces of about --seq-len tokens.
        rng = np.random.default_rng(1)
        ids = rng.integers(0, 50256, size=(args.texts + 4) * args.seq_len).tolist()
        text = subprocess.run([args.binary, "tokenize", "--decode", *vocab], input=json.dumps(ids), check=True,
                              capture_output=True, text=True).stdout
        step = len(text) // (args.texts + 4)
        pieces = [text[i * step:(i + 1) * step] for i in range(args.texts + 4)]

        proc = subprocess.Popen([args.binary, "score", str(run), "--device", args.device, "--batch-tokens",
                                 str(args.batch_tokens), *vocab], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True, bufsize=1)

        def ask(texts):
            proc.stdin.write("".join(json.dumps({"text": t}) + "\n" for t in texts) + "\n")
            proc.stdin.flush()
            return [json.loads(proc.stdout.readline()) for _ in texts]

        ask(pieces[:4])  # warm-up: CUDA context, kernels, allocator
        start = time.perf_counter()
        answers = ask(pieces[4:])
        seconds = time.perf_counter() - start
        proc.stdin.close()
        proc.wait()
        tokens = sum(a["n_tokens"] for a in answers)
        score_tok_s = tokens / seconds

        model_file = tmp / "model.json"
        model_file.write_text(json.dumps(model))
        # bench's variant is the model's kind; a config without the key has the default, the
        # first kind `xsagpt config --json` lists.
        kinds = json.loads(subprocess.run([args.binary, "config", "--json"], check=True, capture_output=True,
                                          text=True).stdout)["attention_kinds"]
        variant = model.get("attention", kinds[0]["name"])
        bench_json = tmp / "bench.json"
        subprocess.run([args.binary, "bench", "--no-block", "--device", args.device, "--step-config", str(model_file),
                        "--step-batch", str(args.step_batch), "--step-seq-len", str(min(args.seq_len,
                                                                                        model["block_size"])),
                        "--variants", variant, "--json", str(bench_json)], check=True, stdout=subprocess.DEVNULL)
        step_tok_s = json.loads(bench_json.read_text())["step"]["results"][variant]["tokens_per_s"]

    result = {"checkpoint": str(args.checkpoint or args.config), "attention": variant, "texts": args.texts,
              "tokens": tokens, "score_seconds": seconds, "score_tokens_per_s": score_tok_s,
              "train_step_tokens_per_s": step_tok_s, "ratio": score_tok_s / step_tok_s}
    print(f"xsagpt score: {tokens} tokens in {seconds:.2f} s = {score_tok_s:,.0f} tokens/s; "
          f"training step ({args.step_batch} x {min(args.seq_len, model['block_size'])}): {step_tok_s:,.0f} tokens/s; "
          f"ratio {result['ratio']:.2f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
