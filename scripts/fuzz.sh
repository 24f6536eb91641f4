#!/usr/bin/env bash
# Builds the libFuzzer targets (in the asan preset's tree: clang 14, ASan+UBSan, the libraries
# instrumented for coverage; after `cmake --workflow --preset asan` they are already built) and
# runs each for a while from its seed corpus. A crash, a sanitizer report or a hang fails the
# script and leaves the input in build/asan/fuzz-artifacts/.
#   scripts/fuzz.sh [seconds per target]   (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
build=build/asan
cmake --preset asan >/dev/null
cmake --build --preset fuzz
mkdir -p "$build/fuzz-artifacts" "$build/fuzz-corpus/http"
cp -n fuzz/corpus/http/* "$build/fuzz-corpus/http/" 2>/dev/null || true
echo "fuzz: http_fuzz for ${seconds}s"
"$build/fuzz/http_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$build/fuzz-artifacts/" -print_final_stats=1 "$build/fuzz-corpus/http" 2>&1 |
  tail -n 25
