#!/usr/bin/env bash
# Installs every Debian 12 package that flashsale's build, tests, benchmarks and demo need.
# Idempotent: when everything is present it prints one line and touches nothing.
set -euo pipefail

packages=(
  # build; clang 14 and its runtime for the libFuzzer targets
  g++ cmake ninja-build pkg-config clang-format clang-tidy clang-14 libclang-rt-14-dev
  # libraries (DESIGN.md, "Dependencies")
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libhiredis-dev libssl-dev libsqlite3-dev libmariadb-dev
  libspdlog-dev libfmt-dev libcli11-dev libtomlplusplus-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # servers the tests, benchmarks and the embedded default start
  redis-server redis-tools mariadb-server
  # bench/side_by_side.sh: the HTTP limit (nginx), a second load tool as a check (wrk)
  nginx wrk curl python3
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
echo "install-deps: installing ${missing[*]}"
"${sudo[@]}" apt-get update -qq
# policy-rc.d keeps Debian from starting system-wide redis/mariadb services: the tests and the
# embedded default start their own servers in private directories.
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
