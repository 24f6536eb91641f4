#!/usr/bin/env bash
# Two builds against each other in alternated rounds: what a change costs the request path.
#
#   bench/ab.sh PHASE OLD_FLASHSALE NEW_FLASHSALE [rounds] [seconds]   (defaults: 4, 4)
#
# PHASE is one of
#   sold_out  the requests flashsale answers from its local sold-out flag, without Redis: an
#             activity 'gone' with one unit, bought by a first user; NEW_FLASHSALE's
#             `flashsale load` (64 connections, random users, keyless purchases, no verification)
#   hot       every request reserves: Debian's wrk (1 thread, 128 connections, a random user among
#             a billion per request, bench_wrk_purchase_script in bench/lib.sh), each run on a
#             fresh activity with a huge stock; after each run the order pipeline drains (every
#             order taken from the stream) and a rewrite of the AOF it caused finishes before the
#             next run, so a run does not pay for the one before it; every answered request must
#             have reserved (the activity's count from the admin API), or the script exits 1
# Each binary runs `serve` as users run it (no Redis URL: its private redis-server with AOF, one
# order consumer to SQLite) on a data directory of its own, both at once. Each round runs old new
# new old (even rounds new old old new). Prints requests/s of every run (hot: also p99 and the CPU
# per request of the service and its redis-server together, from /proc), new/old per round (the
# mean of the two runs over the two) with the rounds' median and spread, and how much the same
# build run twice in a round differs (median): the noise to judge new/old against.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

usage="usage: bench/ab.sh sold_out|hot OLD_FLASHSALE NEW_FLASHSALE [rounds] [seconds]"
phase=${1:?$usage}
old=${2:?$usage}
new=${3:?$usage}
rounds=${4:-4}
seconds=${5:-4}
case $phase in
  sold_out | hot) ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
if [ "$phase" = hot ] && ! command -v wrk >/dev/null; then
  echo "ab.sh: wrk is missing (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
dir=$(mktemp -d /tmp/flashsale-ab-XXXXXX)
pids=()
trap bench_cleanup EXIT
tick_us=$((1000000 / $(getconf CLK_TCK)))
huge=1000000000000

declare -A bin=([old]=$old [new]=$new) port token redis_pid
admin() {  # old|new method path [json]
  curl -sf -X "$2" -H "Authorization: Bearer ${token[$1]}" ${4:+-d "$4"} \
    "http://127.0.0.1:${port[$1]}/api/v1/admin/$3"
}
for v in old new; do
  port[$v]=$(free_port)
  mkdir -p "$dir/$v"
  "${bin[$v]}" serve --demo --data-dir "$dir/$v" --listen "127.0.0.1:${port[$v]}" --log-level warn \
    --reconcile-every-ms 0 --prewarm-every-ms 0 --expire-every-ms 0 >"$dir/$v.log" 2>&1 &
  pids+=("$!")
  wait_for curl -sf "http://127.0.0.1:${port[$v]}/readyz"
  token[$v]=$(cat "$dir/$v/admin-token")
  redis_pid[$v]=$(redis-cli -s "$dir/$v/redis.sock" info server | awk -F: '/^process_id/ { print $2 + 0 }')
  admin "$v" POST activities '{"id":"gone","title":"Gone","stock":1,"per_user_limit":1}' >/dev/null
  curl -sf -X POST -H 'X-User-Id: first' "http://127.0.0.1:${port[$v]}/api/v1/activities/gone/purchase" >/dev/null
  answer=$(curl -s -X POST -H 'X-User-Id: second' "http://127.0.0.1:${port[$v]}/api/v1/activities/gone/purchase")
  case $answer in
    *'"sold_out"'*) echo "$v: $("${bin[$v]}" --version), answers $answer" ;;
    *) echo "bench: $v does not answer sold_out: $answer" >&2; exit 1 ;;
  esac
done
[ "$phase" = sold_out ] || bench_wrk_purchase_script "$dir/purchase.lua"
echo "phase $phase: $rounds rounds of ${seconds}s; load average $(cut -d' ' -f1-3 /proc/loadavg)"

# The units an activity has reserved, from the admin API's status ("redis":{"reserved":N}).
reserved() {  # old|new activity
  admin "$1" GET "activities/$2" | grep -o '"redis":{[^{}]*}' | grep -o '"reserved":[0-9]*' |
    head -n 1 | cut -d: -f2
}
cpu() { echo $(($(bench_cpu_ticks "${pids[$1]}" children) + $(bench_cpu_ticks "${redis_pid[$2]}" children))); }

run() {  # old|new activity -> requests/s of one run (hot: "requests/s p99_ms us_per_request")
  local v=$1 activity=$2
  if [ "$phase" = sold_out ]; then
    "$new" load --url "http://127.0.0.1:${port[$v]}" --activity gone --connections 64 \
      --duration "$seconds" --no-verify 2>&1 | grep -m1 -oE '[0-9.]+ requests/s' | cut -d' ' -f1
    return
  fi
  local index=0 t0 t1 requests rps p99 errors count
  [ "$v" = old ] || index=1
  admin "$v" POST activities \
    "{\"id\":\"$activity\",\"stock\":$huge,\"per_user_limit\":1000000000,\"start_ms\":0,\"end_ms\":4000000000000}" >/dev/null
  t0=$(cpu "$index" "$v")
  read -r requests rps p99 errors < <(wrk -t 1 -c 128 -d "${seconds}s" --timeout 10s \
    -s "$dir/purchase.lua" "http://127.0.0.1:${port[$v]}/api/v1/activities/$activity/purchase" |
    awk '/^RESULT/ { print $2, $3, $4, $5 }')
  t1=$(cpu "$index" "$v")
  count=$(reserved "$v" "$activity")
  if [ "${errors:-1}" != 0 ] || [ "${count:-0}" -lt "${requests:-1}" ]; then
    echo "bench: $v answered ${requests:-?} requests with ${errors:-?} errors but reserved ${count:-?}" >&2
    exit 1
  fi
  for _ in $(seq 1 1200); do
    bench_stream_drained "$dir/$v/redis.sock" "$activity" && break
    sleep 0.1
  done
  bench_stream_drained "$dir/$v/redis.sock" "$activity" || { echo "bench: $v did not drain" >&2; exit 1; }
  bench_settle_aof "$dir/$v/redis.sock"
  echo "$rps $p99 $(awk -v t=$((t1 - t0)) -v n="$requests" -v u="$tick_us" 'BEGIN { printf "%.1f", t * u / n }')"
}

ratios=() noise=() cpu_ratios=() runs=0
for round in $(seq 1 "$rounds"); do
  if [ $((round % 2)) = 1 ]; then order=(old new new old); else order=(new old old new); fi
  declare -A first=() sum=() cpu_sum=()
  line="round $round:"
  for v in "${order[@]}"; do
    runs=$((runs + 1))
    run "$v" "hot-$runs" >"$dir/run"
    read -r rps p99 us <"$dir/run"
    line+=" $v $rps${p99:+ (p99 $p99 ms, $us us)}"
    cpu_sum[$v]=$(awk -v a="${cpu_sum[$v]:-0}" -v b="${us:-0}" 'BEGIN { print a + b }')
    if [ -z "${first[$v]:-}" ]; then first[$v]=$rps; sum[$v]=$rps; else
      sum[$v]=$(awk -v a="${sum[$v]}" -v b="$rps" 'BEGIN { print a + b }')
      noise+=("$(awk -v a="${first[$v]}" -v b="$rps" 'BEGIN { d = b / a - 1; printf "%.4f", d < 0 ? -d : d }')")
    fi
  done
  ratio=$(awk -v n="${sum[new]}" -v o="${sum[old]}" 'BEGIN { printf "%.3f", n / o }')
  ratios+=("$ratio")
  line+="  new/old $ratio"
  if [ "$phase" = hot ]; then
    cpu_ratios+=("$(awk -v n="${cpu_sum[new]}" -v o="${cpu_sum[old]}" 'BEGIN { printf "%.3f", (o > 0 ? n / o : 0) }')")
    line+=", CPU per request new/old ${cpu_ratios[-1]}"
  fi
  echo "$line"
done
spread() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s..%s", lo, hi }'; }
echo "$phase, new/old requests/s: median $(median "${ratios[@]}") (rounds $(spread "${ratios[@]}"));" \
  "the same build twice in a round differs by $(median "${noise[@]}" | awk '{ printf "%.1f %%", $1 * 100 }') (median)"
if [ "$phase" = hot ]; then
  echo "$phase, new/old CPU per request (service + its redis-server): median $(median "${cpu_ratios[@]}")" \
    "(rounds $(spread "${cpu_ratios[@]}"))"
fi
