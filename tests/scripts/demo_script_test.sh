#!/usr/bin/env bash
# scripts/demo.sh sets up once: the first start installs the packages and configures the release
# build; a second start only builds (a no-op when nothing changed) and serves. Run on a copy of the
# script in a temporary tree, with install-deps.sh, cmake and the binary replaced by stubs that
# record their calls (nothing is installed or built).
#   tests/scripts/demo_script_test.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
tmp="$(mktemp -d /tmp/flashsale-demo-test-XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/repo/scripts" "$tmp/bin"
cp "$root/scripts/demo.sh" "$tmp/repo/scripts/demo.sh"
cat >"$tmp/repo/scripts/install-deps.sh" <<'STUB'
#!/bin/sh
echo "install-deps" >>"$CALLS"
STUB
cat >"$tmp/bin/cmake" <<'STUB'
#!/bin/sh
echo "cmake $*" >>"$CALLS"
case "$1" in
  --preset) mkdir -p build/release && : >build/release/build.ninja ;;
  --build)
    mkdir -p build/release/src
    printf '#!/bin/sh\necho "flashsale $*" >>"$CALLS"\n' >build/release/src/flashsale
    chmod +x build/release/src/flashsale ;;
esac
STUB
chmod +x "$tmp/repo/scripts/install-deps.sh" "$tmp/bin/cmake"
export CALLS="$tmp/calls" PATH="$tmp/bin:$PATH"

fail=0
expect() {  # expect WHAT FILE PATTERN [absent]
  if [ "${4:-}" = absent ]; then
    if grep -q -- "$3" "$2"; then echo "FAIL: $1: '$3' was called:" >&2; cat "$2" >&2; fail=1; fi
  elif ! grep -q -- "$3" "$2"; then
    echo "FAIL: $1: '$3' was not called:" >&2; cat "$2" >&2; fail=1
  fi
}

bash "$tmp/repo/scripts/demo.sh" --listen 127.0.0.1:9999 >/dev/null
expect "first start" "$CALLS" "^install-deps$"
expect "first start" "$CALLS" "^cmake --preset release"
expect "first start" "$CALLS" "^cmake --build --preset release"
expect "first start" "$CALLS" "^flashsale serve --demo .*--listen 127.0.0.1:9999"

: >"$CALLS"
bash "$tmp/repo/scripts/demo.sh" >/dev/null
expect "second start" "$CALLS" "^install-deps$" absent
expect "second start" "$CALLS" "^cmake --preset" absent
expect "second start" "$CALLS" "^cmake --build --preset release"
expect "second start" "$CALLS" "^flashsale serve --demo"

[ "$fail" -eq 0 ] && echo "demo_script_test: ok"
exit "$fail"
