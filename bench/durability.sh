#!/usr/bin/env bash
# The cost of each durability mode (docs/durability.md), one row per mode, in one run on this
# machine: `flashsale serve` selling a hot activity (every request reserves a unit; random users,
# huge stock and limit) to `flashsale load` (closed loop) for a few seconds, on
#   async             the private redis-server, AOF fsynced every second (the default)
#   fsync             the private redis-server, AOF fsynced before every reply (appendfsync always)
#   async, replicated a redis-server of ours on loopback TCP with one replica, durability async
#   wait              the same pair, durability wait (WAIT 1 after each reply, batched)
# Prints requests/s and p99 per mode, and each mode's ratio to async.
#
#   bench/durability.sh [--binary PATH] [seconds per run] [connections]   (defaults: release
#                                                                         build, 5, 64)
# Without --binary it builds and uses the release preset.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=""
if [[ "${1:-}" == "--binary" ]]; then
  bin=$2
  shift 2
fi
seconds=${1:-5}
connections=${2:-64}
threads=2
if [[ -z "$bin" ]]; then
  cmake --preset release >/dev/null
  cmake --build --preset release --target flashsale >/dev/null
  bin=build/release/src/flashsale
fi

dir=$(mktemp -d /tmp/flashsale-durability-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_for() {  # command...: until it succeeds, at most 20 s
  for _ in $(seq 1 400); do "$@" >/dev/null 2>&1 && return 0; sleep 0.05; done
  echo "durability: gave up waiting for: $*" >&2
  return 1
}

# A primary and its replica on loopback TCP, for async-replicated and wait.
primary_port=$(free_port)
replica_port=$(free_port)
mkdir -p "$dir/primary" "$dir/replica"
redis-server --port "$primary_port" --bind 127.0.0.1 --dir "$dir/primary" --save "" \
  --repl-diskless-sync-delay 0 \
  --appendonly yes --appendfsync everysec --daemonize no --logfile "$dir/primary.log" &
pids+=($!)
wait_for redis-cli -p "$primary_port" ping
redis-server --port "$replica_port" --bind 127.0.0.1 --dir "$dir/replica" --save "" \
  --appendonly yes --appendfsync everysec --daemonize no --logfile "$dir/replica.log" \
  --replicaof 127.0.0.1 "$primary_port" &
pids+=($!)
wait_for sh -c "redis-cli -p $replica_port info replication | grep -q master_link_status:up"

# One mode: serve, the hot activity, the load -> "rps p99_ms errors".
run() {  # name serve-flags...
  local name=$1
  shift
  local port
  port=$(free_port)
  "$bin" serve --listen "127.0.0.1:$port" --data-dir "$dir/fs-$name" --identity gateway \
    --threads "$threads" --log-level warn --admin-token bench-admin-token \
    --reconcile-every-ms 0 --prewarm-every-ms 0 --expire-every-ms 0 "$@" \
    >"$dir/serve-$name.log" 2>&1 &
  local pid=$!
  pids+=($pid)
  wait_for curl -sf "http://127.0.0.1:$port/healthz"
  curl -sf -H "Authorization: Bearer bench-admin-token" \
    -d '{"id":"hot","stock":1000000000000,"per_user_limit":1000000000,"start_ms":0,"end_ms":4000000000000}' \
    "http://127.0.0.1:$port/api/v1/admin/activities" >/dev/null || true
  "$bin" load --url "http://127.0.0.1:$port" --activity hot --connections "$connections" \
    --threads "$threads" --duration "$seconds" --user-ids random --users 1000000000 \
    >"$dir/load-$name.log" 2>/dev/null || true
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  awk '/^  requests/ { for (i = 1; i <= NF; i++) if ($i == "requests/s;") rps = $(i - 1); errors = $(NF - 1) }
       /^  latency/  { for (i = 1; i <= NF; i++) if ($i == "p99") p99 = $(i + 1) }
       END { print rps, p99, errors }' "$dir/load-$name.log"
}

declare -A rps p99 errors
measure() {  # key serve-flags...
  local key=$1
  read -r r p e < <(run "$@")
  rps[$key]=${r:-0}
  p99[$key]=${p:-0}
  errors[$key]=${e:-?}
}
measure async --durability async
measure fsync --durability fsync
measure async_repl --durability async --redis-url "redis://127.0.0.1:$primary_port" --key-namespace repl
measure wait --durability wait --redis-url "redis://127.0.0.1:$primary_port" --key-namespace wait

echo "machine: $(nproc) cores, $(uname -sr); $(redis-server --version | cut -d' ' -f3); binary $bin"
echo "hot sale, $connections connections, $threads threads, $seconds s per mode"
printf '%-18s %11s %9s %7s %9s\n' mode requests/s "p99 ms" errors "vs async"
row() {  # label key
  printf '%-18s %11.0f %9.2f %7s %9.2f\n' "$1" "${rps[$2]}" "${p99[$2]}" "${errors[$2]}" \
    "$(awk -v a="${rps[$2]}" -v b="${rps[async]}" 'BEGIN { print (b > 0 ? a / b : 0) }')"
}
row async async
row fsync fsync
row "async, replicated" async_repl
row wait wait
