"""What a call leaves, whatever happened in it: bench_compare.py's summary, the table
(verdict.md, from verdict_table.py) with what is known so far, and the results as a
bundle of text under 1 MiB, the one thing that comes back from the device machine."""
import datetime
import io
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile

import verdict_table

from .ledger import ROOT, Ledger

BUNDLE_MAX = 1 << 20  # the results bundle: what comes back from the device machine
TEXT = {".json", ".jsonl", ".md", ".txt", ".log"}


def save_results(v: Ledger, order: list[str], only=()) -> str:
    """The summary, the table and the bundle as they stand: written after every stage
    of a lease too, so a call cut off by the device's limit still returns them."""
    summary(v)
    text = table(v, order, only)
    bundle(v, quiet=True)
    return text


def summary(v: Ledger):
    steps = sorted(v.res.glob("step-*.json"))
    if not steps:
        return
    torch_rows = v.res / "pytorch.jsonl"
    torch_rows.write_text("".join(p.read_text() for p in sorted(v.res.glob("pytorch-*.jsonl"))))
    p = subprocess.run([v.py, "scripts/bench/bench_compare.py", *map(str, steps), "--pytorch", str(torch_rows)],
                       cwd=ROOT, capture_output=True, text=True)
    (v.res / "summary.md").write_text(p.stdout if p.returncode == 0 else f"bench_compare.py failed: {p.stderr}")


def table(v: Ledger, order, only=()) -> str:
    packed = ROOT / "out/lease/COMMIT"  # the packed binaries' commit (scripts/bench/pack.sh)
    commit = packed.read_text().strip() if packed.exists() else subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip() or "unknown"
    machine = (v.res / "machine.txt").read_text().strip() if (v.res / "machine.txt").exists() else "unknown"
    header = [f"### Fused kernels: the verdict{' (CPU dry run: nothing decided)' if v.dry else ''}", "",
              f"{datetime.date.today().isoformat()}, commit {commit}. Machine: {machine}.",
              f"Command: `{v.command}`."]
    text = verdict_table.render(v.res, order, v.dry, header, v.plan_so_far)
    left = [n for n in order if (not only or n in only) and v.status(n) in ("pending", "failed")]
    if left:
        retry = " --retry-failed" if any(v.status(n) == "failed" for n in left) else ""
        text += (f"\nNot done: {', '.join(left)}. On the warm machine (it keeps out/ for 30 s after a call), "
                 f"`{v.command} --only {','.join(left)}{retry}` runs them; on a fresh one, unpack this "
                 f"bundle into out/ here and carry out/gpu beside out/lease.\n")
    (v.res / "verdict.md").write_text(text)
    return text


def bundle(v: Ledger, quiet=False):
    """RES as a gzipped tar, text only and under BUNDLE_MAX: into $OUT when set
    (the device tool brings it back), else beside RES. Anything else is refused
    by name, so a large or binary file can never ride along unseen."""
    files = sorted(p for p in v.res.rglob("*") if p.is_file())
    odd = [str(p.relative_to(v.res)) for p in files if p.suffix not in TEXT]
    if odd:
        sys.exit(f"bench_verdict.py: {v.res} holds files that are not text or JSON: {', '.join(odd)}")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(v.res, arcname=v.res.name)
    size = buf.getbuffer().nbytes
    if size >= BUNDLE_MAX:
        sys.exit(f"bench_verdict.py: the results bundle is {size} bytes, over {BUNDLE_MAX}")
    dest = pathlib.Path(os.environ["OUT"]) if os.environ.get("OUT") else v.res.parent
    (dest / f"{v.res.name}-results.tgz").write_bytes(buf.getvalue())
    if os.environ.get("OUT"):
        shutil.copy(v.res / "verdict.md", dest / "verdict.md")
    if not quiet:
        print(f"[verdict] bundle: {dest / (v.res.name + '-results.tgz')} ({size} bytes)", flush=True)
