#!/usr/bin/env bash
# Builds the Debian package flashsale_<version>_amd64.deb (CPack DEB, cmake/package.cmake): the
# binary, the systemd unit, /etc/flashsale/flashsale.toml, the man page, the system user.
#
#   scripts/package.sh [--preset release|dev | --build DIR] [--out DIR]
# Default: the release preset, the package in build/<preset>/. --build packages an existing
# build directory instead. Prints the package's path last.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=release
build=""
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) preset="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "package: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$build" ]; then
  build="build/$preset"
  if [ ! -f "$build/CMakeCache.txt" ]; then cmake --preset "$preset" >/dev/null; fi
fi
out="${out:-$build}"
cmake --build "$build" --target flashsale flashsale_config_file flashsale_man >/dev/null
mkdir -p "$out"
out="$(cd "$out" && pwd)"
(cd "$build" && cpack -G DEB -B "$out" >/dev/null)
rm -rf "$out/_CPack_Packages"
version="$(sed -n 's/^project(flashsale VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"
echo "$out/flashsale_${version}_$(dpkg --print-architecture).deb"
