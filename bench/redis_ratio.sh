#!/usr/bin/env bash
# The client against its limit, in one run on this machine: redis-benchmark (C, pipelined) and our
# client's Google Benchmark both run the sale reserve script, every call reserving, against the
# same private redis-server. Prints each one's calls/s and ours as a ratio of redis-benchmark's.
#
#   bench/redis_ratio.sh [rounds] [requests]      (defaults: 3 rounds, 200000 requests)
#
# Each measurement starts from an empty database with the activity freshly set up, so neither side
# pays for the other's data. Rounds alternate the two sides; the best of each is compared, since a
# shared 2-core machine only ever slows a round down. The limit is the best redis-benchmark
# configuration measured (many connections with shallow pipelines, or one with a deep pipeline).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
requests=${2:-200000}

cmake --preset release >/dev/null
cmake --build --preset release --target redis_client_bench >/dev/null
bench_bin=build/release/bench/redis_client_bench

dir=$(mktemp -d /tmp/flashsale-bench-XXXXXX)
redis_pid=
cleanup() {
  if [ -n "$redis_pid" ]; then
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT

socket=$dir/redis.sock
redis-server --port 0 --unixsocket "$socket" --unixsocketperm 700 --dir "$dir" --save "" \
  --appendonly no --daemonize no --logfile "$dir/redis.log" &
redis_pid=$!
for _ in $(seq 1 200); do
  redis-cli -s "$socket" ping >/dev/null 2>&1 && break
  sleep 0.05
done
export FLASHSALE_BENCH_REDIS_URL="unix://$socket"

fresh() {
  redis-cli -s "$socket" flushall >/dev/null
  "$bench_bin" --setup
}

redis_benchmark() {  # clients pipeline
  local -a call
  mapfile -t call < <(fresh)  # one argument a line, some empty
  redis-benchmark -s "$socket" -c "$1" -P "$2" -n "$requests" -r 1000000000 --csv "${call[@]}" |
    awk -F'"' 'NR == 2 { print $4 }'
}

ours() {  # in-flight
  fresh >/dev/null
  "$bench_bin" --benchmark_filter="BM_PipelinedReserve/$1/" --benchmark_format=json 2>/dev/null |
    awk -F': ' '/"items_per_second"/ && !seen++ { gsub(/[ ,]/, "", $2); print $2 }'
}

best() { printf '%s\n' "$@" | sort -g | tail -n 1; }

declare -a rb_many rb_deep ours_256 ours_1024
for round in $(seq 1 "$rounds"); do
  rb_many+=("$(redis_benchmark 50 16)")
  ours_1024+=("$(ours 1024)")
  rb_deep+=("$(redis_benchmark 1 1024)")
  ours_256+=("$(ours 256)")
  echo "round $round: redis-benchmark ${rb_many[-1]} / ${rb_deep[-1]}, flashsale ${ours_1024[-1]} / ${ours_256[-1]}" >&2
done

limit=$(best "${rb_many[@]}" "${rb_deep[@]}")
mine=$(best "${ours_1024[@]}" "${ours_256[@]}")
row() { printf '%-56s %12.0f\n' "$1" "$2"; }

echo
echo "flashsale client vs redis-benchmark, sale_reserve.lua, every call reserving"
echo "machine: $(nproc) cores, Linux $(uname -r), redis $(redis-server --version | awk '{print $3}' | cut -d= -f2), $rounds rounds, best of each"
printf '%-56s %12s\n' "" "calls/s"
row "redis-benchmark, 50 connections x 16 pipelined" "$(best "${rb_many[@]}")"
row "redis-benchmark, 1 connection x 1024 pipelined" "$(best "${rb_deep[@]}")"
row "flashsale, 1 connection, 1024 in flight" "$(best "${ours_1024[@]}")"
row "flashsale, 1 connection, 256 in flight" "$(best "${ours_256[@]}")"
ratio=$(awk -v a="$mine" -v b="$limit" 'BEGIN { printf "%.2f", a / b }')
verdict=$(awk -v r="$ratio" 'BEGIN { print (r >= 0.9 ? "meets" : "below") }')
printf '%-56s %12s  (%s the 0.9 aim)\n' "ratio: best flashsale / best redis-benchmark" "$ratio" "$verdict"
