#!/usr/bin/env python3
"""lm-evaluation-harness model "xsagpt": xsagpt checkpoints scored by the C++ engine.

The harness asks a model for three things; each is answered by one long-lived
`xsagpt score` process (the checkpoint is loaded once):
  loglikelihood          {"context", "continuation"} lines -> (logprob, is_greedy)
  loglikelihood_rolling  {"text"} lines -> logprob over rolling windows
  generate_until         {"prompt", "until", "max_new_tokens", ...} lines -> text
`xsagpt score` splits and truncates the texts exactly as the harness does for its
own Hugging Face models (trailing context whitespace moves to the continuation,
contexts are cut on the left to the model's window), so the numbers are comparable.

lm-eval 0.4.13 finds models only in its own registry, so this file registers the
class and then runs the harness's own command line; use it wherever you would type
`lm_eval`:

    .venv/bin/python scripts/eval/lm_eval_xsagpt.py --model xsagpt --model_args checkpoint=runs/X \
        --tasks arc_easy,boolq,hellaswag,lambada_openai,openbookqa,piqa,social_iqa,winogrande \
        --output_path results/    # -> results/X/results_<date>.json, named after the run

From Python, `import lm_eval_xsagpt` (run from scripts/eval/, or with it on sys.path) registers the model
for lm_eval.simple_evaluate(model="xsagpt", model_args="checkpoint=...", ...), or pass
an instance: simple_evaluate(model=XsagptLM(checkpoint="runs/X"), tasks=[...]).

--model_args keys: checkpoint (required: a checkpoint file or run directory),
binary (default: $XSAGPT_BINARY, else build/xsagpt beside this script), precision
(auto, bf16, fp32), batch_tokens (tokens per forward pass, 0: xsagpt's default),
vocab (the folder with GPT-2's encoder.json and vocab.bpe), threads, max_gen_toks
(default 256). The device is lm_eval's own --device (cpu, cuda, cuda:N; the harness
defaults to cuda:0, which falls back to the CPU with a warning where there is no GPU).
"""
from __future__ import annotations

import json
import logging
import os
import pathlib
import subprocess
import sys


def _ensure_lm_eval() -> None:
    """lm-eval is an extra (requirements-eval.txt, ~0.5 GB) that the demo does not
    install: on first use, install it into this Python, saying so, or explain."""
    try:
        import lm_eval  # noqa: F401
        return
    except ImportError:
        pass
    req = pathlib.Path(__file__).resolve().parents[2] / "requirements-eval.txt"
    print(f"lm_eval_xsagpt: lm-eval is not installed in {sys.executable}; installing {req.name} "
          "(lm-eval 0.4.13 and its ~0.5 GB of dependencies; once) ...", file=sys.stderr)
    rc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r", str(req)]).returncode
    if rc != 0:
        sys.exit(f"lm_eval_xsagpt: installing {req} failed (pip exit {rc}); install it by hand with "
                 f"`bash scripts/setup.sh --eval` or `{sys.executable} -m pip install -r {req}`")


_ensure_lm_eval()

from lm_eval.api.model import LM  # noqa: E402
from lm_eval.api.registry import register_model  # noqa: E402
import lm_eval.models  # noqa: F401,E402  the built-in models first: the registry loads them only while empty

ROOT = pathlib.Path(__file__).resolve().parents[2]
eval_logger = logging.getLogger("lm_eval_xsagpt")
# Lines sent before reading the answers: xsagpt score answers at an empty line or
# after --group lines, so sending at most --group lines at a time never leaves both
# processes blocked on a full pipe.
GROUP = 4096


def run_model_config(checkpoint: str) -> dict | None:
    """The model section of the run's config.json, for a run directory or a
    checkpoints/step_*.pt inside one; None when there is none."""
    p = pathlib.Path(checkpoint)
    for cand in (p / "config.json", p.parent.parent / "config.json"):
        if cand.is_file():
            return json.loads(cand.read_text()).get("model")
    return None


def run_name(checkpoint: str) -> str:
    """What a result folder is called: the run directory's name, plus the step file's stem
    when a single checkpoint file inside it was given."""
    p = pathlib.Path(checkpoint).resolve()
    if p.is_file() and p.parent.name == "checkpoints":
        return f"{p.parent.parent.name}-{p.stem}"
    return p.stem if p.is_file() else p.name


def _name_results_after_the_run() -> None:
    """lm-eval names the folder under --output_path from model_args' pretrained=/model=/path=
    keys, else randomly; with checkpoint= it is named after the run instead."""
    from lm_eval.loggers.evaluation_tracker import GeneralConfigTracker
    original = GeneralConfigTracker._get_model_name

    def named(model_args):
        if isinstance(model_args, str):
            args = dict(kv.split("=", 1) for kv in model_args.split(",") if "=" in kv)
        else:
            args = dict(model_args or {})
        if args.get("checkpoint"):
            return run_name(str(args["checkpoint"]))
        return original(model_args)

    GeneralConfigTracker._get_model_name = staticmethod(named)


_name_results_after_the_run()


class ScoreError(RuntimeError):
    pass


class ScoreProcess:
    """One `xsagpt score` process: ask() sends request dicts, returns answer dicts."""

    def __init__(self, argv: list[str]):
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     encoding="utf-8", bufsize=1)

    def ask(self, requests: list[dict], progress=None) -> list[dict]:
        answers = []
        for start in range(0, len(requests), GROUP):
            chunk = requests[start:start + GROUP]
            try:
                self.proc.stdin.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in chunk) + "\n")
                self.proc.stdin.flush()
            except BrokenPipeError:
                self._failed()
            for _ in chunk:
                line = self.proc.stdout.readline()
                if not line:
                    self._failed()
                answers.append(json.loads(line))
            if progress is not None:
                progress.update(len(chunk))
        return answers

    def _failed(self):
        code = self.proc.wait()
        raise ScoreError(f"{' '.join(self.argv)} exited with status {code}; its error is printed above")

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()


@register_model("xsagpt")
class XsagptLM(LM):
    def __init__(self, checkpoint: str, binary: str | None = None, device: str | None = None,
                 precision: str = "auto", batch_tokens: int = 0, vocab: str | None = None, threads: int = 0,
                 max_gen_toks: int = 256, batch_size=None, max_batch_size=None, **unused):
        super().__init__()
        if unused:
            raise ValueError(f"xsagpt: unknown model_args {sorted(unused)} (known: checkpoint, binary, "
                             "precision, batch_tokens, vocab, threads, max_gen_toks; the device is lm_eval's --device)")
        device = device or "auto"
        if device.startswith("cuda"):
            import torch
            if not torch.cuda.is_available():
                # The harness passes cuda:0 unless told otherwise, also on machines without a GPU.
                eval_logger.warning("xsagpt: device %s asked for but no CUDA device is available; using the CPU "
                                    "(pass --device cpu to lm_eval to silence this)", device)
                device = "cpu"
        # batch_size / max_batch_size come from lm_eval's own options: xsagpt batches by
        # tokens (batch_tokens) instead.
        binary = binary or os.environ.get("XSAGPT_BINARY") or str(ROOT / "build" / "xsagpt")
        if not pathlib.Path(binary).exists():
            raise FileNotFoundError(f"xsagpt binary {binary} not found: build it (bash scripts/setup.sh) "
                                    "or pass binary=... in --model_args")
        if not pathlib.Path(checkpoint).exists():
            raise FileNotFoundError(f"checkpoint {checkpoint}: no such file or run directory")
        self.checkpoint = str(checkpoint)
        self.max_gen_toks = int(max_gen_toks)
        argv = [binary, "score", self.checkpoint, "--group", str(GROUP), "--precision", str(precision),
                "--batch-tokens", str(int(batch_tokens)), "--device", device,
                "--threads", str(int(threads))]
        if vocab:
            argv += ["--vocab", str(vocab)]
        self.engine = ScoreProcess(argv)

    def _progress(self, total: int, desc: str, disable: bool):
        from tqdm import tqdm
        return tqdm(total=total, desc=desc, disable=disable)

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        lines = [{"context": ctx, "continuation": cont} for ctx, cont in (r.args for r in requests)]
        with self._progress(len(lines), "xsagpt loglikelihood", disable_tqdm) as bar:
            answers = self.engine.ask(lines, bar)
        out = []
        for (ctx, cont), a in zip((r.args for r in requests), answers):
            out.append((a["logprob"], a["is_greedy"]))
            self.cache_hook.add_partial("loglikelihood", (ctx, cont), out[-1])
        return out

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        lines = [{"text": r.args[0]} for r in requests]
        with self._progress(len(lines), "xsagpt loglikelihood_rolling", disable_tqdm) as bar:
            answers = self.engine.ask(lines, bar)
        out = []
        for r, a in zip(requests, answers):
            out.append(a["logprob"])
            self.cache_hook.add_partial("loglikelihood_rolling", (r.args[0],), out[-1])
        return out

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        lines = []
        for r in requests:
            context, gen_kwargs = r.args
            kw = dict(gen_kwargs or {})
            until = kw.pop("until", None) or []
            until = [until] if isinstance(until, str) else list(until)
            until.append("<|endoftext|>")  # as the harness's own models stop at their end-of-text token
            line = {"prompt": context, "until": until,
                    "max_new_tokens": int(kw.pop("max_gen_toks", self.max_gen_toks))}
            # As the harness's Hugging Face models: greedy unless do_sample asks for sampling.
            temperature = float(kw.pop("temperature", 0.0))
            line["temperature"] = temperature if kw.pop("do_sample", False) else 0.0
            if "seed" in kw:
                line["seed"] = int(kw.pop("seed"))
            lines.append(line)
        with self._progress(len(lines), "xsagpt generate_until", disable_tqdm) as bar:
            answers = self.engine.ask(lines, bar)
        out = []
        for r, a in zip(requests, answers):
            out.append(a["text"])
            self.cache_hook.add_partial("generate_until", r.args, out[-1])
        return out

    @property
    def tokenizer_name(self) -> str:
        return "gpt2"

    def get_model_info(self) -> dict:
        """Goes into the results file's "config": which checkpoint, and its model config
        (from the run's config.json), so scripts/eval/table2.py can tell SA from XSA later."""
        return {"xsagpt": {"checkpoint": self.checkpoint, "model": run_model_config(self.checkpoint)}}

    def __del__(self):
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.close()


def main() -> None:
    from lm_eval.__main__ import cli_evaluate
    cli_evaluate()


if __name__ == "__main__":
    # Run as a script, this module is __main__: make `import lm_eval_xsagpt` elsewhere
    # (lm-eval's workers, pickling) find the same class rather than register it twice.
    sys.modules.setdefault("lm_eval_xsagpt", sys.modules["__main__"])
    main()
