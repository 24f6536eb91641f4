#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy) over the library sources, using the dev build's compile commands.
# Slow (Boost headers): a few minutes. Run it before sending a change that touches src/.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/dev/compile_commands.json ] || cmake --preset dev >/dev/null
mapfile -t files < <(git ls-files 'src/*.cc' | grep -v '_test\.cc$')
out=$(clang-tidy -p build/dev --quiet "${files[@]}" 2>/dev/null | grep -E '^/.*(warning|error):' || true)
if [ -n "$out" ]; then
  echo "$out"
  exit 1
fi
echo "lint: ${#files[@]} files clean"
