#!/usr/bin/env bash
# The Debian package end to end, without installing it: scripts/package.sh builds it from the
# given build directory; dpkg-deb -I and -c check its control fields and contents; the systemd unit
# passes `systemd-analyze verify` (pointed at the unpacked binary); the man page renders without
# warnings; /usr/share/doc/flashsale/copyright is in Debian's machine-readable format and names
# Apache-2.0 (the licence of LICENSE, which is Debian's own copy of its text); the config file names every setting and, uncommented, is accepted; and the packaged
# binary, unpacked with dpkg-deb -x, runs `serve --demo` with that file to a first purchase.
#
#   tests/package/package_test.sh --build build/dev
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$root/build/dev"
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    *) echo "package_test: unknown argument $1" >&2; exit 2 ;;
  esac
done
work="$(mktemp -d /tmp/flashsale-package-XXXXXX)"
serve_pid=""
cleanup() {
  if [ -n "$serve_pid" ] && kill -0 "$serve_pid" 2>/dev/null; then
    kill -TERM "$serve_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$serve_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$serve_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "package_test: FAIL: $*" >&2; exit 1; }

deb="$("$root/scripts/package.sh" --build "$build" --out "$work" | tail -1)"
version="$(sed -n 's/^project(flashsale VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")"
[ "$(basename "$deb")" = "flashsale_${version}_amd64.deb" ] || fail "package named $(basename "$deb")"
[ -f "$deb" ] || fail "no $deb"
echo "package_test: built $(basename "$deb")"

info="$(dpkg-deb -I "$deb")"
for field in "Package: flashsale" "Version: $version" "Architecture: amd64" "Depends: .*redis-server"; do
  grep -Eq "^ $field" <<<"$info" || fail "control lacks '$field':
$info"
done
for script in postinst prerm postrm conffiles; do
  grep -q " $script" <<<"$info" || fail "control archive lacks $script"
done
contents="$(dpkg-deb -c "$deb")"
for path in ./usr/bin/flashsale ./usr/lib/systemd/system/flashsale.service \
  ./etc/flashsale/flashsale.toml ./usr/share/man/man1/flashsale.1.gz \
  ./usr/lib/sysusers.d/flashsale.conf ./usr/share/doc/flashsale/openapi.json \
  ./usr/share/doc/flashsale/copyright; do
  grep -q " $path\$" <<<"$contents" || fail "package lacks $path"
done
grep -E ' \./usr/bin/flashsale$' <<<"$contents" | grep -q '^-rwxr-xr-x root/root' \
  || fail "the binary is not root-owned 0755"
echo "package_test: control fields and contents ok"

tree="$work/tree"
dpkg-deb -x "$deb" "$tree"
binary="$tree/usr/bin/flashsale"
"$binary" --version | grep -q "^flashsale $version (commit " || fail "--version: $("$binary" --version)"

# The unit as packaged, with ExecStart pointing at the unpacked binary (it is not installed).
unit="$work/flashsale.service"
sed "s|/usr/bin/flashsale|$binary|" "$tree/usr/lib/systemd/system/flashsale.service" > "$unit"
for key in 'User=flashsale' 'StateDirectory=flashsale' 'ProtectSystem=strict' \
  'NoNewPrivileges=yes' 'PrivateTmp=yes' 'ProtectHome=yes' 'CapabilityBoundingSet=$'; do
  grep -q "^$key" "$unit" || fail "the unit lacks $key"
done
# Documentation=man:flashsale(1) is checked too: the packaged man page, found through MANPATH.
if ! verify="$(MANPATH="$tree/usr/share/man" systemd-analyze verify "$unit" 2>&1)" || [ -n "$verify" ]; then
  fail "systemd-analyze verify:
$verify"
fi
echo "package_test: systemd-analyze verify ok"

if ! man_warnings="$(zcat "$tree/usr/share/man/man1/flashsale.1.gz" | groff -man -Tutf8 -ww -z 2>&1)" \
  || [ -n "$man_warnings" ]; then
  fail "the man page: $man_warnings"
fi
echo "package_test: man page ok"

# The licence: the copyright file in Debian's machine-readable format (a Format line first, a
# `Files: *` paragraph under Apache-2.0, that licence's own paragraph pointing at Debian's copy of
# its text), and LICENSE at the root the unmodified Apache-2.0 text.
copyright="$tree/usr/share/doc/flashsale/copyright"
grep -E ' \./usr/share/doc/flashsale/copyright$' <<<"$contents" | grep -q '^-rw-r--r-- root/root' \
  || fail "the copyright file is not root-owned 0644"
[ "$(head -1 "$copyright")" = "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" ] \
  || fail "the copyright file does not start with the DEP-5 Format line: $(head -1 "$copyright")"
grep -q '^Upstream-Name: flashsale$' "$copyright" || fail "the copyright file lacks Upstream-Name"
# Paragraphs are separated by blank lines; the one for Files: * names its copyright and licence.
files_paragraph="$(awk -v RS= '/(^|\n)Files: \*(\n|$)/' "$copyright")"
grep -q '^Copyright: ' <<<"$files_paragraph" || fail "no Copyright field for Files: *"
grep -qx 'License: Apache-2.0' <<<"$files_paragraph" || fail "Files: * is not under Apache-2.0:
$files_paragraph"
license_paragraph="$(awk -v RS= '/^License: Apache-2.0\n/' "$copyright")"
grep -q '/usr/share/common-licenses/Apache-2.0' <<<"$license_paragraph" \
  || fail "no stand-alone License: Apache-2.0 paragraph pointing at the common licence:
$(cat "$copyright")"
cmp -s "$root/LICENSE" /usr/share/common-licenses/Apache-2.0 \
  || fail "LICENSE is not the Apache-2.0 text of /usr/share/common-licenses/Apache-2.0"
echo "package_test: copyright file ok (Apache-2.0)"

# Every setting of `serve --help` is in the config file, commented out at its default.
config="$tree/etc/flashsale/flashsale.toml"
settings="$("$binary" serve --help | grep -oE '^  --[a-z-]+' | sed 's/^  --//' | grep -vxE 'help|config' | sort -u)"
[ -n "$settings" ] || fail "no settings in serve --help"
for setting in $settings; do
  grep -q "^# $setting = " "$config" || fail "the config file lacks '$setting'"
done
grep -qv '^\(#.*\)\?$' "$config" && fail "the config file sets something: $(grep -v '^\(#.*\)\?$' "$config")"
sed -E 's/^# ([a-z-]+ = )/\1/' "$config" > "$work/uncommented.toml"
echo "package_test: the config file names all $(wc -w <<<"$settings") settings"

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$binary" serve --config "$work/uncommented.toml" --demo --threads 1 --data-dir "$work/data" \
  --listen "127.0.0.1:$port" > "$work/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 1 300); do
  if curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then break; fi
  kill -0 "$serve_pid" 2>/dev/null || fail "serve exited: $(cat "$work/serve.log")"
  sleep 0.1
done
reply="$(curl -s --max-time 10 -X POST -H 'X-User-Id: alice' "http://127.0.0.1:$port/api/v1/activities/demo/purchase")"
grep -q '"status":"reserved"' <<<"$reply" || fail "the first purchase: $reply
$(cat "$work/serve.log")"
echo "package_test: the packaged serve --demo sold its first unit: $reply"
kill -TERM "$serve_pid"
for _ in $(seq 1 300); do kill -0 "$serve_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$serve_pid" 2>/dev/null; then fail "serve did not stop on SIGTERM"; fi
wait "$serve_pid" || fail "serve exited $? on SIGTERM"
serve_pid=""
echo "package_test: ok"
