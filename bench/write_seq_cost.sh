#!/usr/bin/env bash
# What the write-sequence check (issue 30; docs/durability.md, "Lost writes caught from the data")
# costs, against the code before it, in rounds that alternate the two on this machine.
#
#   bench/write_seq_cost.sh [rounds] [reservations per run]        (defaults: 6, 200000)
#   bench/write_seq_cost.sh hot OLD_FLASHSALE [rounds] [seconds]   (defaults: 6, 5)
#
# Without `hot`: the reserve script inside Redis. The script as it is in this tree (`new`: two
# more ARGV, two more fields in the meta HMGET, one `HINCRBY meta wseq 1` per call that records an
# order, the field `s` in the stream entry, a two-value reply header) and as it was before
# ($WRITE_SEQ_BEFORE, default afacbc9, main before the sequence was merged: `old`; any commit
# may be named, each script is called with the ARGV its own header declares; $WRITE_SEQ_OLD and
# $WRITE_SEQ_NEW name files instead, e.g. a variant with half a change), both loaded
# side by side on the same redis-server, driven by redis-benchmark (C; 50 connections x 16
# pipelined; `__rand_int__` placeholders make every order id and user fresh, so every call
# reserves), single reservations and batches of 32 a call, with the AOF off and on (`everysec`,
# automatic rewrites off, as bench/stream_format.sh). Every run sets up its own activity with the
# real setup script (sale_setup.lua) under a fresh key namespace and deletes it after the run.
# A fresh redis-server for each round and AOF setting. Within a round each configuration runs
# old new new old (new old old new in even rounds): the pairs cancel a machine that drifts
# linearly within the round, and the second run of each script against its first is the noise of
# one run against another on this machine (`same script`). Measured per run, divided by the
# reservations made (the stock taken, checked against calls x batch):
#   Redis CPU    used_cpu_user + used_cpu_sys from INFO cpu (the whole process: its threads, the
#                event loop's reads and writes, the AOF), before and after redis-benchmark
#   EVALSHA      the microseconds INFO commandstats counts inside the script's calls
#   AOF bytes    aof_current_size before and after (AOF on)
# and reservations/s. new/old per round is the mean of the round's two new runs over its two old
# runs; the medians over the rounds are printed with the spread, and the verdict compares
# |median new/old - 1| with the median |same script - 1|.
#
# With `hot`: the service's hot phase, the release build of this tree against OLD_FLASHSALE (a
# release build of the code before, e.g. a worktree of afacbc9 built with the release preset):
# for each binary the default configuration (`flashsale serve` with its private redis-server, AOF
# everysec, one order consumer to SQLite) and the bare one (a redis-server of ours without AOF,
# no consumer), as bench/hot_path.sh runs them, all started at once; each round, on fresh hot
# activities, `flashsale load` (128 connections, 2 threads, random users among a billion) runs
# default old and new, then bare old and new, each pair in swapped order every other round; the
# default's runs are verified (`--verify`, exit 1 otherwise) and nothing runs while its AOF
# rewrite, if one was started, goes on. Each binary's own `flashsale load` drives it (its load
# and verify code is the same in both). Prints requests/s, flashsale's and Redis's CPU per
# request, new/old per round and the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

dir=$(mktemp -d /tmp/flashsale-wseq-XXXXXX)
pids=()
trap bench_cleanup EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date +%s)

# The same-script ratios' median distance from 1 against the new/old median's: the verdict.
verdict() {  # median-new/old same-script-ratio...
  local r=$1
  shift
  local noise
  noise=$(printf '%s\n' "$@" | awk '{ d = $1 - 1; print (d < 0 ? -d : d) }' | sort -g |
    awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }')
  awk -v r="$r" -v n="$noise" 'BEGIN { d = r - 1; a = (d < 0 ? -d : d)
    printf "%s (|new/old - 1| %.1f %%, same code twice %.1f %%)", (a <= n ? "within the noise" : "outside the noise"), a * 100, n * 100 }'
}
spread() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.3f..%.3f", lo, hi }'; }

# fig["<configuration> <old|new> <round> <1|2>"] holds one run's figures, space-separated.
declare -A fig
col() {  # configuration variant column -> median over the rounds of the mean of the two runs
  local vals=() round
  for round in $(seq 1 "$rounds"); do
    vals+=("$(awk -v c="$3" -v x="${fig["$1 $2 $round 1"]}" -v y="${fig["$1 $2 $round 2"]}" \
      'BEGIN { split(x, a, " "); split(y, b, " "); printf "%.3f", (a[c] + b[c]) / 2 }')")
  done
  median "${vals[@]}"
}
per_round_ratio() {  # configuration column -> new/old per round (the means of the two runs)
  local round
  for round in $(seq 1 "$rounds"); do
    awk -v c="$2" -v n1="${fig["$1 new $round 1"]}" -v n2="${fig["$1 new $round 2"]}" \
      -v o1="${fig["$1 old $round 1"]}" -v o2="${fig["$1 old $round 2"]}" \
      'BEGIN { split(n1, a, " "); split(n2, b, " "); split(o1, x, " "); split(o2, y, " ")
               printf "%.3f\n", (x[c] + y[c] > 0 ? (a[c] + b[c]) / (x[c] + y[c]) : 0) }'
  done
}
same_script() {  # configuration column -> each code's second run over its first, every round
  local round v
  for round in $(seq 1 "$rounds"); do
    for v in old new; do
      awk -v c="$2" -v p="${fig["$1 $v $round 1"]}" -v q="${fig["$1 $v $round 2"]}" \
        'BEGIN { split(p, a, " "); split(q, b, " "); printf "%.3f\n", (a[c] > 0 ? b[c] / a[c] : 0) }'
    done
  done
}
ratio_line() {  # label configuration column
  local rr ss m
  mapfile -t rr < <(per_round_ratio "$2" "$3")
  mapfile -t ss < <(same_script "$2" "$3")
  m=$(median "${rr[@]}")
  printf '%-40s %.3f (rounds %s): %s\n' "$1" "$m" "$(spread "${rr[@]}")" "$(verdict "$m" "${ss[@]}")"
}
# The order of a round's four runs of a configuration: ABBA, BAAB in even rounds.
abba() { if (($1 % 2)); then echo old new new old; else echo new old old new; fi; }

if [ "${1:-}" = hot ]; then
  old_bin=${2:?"usage: bench/write_seq_cost.sh hot OLD_FLASHSALE [rounds] [seconds]"}
  rounds=${3:-6}
  seconds=${4:-5}
  [ -x "$old_bin" ] || { echo "$old_bin: not an executable" >&2; exit 2; }
  bench_build_release flashsale
  new_bin=build/release/src/flashsale
  threads=2
  tick_us=$((1000000 / $(getconf CLK_TCK)))
  token=bench-admin-token
  declare -A bin port server redis
  bin[old]=$old_bin
  bin[new]=$new_bin
  serve() {  # variant name flags...: appends its pid
    local v=$1 name=$2
    shift 2
    port[$v-$name]=$(free_port)
    "${bin[$v]}" serve --listen "127.0.0.1:${port[$v-$name]}" --data-dir "$dir/$v-$name" \
      --identity gateway --threads "$threads" --log-level warn --admin-token "$token" \
      --reconcile-every-ms 0 --prewarm-every-ms 0 --expire-every-ms 0 "$@" \
      >"$dir/$v-$name.log" 2>&1 &
    pids+=($!)
    server[$v-$name]=$!
    wait_for curl -sf "http://127.0.0.1:${port[$v-$name]}/healthz"
  }
  create_hot() {  # key activity
    curl -sf -H "Authorization: Bearer $token" \
      -d "{\"id\":\"$2\",\"stock\":1000000000000,\"per_user_limit\":1000000000,\"start_ms\":0,\"end_ms\":4000000000000}" \
      "http://127.0.0.1:${port[$1]}/api/v1/admin/activities" >/dev/null
  }
  for v in old new; do
    # bare: our redis-server, no AOF, no consumer; a worker runs the lost-write repair once.
    bench_start_redis "$dir/$v-bare-redis.sock"
    redis[$v-bare]=${pids[-1]}
    serve "$v" bare --redis-url "unix://$dir/$v-bare-redis.sock" --consumers 0
    create_hot "$v-bare" probe
    "${bin[$v]}" worker --redis-url "unix://$dir/$v-bare-redis.sock" --data-dir "$dir/$v-bare" \
      --log-level warn >"$dir/$v-bare-worker.log" 2>&1 &
    worker_pid=$!
    pids+=("$worker_pid")
    wait_for sh -c "curl -s -X POST -H 'X-User-Id: probe' \
      http://127.0.0.1:${port[$v-bare]}/api/v1/activities/probe/purchase | grep -q '\"reserved\"'"
    kill "$worker_pid"
    wait "$worker_pid" || true
    # default: no Redis URL (its private redis-server, AOF everysec), one order consumer.
    serve "$v" default
    redis[$v-default]=$(redis-cli -s "$dir/$v-default/redis.sock" info server |
      awk -F: '/^process_id/ { print $2 + 0 }')
    [ "$(redis-cli -s "$dir/$v-default/redis.sock" config get appendfsync | tail -n 1)" = everysec ]
  done
  settle() {  # key: until the default's AOF rewrite, if one started, has ended
    local info
    sleep 3
    for _ in $(seq 1 1200); do
      info=$(redis-cli -s "$dir/$1/redis.sock" info persistence 2>/dev/null) || return 0
      grep -Eq '^aof_rewrite_(in_progress|scheduled):1' <<<"$info" || return 0
      sleep 0.1
    done
  }
  failed=0
  hot_run() {  # variant config i
    local key=$1-$2 act="hot-$round-$1-$3" log s0 r0 s1 r1 extra=()
    create_hot "$key" "$act"
    log=$dir/$key-$round-$3.log
    if [ "$2" = default ]; then extra=(--data-dir "$dir/$key" --drain-timeout-ms 120000); fi
    s0=$(bench_cpu_ticks "${server[$key]}")
    r0=$(bench_cpu_ticks "${redis[$key]}" children)
    "${bin[$1]}" load --url "http://127.0.0.1:${port[$key]}" --activity "$act" --connections 128 \
      --threads "$threads" --duration "$seconds" --user-ids random --users 1000000000 \
      "${extra[@]}" >"$log" 2>/dev/null &
    local load_pid=$!
    for _ in $(seq 1 $((seconds * 100 + 6000))); do  # the report, at most a minute late
      grep -q '^  errors' "$log" 2>/dev/null && break
      kill -0 "$load_pid" 2>/dev/null || break
      sleep 0.01
    done
    s1=$(bench_cpu_ticks "${server[$key]}")
    r1=$(bench_cpu_ticks "${redis[$key]}" children)
    wait "$load_pid" || true
    local r p99 errors answered us_s us_r
    read -r r p99 errors answered < <(bench_load_summary "$log")
    answered=${answered:-0}
    us_s=$(awk -v t=$((s1 - s0)) -v n="$answered" -v u="$tick_us" 'BEGIN { printf "%.1f", (n > 0 ? t * u / n : 0) }')
    us_r=$(awk -v t=$((r1 - r0)) -v n="$answered" -v u="$tick_us" 'BEGIN { printf "%.1f", (n > 0 ? t * u / n : 0) }')
    fig["$2 $1 $round $3"]="${r:-0} $us_s $us_r ${p99:-0}"
    echo "round $round: $2 $1 ($3): ${r:-0} requests/s, p99 ${p99:-0} ms, ${errors:-0} errors," \
      "CPU/request $us_s us flashsale, $us_r us Redis" >&2
    if ! grep -Eq '^  outcomes +1 reserved: [0-9]+;$' "$log"; then
      failed=1
      echo "$key round $round: not every request reserved: $(grep '^  outcomes' "$log")" >&2
    fi
    if [ "$2" = default ]; then
      if ! grep -q '^verified:' "$log"; then
        failed=1
        echo "$key round $round NOT verified:" >&2
        sed -n '/^verify/,$p' "$log" >&2
      fi
      settle "$key"
    fi
  }
  for round in $(seq 1 "$rounds"); do
    for config in default bare; do
      declare -A seen=()
      for v in $(abba "$round"); do
        seen[$v]=$((${seen[$v]:-0} + 1))
        hot_run "$v" "$config" "${seen[$v]}"
      done
    done
  done

  echo
  bench_machine_line
  echo "versions: new $(git rev-parse --short HEAD) ($new_bin), old $old_bin" \
    "($("$old_bin" --version 2>/dev/null | head -n 1 || echo '?')), redis $(redis-server --version | awk '{print $3}' | cut -d= -f2)"
  echo "runs: $rounds rounds, each configuration old new new old (even rounds new old old new), ${seconds}s" \
    "each, flashsale load 128 connections, $threads threads"
  echo "      load average before $load_before, after $(cut -d' ' -f1-3 /proc/loadavg); took $(($(date +%s) - started)) s"
  echo
  printf '%-8s %-4s %11s %13s %13s %8s\n' config code requests/s "us flashsale" "us Redis" "p99 ms"
  for config in default bare; do
    for v in old new; do
      printf '%-8s %-4s %11.0f %13.1f %13.1f %8.2f\n' "$config" "$v" "$(col "$config" "$v" 1)" \
        "$(col "$config" "$v" 2)" "$(col "$config" "$v" 3)" "$(col "$config" "$v" 4)"
    done
  done
  echo
  echo "new/old, the median of the rounds' ratios (each the mean of two runs over two), the rounds'"
  echo "spread, and the verdict against the same code run twice in a round (CPU: per request):"
  for config in default bare; do
    ratio_line "$config requests/s" "$config" 1
    ratio_line "$config flashsale CPU" "$config" 2
    ratio_line "$config Redis CPU" "$config" 3
  done
  exit "$failed"
fi

# The reserve script inside Redis.
rounds=${1:-6}
reservations=${2:-200000}
before=${WRITE_SEQ_BEFORE:-afacbc9}
if [ -n "${WRITE_SEQ_OLD:-}" ]; then  # a file instead of a commit's script (e.g. a variant)
  old_script=$(cat "$WRITE_SEQ_OLD")
  before=$WRITE_SEQ_OLD
else
  old_script=$(git show "$before:src/keyspace/lua/sale_reserve.lua")
fi
new_script=$(cat "${WRITE_SEQ_NEW:-src/keyspace/lua/sale_reserve.lua}")
setup_script=$(cat src/keyspace/lua/sale_setup.lua)
stock=1000000000000
now_ms=1800000000000
batches=(1 32)

start_redis() {  # aof(yes|no) -> sets sock and rpid
  local d
  d=$(mktemp -d "$dir/redis-XXXX")
  sock=$d/redis.sock
  redis-server --port 0 --unixsocket "$sock" --unixsocketperm 700 --dir "$d" --save "" \
    --appendonly "$1" --appendfsync everysec --auto-aof-rewrite-percentage 0 \
    --daemonize no --logfile "$d/redis.log" &
  rpid=$!
  pids+=("$rpid")
  wait_for redis-cli -s "$sock" ping
}
stop_redis() {
  kill "$rpid"
  wait "$rpid" 2>/dev/null || true
  rm -rf "$(dirname "$sock")"
}
info_field() {  # section field
  redis-cli -s "$sock" info "$1" | tr -d '\r' | awk -F: -v f="$2" '$1 == f { print $2 }'
}
cpu_seconds() {
  redis-cli -s "$sock" info cpu | tr -d '\r' |
    awk -F: '$1 == "used_cpu_user" || $1 == "used_cpu_sys" { s += $2 } END { printf "%.6f\n", s }'
}

# One run: a fresh activity under its own namespace, redis-benchmark calling the script, the
# activity's keys deleted after. Prints "reservations/s us-cpu us-evalsha aof-bytes" per
# reservation; exits 1 if a call did not reserve all its batch.
one_run() {  # variant(old|new) sha batch tag
  local v=$1 sha=$2 batch=$3 tag=$4
  local p="wseq$tag:seckill:{hot}:"
  local keys=("${p}meta" "${p}stock" "${p}items" "${p}buyers" "${p}orders" "${p}stream")
  local setup
  setup=$(redis-cli -s "$sock" EVAL "$setup_script" 3 "${keys[@]:0:3}" 0 4000000000000 \
    1000000000 open counted "$stock" 1 | head -n 1)
  [ "$setup" = 1 ] || { echo "setup of $p answered $setup" >&2; exit 1; }
  local args=(EVALSHA "$sha" 6 "${keys[@]}") source extra
  if [ "$v" = new ]; then source=$new_script; else source=$old_script; fi
  # Each script's own ARGV layout (new: the floor first, a fresh activity's sequence).
  mapfile -t extra < <(bench_reserve_argv "$source" "$batch" "$now_ms")
  args+=("${extra[@]}")
  local calls=$((reservations / batch))  # redis-benchmark may make a few more: counted below
  redis-cli -s "$sock" config resetstat >/dev/null
  local c0 c1 a0 a1 rps
  a0=$(info_field persistence aof_current_size)
  c0=$(cpu_seconds)
  rps=$(redis-benchmark -s "$sock" -c 50 -P 16 -n "$calls" -r 1000000000 --csv "${args[@]}" |
    awk -F'"' 'NR == 2 { print $4 }')
  c1=$(cpu_seconds)
  a1=$(info_field persistence aof_current_size)
  local left made evalsha_usec wseq xlen
  left=$(redis-cli -s "$sock" get "${p}stock")
  made=$((stock - left))
  evalsha_usec=$(info_field commandstats cmdstat_evalsha | sed 's/.*,usec=\([0-9]*\),.*/\1/')
  xlen=$(redis-cli -s "$sock" xlen "${p}stream")
  wseq=$(redis-cli -s "$sock" hget "${p}meta" wseq)
  # Every call reserved its whole batch: one stream entry a call, batch units each.
  if [ "$made" -ne $((xlen * batch)) ] || [ "$xlen" -lt "$calls" ]; then
    echo "$tag: $made reservations in $xlen stream entries, for $calls calls of $batch" >&2
    exit 1
  fi
  if [ "$v" = new ] && [ "$wseq" != "$xlen" ]; then
    echo "$tag: the write sequence is at '$wseq' after $xlen calls" >&2
    exit 1
  fi
  redis-cli -s "$sock" del "${keys[@]}" >/dev/null
  awk -v r="${rps:-0}" -v b="$batch" -v c0="$c0" -v c1="$c1" \
    -v e="$evalsha_usec" -v a0="${a0:-0}" -v a1="${a1:-0}" -v n="$made" \
    'BEGIN { printf "%.0f %.3f %.3f %.0f\n", r * b, (c1 - c0) * 1e6 / n, e / n, (a1 - a0) / n }'
}

for round in $(seq 1 "$rounds"); do
  for aof in no yes; do
    start_redis "$aof"
    declare -A sha=()
    sha[old]=$(redis-cli -s "$sock" SCRIPT LOAD "$old_script")
    sha[new]=$(redis-cli -s "$sock" SCRIPT LOAD "$new_script")
    for batch in "${batches[@]}"; do
      declare -A seen=()
      for v in $(abba "$round"); do
        i=$((${seen[$v]:-0} + 1))
        seen[$v]=$i
        fig["$aof $batch $v $round $i"]=$(one_run "$v" "${sha[$v]}" "$batch" "$round-$aof-$batch-$v-$i")
        read -r r c e a <<<"${fig["$aof $batch $v $round $i"]}"
        echo "round $round: aof $aof, batch $batch, $v ($i): $r reservations/s," \
          "$c us Redis CPU, $e us in EVALSHA, $a AOF bytes per reservation" >&2
      done
    done
    stop_redis
  done
done

echo
bench_machine_line
echo "versions: new $(git rev-parse --short HEAD):src/keyspace/lua/sale_reserve.lua," \
  "old $before's; redis $(redis-server --version | awk '{print $3}' | cut -d= -f2)"
echo "runs: $rounds rounds, each configuration old new new old (even rounds new old old new) on" \
  "one redis-server a round; redis-benchmark 50x16, $reservations reservations a run"
echo "      load average before $load_before, after $(cut -d' ' -f1-3 /proc/loadavg); took $(($(date +%s) - started)) s"
echo
echo "per reservation, medians of the rounds (EVALSHA: wall time inside the script's calls)"
printf '%-4s %-5s %-4s %14s %10s %12s %8s\n' aof batch code "reservations/s" "us CPU" "us EVALSHA" "AOF B"
for aof in no yes; do
  for batch in "${batches[@]}"; do
    for v in old new; do
      printf '%-4s %-5s %-4s %14.0f %10.2f %12.2f %8.0f\n' "$aof" "$batch" "$v" \
        "$(col "$aof $batch" "$v" 1)" "$(col "$aof $batch" "$v" 2)" \
        "$(col "$aof $batch" "$v" 3)" "$(col "$aof $batch" "$v" 4)"
    done
  done
done
echo
echo "new/old, the median of the rounds' ratios (each the mean of two runs over two), the rounds'"
echo "spread, and the verdict against the same script run twice in a round:"
for aof in no yes; do
  for batch in "${batches[@]}"; do
    ratio_line "aof $aof, batch $batch, Redis CPU" "$aof $batch" 2
    ratio_line "aof $aof, batch $batch, EVALSHA time" "$aof $batch" 3
    ratio_line "aof $aof, batch $batch, reservations/s" "$aof $batch" 1
  done
done
