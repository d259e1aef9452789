"""The tools that read a checkpoint (sample, analyze, eval, score) pointed at a run: a
checkpoint that a live trainer prunes (train.keep_checkpoints) between the moment a tool
lists it and the moment it reads it is replaced by the run's newest one rather than
blamed as damaged; a checkpoint path that is not UTF-8 is written into their JSON
reports with its odd bytes escaped, after the work, instead of ending in a bare JSON
error. End to end with the real binary, on the CPU."""
import json
import os
import signal

from tinyrun import cpu_config

TASKS = __import__("pathlib").Path(__file__).resolve().parents[2] / "lm_eval_tasks"


def test_a_checkpoint_pruned_while_a_tool_reads_the_run_is_replaced_by_the_newest(tmp_path, shards, xsagpt, spawn):
    cfg = cpu_config(tmp_path, shards, max_steps=4, ckpt_interval=2, eval_interval=0, keep_checkpoints=3)
    xsagpt("train", "-c", cfg)
    run = tmp_path / "run"
    ckpts = sorted((run / "checkpoints").glob("step_*.pt"))
    assert [p.name for p in ckpts] == ["step_00000002.pt", "step_00000004.pt"]
    # The tool has listed the run's checkpoints and picked step 4; a trainer prunes it now.
    proc = spawn("sample", run, "--prompt-ids", "1,2", "-n", 2, "--ids", "--device", "cpu", "--threads", 1,
                 stop_at="load:newest-checkpoint-listed")
    ckpts[-1].unlink()
    proc.send_signal(signal.SIGCONT)
    out, err = proc.communicate(timeout=120)
    # Before: "step_00000004.pt: not a readable checkpoint (truncated or not a PyTorch archive)".
    assert proc.returncode == 0, err
    assert "step_00000002.pt (step 2)" in err and len(json.loads(out.splitlines()[-1])) == 2


def test_a_checkpoint_path_that_is_not_utf8_is_escaped_in_the_reports(tmp_path, gpt2_run, xsagpt, gpt2_vocab_dir):
    odd = tmp_path / os.fsdecode(b"run-\xff")
    (odd / "checkpoints").mkdir(parents=True)
    ckpt = odd / "checkpoints" / "step_00000001.pt"
    ckpt.write_bytes((gpt2_run / "checkpoints" / "step_00000001.pt").read_bytes())
    shown = str(tmp_path) + "/run-\\xFF/checkpoints/step_00000001.pt"
    proc = xsagpt("analyze", ckpt, "--sequences", 2, "--device", "cpu", "--threads", 1, "--out",
                  tmp_path / "analysis.json", check=False, errors="backslashreplace")  # its log shows the path as is
    # Before: the analysis ran, then "[json.exception.type_error.316] invalid UTF-8 byte".
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "analysis.json").read_text())["checkpoint"].lower() == shown.lower()
    proc = xsagpt("eval", ckpt, "--task", TASKS / "tiny_mc.jsonl", "--vocab", gpt2_vocab_dir, "--device", "cpu",
                  "--threads", 1, "--out", tmp_path / "eval.json", check=False, errors="backslashreplace")
    assert proc.returncode == 0, proc.stderr
    (model,) = json.loads((tmp_path / "eval.json").read_text())["models"]
    assert model["checkpoint"].lower() == shown.lower()
