#!/usr/bin/env bash
# Installs every Debian 12 package that flashsale's build, tests, benchmarks and demo need.
# Then the browser tests' and the API tests' npm packages (tests/browser, tests/api, pinned by
# their package-lock.json files).
# Idempotent: when everything is present it prints two lines and touches nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  # build; clang 14 and its runtime for the libFuzzer targets
  g++ cmake ninja-build pkg-config clang-format clang-tidy clang-14 libclang-rt-14-dev
  # a compiler cache: .ci/run builds through it when it is there (the same sources compile once)
  ccache
  # libraries (docs/design.md, "Dependencies")
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libhiredis-dev libssl-dev libsqlite3-dev libmariadb-dev librabbitmq-dev
  libspdlog-dev libfmt-dev libcli11-dev libtomlplusplus-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # servers the tests, benchmarks and the embedded default start
  redis-server redis-tools mariadb-server
  # the order events' RabbitMQ tests: a broker (started by the test fixtures, with its own epmd),
  # and pika, a client nobody here wrote, reading the queues
  rabbitmq-server python3-pika
  # scripts/galera.sh: MariaDB Galera (the provider, and rsync for state transfers between nodes)
  galera-4 rsync
  # the TLS tests (Redis, MariaDB) make their certificates with the openssl command
  openssl
  # the web pages' tests: a real browser, and Node.js to drive it with playwright-core
  chromium nodejs
  # bench/side_by_side.sh: the HTTP limit (nginx), a second load tool as a check (wrk)
  nginx wrk curl python3
  # operations: the prometheus tests (promtool, a prometheus server scraping serve and worker);
  # the Debian package and its test (dpkg-shlibdeps, systemd-analyze, the man page checked)
  prometheus dpkg-dev systemd groff-base man-db
  # --identity jwt: cjose verifies the shop's JWTs (jansson for its pkg-config file); its tests
  # mint tokens with python3-jwt, which signs RS256/ES256 through python3-cryptography
  libcjose-dev libjansson-dev python3-jwt python3-cryptography
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

# Debian's nodejs ships npm separately; a Node.js from elsewhere may bring its own.
if ! command -v npm >/dev/null; then missing+=(npm); fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
  echo "install-deps: installing ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  # policy-rc.d keeps Debian from starting system-wide redis/mariadb/rabbitmq services: the tests
  # and the embedded default start their own servers in private directories.
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "install-deps: done"
fi

# playwright-core drives Debian's chromium; it downloads no browser of its own.
if node -e '
  const pinned = require("./tests/browser/package-lock.json").packages["node_modules/playwright-core"].version;
  const have = require("./tests/browser/node_modules/playwright-core/package.json").version;
  process.exit(pinned === have ? 0 : 1);' 2>/dev/null; then
  echo "install-deps: tests/browser npm packages present"
else
  echo "install-deps: npm ci in tests/browser"
  npm ci --prefix tests/browser --no-audit --no-fund --loglevel=error
fi

# The API tests: @redocly/cli and ajv (tests/api, pinned by its package-lock.json).
if node -e '
  const lock = require("./tests/api/package-lock.json").packages;
  for (const name of ["@redocly/cli", "ajv", "ajv-formats"]) {
    const have = require("./tests/api/node_modules/" + name + "/package.json").version;
    if (lock["node_modules/" + name].version !== have) process.exit(1);
  }' 2>/dev/null; then
  echo "install-deps: tests/api npm packages present"
else
  echo "install-deps: npm ci in tests/api"
  npm ci --prefix tests/api --no-audit --no-fund --loglevel=error
fi
