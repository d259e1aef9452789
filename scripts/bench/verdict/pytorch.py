"""The PyTorch stages: the same training step in plain PyTorch (bench_pytorch.py on the
reference model, scripts/reference/), eager and torch.compile, the baseline xsagpt's step
is compared with (bench_compare.py's summary)."""
from .ledger import Ledger, StageFailed
from .sizes import pytorch_args


def pytorch(v: Ledger, size: str, attention: str, timeout):
    out = v.sh(f"pytorch-{size}-{attention}", [v.py, "scripts/bench/bench_pytorch.py", *pytorch_args(v, size),
                                               "--attention", attention, "--compile"], timeout, check=False)
    lines = [l for l in out.splitlines() if l.startswith("{")]
    # bench_compare.py matches rows by config name; the dry run's are tiny's
    (v.res / f"pytorch-{size}-{attention}.jsonl").write_text("".join(l + "\n" for l in lines))
    if len(lines) < 2:
        raise StageFailed(f"{'eager and compiled' if not lines else 'compiled'} step missing: see "
                          f"pytorch-{size}-{attention}.log")
