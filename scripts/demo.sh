#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a running flash sale: installs the packages,
# builds the release binary, and starts `flashsale serve --demo` (its own redis-server and SQLite
# in ./flashsale-data). Extra arguments go to `flashsale serve`, e.g. --listen 0.0.0.0:8080.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target flashsale
exec build/release/src/flashsale serve --demo --data-dir ./flashsale-data "$@"
