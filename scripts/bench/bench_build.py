#!/usr/bin/env python3
"""Where a cold build's time goes, step by step: the demo's build (Release, only `xsagpt`,
the CUDA kernels left out, as scripts/setup.sh --target xsagpt does it on a machine
without a GPU) in a scratch folder, ccache off, every compile and link run through this
script, which records the step's CPU seconds (the compiler's user + system time) and
peak memory beside its output. Prints one row a step (ninja's wall time and the CPU
seconds, the unity batch's source files) and the totals, slowest first.

CPU seconds are the figure to compare on a shared machine: wall time grows with what
else runs, a compiler's own work much less. The whole build's wall time is the figure a
fresh machine's user waits for; measure it with nothing else running.

    .venv/bin/python scripts/bench/bench_build.py                      # the demo's build
    .venv/bin/python scripts/bench/bench_build.py --kernels ON --target all --json out/build.json
    .venv/bin/python scripts/bench/bench_build.py --phases             # + GCC's -ftime-report phases

The scratch folder (default /tmp/xsagpt-bench-build) is emptied first and kept after.
"""
import argparse
import json
import os
import pathlib
import re
import resource
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
# GCC's -ftime-report phases, in the order it prints them: reading the headers, the
# templates instantiated at the end of the unit, and optimisation with code generation.
PHASES = {"phase parsing": "parse", "phase lang. deferred": "instantiate", "phase opt and generate": "codegen"}


def launch(record_phases: bool, argv: list[str]) -> int:
    """Runs one compile or link step and writes <output>.cpu beside its output (JSON)."""
    out = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-o"), None)
    stderr = None
    if record_phases and out and "-ftime-report" in argv:
        stderr = open(out + ".phases", "w")
    rc = subprocess.run(argv, stderr=stderr).returncode
    if stderr:
        stderr.close()
        if rc != 0:
            sys.stderr.write(pathlib.Path(out + ".phases").read_text(errors="replace"))
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out and rc == 0:
        rec = {"user": use.ru_utime, "sys": use.ru_stime, "max_rss_mb": use.ru_maxrss / 1024}
        pathlib.Path(out + ".cpu").write_text(json.dumps(rec))
    return rc


def phases(path: pathlib.Path) -> dict:
    """-ftime-report's wall seconds of the three phases, from a step's saved stderr."""
    got = {}
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            name = line.split(":")[0].strip()
            if name in PHASES:
                m = re.findall(r"([\d.]+) \(\s*\d+%\)", line)
                if len(m) >= 3:
                    got[PHASES[name]] = float(m[0]) + float(m[1])  # usr + sys
    return got


def unity_members(build: pathlib.Path, obj: str) -> str:
    """The source files a unity object compiles (its generated unity_*.cxx), or the object's own name."""
    m = re.search(r"(Unity/unity_[\w]+_cxx\.cxx)\.o$", obj)
    if not m:
        return re.sub(r"^.*CMakeFiles/[^/]+/", "", obj).removesuffix(".o")
    src = next(build.glob(f"**/{m.group(1).removesuffix('_cxx.cxx')}_cxx.cxx"), None)
    if not src:
        return obj
    files = re.findall(r'#include "([^"]+)"', src.read_text())
    return " ".join(str(pathlib.Path(f).relative_to(ROOT)) if f.startswith(str(ROOT)) else f for f in files)


def ninja_steps(build: pathlib.Path) -> list[dict]:
    """The last build's steps from ninja's log: output, wall seconds, start, end."""
    steps = {}
    for line in (build / ".ninja_log").read_text().splitlines()[1:]:
        start, end, _, out, _ = line.split("\t")
        steps[out] = {"output": out, "start": int(start) / 1e3, "end": int(end) / 1e3,
                      "wall": (int(end) - int(start)) / 1e3}
    return sorted(steps.values(), key=lambda s: s["start"])


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--launch":  # the launcher CMake calls: --launch PHASES cmd...
        return launch(sys.argv[2] == "1", sys.argv[3:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=pathlib.Path, default=pathlib.Path("/tmp/xsagpt-bench-build"),
                    help="scratch build folder, emptied first (default /tmp/xsagpt-bench-build)")
    ap.add_argument("--kernels", choices=("ON", "OFF"), default="OFF", help="XSAGPT_KERNELS (default OFF, as the demo)")
    ap.add_argument("--target", action="append", help="ninja target (repeatable; default xsagpt; 'all' for everything)")
    ap.add_argument("--objects", metavar="REGEX", help="instead of --target: the object files whose path matches "
                    "REGEX, with what they need (the precompiled header), e.g. 'unity_(sweep|cli)_' to compare "
                    "the units of some folders between two commits")
    ap.add_argument("--jobs", type=int, default=os.cpu_count(), help="parallel build jobs (default: the cores)")
    ap.add_argument("--phases", action="store_true", help="add -ftime-report and show its three phases per unit")
    ap.add_argument("--cmake-arg", action="append", default=[], help="one more -D... for the configure step")
    ap.add_argument("--json", type=pathlib.Path, help="also write the steps and totals here")
    args = ap.parse_args()
    build = args.dir.resolve()
    if build == ROOT or ROOT in build.parents and build.name == "build":
        ap.error(f"--dir {build}: a scratch folder, not the checkout's build folder")
    shutil.rmtree(build, ignore_errors=True)
    launcher = f"{sys.executable};{pathlib.Path(__file__).resolve()};--launch;{int(args.phases)}"
    configure = ["cmake", "-S", str(ROOT), "-B", str(build), "-G", "Ninja", "-Wno-dev", "-DCMAKE_BUILD_TYPE=Release",
                 f"-DXSAGPT_KERNELS={args.kernels}", "-DXSAGPT_CCACHE=OFF", f"-DCMAKE_CXX_COMPILER_LAUNCHER={launcher}",
                 f"-DCMAKE_CXX_LINKER_LAUNCHER={launcher}", *args.cmake_arg]
    if args.phases:
        configure.append("-DCMAKE_CXX_FLAGS=-ftime-report")
    subprocess.run(configure, check=True, stdout=subprocess.DEVNULL)
    targets = args.target or ["xsagpt"]
    if args.objects:
        listing = subprocess.run(["ninja", "-C", str(build), "-t", "targets", "all"], check=True, capture_output=True,
                                 text=True).stdout
        targets = [t for t in (line.split(":")[0] for line in listing.splitlines())
                   if t.endswith(".o") and re.search(args.objects, t)]
        if not targets:
            ap.error(f"--objects {args.objects!r} matches no object file of the build")
    t0, c0 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(["cmake", "--build", str(build), f"-j{args.jobs}", *(f"--target={t}" for t in targets)], check=True,
                   stdout=subprocess.DEVNULL)
    wall, c1 = time.monotonic() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)

    rows = []
    for s in ninja_steps(build):
        cpu_file = build / (s["output"] + ".cpu")
        if not cpu_file.exists():
            continue  # not a compile or link (cmake's own steps)
        rec = json.loads(cpu_file.read_text())
        rows.append({**s, **rec, "cpu": rec["user"] + rec["sys"], "what": unity_members(build, s["output"]),
                     **phases(build / (s["output"] + ".phases"))})
    total_cpu = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
    print(f"{'cpu s':>7} {'wall s':>7} {'MB':>6}  " + ("parse  inst  code  " if args.phases else "") + "step")
    for r in sorted(rows, key=lambda r: -r["cpu"]):
        ph = "".join(f"{r.get(k, 0):5.0f} " for k in PHASES.values()) + " " if args.phases else ""
        print(f"{r['cpu']:7.1f} {r['wall']:7.1f} {r['max_rss_mb']:6.0f}  {ph}{r['what'][:150]}")
    print(f"{sum(r['cpu'] for r in rows):7.1f} {'':7} {'':6}  " + ("" if not args.phases else " " * 18) +
          f"all {len(rows)} steps (CPU s summed); the whole build: {wall:.0f} s wall, {total_cpu:.0f} CPU-s, "
          f"{args.jobs} jobs, targets {args.objects or ' '.join(targets)}, XSAGPT_KERNELS={args.kernels}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"wall": wall, "cpu": total_cpu, "jobs": args.jobs, "targets": targets,
                                         "kernels": args.kernels, "steps": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
