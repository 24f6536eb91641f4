#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a running flash sale: installs the packages,
# builds the release binary, and starts `flashsale serve --demo` (its own redis-server and SQLite
# in ./flashsale-data). Extra arguments go to `flashsale serve`, e.g. --listen 0.0.0.0:8080.
#
# The setup runs once: when the release build is configured (build/release/build.ninja exists),
# a later start skips the package install and the configure and only builds, which is quick when
# nothing changed. To set up again from scratch, remove build/release.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/release/build.ninja ]; then
  scripts/install-deps.sh
  cmake --preset release >/dev/null
else
  echo "demo: set up already (build/release); building and starting"
fi
cmake --build --preset release --target flashsale
exec build/release/src/flashsale serve --demo --data-dir ./flashsale-data "$@"
