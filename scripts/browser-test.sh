#!/usr/bin/env bash
# The buyer page and the dashboard in Debian's chromium, driven by playwright-core against a real
# `flashsale serve --demo` (tests/browser/run.mjs). ctest runs it as browser_test with the build's
# binary; by hand:
#   scripts/browser-test.sh --binary build/dev/src/flashsale [--artifacts DIR]
# Screenshots go to --artifacts (default: <build dir>/browser-artifacts).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d tests/browser/node_modules/playwright-core ]; then
  echo "browser-test: tests/browser/node_modules is missing: run scripts/install-deps.sh" >&2
  exit 1
fi
exec node tests/browser/run.mjs "$@"
