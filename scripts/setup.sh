#!/usr/bin/env bash
# Installs what xsagpt needs and builds it: Debian packages, the project's .venv
# (LibTorch comes from the pinned torch wheel), then a Release build in build/.
# Idempotent: each step is skipped when what it makes is already up to date.
#   XSAGPT_BUILD_DIR   build folder (default build)
#   XSAGPT_NO_APT=1    never call apt-get (e.g. machines where nothing can be installed)
#   XSAGPT_PYTHON      python for .venv creation (default python3)
#   CMAKE_PREFIX_PATH  use another LibTorch instead of the wheel
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="${XSAGPT_BUILD_DIR:-build}"
say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# 1. Debian packages: header-only/dev libraries, the offline corpus, tooling.
apt_pkgs=(cmake ninja-build g++ libcxxopts-dev nlohmann-json3-dev libspdlog-dev libgtest-dev
          libpcre2-dev libgloo-dev bible-kjv python3-venv)
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
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
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

# 3. Configure once, then build incrementally.
if [ ! -f "$build/CMakeCache.txt" ]; then
  say "configuring $build/ (Release)"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -Wno-dev >"$root/.cmake-configure.log" 2>&1 \
    || { cat "$root/.cmake-configure.log"; exit 1; }
fi
say "building $build/ with $(nproc) jobs"
cmake --build "$build" -j"$(nproc)"
say "ready: $build/xsagpt"
