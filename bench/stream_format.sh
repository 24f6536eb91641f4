#!/usr/bin/env bash
# What the shape of an order intent's stream entry costs Redis, with and without the AOF: the
# intent as the reserve script wrote it until 2026-12-03 (`wide`: six named fields, order_id
# user_id quantity items ts limit) against the same values packed into one field, as it writes
# them now (`packed`), and the packed intents of a whole batch as the fields of ONE entry
# (`batched`: one XADD a call, the `o` field repeated; not what the order pipeline reads today).
# Each call is a script writing 16 intents (a batch): 16 XADDs, or one for `batched`, driven by
# redis-benchmark (50 connections x 16 pipelined) on a private redis-server (unix socket; AOF
# `everysec` or none, automatic rewrites off). Prints calls/s, Redis CPU per intent (user + system
# from /proc/<pid>/stat over the run) and AOF bytes per intent, and the ratios measured in the
# same run. No flashsale code runs: it measures the format alone (bench/README.md).
#
#   bench/stream_format.sh [rounds] [calls per run]      (defaults: 3, 100000)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
rounds=${1:-3}
calls=${2:-100000}
per_call=16
tick_us=$((1000000 / $(getconf CLK_TCK)))

dir=$(mktemp -d /tmp/flashsale-stream-XXXXXX)
pids=()
trap bench_cleanup EXIT

wide="for i = 1, $per_call do redis.call('XADD', KEYS[1], '*', 'order_id', ARGV[1] .. i,
  'user_id', ARGV[2], 'quantity', '1', 'items', '', 'ts', '1764633600000', 'limit', '1000000000')
end return 1"
packed="for i = 1, $per_call do redis.call('XADD', KEYS[1], '*', 'o', ARGV[1] .. i .. '|' ..
  ARGV[2] .. '|1||1764633600000|1000000000') end return 1"
batched="local a = {KEYS[1], '*'} for i = 1, $per_call do a[2 * i + 1] = 'o'
  a[2 * i + 2] = ARGV[1] .. i .. '|' .. ARGV[2] .. '|1||1764633600000|1000000000' end
redis.call('XADD', unpack(a)) return 1"

run() {  # aof(yes|no) variant: prints "calls/s us-per-intent aof-bytes-per-intent"
  local aof=$1 script=$2 d sock pid sha t0 t1 rps bytes
  d=$(mktemp -d "$dir/redis-XXXX")
  sock=$d/redis.sock
  redis-server --port 0 --unixsocket "$sock" --unixsocketperm 700 --dir "$d" --save "" \
    --appendonly "$aof" --appendfsync everysec --auto-aof-rewrite-percentage 0 \
    --daemonize no --logfile "$d/redis.log" &
  pid=$!
  pids+=("$pid")
  wait_for redis-cli -s "$sock" ping
  sha=$(redis-cli -s "$sock" SCRIPT LOAD "$script")
  t0=$(bench_cpu_ticks "$pid")
  rps=$(redis-benchmark -s "$sock" -n "$calls" -c 50 -P 16 --csv EVALSHA "$sha" 1 '{a}:stream' \
    'ord-0000000000000000__rand_int__' 'user-__rand_int__' | tail -1 | cut -d, -f2 | tr -d '"')
  t1=$(bench_cpu_ticks "$pid")
  bytes=0
  if [ "$aof" = yes ]; then bytes=$(du -sb "$d/appendonlydir" | cut -f1); fi
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  rm -rf "$d"
  awk -v r="$rps" -v t=$((t1 - t0)) -v us="$tick_us" -v n=$((calls * per_call)) -v b="$bytes" \
    'BEGIN { printf "%.0f %.2f %.0f\n", r, t * us / n, b / n }'
}

declare -A best_rps best_cpu bytes_of
for round in $(seq 1 "$rounds"); do
  for aof in no yes; do
    for variant in wide packed batched; do
      case $variant in
        wide) script=$wide ;;
        packed) script=$packed ;;
        batched) script=$batched ;;
      esac
      read -r rps cpu bytes < <(run "$aof" "$script")
      echo "round $round: aof $aof, $variant: $rps calls/s, $cpu us Redis CPU per intent, $bytes AOF bytes per intent"
      k="$aof $variant"
      if [ -z "${best_rps[$k]:-}" ] || [ "$rps" -gt "${best_rps[$k]}" ]; then best_rps[$k]=$rps; fi
      if [ -z "${best_cpu[$k]:-}" ] || awk -v a="$cpu" -v b="${best_cpu[$k]}" 'BEGIN { exit !(a < b) }'; then
        best_cpu[$k]=$cpu
      fi
      bytes_of[$k]=$bytes
    done
  done
done

echo
echo "redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), $per_call intents a call, redis-benchmark 50x16, $calls calls a run, best of $rounds rounds"
printf '%-22s %12s %14s %14s\n' "aof, entry" "calls/s" "us CPU/intent" "AOF B/intent"
for k in "no wide" "no packed" "no batched" "yes wide" "yes packed" "yes batched"; do
  printf '%-22s %12s %14s %14s\n' "$k" "${best_rps[$k]}" "${best_cpu[$k]}" "${bytes_of[$k]}"
done
for aof in no yes; do
  for pair in "packed wide" "batched packed"; do
    read -r x y <<<"$pair"
    awk -v a="${best_rps[$aof $x]}" -v b="${best_rps[$aof $y]}" -v c="${best_cpu[$aof $x]}" \
      -v d="${best_cpu[$aof $y]}" -v f="$aof" -v x="$x" -v y="$y" \
      'BEGIN { printf "aof %-3s %s / %s: calls/s %.2f, Redis CPU per intent %.2f\n", f, x, y, a / b, c / d }'
  done
done
