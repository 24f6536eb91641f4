#!/usr/bin/env bash
# The sold-out phase of two builds against each other, in alternated rounds: what a change to the
# request path (the gate, the idempotency checks before it) costs the requests that flashsale
# answers from its local sold-out flag without Redis.
#
#   bench/sold_out_ab.sh OLD_FLASHSALE NEW_FLASHSALE [rounds] [seconds]   (defaults: 4, 4)
#
# Each binary runs `serve --demo` on a data directory of its own, both at once; an activity
# 'gone' with one unit, bought by a first user, so every later purchase is sold_out. Each round
# runs old new new old (even rounds new old old new) of NEW_FLASHSALE's `flashsale load` (64
# connections, random users, keyless purchases, no verification) for the given seconds. Prints
# requests/s of every run, new/old per round (the mean of the two runs over the two) with the
# rounds' median and spread, and the same code run twice in a round as the noise.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

old=${1:?"usage: bench/sold_out_ab.sh OLD_FLASHSALE NEW_FLASHSALE [rounds] [seconds]"}
new=${2:?"usage: bench/sold_out_ab.sh OLD_FLASHSALE NEW_FLASHSALE [rounds] [seconds]"}
rounds=${3:-4}
seconds=${4:-4}
dir=$(mktemp -d /tmp/flashsale-soldout-XXXXXX)
pids=()
trap bench_cleanup EXIT

declare -A bin=([old]=$old [new]=$new) port
for v in old new; do
  port[$v]=$(free_port)
  mkdir -p "$dir/$v"
  "${bin[$v]}" serve --demo --data-dir "$dir/$v" --listen "127.0.0.1:${port[$v]}" >"$dir/$v.log" 2>&1 &
  pids+=("$!")
  wait_for curl -sf "http://127.0.0.1:${port[$v]}/readyz"
  token=$(cat "$dir/$v/admin-token")
  curl -sf -X POST -H "Authorization: Bearer $token" \
    -d '{"id":"gone","title":"Gone","stock":1,"per_user_limit":1}' \
    "http://127.0.0.1:${port[$v]}/api/v1/admin/activities" >/dev/null
  curl -sf -X POST -H 'X-User-Id: first' "http://127.0.0.1:${port[$v]}/api/v1/activities/gone/purchase" >/dev/null
  answer=$(curl -s -X POST -H 'X-User-Id: second' "http://127.0.0.1:${port[$v]}/api/v1/activities/gone/purchase")
  case $answer in
    *'"sold_out"'*) echo "$v: $("${bin[$v]}" --version), answers $answer" ;;
    *) echo "bench: $v does not answer sold_out: $answer" >&2; exit 1 ;;
  esac
done

run() {  # old|new -> requests/s of one run
  "$new" load --url "http://127.0.0.1:${port[$1]}" --activity gone --connections 64 \
    --duration "$seconds" --no-verify 2>&1 | grep -m1 -oE '[0-9.]+ requests/s' | cut -d' ' -f1
}

ratios=() noise=()
for round in $(seq 1 "$rounds"); do
  if [ $((round % 2)) = 1 ]; then order=(old new new old); else order=(new old old new); fi
  declare -A first=() sum=()
  line="round $round:"
  for v in "${order[@]}"; do
    rps=$(run "$v")
    line+=" $v $rps"
    if [ -z "${first[$v]:-}" ]; then first[$v]=$rps; sum[$v]=$rps; else
      sum[$v]=$(awk -v a="${sum[$v]}" -v b="$rps" 'BEGIN { print a + b }')
      noise+=("$(awk -v a="${first[$v]}" -v b="$rps" 'BEGIN { d = b / a - 1; printf "%.4f", d < 0 ? -d : d }')")
    fi
  done
  ratio=$(awk -v n="${sum[new]}" -v o="${sum[old]}" 'BEGIN { printf "%.3f", n / o }')
  ratios+=("$ratio")
  echo "$line  new/old $ratio"
done
spread=$(printf '%s\n' "${ratios[@]}" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s..%s", lo, hi }')
echo "sold out, new/old requests/s: median $(median "${ratios[@]}") (rounds $spread);" \
  "the same build twice in a round differs by $(median "${noise[@]}" | awk '{ printf "%.1f %%", $1 * 100 }') (median)"
