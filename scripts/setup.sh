#!/usr/bin/env bash
# Installs what xsagpt needs and builds it: Debian packages, the project's .venv
# (LibTorch comes from the pinned torch wheel), then a Release build in build/.
# Idempotent: each step is skipped when what it makes is already up to date.
#   bash scripts/setup.sh [--eval] [--track] [--slurm] [--target NAME]...
#   --eval             also install requirements-eval.txt (lm-eval, ~0.5 GB: pandas,
#                      scipy, scikit-learn, pyarrow; transformers); the test command
#                      and scripts/eval/lm_eval_xsagpt.py ask for it, the demo does not
#   --track            also install requirements-track.txt (tensorboard, wandb) for
#                      scripts/view/track.py; the test command asks for it, the demo does not
#   --slurm            also install Debian's Slurm (slurmctld, slurmd, slurm-client, munge;
#                      ~13 MB) for the one-node cluster of scripts/slurm/start.sh, which the
#                      test command starts for the tests of the sweep's Slurm jobs
#   --target NAME      build only NAME (repeatable; e.g. xsagpt: what the demo runs);
#                      default: everything, the test binaries included. A first
#                      build of only xsagpt on a machine with no GPU leaves the fused
#                      CUDA kernels out (they never run there: XSAGPT_KERNELS=OFF);
#                      a build of everything always has them, so the tests compile
#                      every .cu file
#   XSAGPT_BUILD_DIR   build folder (default build)
#   XSAGPT_NO_APT=1    never call apt-get (e.g. machines where nothing can be installed)
#   XSAGPT_PYTHON      python for .venv creation (default python3)
#   CMAKE_PREFIX_PATH  use another LibTorch instead of the wheel
# Compiles through ccache when it is installed (it is one of the packages below), so
# a second checkout on the same machine builds in a fraction of the time.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="${XSAGPT_BUILD_DIR:-build}"
say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
eval_extra=0
track_extra=0
slurm_extra=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --eval) eval_extra=1 ;;
    --track) track_extra=1 ;;
    --slurm) slurm_extra=1 ;;
    --target) [ $# -ge 2 ] || { echo "setup.sh: --target needs a name" >&2; exit 2; }; targets+=("$2"); shift ;;
    *) echo "setup.sh: unknown argument '$1' (expected --eval, --track, --slurm or --target NAME)" >&2; exit 2 ;;
  esac
  shift
done

# 1. Debian packages: header-only/dev libraries, the offline corpus, tooling.
apt_pkgs=(cmake ninja-build g++ libcxxopts-dev nlohmann-json3-dev libspdlog-dev libgtest-dev
          libpcre2-dev libgloo-dev bible-kjv python3-venv ccache)
if [ "$slurm_extra" = 1 ]; then apt_pkgs+=(slurmctld slurmd slurm-client munge); fi
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "${XSAGPT_NO_APT:-0}" = 1 ] || ! command -v apt-get >/dev/null; then
    say "missing Debian packages: ${missing[*]} (XSAGPT_NO_APT set or no apt-get; continuing)"
  else
    sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
    say "installing Debian packages: ${missing[*]}"
    $sudo apt-get update -qq
    # Only what the packages depend on: what they recommend besides is nothing the build
    # or the tests use, and costs a fresh machine download and unpacking time.
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
else
  say "Debian packages present"
fi

# 2. Python venv with the pinned torch wheel (LibTorch) and script dependencies.
py="${XSAGPT_PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $($py --version)"
  "$py" -m venv .venv
fi
req_hash="$(sha256sum requirements.txt | cut -d' ' -f1)"
if [ "$(cat .venv/.requirements.sha256 2>/dev/null)" != "$req_hash" ]; then
  say "installing requirements.txt into .venv (torch is large: first time takes minutes)"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r requirements.txt
  echo "$req_hash" > .venv/.requirements.sha256
else
  say ".venv up to date ($(.venv/bin/python -c 'import torch; print("torch", torch.__version__)'))"
fi
# The extras, each installed again only when its requirements file changed.
install_extra() {  # $1: eval or track, $2: what it is for
  local hash
  hash="$(sha256sum "requirements-$1.txt" | cut -d' ' -f1)"
  if [ "$(cat ".venv/.requirements-$1.sha256" 2>/dev/null)" != "$hash" ]; then
    say "installing requirements-$1.txt into .venv ($2)"
    .venv/bin/python -m pip install -q -r "requirements-$1.txt"
    echo "$hash" > ".venv/.requirements-$1.sha256"
  fi
}
if [ "$eval_extra" = 1 ]; then install_extra eval "lm-eval and transformers for downstream evaluation"; fi
if [ "$track_extra" = 1 ]; then install_extra track "tensorboard and wandb for scripts/view/track.py"; fi

# 3. Configure once, then build incrementally.
kernels=ON
if [ "${targets[*]}" = xsagpt ] && ! nvidia-smi -L >/dev/null 2>&1; then
  # Keep what an earlier configure chose (the test command's ON stays ON).
  kernels="$(sed -n 's/^XSAGPT_KERNELS:BOOL=//p' "$build/CMakeCache.txt" 2>/dev/null || true)"
  kernels="${kernels:-OFF}"
fi
if [ ! -f "$build/CMakeCache.txt" ] || ! grep -q "^XSAGPT_KERNELS:BOOL=$kernels\$" "$build/CMakeCache.txt"; then
  if [ "$kernels" = OFF ]; then
    say "configuring $build/ (Release) without the fused CUDA kernels: no GPU here, and the quickstart never runs them"
  else
    say "configuring $build/ (Release)"
  fi
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DXSAGPT_KERNELS="$kernels" -Wno-dev \
    >"$root/.cmake-configure.log" 2>&1 || { cat "$root/.cmake-configure.log"; exit 1; }
fi
if grep -q '^XSAGPT_CCACHE_PROGRAM:FILEPATH=/' "$build/CMakeCache.txt" 2>/dev/null; then
  say "building $build/ with $(nproc) jobs through ccache (hits: objects another checkout here already compiled)"
else
  say "building $build/ with $(nproc) jobs"
fi
target_args=()
for t in "${targets[@]}"; do target_args+=(--target "$t"); done
cmake --build "$build" -j"$(nproc)" "${target_args[@]}"
say "ready: $build/xsagpt"
