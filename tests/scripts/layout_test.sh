#!/usr/bin/env bash
# What a newcomer meets in the repository itself: the data directories the README's commands
# create are ignored by git, the README runs one `flashsale` (said once how to get it on PATH,
# then called by that name), and it says what the package's redis-server dependency starts.
#   tests/scripts/layout_test.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
fail=0
say() { echo "FAIL: $*" >&2; fail=1; }

# scripts/demo.sh and the README's commands write these into the repository's root.
for dir in flashsale-data cluster-data; do
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git check-ignore -q "$dir/file" || say "$dir/ is not ignored by git (.gitignore)"
  elif ! grep -qx "/$dir/" .gitignore; then
    say "$dir/ is not in .gitignore"
  fi
done

# Once: how `flashsale` gets on PATH; after that no code block calls a build tree's binary
# (a test script's --binary argument names the build it tests, and is not a call).
grep -q 'export PATH="$PWD/build/release/src:$PATH"' README.md ||
  say "README.md does not say how to put flashsale on PATH"
calls=$(awk '/^```/ { block = !block; next } block' README.md |
  grep -E 'build/[a-z]+/src/flashsale' | grep -v -e 'export PATH=' -e '--binary build/' || true)
[ -z "$calls" ] || say "README.md calls a build tree's flashsale instead of flashsale on PATH:
$calls"

# The package depends on redis-server, whose own unit starts a system Redis flashsale never uses.
grep -q 'systemctl disable --now redis-server' README.md ||
  say "README.md does not say what to do with the system Redis the package pulls in"

[ "$fail" -eq 0 ] && echo "layout_test: ok"
exit "$fail"
