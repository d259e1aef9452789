"""The stages every call starts with, which need no kernel table: the preflight (what
the machine has, checked in seconds before anything is built) and the build."""
import os
import pathlib
import shutil
import subprocess
import time

from .ledger import ROOT, Ledger, StageFailed


def torch_on(v: Ledger) -> tuple[str, str, str]:
    """(torch's version, the GPU's name or "", why torch could not be asked) of v.py."""
    try:
        p = v.procs.run([v.py, "-c", "import torch; print(torch.__version__, torch.version.cuda); "
                         "print(torch.cuda.get_device_name() if torch.cuda.is_available() else '')"], 60, None, None)
        lines, why = p.stdout.splitlines(), (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
    except (OSError, subprocess.TimeoutExpired) as e:
        lines, why = [], str(e)
    version, gpu = (lines + ["", ""])[:2]
    return version, gpu, why


def preflight(v: Ledger, timeout):
    """torch importable and a CUDA GPU visible to it, nvcc, the vendored libraries, the
    KJV shards and the disk the parity checkpoints need; what is missing in one line."""
    missing = []
    version, gpu, why = torch_on(v)
    if not version:
        missing.append(f"{v.py} cannot import torch ({why[:160]})")
    elif not v.dry and not gpu:
        missing.append(f"no CUDA GPU visible to {v.py}'s torch (on a machine without one: --cpu-dry-run)")
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if pathlib.Path("/usr/local/cuda/bin/nvcc").exists() else None)
    if not nvcc and not v.dry:
        missing.append("nvcc not found (the CUDA toolkit)")
    if not v.dry and not (ROOT / "third_party/usr").is_dir():
        missing.append("third_party/ missing: run `bash scripts/maint/vendor_deps.sh` here and carry third_party")
    shards = ROOT / "data/kjv/shards"
    if not (shards / "val_000000.bin").exists() or not list(shards.glob("train_*.bin")):
        missing.append("data/kjv/shards/ missing: run `bash data/kjv/prepare.sh` here and carry data/kjv/shards")
    need_gb = 2 if v.dry else 20
    free_gb = shutil.disk_usage(ROOT).free / 2**30
    if free_gb < need_gb:
        missing.append(f"{free_gb:.0f} GiB free on disk, need {need_gb} (parity checkpoints, build, Inductor cache)")
    machine = (f"CPU dry run: {os.cpu_count()} cores" if v.dry else gpu or "no GPU") + f"; torch {version or '-'}"
    (v.res / "machine.txt").write_text(machine + "\n")
    if missing:
        raise StageFailed("; ".join(missing))


def build(v: Ledger, timeout):
    t = time.monotonic()
    if not (ROOT / "build/build.ninja").exists() or not v.dry:
        v.sh("build", ["cmake", "-S", ".", "-B", "build", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-Wno-dev"],
             timeout)
    v.sh("build", ["cmake", "--build", "build", f"-j{os.cpu_count()}", "--target", "xsagpt", "xsagpt_tests"],
         timeout - (time.monotonic() - t))
