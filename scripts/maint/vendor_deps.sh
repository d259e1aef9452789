#!/usr/bin/env bash
# Vendors the non-torch build dependencies into third_party/ for machines where
# nothing can be installed (the lent GPU machines: python3 with torch, cmake,
# ninja and nvcc, but no spdlog, fmt, cxxopts, nlohmann-json, GoogleTest or PCRE2).
# Run it here, on Debian 12 with apt: it downloads the Debian packages (no root
# needed) and unpacks them with dpkg -x, giving third_party/usr/{include,lib,share}.
# CMakeLists.txt searches third_party/usr first when it exists, and the binaries
# find libspdlog/libfmt/libpcre2 there through their build-tree RPATH.
# See docs/gpu-machine.md for the whole procedure.
#   bash scripts/maint/vendor_deps.sh [DEST]   (default third_party/; the pack step
#   of scripts/bench/bench_gpu.sh puts them into its carry folder instead, so that
#   the local build keeps finding the system's copies)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dest="$(realpath -m "${1:-$root/third_party}")"
say() { printf '\033[1m[vendor]\033[0m %s\n' "$*"; }

pkgs=(
  libcxxopts-dev nlohmann-json3-dev               # header-only
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9  # logging; spdlog is built against fmt 9
  libgtest-dev                                    # static libgtest + GTestConfig.cmake
  libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3  # tokenizer regexes
  libgloo-dev  # headers only: c10d's ProcessGroupGloo.hpp includes them; the code is inside LibTorch
)

command -v apt-get >/dev/null && command -v dpkg >/dev/null ||
  { echo "vendor_deps.sh: needs apt-get and dpkg (run it on the Debian dev machine)" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
say "downloading ${#pkgs[@]} Debian packages"
# As root apt would drop to its _apt user, which cannot write the private temp dir.
as_root=(); [ "$(id -u)" -eq 0 ] && as_root=(-o APT::Sandbox::User=root)
(cd "$tmp" && apt-get download -qq "${as_root[@]}" "${pkgs[@]}")

rm -rf "$dest"
mkdir -p "$dest"
for deb in "$tmp"/*.deb; do
  dpkg -x "$deb" "$dest"
  dpkg-deb --show --showformat='${Package} ${Version}\n' "$deb" >> "$dest/PACKAGES"
done

# Only headers, libraries, CMake/pkg-config files are needed to build and run;
# documentation and static PCRE2 archives (we link the shared one) only cost carry space.
rm -rf "$dest/usr/share/doc" "$dest/usr/share/man" "$dest/usr/share/lintian"
rm -f "$dest"/usr/lib/*/libpcre2-*.a

say "third_party/: $(du -sh "$dest" | cut -f1), packages in third_party/PACKAGES"
