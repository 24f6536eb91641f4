#!/usr/bin/env bash
# The OpenAPI description against the code: lints api/openapi.json with @redocly/cli, runs
# server_integration_test with FLASHSALE_API_RECORD set (every reply its HTTP client receives is recorded),
# then validates each recorded reply against the description with ajv (tests/api/validate.mjs).
# Fails if the lint, server_integration_test or any reply fails.
#
#   scripts/api-test.sh --server-test build/dev/tests/server_test [--artifacts DIR]
# Needs tests/api/node_modules (scripts/install-deps.sh runs npm ci there).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
server_integration_test=""
artifacts=""
while [ $# -gt 0 ]; do
  case "$1" in
    --server-test) server_integration_test="$2"; shift 2 ;;
    --artifacts) artifacts="$2"; shift 2 ;;
    *) echo "api-test: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$server_integration_test" ] || [ ! -x "$server_integration_test" ]; then
  echo "api-test: --server-test must name the built server_integration_test binary" >&2
  exit 2
fi
if [ ! -d "$root/tests/api/node_modules/@redocly/cli" ]; then
  echo "api-test: tests/api/node_modules missing; run scripts/install-deps.sh" >&2
  exit 2
fi
if [ -z "$artifacts" ]; then
  artifacts="$(mktemp -d /tmp/flashsale-api-XXXXXX)"
  trap 'rm -rf "$artifacts"' EXIT
fi
mkdir -p "$artifacts"
record="$artifacts/exchanges.jsonl"
rm -f "$record"

echo "api-test: lint"
(cd "$root/tests/api" && node_modules/.bin/redocly lint --format=stylish ../../api/openapi.json)

echo "api-test: server_integration_test, recording replies to $record"
FLASHSALE_API_RECORD="$record" "$server_integration_test" > "$artifacts/server_test.log" 2>&1 || {
  tail -50 "$artifacts/server_test.log"
  echo "api-test: server_integration_test failed (log: $artifacts/server_test.log)" >&2
  exit 1
}

echo "api-test: validate"
node "$root/tests/api/validate.mjs" "$root/api/openapi.json" "$record"
