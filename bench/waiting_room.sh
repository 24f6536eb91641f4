#!/usr/bin/env bash
# The waiting room (issue 37, point 5): joins/s and polls/s of `flashsale serve` as users run it
# (the embedded default: private redis-server with AOF, order consumer to SQLite), against nginx
# answering a constant on the same connections in the same run (the HTTP limit), and the Redis
# memory per place.
#
#   bench/waiting_room.sh [seconds] [FLASHSALE]   (defaults: 5, build/release/src/flashsale)
#
# Debian's wrk, 1 thread, 128 connections:
#   join   POST .../join, a new user every request (u<n>, n counting up): every request takes a
#          place in the room of a sale that starts in an hour (the places are ranked at random)
#   poll   GET .../wait?wait_ms=0 of a random user among those who joined, once the sale has
#          started (its start moved to now): the place, the number ahead and the estimate, read
#          with ZRANK (O(log n)) from a room of every place the join phase took
#   nginx  POST of a constant reply, the same request shape as the join
# Memory per place: the redis-server's used_memory after the joins minus before, over ZCARD.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

seconds=${1:-5}
binary=${2:-build/release/src/flashsale}
if ! command -v wrk >/dev/null; then
  echo "waiting_room.sh: wrk is missing (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
if [ ! -x "$binary" ]; then
  echo "waiting_room.sh: $binary is missing (cmake --preset release && cmake --build --preset release --target flashsale)" >&2
  exit 1
fi
dir=$(mktemp -d /tmp/flashsale-room-XXXXXX)
pids=()
trap bench_cleanup EXIT

port=$(free_port)
"$binary" serve --demo --data-dir "$dir/serve" --listen "127.0.0.1:$port" --log-level warn \
  --reconcile-every-ms 0 --prewarm-every-ms 0 --expire-every-ms 0 >"$dir/serve.log" 2>&1 &
pids+=("$!")
wait_for curl -sf "http://127.0.0.1:$port/readyz"
token=$(cat "$dir/serve/admin-token")
socket="$dir/serve/redis.sock"
admin() {  # method path [json]
  curl -sf -X "$1" -H "Authorization: Bearer $token" ${3:+-d "$3"} \
    "http://127.0.0.1:$port/api/v1/admin/$2"
}
now_ms() { date +%s%3N; }
start=$(($(now_ms) + 3600000))
admin POST activities "{\"id\":\"room\",\"title\":\"Room\",\"stock\":1000000000,\"per_user_limit\":1,
  \"start_ms\":$start,\"end_ms\":$((start + 86400000)),\"waiting_room\":{\"opens_before_ms\":7200000,
  \"admit_per_s\":100000,\"pass_ttl_ms\":60000,\"max_waiting\":100000000}}" >/dev/null

# wrk's requests: bench_wrk_purchase_script's (its report line included) with the user counting
# up (a join of user u<n>), or a GET of a random joined user (a poll).
bench_wrk_purchase_script "$dir/purchase.lua"
sed -e 's/^local headers = {}$/local headers = {}\nlocal n = 0/' \
  -e 's/^  headers\["X-User-Id"\] = .*$/  headers["X-User-Id"] = "u" .. n; n = n + 1/' \
  "$dir/purchase.lua" >"$dir/join.lua"
sed -e 's/^wrk.method = "POST"$/wrk.method = "GET"/' \
  -e 's/^  headers\["X-User-Id"\] = .*$/  headers["X-User-Id"] = "u" .. math.random(0, JOINED - 1)/' \
  "$dir/purchase.lua" >"$dir/poll.lua"
wrk_run() {  # url script -> "requests rps p99_ms errors"
  wrk -t1 -c128 -d"${seconds}s" --latency -s "$2" "$1" | awk '/^RESULT/ { print $2, $3, $4, $5 }'
}
memory() { redis-cli -s "$socket" info memory | awk -F: '/^used_memory:/ { print $2 + 0 }'; }

room_key='fs:seckill:{room}:room'
before=$(memory)
read -r join_requests join_rps join_p99 join_errors < <(wrk_run \
  "http://127.0.0.1:$port/api/v1/activities/room/join" "$dir/join.lua")
places=$(redis-cli -s "$socket" zcard "$room_key")
after=$(memory)

# The sale starts now: the first poll seals the places taken before it.
admin PATCH activities/room "{\"start_ms\":$(now_ms)}" >/dev/null
sed -i "s/JOINED/$places/" "$dir/poll.lua"
read -r poll_requests poll_rps poll_p99 poll_errors < <(wrk_run \
  "http://127.0.0.1:$port/api/v1/activities/room/wait?wait_ms=0" "$dir/poll.lua")
sample=$(curl -sf -H "X-User-Id: u$((places / 2))" \
  "http://127.0.0.1:$port/api/v1/activities/room/wait?wait_ms=0")

nginx_port=$(free_port)
bench_start_nginx "$nginx_port" 2 '{"status":"waiting"}' '{"status":"waiting"}'
read -r nginx_requests nginx_rps nginx_p99 nginx_errors < <(wrk_run \
  "http://127.0.0.1:$nginx_port/api/v1/activities/hot/purchase" "$dir/join.lua")

bench_machine_line
bench_versions_line
printf '%-44s %10s %10s %8s %8s\n' "" requests "req/s" "p99 ms" errors
printf '%-44s %10s %10s %8s %8s\n' "join (a new place each)" "$join_requests" "$join_rps" "$join_p99" "$join_errors"
printf '%-44s %10s %10s %8s %8s\n' "poll (wait_ms=0, a random joined user)" "$poll_requests" "$poll_rps" "$poll_p99" "$poll_errors"
printf '%-44s %10s %10s %8s %8s\n' "nginx, a constant reply" "$nginx_requests" "$nginx_rps" "$nginx_p99" "$nginx_errors"
echo "joins/s / nginx: $(ratio "$join_rps" "$nginx_rps")   polls/s / nginx: $(ratio "$poll_rps" "$nginx_rps")"
echo "places in the room: $places; Redis memory per place: $(ratio "$((after - before))" "$places") bytes"
echo "a poll's answer (user u$((places / 2))): $sample"
if [ "$join_errors" != 0 ] || [ "$poll_errors" != 0 ] || [ "$places" -lt "$join_requests" ]; then
  echo "waiting_room.sh: errors, or fewer places than joins" >&2
  exit 1
fi
