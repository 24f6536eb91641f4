#!/usr/bin/env bash
# flashsale against the two limits of this machine, in one run, on loopback:
#   flashsale    `flashsale serve` (release build) on a private redis-server, gateway identity,
#                SQLite, one order consumer persisting the orders while it serves (the scheduled
#                jobs off: a reconciliation scanning every order would land in a phase)
#   Redis limit  redis-benchmark running the same reserve script on that redis-server, pipelined
#                (the approach of bench/redis_ratio.sh)
#   HTTP limit   nginx answering flashsale's own reply as a constant, from memory
# in two phases:
#   hot          every request reserves a unit: huge stock, per-user limit huge, random users
#   sold out     the activity has no stock left (flashsale answers from its local flag)
# flashsale and nginx are driven by the same tool, `flashsale load` (closed loop, the same
# connections and threads); wrk drives nginx too, as a check that the tool is not the bottleneck.
# The hot phase on flashsale is verified afterwards (`flashsale load --verify`: units sold, one
# database row per unit, no user above the limit, no duplicate, no lost order).
# Prints the machine and versions, then requests/s, p99 and flashsale's ratio to each limit.
#
#   bench/side_by_side.sh [rounds] [seconds per run] [connections] [redis-benchmark requests]
#                                                            (defaults: 3, 5, 64, 200000)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
rounds=${1:-3}
seconds=${2:-5}
connections=${3:-64}
rb_requests=${4:-200000}
threads=2  # flashsale's I/O threads, nginx's workers, the load tools' threads

bench_build_release flashsale redis_client_bench
bin=build/release/src/flashsale
bench_bin=build/release/bench/redis_client_bench

dir=$(mktemp -d /tmp/flashsale-side-XXXXXX)
pids=()
trap bench_cleanup EXIT

# The private redis-server: flashsale and redis-benchmark use the same one (no persistence).
socket=$dir/redis.sock
bench_start_redis "$socket"

# flashsale: 'hot' (stock and limit so large that every request reserves) and 'gone' (sold out).
fs_port=$(free_port)
"$bin" serve --listen "127.0.0.1:$fs_port" --data-dir "$dir/fs" --redis-url "unix://$socket" \
  --identity gateway --threads "$threads" --log-level warn --admin-token bench-admin-token \
  --reconcile-every-ms 0 --prewarm-every-ms 0 --expire-every-ms 0 \
  >"$dir/fs.log" 2>&1 &
pids+=($!)
wait_for curl -sf "http://127.0.0.1:$fs_port/healthz"
admin=(-H "Authorization: Bearer bench-admin-token")
create() {
  curl -sf "${admin[@]}" -d "$1" "http://127.0.0.1:$fs_port/api/v1/admin/activities" >/dev/null
}
create '{"id":"hot","stock":1000000000000,"per_user_limit":1000000000,"start_ms":0,"end_ms":4000000000000}'
create '{"id":"gone","stock":1,"start_ms":0,"end_ms":4000000000000}'
curl -sf -X POST -H 'X-User-Id: first' "http://127.0.0.1:$fs_port/api/v1/activities/gone/purchase" >/dev/null
sold_out_reply=$(curl -s -X POST -H 'X-User-Id: someone' "http://127.0.0.1:$fs_port/api/v1/activities/gone/purchase")
hot_reply=$(curl -s -X POST -H 'X-User-Id: probe' "http://127.0.0.1:$fs_port/api/v1/activities/hot/purchase")

# nginx: the same replies, constant, from memory.
nginx_port=$(free_port)
bench_start_nginx "$nginx_port" "$threads" "$hot_reply" "$sold_out_reply"

# flashsale load -> "rps p99_ms errors"; the report (and verification) in $dir/<log>.
load() {  # port activity log [more flags]
  local port=$1 activity=$2 log=$3
  shift 3
  "$bin" load --url "http://127.0.0.1:$port" --activity "$activity" --connections "$connections" \
    --threads "$threads" --duration "$seconds" --user-ids random --users 1000000000 "$@" \
    >"$dir/$log" 2>/dev/null || true
  bench_load_summary "$dir/$log" | cut -d' ' -f1-3
}

# wrk: the same POST with a random X-User-Id per request (bench/lib.sh) -> "rps p99_ms errors".
bench_wrk_purchase_script "$dir/purchase.lua"
wrk_run() {  # port activity
  wrk -t "$threads" -c "$connections" -d "${seconds}s" -s "$dir/purchase.lua" \
    "http://127.0.0.1:$1/api/v1/activities/$2/purchase" | awk '/^RESULT/ { print $3, $4, $5 }'
}

# redis-benchmark on the reserve script -> "rps p99_ms errors"; 50 connections x 16 pipelined,
# the best configuration bench/redis_ratio.sh found. Its own namespace on the same server.
redis_benchmark() {  # --setup | --setup-sold-out
  local -a call
  mapfile -t call < <(FLASHSALE_BENCH_REDIS_URL="unix://$socket" "$bench_bin" "$1")  # a line each
  bench_redis_benchmark "$socket" "$rb_requests" 50 16 "${call[@]}"
}

bench_machine_line
bench_versions_line
echo "runs: $rounds rounds, ${seconds}s each, closed loop, $connections connections, $threads load threads;" \
  "flashsale $threads I/O threads, nginx $threads workers; redis-benchmark -n $rb_requests"
echo "      the servers, Redis and the load tools share these cores; loopback only"

# Rounds alternate the systems; each one's best round is reported (a shared machine only ever
# slows a round down), its errors summed over the rounds. Every hot round on flashsale is verified.
declare -A rps p99 errors
measure() {  # key command...
  local r p e
  read -r r p e < <("${@:2}")
  r=${r:-0} p=${p:-0} e=${e:-0}
  echo "round $round: $1 $r requests/s, p99 $p ms, $e errors" >&2
  if [ -z "${rps[$1]:-}" ] || awk -v a="$r" -v b="${rps[$1]}" 'BEGIN { exit !(a > b) }'; then
    rps[$1]=$r
    p99[$1]=$p
  fi
  errors[$1]=$((${errors[$1]:-0} + e))
}
verified_rounds=0
for round in $(seq 1 "$rounds"); do
  measure fs_hot load "$fs_port" hot "fs-hot-$round.log" \
    --redis-url "unix://$socket" --db-url "sqlite:$dir/fs/flashsale.db" --drain-timeout-ms 120000
  if grep -q '^verified:' "$dir/fs-hot-$round.log"; then
    verified_rounds=$((verified_rounds + 1))
  else
    echo "flashsale hot round $round NOT verified:" >&2
    sed -n '/^verify/,$p' "$dir/fs-hot-$round.log" >&2
  fi
  measure ng_hot load "$nginx_port" hot nginx-hot.log
  measure wrk_hot wrk_run "$nginx_port" hot
  measure rb_hot redis_benchmark --setup
  measure fs_out load "$fs_port" gone fs-out.log
  measure ng_out load "$nginx_port" gone nginx-out.log
  measure wrk_out wrk_run "$nginx_port" gone
  measure rb_out redis_benchmark --setup-sold-out
done

row() {  # phase system key [ratio]
  printf '%-9s %-52s %11.0f %9.2f %7s %10s\n' "$1" "$2" "${rps[$3]}" "${p99[$3]}" "${errors[$3]}" "${4:-}"
}
echo
printf '%-9s %-52s %11s %9s %7s %10s\n' phase "system (best of $rounds rounds)" "requests/s" "p99 ms" \
  errors "flashsale/"
for phase in hot out; do
  label=$([ $phase = hot ] && echo hot || echo "sold out")
  fs=${rps[fs_$phase]}
  row "$label" "flashsale serve, by flashsale load" "fs_$phase"
  row "$label" "Redis limit: redis-benchmark, reserve script, 50x16" "rb_$phase" \
    "$(ratio "$fs" "${rps[rb_$phase]}")"
  row "$label" "HTTP limit: nginx static reply, by flashsale load" "ng_$phase" \
    "$(ratio "$fs" "${rps[ng_$phase]}")"
  row "$label" "HTTP limit: nginx static reply, by wrk (tool check)" "wrk_$phase" \
    "$(ratio "$fs" "${rps[wrk_$phase]}")"
done
echo
echo "load tool check, nginx by flashsale load / by wrk: hot $(ratio "${rps[ng_hot]}" "${rps[wrk_hot]}")," \
  "sold out $(ratio "${rps[ng_out]}" "${rps[wrk_out]}")"
last=$dir/fs-hot-$rounds.log
echo "flashsale hot phase, last round: $(awk '/^  outcomes/' "$last" | sed 's/^ *outcomes *//')"
echo "flashsale hot phase verified in $verified_rounds of $rounds rounds; after the last:" \
  "$(awk '/db units/ { sub(/^ *(PASS|FAIL) *db units */, ""); print; exit }' "$last")"
[ "$verified_rounds" -eq "$rounds" ]
