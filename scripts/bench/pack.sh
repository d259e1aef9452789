#!/usr/bin/env bash
# The pack step of a GPU lease (`bash scripts/bench/bench_gpu.sh pack`): everything the
# one-call verdict needs beyond the tracked files, laid out in one carry folder, built
# here so the lent GPU's minutes go to measuring, not to a 200 s cold build.
#
#   out/lease/build/xsagpt, out/lease/build/tests/xsagpt_tests   Release, device code for sm_90
#   out/lease/third_party/     spdlog, fmt, PCRE2 ... as Debian packages (scripts/maint/vendor_deps.sh)
#   out/lease/data/kjv/shards/ the parity runs' and the demo's corpus (data/kjv/prepare.sh)
#
# The binaries link the torch wheel's LibTorch by soname; on the GPU machine they run
# against its own torch 2.11 (cu130) through LD_LIBRARY_PATH (scripts/bench/lease.py).
# The folder must stay under 40 MiB (the device tool carries 64 MiB with the working tree).
# Its path is the last line printed. Then, with the device tool:
#   run(carry=["out/lease"], timeout_s=600, command="bash scripts/bench/bench_gpu.sh lease")
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=${XSAGPT_BUILD_DIR:-build}
pack=out/lease
limit_mib=40
say() { printf '\033[1m[pack]\033[0m %s\n' "$*" >&2; }

# 1. The two binaries, with the CUDA kernels, through the test command's setup (ccache
# makes this a no-op after `bash scripts/test.sh`). With no GPU here the device code is
# sm_90 (cmake/FindTorchFromVenv.cmake); a GPU here would choose its own arch instead.
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
bash scripts/setup.sh --target xsagpt --target xsagpt_tests >&2
grep -q '^XSAGPT_KERNELS:BOOL=ON$' "$build/CMakeCache.txt" ||
  { echo "pack: $build/ is configured without the CUDA kernels (XSAGPT_KERNELS=OFF)" >&2; exit 1; }
if command -v cuobjdump >/dev/null; then
  cuobjdump --list-elf "$build/xsagpt" 2>/dev/null | grep -q 'sm_90' ||
    { echo "pack: $build/xsagpt holds no sm_90 device code ($(cuobjdump --list-elf "$build/xsagpt" 2>&1 | head -2 | tr '\n' ' ')); " \
           "configure another build folder with TORCH_CUDA_ARCH_LIST=9.0 and XSAGPT_BUILD_DIR" >&2; exit 1; }
fi

# 2. The corpus.
[ -f data/kjv/shards/val_000000.bin ] || bash data/kjv/prepare.sh >&2

# 3. Lay out a fresh folder beside the old one, then swap: a failed pack leaves the
# last good one. The vendored packages are reused when the list is unchanged.
tmp=out/lease.tmp
rm -rf "$tmp"
mkdir -p "$tmp/build/tests" "$tmp/data/kjv"
cp "$build/xsagpt" "$tmp/build/"
cp "$build/tests/xsagpt_tests" "$tmp/build/tests/"
cp -r data/kjv/shards "$tmp/data/kjv/"
if [ -f "$pack/third_party/PACKAGES" ] && [ "$pack/third_party/PACKAGES" -nt scripts/maint/vendor_deps.sh ]; then
  cp -r "$pack/third_party" "$tmp/"
else
  bash scripts/maint/vendor_deps.sh "$tmp/third_party" >&2
fi
# The commit the binaries were built from, for the table's header (the device's copy
# of the working tree need not carry the git history).
git describe --always --dirty > "$tmp/COMMIT"
size_kib=$(du -sk "$tmp" | cut -f1)
if [ "$size_kib" -gt $((limit_mib * 1024)) ]; then
  du -sk "$tmp"/* "$tmp"/build/* "$tmp"/build/tests/* >&2
  echo "pack: $tmp is $((size_kib / 1024)) MiB, over the $limit_mib MiB the lease carries" >&2
  exit 1
fi
rm -rf "$pack"
mv "$tmp" "$pack"
say "$pack: $((size_kib / 1024)) MiB ($(du -sh "$pack/build" | cut -f1) binaries, $(du -sh "$pack/third_party" | cut -f1) packages, $(du -sh "$pack/data" | cut -f1) shards), commit $(git rev-parse --short HEAD)"
echo "$pack"
