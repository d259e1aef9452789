"""`bash scripts/bench/bench_gpu.sh pack`: what one lease carries is built and laid out
here, under the 40 MiB the carry allows beside the working tree, with sm_90 device code
in both binaries, and its path is the last line printed."""
import shutil
import subprocess

import pytest


def test_the_pack_folder_holds_the_lease_and_fits(repo_root, build_dir, kjv):
    # kjv: the shards prepared first, under the lock other test processes take (bench/conftest.py).
    if build_dir.resolve() != (repo_root / "build").resolve():
        pytest.skip("pack builds the default build folder")
    proc = subprocess.run(["bash", str(repo_root / "scripts/bench/bench_gpu.sh"), "pack"], cwd=repo_root,
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    pack = repo_root / proc.stdout.strip().splitlines()[-1]
    assert pack == repo_root / "out/lease"
    files = {p.relative_to(pack).as_posix(): p for p in pack.rglob("*") if p.is_file()}
    size = sum(p.stat().st_size for p in files.values())
    assert 0 < size <= 40 << 20, f"{size / 2**20:.1f} MiB"
    for need in ("build/xsagpt", "build/tests/xsagpt_tests", "data/kjv/shards/val_000000.bin", "third_party/PACKAGES"):
        assert need in files, need
    assert any(n.startswith("third_party/usr/lib/x86_64-linux-gnu/libspdlog.so") for n in files)
    assert any(n.startswith("data/kjv/shards/train_") for n in files)
    if shutil.which("cuobjdump"):
        for binary in ("build/xsagpt", "build/tests/xsagpt_tests"):
            elf = subprocess.run(["cuobjdump", "--list-elf", str(pack / binary)], capture_output=True, text=True)
            assert "sm_90" in elf.stdout, binary
