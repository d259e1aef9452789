"""Bad configs and arguments are refused before anything is built, naming the key or file:
duplicate keys, unknown or out-of-range values, absurd sizes (more sinks than positions,
a model whose state cannot fit), JSON nested too deep, paths that are not UTF-8,
inputs of the wrong kind; and model.base can be set on the command line. End to end
with the real binary."""
import json
import os

import pytest

from tinyrun import cpu_config, run_config, write_run_config


def test_a_duplicate_key_in_a_config_is_an_error_naming_it(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=2)
    text = cfg.read_text().replace('"lr": 0.01', '"lr": 0.01, "lr": 0.5')
    assert text.count('"lr"') == 2
    cfg.write_text(text)
    proc = xsagpt("train", "-c", cfg, check=False)
    # Before: trained with lr 0.5, silently.
    assert proc.returncode == 2
    assert f'{cfg}: key "lr" appears twice in "train"' in proc.stderr
    assert not (tmp_path / "run").exists()


def test_more_sinks_than_positions_is_refused(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=2)
    proc = xsagpt("train", "-c", cfg, "--set", "model.n_sink=100000", check=False)
    # Before: accepted; 7 GB and a 6-minute step.
    assert proc.returncode == 2 and "n_sink: 100000 sinks is more than block_size (64)" in proc.stderr


def test_a_model_whose_state_cannot_fit_is_refused_before_it_is_built(tmp_path, shards, xsagpt):
    # d_model 65536: ~69G parameters, ~1 TiB of weights, gradients and AdamW state,
    # more than any test machine's RAM. The estimate (model/counts.h) is exact for that part.
    cfg = cpu_config(tmp_path, shards, max_steps=2)
    proc = xsagpt("train", "-c", cfg, "--set", "model.d_model=65536", check=False, timeout=120)
    # Before: the trainer began allocating it (std::bad_alloc, or the OOM killer).
    assert proc.returncode == 2, proc.stderr
    assert "this run cannot fit" in proc.stderr and "of this machine's RAM" in proc.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("override,message", [
    ("train.lr=-1", "train.lr: must be > 0"),
    ("train.seq_len=100", "train.seq_len: must be in 1..64"),
    ("train.batch_tokens=100", "train.batch_tokens: must be 0 or a multiple"),
    ("train.warmup=5", "unknown key 'warmup'"),
    ("model.attention=local", "model.attention"),
    ("train.max_steps=ten", "train.max_steps: expected an integer"),
    ("train.kernels=triton", "train.kernels"),
    ("train.kernels=rope,xla", 'unknown kernel "xla"'),
    ("train.kernels=gelu", 'train.kernels: the gelu kernel computes the tanh approximation of GELU'),
    ("train.kernels=fused,gelu", 'needs model.gelu="tanh", but model.gelu is "exact"'),
    ("model.gelu=erf", 'model.gelu: expected "exact" or "tanh"'),
    ("train.device=gpu", 'train.device: expected "auto", "cpu", "cuda" or "cuda:N"'),
    ("train.device=cuda:99", "train.device"),  # no CUDA, or no GPU 99: refused either way
    # Integers a field's type cannot hold. Before: 4294967298 threads silently became 2,
    # and 64-bit values wrapped around to negative numbers in the messages.
    ("train.threads=4294967298", "train.threads: expected an integer in [-2147483648, 2147483647], got 4294967298"),
    # Before: accepted, and the run was still creating threads a minute later.
    ("train.threads=100000", "train.threads: must be at most 1024, got 100000"),
    ("model.block_size=18446744073709551615",
     "model.block_size: expected an integer in [-9223372036854775808, 9223372036854775807], got 18446744073709551615"),
    ("train.max_steps=1e19", "train.max_steps: expected an integer in [-9223372036854775808, 9223372036854775807]"),
    ("train.micro_batch=4611686018427387904",
     "train.micro_batch: 4611686018427387904 sequences of 32 tokens on 1 rank(s) is more tokens than a 64-bit count"),
    ("train.max_steps=4611686018427387904", "train.max_steps: 4611686018427387904 steps of 128 tokens is more tokens"),
    # RoPE tables of 550 GB. Before: LibTorch's bare allocator error, naming no key.
    ("model.block_size=4294967298", "model.block_size: 4294967298 positions (plus model.n_sink 0) give RoPE tables"),
])
def test_bad_config_exits_nonzero_naming_the_key(tmp_path, shards, xsagpt, override, message):
    cfg = run_config(tmp_path, shards)
    proc = xsagpt("train", "-c", cfg, "--set", override, check=False)
    assert proc.returncode == 2
    assert message in proc.stderr + proc.stdout
    assert not (tmp_path / "run").exists(), "nothing may be created before the config is valid"


def test_threads_past_the_bound_are_refused_by_flag_past_the_cores_capped(tmp_path, shards, xsagpt):
    # --threads takes the same rule as train.threads. Before: bench began creating 100000 threads.
    proc = xsagpt("bench", "--threads", "100000", "--no-block", "--no-step", check=False, timeout=60)
    assert proc.returncode == 2 and "--threads: must be at most 1024, got 100000" in proc.stderr, proc.stderr
    # A config written for a bigger machine runs here at this machine's width, saying so.
    # Before: 1000 threads on 2 cores made a 3 s step take 47 s, without a word.
    cores = len(os.sched_getaffinity(0))
    cfg = cpu_config(tmp_path, shards, max_steps=2, eval_interval=0, ckpt_interval=0)
    proc = xsagpt("train", "-c", cfg, "--set", f"train.threads={4 * cores}", timeout=120)
    assert (f"train.threads = {4 * cores} is more threads than the {cores} logical cores this process may use; "
            f"running with {cores}") in proc.stderr, proc.stderr
    assert f"cpu: {cores} torch threads of {cores} hardware threads" in proc.stderr
    assert (tmp_path / "run" / "done.json").is_file()


def test_a_kernel_row_no_longer_in_the_table_is_refused_naming_the_rows(tmp_path, shards, xsagpt):
    # graphs (the micro-step as a CUDA graph) was measured slower in every cell and left
    # the table (docs/benchmarks.md): a config that still names it is refused by the
    # kernels' key, with the names the table takes now, before anything is written.
    cfg = run_config(tmp_path, shards)
    rows = [k["name"] for k in json.loads(xsagpt("config", "--json").stdout)["kernels"]]
    assert len(rows) >= 6 and "graphs" not in rows
    proc = xsagpt("train", "-c", cfg, "--set", "train.kernels=fused,graphs", check=False)
    assert proc.returncode == 2, proc.stderr
    assert 'train.kernels: unknown kernel "graphs"' in proc.stderr
    for name in rows:
        assert name in proc.stderr, name
    assert not (tmp_path / "run").exists()


def test_the_gelu_kernel_beside_fp8_is_refused_on_a_tanh_model(tmp_path, shards, xsagpt):
    cfg = run_config(tmp_path, shards)
    proc = xsagpt("train", "-c", cfg, "--set", "model.gelu=tanh", "--set", "train.kernels=gelu,fp8", check=False)
    assert proc.returncode == 2
    assert "train.kernels: gelu and fp8 both replace the MLP's GEMMs" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_deeply_nested_json_is_refused_while_it_is_read(tmp_path, markov_shards, xsagpt):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    for command in ("train", "info"):
        proc = xsagpt(command, "-c", deep, check=False)
        # Before: exit 139, the stack overflowing while the error message showed the value.
        assert proc.returncode == 2, proc.stderr
        assert f"{deep}: JSON nested more than 64 levels deep" in proc.stderr
    cfg = write_run_config(tmp_path / "cfg.json", markov_shards, tmp_path / "run")
    proc = xsagpt("train", "-c", cfg, "--set", "train.lr=" + "[" * 60000 + "]" * 60000, check=False)  # < ARG_MAX
    assert proc.returncode == 2 and "--set train.lr: JSON nested more than 64 levels deep" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_paths_that_are_not_utf8_are_named_escaped(tmp_path, markov_shards, xsagpt):
    cfg = write_run_config(tmp_path / "cfg.json", markov_shards)
    out = tmp_path / "runs" / "\udcff"  # the byte 0xff, as Python passes it to the program
    proc = xsagpt("train", "-c", cfg, "--out", out, check=False)
    # Before: a bare "[json.exception.type_error.316] invalid UTF-8 byte", naming neither option nor path.
    assert proc.returncode == 2, proc.stderr
    assert f'--out: "{tmp_path}/runs/\\xff" is not valid UTF-8 (byte 0xff at offset {len(str(tmp_path)) + 6})' \
        in proc.stderr
    proc = xsagpt("train", "-c", cfg, "--set", f"data.val={markov_shards}/\udcfe*.bin", check=False)
    assert proc.returncode == 2 and f'data.val: "{markov_shards}/\\xfe*.bin" is not valid UTF-8' in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_inputs_of_the_wrong_kind_are_named(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=2)
    proc = xsagpt("tokenize", tmp_path, check=False)
    assert proc.returncode == 2 and f"{tmp_path}: is a directory" in proc.stderr  # before: exit 0, "[]"
    proc = xsagpt("train", "-c", tmp_path, check=False)
    assert proc.returncode == 2 and f"{tmp_path}: is a directory, expected a JSON file" in proc.stderr
    proc = xsagpt("train", "-c", cfg, "--set", "train.eval_tokens=10", check=False)
    assert proc.returncode == 2 and "train.eval_tokens: 10 tokens is less than one validation batch" in proc.stderr
    spec = {"base": str(cfg), "grid": {"train.lr": [1e-3]}, "constant_batch_tokens": "yes",
            "out_dir": str(tmp_path / "sw")}
    (tmp_path / "sw.json").write_text(json.dumps(spec))
    proc = xsagpt("sweep", "-c", tmp_path / "sw.json", check=False)
    assert proc.returncode == 2 and f"{tmp_path}/sw.json: constant_batch_tokens: expected true or false" in proc.stderr


def test_model_base_can_be_set_on_the_command_line(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=2)
    proc = xsagpt("train", "-c", cfg, "--set", "model.base=tiny", "--set", "model.n_layer=1")
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["model"]["n_layer"] == 1 and saved["model"]["vocab_size"] == 256 and proc.returncode == 0
    # The model's variant name for the tools; a run config read back ignores it.
    assert saved["variant"] == saved["model"]["attention"] and saved["variant"] in ("sa", "xsa")
    assert xsagpt("train", "-c", tmp_path / "run" / "config.json", "--out", tmp_path / "again").returncode == 0


def test_help_names_files_that_exist_and_info_never_overflows(tmp_path, xsagpt, repo_root):
    proc = xsagpt("train", check=False)
    suggested = proc.stderr.split("--config ")[-1].split(")")[0]
    assert (repo_root / suggested).exists(), suggested
    model = {"n_layer": 2000000, "d_model": 3000000, "n_head": 1, "head_dim": 3000000}
    (tmp_path / "huge.json").write_text(json.dumps(model))
    proc = xsagpt("info", "-c", tmp_path / "huge.json", check=False)
    assert proc.returncode == 2 and "more than a 64-bit count can hold" in proc.stderr
    assert "-" not in proc.stdout


def test_a_number_out_of_a_doubles_range_names_its_key_and_source(tmp_path, shards, xsagpt):
    cfg = cpu_config(tmp_path, shards, max_steps=2)
    proc = xsagpt("train", "-c", cfg, "--set", "train.lr=1e999", check=False)
    # Before: a bare "[json.exception.out_of_range.406] number overflow parsing '1e999'".
    assert proc.returncode == 2
    assert "--set train.lr: a number out of a double's range" in proc.stderr and "1e999" in proc.stderr
    cfg.write_text(cfg.read_text().replace('"lr": 0.01', '"lr": 1e999'))
    proc = xsagpt("train", "-c", cfg, check=False)
    assert proc.returncode == 2
    assert f'{cfg}: the value of "lr" holds a number out of a double\'s range' in proc.stderr
    assert not (tmp_path / "run").exists()
