"""Fixtures of the GPU verdict's tests (test_gpu_verdict.py, test_lease_guards.py)."""
import subprocess

import pytest


@pytest.fixture(scope="module")
def kjv(repo_root, kjv_lock):
    """The KJV shards the verdict's preflight asks for (data/kjv/prepare.sh, once)."""
    shards = repo_root / "data/kjv/shards"
    with kjv_lock():
        if not (shards / "val_000000.bin").exists():
            subprocess.run(["bash", str(repo_root / "data/kjv/prepare.sh")], check=True, capture_output=True)
    return shards
