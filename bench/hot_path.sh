#!/usr/bin/env bash
# The hot path against its aims (issue 14), in one run on this machine, loopback only:
#   default   `flashsale serve` as it runs with no Redis URL: its private redis-server on a unix
#             socket with AOF fsynced every second, one order consumer persisting to SQLite
#   bare      `flashsale serve` on a redis-server of ours (unix socket, no AOF), no order consumer
#   consumer  bare plus one order consumer to SQLite (its own redis-server): between default and
#             bare, it splits what the default costs into the AOF's share and the consumer's
#   nginx     answering flashsale's own replies as constants, from memory (the HTTP limit)
#   Redis     redis-benchmark running the reserve script on the bare redis-server (the Redis
#             limit), and the batch script when redis_client_bench can print its call
# Phases: hot (every request reserves: huge stock and limit, random users among a billion) at 128
# and 1,024 connections, and sold out (the activity's one unit is gone). Every load is
# `flashsale load`, closed loop, 2 threads. CPU per request is user + system time from
# /proc/<pid>/stat over the load's run (the process's threads; redis-server's reaped children
# too), divided by the requests answered; the order pipeline may leave a backlog that drains after
# the load (its threads run at a lower priority: docs/durability.md), so the drain's time (from the
# load's report to its verification, which waits for the stream to be empty and then checks every
# order in the record) and the CPU per request counted until then are shown too. Every hot run on
# the default is verified
# (`flashsale load --verify`, each on a fresh activity); the script exits 1 if one does not.
# Rounds alternate the systems, each hot run on a fresh activity; the pairs whose ratio is an aim
# (default and bare, default sold out and nginx) swap their order every round, and no other
# system runs while the default's redis-server rewrites its AOF after a burst. Each figure is the
# median of the rounds, each ratio the median of the rounds' ratios (the two systems measured
# seconds apart); the medians are shown beside it. Use an even number of rounds. The two pairs
# whose ratio is an aim run `pairs` times a round (in alternating order), so their ratios are
# medians of rounds x pairs: this machine's speed changes by a third within seconds at times, and
# one slow run in four moves a median of four.
#
# Issue 34's measurements in the same run, judged from Debian's wrk as the load client (`flashsale
# load` spends CPU the servers need on a 2-core machine; its runs above stay, for the verified
# sales): a wrk Lua script sends the same request as `flashsale load` (POST .../purchase, a random
# user among a billion in X-User-Id, no body), so every request reserves. Each round, on fresh
# activities, in an order that reverses every other round: the default, nginx and a Node.js peer of
# the same contract (bench/node_peer: node:http cluster of 2 workers, ioredis auto-pipelining, one
# 3-key Lua script, on a redis-server of its own with no persistence) at 128 connections, the
# default and nginx at 1,024; after a wrk run on the default, the order pipeline's backlog drains
# (polled from Redis, then confirmed once by the admin API) before anything else runs. Each wrk
# run checks from Redis that every answered request reserved (the peer: all but one in a
# thousand, its buyers set refusing a user drawn twice). Then redis-benchmark `-t set -P 16` on
# the bare redis-server, the Redis limit of issue 34 (CPU per SET from /proc, as for the
# reservations), and once after the rounds the Redis memory per order: `used_memory` of the
# default's redis-server before and after 100,000 orders on a fresh activity, once the pipeline
# has drained.
#
#   bench/hot_path.sh [rounds] [seconds per run] [pairs]   (defaults: 4, 5, 2; about 3 minutes
#                                                           a round)
#   WRK_THREADS=N (default 1, as issue 34 measured): wrk's threads
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
rounds=${1:-4}
seconds=${2:-5}
pairs=${3:-2}
threads=2            # flashsale's I/O threads, nginx's workers, the load tool's threads
rb_requests=200000   # redis-benchmark requests per run
batch_size=16        # reservations per batch call, when the batch script exists
tick_us=$((1000000 / $(getconf CLK_TCK)))
wrk_threads=${WRK_THREADS:-1}
set_requests=1000000  # redis-benchmark -t set requests per run
memory_orders=100000  # orders for the Redis memory per order
huge=1000000000000    # the hot activities' stock

for tool in wrk node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "hot_path.sh: $tool is missing (scripts/install-deps.sh installs it)" >&2
    exit 1
  fi
done
# The Node peer's packages, pinned by its package-lock.json (node_modules is not committed).
if ! node -e '
  const pinned = require("./bench/node_peer/package-lock.json").packages["node_modules/ioredis"].version;
  const have = require("./bench/node_peer/node_modules/ioredis/package.json").version;
  process.exit(pinned === have ? 0 : 1);' 2>/dev/null; then
  npm ci --prefix bench/node_peer --no-audit --no-fund --loglevel=error >&2
fi

bench_build_release flashsale redis_client_bench
bin=build/release/src/flashsale
bench_bin=build/release/bench/redis_client_bench

dir=$(mktemp -d /tmp/flashsale-hot-XXXXXX)
pids=()
trap bench_cleanup EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date +%s)

token=bench-admin-token
serve() {  # name port flags...: appends its pid
  local name=$1 port=$2
  shift 2
  "$bin" serve --listen "127.0.0.1:$port" --data-dir "$dir/$name" --identity gateway \
    --threads "$threads" --log-level warn --admin-token "$token" \
    --reconcile-every-ms 0 --prewarm-every-ms 0 --expire-every-ms 0 "$@" >"$dir/$name.log" 2>&1 &
  pids+=($!)
  wait_for curl -sf "http://127.0.0.1:$port/healthz"
}
create() {  # port json
  curl -sf -H "Authorization: Bearer $token" -d "$2" \
    "http://127.0.0.1:$1/api/v1/admin/activities" >/dev/null
}
create_hot() {  # port id
  create "$1" "{\"id\":\"$2\",\"stock\":1000000000000,\"per_user_limit\":1000000000,\"start_ms\":0,\"end_ms\":4000000000000}"
}

# The bare configuration: our redis-server, no AOF, no order consumer.
bare_socket=$dir/bare-redis.sock
bench_start_redis "$bare_socket"
bare_redis_pid=${pids[-1]}
bare_port=$(free_port)
serve bare "$bare_port" --redis-url "unix://$bare_socket" --consumers 0
bare_pid=${pids[-1]}
create_hot "$bare_port" hot
# Purchases wait for the lost-write repair, which order consumers run: a `flashsale worker` runs
# it, and is stopped once a purchase reserves.
"$bin" worker --redis-url "unix://$bare_socket" --data-dir "$dir/bare" --log-level warn \
  >"$dir/bare-worker.log" 2>&1 &
worker_pid=$!
pids+=("$worker_pid")
wait_for sh -c "curl -s -X POST -H 'X-User-Id: probe' \
  http://127.0.0.1:$bare_port/api/v1/activities/hot/purchase | grep -q '\"reserved\"'"
kill "$worker_pid"
wait "$worker_pid" || true

# bare plus one order consumer (the default's, to SQLite in its data directory), no AOF.
consumer_socket=$dir/consumer-redis.sock
bench_start_redis "$consumer_socket"
consumer_redis_pid=${pids[-1]}
consumer_port=$(free_port)
serve consumer "$consumer_port" --redis-url "unix://$consumer_socket"
consumer_pid=${pids[-1]}

# The default: no Redis URL (its private redis-server, AOF everysec), one order consumer, SQLite.
default_port=$(free_port)
serve default "$default_port"
default_pid=${pids[-1]}
default_redis_pid=$(redis-cli -s "$dir/default/redis.sock" info server |
  awk -F: '/^process_id/ { print $2 + 0 }')
[ "$(redis-cli -s "$dir/default/redis.sock" config get appendfsync | tail -n 1)" = everysec ]
create "$default_port" '{"id":"gone","stock":1,"start_ms":0,"end_ms":4000000000000}'
curl -sf -X POST -H 'X-User-Id: first' \
  "http://127.0.0.1:$default_port/api/v1/activities/gone/purchase" >/dev/null
create_hot "$default_port" probe
sold_out_reply=$(curl -s -X POST -H 'X-User-Id: someone' \
  "http://127.0.0.1:$default_port/api/v1/activities/gone/purchase")
hot_reply=$(curl -s -X POST -H 'X-User-Id: probe' \
  "http://127.0.0.1:$default_port/api/v1/activities/probe/purchase")

nginx_port=$(free_port)
bench_start_nginx "$nginx_port" "$threads" "$hot_reply" "$sold_out_reply"
nginx_workers=$(ps -o pid= --ppid "${pids[-1]}" | tr -s ' \n' ' ')

# The Node.js peer (bench/node_peer) on a redis-server of its own, no persistence; its activities
# exist once their stock key is set.
peer_socket=$dir/peer-redis.sock
bench_start_redis "$peer_socket"
peer_redis_pid=${pids[-1]}
peer_port=$(free_port)
node bench/node_peer/server.mjs --port "$peer_port" --redis-socket "$peer_socket" \
  --workers "$threads" >"$dir/peer.log" 2>&1 &
peer_pid=$!
pids+=("$peer_pid")
peer_create() { redis-cli -s "$peer_socket" set "peer:{$1}:stock" "$huge" >/dev/null; }
peer_create probe
wait_for sh -c "curl -s -X POST -H 'X-User-Id: probe' \
  http://127.0.0.1:$peer_port/api/v1/activities/probe/purchase | grep -q '\"reserved\"'"
peer_procs="$peer_pid $(ps -o pid= --ppid "$peer_pid" | tr -s ' \n' ' ')"

# wrk's request: bench_wrk_purchase_script's (bench/lib.sh), every request reserving.
bench_wrk_purchase_script "$dir/purchase.lua"

# The Redis limit's calls, set up on the bare redis-server (its own namespace there).
# (one argument a line, some empty: mapfile keeps them)
mapfile -t reserve_call < <(FLASHSALE_BENCH_REDIS_URL="unix://$bare_socket" "$bench_bin" --setup)
batch_call=()
if batch_line=$(FLASHSALE_BENCH_REDIS_URL="unix://$bare_socket" "$bench_bin" --setup-batch \
  "$batch_size" 2>/dev/null) && [ -n "$batch_line" ]; then
  mapfile -t batch_call <<<"$batch_line"
fi

ticks() {  # pid... -> the sum of their CPU ticks (redis-servers with their reaped children)
  local sum=0 pid
  for pid in "$@"; do
    if [[ " $bare_redis_pid $consumer_redis_pid $default_redis_pid $peer_redis_pid " == *" $pid "* ]]; then
      sum=$((sum + $(bench_cpu_ticks "$pid" children)))
    else
      sum=$((sum + $(bench_cpu_ticks "$pid")))
    fi
  done
  echo "$sum"
}

declare -A runs  # key -> "rps p99 errors us_server us_redis" per round, newline-separated
verify_failed=0
run_count=0  # numbers the runs' logs
# One load run: `flashsale load` on port/activity with the connections; CPU of the server's
# processes (and of its Redis) from its start until its report is printed (before verifying).
run() {  # key port activity connections "server pids" "redis pids" [load flags]
  local key=$1 port=$2 activity=$3 conns=$4 server=$5 redis=$6
  shift 6
  run_count=$((run_count + 1))
  local log=$dir/$key-$round-$run_count.log
  local s0 r0 s1 r1 s2 r2 t1 t2
  # shellcheck disable=SC2086  # the pid lists split on purpose
  s0=$(ticks $server)
  r0=$(ticks "$redis")
  "$bin" load --url "http://127.0.0.1:$port" --activity "$activity" --connections "$conns" \
    --threads "$threads" --duration "$seconds" --user-ids random --users 1000000000 "$@" \
    >"$log" 2>/dev/null &
  local load_pid=$!
  for _ in $(seq 1 $((seconds * 100 + 6000))); do  # the report, at most a minute late
    grep -q '^  errors' "$log" 2>/dev/null && break
    kill -0 "$load_pid" 2>/dev/null || break
    sleep 0.01
  done
  t1=$EPOCHREALTIME
  # shellcheck disable=SC2086
  s1=$(ticks $server)
  r1=$(ticks "$redis")
  wait "$load_pid" || true
  t2=$EPOCHREALTIME
  # shellcheck disable=SC2086
  s2=$(ticks $server)
  r2=$(ticks "$redis")
  local rps p99 errors answered
  read -r rps p99 errors answered < <(bench_load_summary "$log")
  answered=${answered:-0}
  local us_server us_redis
  us_server=$(awk -v t=$((s1 - s0)) -v n="$answered" -v u="$tick_us" 'BEGIN { printf "%.1f", (n > 0 ? t * u / n : 0) }')
  us_redis=$(awk -v t=$((r1 - r0)) -v n="$answered" -v u="$tick_us" 'BEGIN { printf "%.1f", (n > 0 ? t * u / n : 0) }')
  [ -n "$redis" ] || us_redis=-
  # With a verification: the drain's seconds and the CPU per request until it ended.
  local drain=- us_server_all=- us_redis_all=-
  if [[ " $* " == *" --drain-timeout-ms "* ]]; then
    drain=$(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.1f", b - a }')
    us_server_all=$(awk -v t=$((s2 - s0)) -v n="$answered" -v u="$tick_us" 'BEGIN { printf "%.1f", (n > 0 ? t * u / n : 0) }')
    us_redis_all=$(awk -v t=$((r2 - r0)) -v n="$answered" -v u="$tick_us" 'BEGIN { printf "%.1f", (n > 0 ? t * u / n : 0) }')
  fi
  runs[$key]+="${rps:-0} ${p99:-0} ${errors:-0} $us_server $us_redis $drain $us_server_all $us_redis_all"$'\n'
  echo "round $round: $key ${rps:-0} requests/s, p99 ${p99:-0} ms, ${errors:-0} errors," \
    "CPU/request $us_server us server, $us_redis us Redis; drained and verified in $drain s," \
    "CPU/request until then $us_server_all us server, $us_redis_all us Redis" >&2
  if [ "$port" != "$nginx_port" ] && [[ "$activity" == hot* ]] &&
    ! grep -Eq '^  outcomes +1 reserved: [0-9]+;$' "$log"; then
    verify_failed=1
    echo "$key round $round: not every request reserved: $(grep '^  outcomes' "$log")" >&2
  fi
  if [[ " $* " == *" --drain-timeout-ms "* ]] && ! grep -q '^verified:' "$log"; then
    verify_failed=1
    echo "$key round $round NOT verified:" >&2
    sed -n '/^verify/,$p' "$log" >&2
  fi
}
# redis-benchmark on the bare redis-server; Redis CPU per call (the batch: per reservation).
rb_run() {  # key per-call call...
  local key=$1 per_call=$2
  shift 2
  local r0 r1 rps p99 errors
  r0=$(ticks "$bare_redis_pid")
  read -r rps p99 errors < <(bench_redis_benchmark "$bare_socket" "$rb_requests" 50 16 "$@")
  r1=$(ticks "$bare_redis_pid")
  rps=$(awk -v r="${rps:-0}" -v k="$per_call" 'BEGIN { printf "%.0f", r * k }')
  local us
  us=$(awk -v t=$((r1 - r0)) -v n=$((rb_requests * per_call)) -v u="$tick_us" 'BEGIN { printf "%.1f", t * u / n }')
  runs[$key]+="$rps ${p99:-0} 0 - $us - - -"$'\n'
  echo "round $round: $key $rps reservations/s, $us us Redis CPU each" >&2
}

# The admin API's view of an activity; one integer field of one of its flat objects.
admin_status() { curl -sf -H "Authorization: Bearer $token" "http://127.0.0.1:$1/api/v1/admin/activities/$2"; }
json_field() {  # json object field
  grep -o "\"$2\":{[^{}]*}" <<<"$1" | grep -o "\"$3\":-\?[0-9]*" | head -n 1 | cut -d: -f2
}
# Units reserved on an activity so far: flashsale's from its admin API, the peer's from its stock.
reserved_units() {  # port activity
  if [ "$1" = "$peer_port" ]; then
    echo $((huge - $(redis-cli -s "$peer_socket" get "peer:{$2}:stock")))
  else
    json_field "$(admin_status "$1" "$2")" redis reserved
  fi
}
# Until the default's order pipeline has persisted every unit reserved on the activity, at most
# two minutes; 1 if it did not. Polled from Redis (the order stream's group has delivered the
# stream's last entry and has nothing pending), which costs the service nothing; then the admin
# API, whose count of the persisted units is a database query on the consumer's thread, is asked
# until they match the units reserved.
wait_drained() {  # port activity
  local status
  for _ in $(seq 1 1200); do
    bench_stream_drained "$dir/default/redis.sock" "$2" && break
    sleep 0.1
  done
  for _ in $(seq 1 240); do
    status=$(admin_status "$1" "$2") || true
    if [ -n "$(json_field "$status" persisted units)" ] &&
      [ "$(json_field "$status" persisted units)" = "$(json_field "$status" redis reserved)" ]; then
      return 0
    fi
    sleep 0.5
  done
  return 1
}
# One wrk run, the same columns as run's: CPU of the server's processes and of its Redis over
# wrk's run (and, on the default, until its order pipeline drained); then the check that every
# answered request reserved (the units reserved on the fresh activity: at least the requests
# answered, at most those plus the ones in flight when wrk stopped).
wrk_run() {  # key port activity connections "server pids" "redis pids"
  local key=$1 port=$2 activity=$3 conns=$4 server=$5 redis=$6
  run_count=$((run_count + 1))
  local log=$dir/$key-$round-$run_count.log
  local s0 r0 s1 r1 s2 r2 t1 t2
  # shellcheck disable=SC2086  # the pid lists split on purpose
  s0=$(ticks $server)
  # shellcheck disable=SC2086
  r0=$(ticks $redis)
  wrk -t "$wrk_threads" -c "$conns" -d "${seconds}s" --timeout 10s -s "$dir/purchase.lua" \
    "http://127.0.0.1:$port/api/v1/activities/$activity/purchase" >"$log" 2>&1 || true
  t1=$EPOCHREALTIME
  # shellcheck disable=SC2086
  s1=$(ticks $server)
  # shellcheck disable=SC2086
  r1=$(ticks $redis)
  local requests rps p99 errors
  read -r requests rps p99 errors < <(awk '/^RESULT/ { print $2, $3, $4, $5 }' "$log")
  requests=${requests:-0}
  local drain=- us_server_all=- us_redis_all=-
  if [ "$port" = "$default_port" ]; then
    if ! wait_drained "$port" "$activity"; then
      verify_failed=1
      echo "$key round $round: the order pipeline did not drain within two minutes" >&2
    fi
    t2=$EPOCHREALTIME
    # shellcheck disable=SC2086
    s2=$(ticks $server)
    # shellcheck disable=SC2086
    r2=$(ticks $redis)
    drain=$(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.1f", b - a }')
    us_server_all=$(awk -v t=$((s2 - s0)) -v n="$requests" -v u="$tick_us" 'BEGIN { printf "%.1f", (n > 0 ? t * u / n : 0) }')
    us_redis_all=$(awk -v t=$((r2 - r0)) -v n="$requests" -v u="$tick_us" 'BEGIN { printf "%.1f", (n > 0 ? t * u / n : 0) }')
  fi
  local us_server us_redis
  us_server=$(awk -v t=$((s1 - s0)) -v n="$requests" -v u="$tick_us" 'BEGIN { printf "%.1f", (n > 0 ? t * u / n : 0) }')
  us_redis=$(awk -v t=$((r1 - r0)) -v n="$requests" -v u="$tick_us" 'BEGIN { printf "%.1f", (n > 0 ? t * u / n : 0) }')
  [ -n "$redis" ] || us_redis=-
  runs[$key]+="${rps:-0} ${p99:-0} ${errors:-0} $us_server $us_redis $drain $us_server_all $us_redis_all"$'\n'
  local reserved=-
  if [ "$port" != "$nginx_port" ]; then
    reserved=$(reserved_units "$port" "$activity")
    local least=$requests
    [ "$port" != "$peer_port" ] || least=$((requests - requests / 1000))
    if [ "$requests" -eq 0 ] || [ "${reserved:-0}" -lt "$least" ] ||
      [ "${reserved:-0}" -gt $((requests + conns)) ]; then
      verify_failed=1
      echo "$key round $round: $requests requests answered but ${reserved:-?} units reserved" >&2
    fi
  fi
  echo "round $round: $key (wrk) ${rps:-0} requests/s, p99 ${p99:-0} ms, ${errors:-0} errors," \
    "$reserved units reserved; CPU/request $us_server us server, $us_redis us Redis; drained in" \
    "$drain s, CPU/request until then $us_server_all us server, $us_redis_all us Redis" >&2
  [ "$port" != "$default_port" ] || settle_default
}
# redis-benchmark -t set -P 16 on the bare redis-server: issue 34's Redis limit, CPU per SET.
set_run() {
  local r0 r1 rps us
  r0=$(ticks "$bare_redis_pid")
  rps=$(redis-benchmark -s "$bare_socket" -t set -P 16 -c 50 -n "$set_requests" -r 100000 --csv |
    awk -F'"' 'NR == 2 { print $4 }')
  r1=$(ticks "$bare_redis_pid")
  us=$(awk -v t=$((r1 - r0)) -v n="$set_requests" -v u="$tick_us" 'BEGIN { printf "%.2f", t * u / n }')
  runs[redis_set]+="${rps:-0} - 0 - $us - - -"$'\n'
  echo "round $round: redis_set ${rps:-0} SETs/s, $us us Redis CPU each" >&2
}
# The wrk runs of a round, on fresh activities, their order reversed every other round.
wrk_round() {
  local a="wrk-$round" b="wrk1k-$round"
  create_hot "$default_port" "$a"
  create_hot "$default_port" "$b"
  peer_create "$a"
  local trio=(default nginx peer) duo=(default nginx) system
  if ((round % 2 == 0)); then trio=(peer nginx default) duo=(nginx default); fi
  for system in "${trio[@]}"; do
    case $system in
      default) wrk_run wrk_default_hot "$default_port" "$a" 128 "$default_pid" "$default_redis_pid" ;;
      nginx) wrk_run wrk_nginx_hot "$nginx_port" hot 128 "$nginx_workers" "" ;;
      peer) wrk_run wrk_peer_hot "$peer_port" "$a" 128 "$peer_procs" "$peer_redis_pid" ;;
    esac
  done
  for system in "${duo[@]}"; do
    case $system in
      default) wrk_run wrk_default_hot1k "$default_port" "$b" 1024 "$default_pid" "$default_redis_pid" ;;
      nginx) wrk_run wrk_nginx_hot1k "$nginx_port" hot 1024 "$nginx_workers" "" ;;
    esac
  done
  set_run
}

# The default's redis-server rewrites its AOF at a quiet moment after a burst (its supervisor's
# rule, supervise/aof_rewrite.h): while it does, the fork's child takes CPU from whatever runs. So
# before another system's run, the default's supervisor gets three of its looks (one a second)
# and a rewrite it started is waited for (at most two minutes): the rewrite is the default's
# cost, and it counts where it lands, in the default's own runs (its children's CPU).
settle_default() { bench_settle_aof "$dir/default/redis.sock"; }
# The aim pairs' runs after a round's first are kept under keys of their own (default_hot2 ...),
# so the other figures pair one run of each system a round.
default_hot_run() {  # key suffix, activity
  run "default_hot$1" "$default_port" "$2" 128 "$default_pid" "$default_redis_pid" \
    --data-dir "$dir/default" --drain-timeout-ms 120000
  settle_default
}
bare_hot_run() { run "bare_hot$1" "$bare_port" "$2" 128 "$bare_pid" "$bare_redis_pid"; }
default_out_run() { run "default_out$1" "$default_port" gone 128 "$default_pid" "$default_redis_pid"; }
nginx_out_run() { run "nginx_out$1" "$nginx_port" gone 128 "$nginx_workers" ""; }
hot_pair() {  # pair number within the round
  local suffix="" activity="hot-$round"
  if (($1 > 1)); then suffix=2 activity="hot-$round-$1"; fi
  create_hot "$default_port" "$activity"
  create_hot "$bare_port" "$activity"
  if (((round + $1) % 2 == 0)); then
    default_hot_run "$suffix" "$activity"
    bare_hot_run "$suffix" "$activity"
  else
    bare_hot_run "$suffix" "$activity"
    default_hot_run "$suffix" "$activity"
  fi
}
out_pair() {  # pair number within the round
  local suffix=""
  if (($1 > 1)); then suffix=2; fi
  if (((round + $1) % 2 == 0)); then
    default_out_run "$suffix"
    nginx_out_run "$suffix"
  else
    nginx_out_run "$suffix"
    default_out_run "$suffix"
  fi
}

# Each round runs every system on a fresh activity (a sale's hashes start empty and grow: the
# same work for each), and the pairs whose ratio is an aim (default and bare, default sold out
# and nginx) run in one order in odd rounds and in the other in even ones, so a machine that
# speeds up or slows down over a round favours neither side in the median.
for round in $(seq 1 "$rounds"); do
  create_hot "$default_port" "hot1k-$round"
  for pair in $(seq 1 "$pairs"); do hot_pair "$pair"; done
  create_hot "$consumer_port" "hot-$round"
  run consumer_hot "$consumer_port" "hot-$round" 128 "$consumer_pid" "$consumer_redis_pid" \
    --redis-url "unix://$consumer_socket" --db-url "sqlite:$dir/consumer/flashsale.db" \
    --drain-timeout-ms 120000
  run nginx_hot "$nginx_port" hot 128 "$nginx_workers" ""
  run default_hot1k "$default_port" "hot1k-$round" 1024 "$default_pid" "$default_redis_pid" \
    --data-dir "$dir/default" --drain-timeout-ms 120000
  settle_default
  run nginx_hot1k "$nginx_port" hot 1024 "$nginx_workers" ""
  for pair in $(seq 1 "$pairs"); do out_pair "$pair"; done
  rb_run redis_reserve 1 "${reserve_call[@]}"
  if [ ${#batch_call[@]} -gt 0 ]; then rb_run redis_batch "$batch_size" "${batch_call[@]}"; fi
  wrk_round
done

# Redis memory per order on the default: used_memory before and after 100,000 orders on a fresh
# activity, each read once the order pipeline has drained and no AOF rewrite runs.
used_memory() {
  redis-cli -s "$dir/default/redis.sock" info memory | awk -F: '/^used_memory:/ { print $2 + 0 }'
}
create_hot "$default_port" memory
settle_default
memory_before=$(used_memory)
"$bin" load --url "http://127.0.0.1:$default_port" --activity memory --connections 128 \
  --threads "$threads" --requests "$memory_orders" --duration 0 --user-ids random \
  --users 1000000000 --data-dir "$dir/default" --drain-timeout-ms 120000 >"$dir/memory.log" 2>&1 || true
memory_reserved=$(reserved_units "$default_port" memory)
if ! grep -q '^verified:' "$dir/memory.log" || ! wait_drained "$default_port" memory ||
  [ "${memory_reserved:-0}" -ne "$memory_orders" ]; then
  verify_failed=1
  echo "memory run: ${memory_reserved:-?} units reserved of $memory_orders, or not verified:" >&2
  sed -n '/^verify/,$p' "$dir/memory.log" >&2
fi
settle_default
memory_after=$(used_memory)
bytes_per_order=$(awk -v a="$memory_before" -v b="$memory_after" -v n="${memory_reserved:-0}" \
  'BEGIN { printf "%.0f", (n > 0 ? (b - a) / n : 0) }')
echo "memory: used_memory $memory_before before, $memory_after after ${memory_reserved:-0} orders" >&2

col() {  # key column -> the median over the rounds ("n/a" if the key never ran)
  [ -n "${runs[$1]:-}" ] || { echo n/a; return; }
  # shellcheck disable=SC2046
  median $(awk -v c="$2" 'NF { print $c }' <<<"${runs[$1]}")
}
# The median over the rounds of a's requests/s over b's in the same round: the two ran seconds
# apart, so a load that drifts over the run moves both.
# With more pairs (key_a2 key_b2 ...), the median over all of them.
pair_ratio() {  # key_a key_b [key_a2 key_b2 ...]
  local ratios=()
  while (($# >= 2)); do
    if [ -n "${runs[$1]:-}" ] && [ -n "${runs[$2]:-}" ]; then
      # shellcheck disable=SC2207
      ratios+=($(paste -d' ' <(awk 'NF { print $1 }' <<<"${runs[$1]}") \
        <(awk 'NF { print $1 }' <<<"${runs[$2]}") | awk '{ print ($2 > 0 ? $1 / $2 : 0) }'))
    fi
    shift 2
  done
  if [ ${#ratios[@]} -eq 0 ]; then
    echo n/a
    return
  fi
  printf '%.2f' "$(median "${ratios[@]}")"
}
# The ratios of an aim pair, sorted: how far the rounds spread.
pair_spread() {  # key_a key_b [key_a2 key_b2 ...]
  local out=""
  while (($# >= 2)); do
    if [ -n "${runs[$1]:-}" ] && [ -n "${runs[$2]:-}" ]; then
      out+=$(paste -d' ' <(awk 'NF { print $1 }' <<<"${runs[$1]}") \
        <(awk 'NF { print $1 }' <<<"${runs[$2]}") | awk '{ printf "%.2f\n", ($2 > 0 ? $1 / $2 : 0) }')
      out+=$'\n'
    fi
    shift 2
  done
  sort -n <<<"$out" | awk 'NF' | paste -sd' '
}
errors_sum() { awk '{ s += $3 } END { print s + 0 }' <<<"${runs[$1]:-}"; }

echo
bench_machine_line
bench_versions_line
echo "runs: $rounds rounds, ${seconds}s each, flashsale load closed loop, $threads threads; flashsale $threads I/O" \
  "threads, nginx $threads workers; redis-benchmark 50x16, -n $rb_requests; medians of the rounds"
echo "      wrk: $wrk_threads thread(s), random users, every request reserving; the Node peer" \
  "$threads workers; redis-benchmark -t set -P 16 -c 50 -n $set_requests"
echo "      the servers, Redis and the load tool share these cores; loopback only;" \
  "load average before $load_before, after $(cut -d' ' -f1-3 /proc/loadavg)"
echo
printf '%-44s %11s %8s %6s %14s %14s %8s %14s\n' "system, phase, connections" requests/s "p99 ms" \
  errors "us CPU/server" "us CPU/Redis" "drain s" "us CPU+drain"
one_decimal() { if [ "$1" = - ] || [ "$1" = n/a ]; then echo -; else printf '%.1f' "$1"; fi; }
col_or_dash() {  # key column: the median, or - where the runs have none
  if awk -v c="$2" 'NF && $c == "-" { found = 1 } END { exit !found }' <<<"${runs[$1]:-}"; then
    echo -
  else
    col "$1" "$2"
  fi
}
detail() {  # label key
  if [ -z "${runs[$2]:-}" ]; then
    printf '%-44s %11s\n' "$1" n/a
    return
  fi
  local all=-
  if [ "$(col_or_dash "$2" 7)" != - ]; then
    all="$(one_decimal "$(col "$2" 7)") + $(one_decimal "$(col "$2" 8)")"
  fi
  printf '%-44s %11.0f %8.2f %6s %14s %14s %8s %14s\n' "$1" "$(col "$2" 1)" "$(col "$2" 2)" \
    "$(errors_sum "$2")" "$(one_decimal "$(col_or_dash "$2" 4)")" \
    "$(one_decimal "$(col_or_dash "$2" 5)")" "$(one_decimal "$(col_or_dash "$2" 6)")" "$all"
}
detail "default, hot, 128" default_hot
detail "default, hot, 1024" default_hot1k
detail "default, sold out, 128" default_out
detail "bare, hot, 128" bare_hot
detail "bare + order consumer, hot, 128" consumer_hot
detail "nginx, hot reply, 128" nginx_hot
detail "nginx, hot reply, 1024" nginx_hot1k
detail "nginx, sold-out reply, 128" nginx_out
detail "redis-benchmark, reserve script (per call)" redis_reserve
detail "redis-benchmark, batch of $batch_size (per reservation)" redis_batch
detail "wrk: default, hot, 128" wrk_default_hot
detail "wrk: default, hot, 1024" wrk_default_hot1k
detail "wrk: Node peer, hot, 128" wrk_peer_hot
detail "wrk: nginx, hot reply, 128" wrk_nginx_hot
detail "wrk: nginx, hot reply, 1024" wrk_nginx_hot1k
if [ -n "${runs[redis_set]:-}" ]; then
  printf '%-44s %11.0f %8s %6s %14s %14.2f\n' "redis-benchmark -t set -P 16 (per SET)" \
    "$(col redis_set 1)" - 0 - "$(col redis_set 5)"
fi

echo
printf '%-46s %30s %9s %s\n' aim measured aim verdict
aim() {  # label value suffix [op target]: met / missed (by how much) / reported / n/a
  local verdict=reported
  if [ "$2" = n/a ] || [ "$2" = - ]; then
    verdict=n/a
  elif [ -n "${4:-}" ]; then
    verdict=$(awk -v v="$2" -v a="$5" -v op="$4" 'BEGIN {
      if (op == ">=" ? v >= a : v <= a) print "met"
      else printf "missed by %.0f %%\n", (op == ">=" ? (a - v) / a : (v - a) / a) * 100 }')
  fi
  printf '%-46s %30s %9s %s\n' "$1" "$2$3" "${4:-} ${5:-}" "$verdict"
}
hot=$(col default_hot 1)
hot_ratio=$(pair_ratio default_hot nginx_hot)
aim "hot: default / nginx, 128 connections" "$hot_ratio" " ($(printf %.0f "$hot") / $(printf %.0f "$(col nginx_hot 1)"))" ">=" 0.6
aim "CPU per request: flashsale (default)" "$(one_decimal "$(col default_hot 4)")" " us" "<=" 10
aim "CPU per request: flashsale (bare)" "$(one_decimal "$(col bare_hot 4)")" " us" "<=" 10
aim "CPU per reservation: redis-server (default)" "$(one_decimal "$(col default_hot 5)")" " us" "<=" 5
aim "CPU per reservation: redis-server (bare)" "$(one_decimal "$(col bare_hot 5)")" " us" "<=" 5
aim "CPU per request: nginx" "$(one_decimal "$(col nginx_hot 4)")" " us" "" ""
# The same kernel socket work is about half of nginx's CPU per request: flashsale's against it
# survives the machine where an absolute figure does not (the aim proposed in bench/README.md).
aim "  flashsale (bare) / nginx, proposed aim" "$(awk -v a="$(col bare_hot 4)" \
  -v b="$(col nginx_hot 4)" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')" "" "<=" 1.5
aim "p99 at 128 connections (default)" "$(printf %.2f "$(col default_hot 2)")" " ms" "<=" 5
aim "p99 at 1024 connections (default)" "$(printf %.2f "$(col default_hot1k 2)")" " ms" "" ""
aim "Redis limit: default / reserve script" "$(pair_ratio default_hot redis_reserve)" \
  " ($(printf %.0f "$(col redis_reserve 1)")/s)" "" ""
if [ -n "${runs[redis_batch]:-}" ]; then
  aim "Redis limit: default / batch script ($batch_size)" "$(pair_ratio default_hot redis_batch)" \
    " ($(printf %.0f "$(col redis_batch 1)")/s)" "" ""
else
  aim "Redis limit: default / batch script" n/a " (no --setup-batch)" "" ""
fi
out_ratio=$(pair_ratio default_out nginx_out default_out2 nginx_out2)
aim "sold out: default / nginx" "$out_ratio" \
  " ($(printf %.0f "$(col default_out 1)") / $(printf %.0f "$(col nginx_out 1)"))" ">=" 0.95
aim "default / bare, hot, 128 connections" \
  "$(pair_ratio default_hot bare_hot default_hot2 bare_hot2)" \
  " ($(printf %.0f "$hot") / $(printf %.0f "$(col bare_hot 1)"))" ">=" 0.9
minus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.1f", a - b }'; }
aim "  of which the order consumer: (bare + c.) / bare" "$(pair_ratio consumer_hot bare_hot)" \
  ", $(minus "$(col consumer_hot 4)" "$(col bare_hot 4)") us flashsale" "" ""
aim "  and the AOF: default / (bare + consumer)" "$(pair_ratio default_hot consumer_hot)" \
  ", $(minus "$(col default_hot 5)" "$(col consumer_hot 5)") us Redis" "" ""
aim "  drain after the hot load (default), seconds" "$(one_decimal "$(col_or_dash default_hot 6)")" \
  " s" "" ""

# Issue 34's aims, judged from the wrk runs (sold out: from the flashsale load pairs above).
# A ratio of two systems is the median over the rounds of the ratio within a round.
col_ratio() {  # key_a column_a key_b column_b -> the median over the rounds of a / b
  if [ -z "${runs[$1]:-}" ] || [ -z "${runs[$3]:-}" ]; then
    echo n/a
    return
  fi
  local ratios
  # shellcheck disable=SC2207
  ratios=($(paste -d' ' <(awk -v c="$2" 'NF { print $c }' <<<"${runs[$1]}") \
    <(awk -v c="$4" 'NF { print $c }' <<<"${runs[$3]}") | awk '{ print ($2 > 0 ? $1 / $2 : 0) }'))
  printf '%.2f' "$(median "${ratios[@]}")"
}
echo
echo "issue 34's aims (wrk, $wrk_threads thread(s); the default as users run it):"
printf '%-46s %30s %9s %s\n' aim measured aim verdict
wrk_hot=$(col wrk_default_hot 1)
aim "hot: default / nginx, 128 (wrk)" "$(pair_ratio wrk_default_hot wrk_nginx_hot)" \
  " ($(printf %.0f "$wrk_hot") / $(printf %.0f "$(col wrk_nginx_hot 1)"))" ">=" 0.65
aim "hot: default / Node peer, 128 (wrk)" "$(pair_ratio wrk_default_hot wrk_peer_hot)" \
  " ($(printf %.0f "$wrk_hot") / $(printf %.0f "$(col wrk_peer_hot 1)"))" ">=" 2.2
aim "Redis CPU per reservation / pipelined SET" "$(col_ratio wrk_default_hot 5 redis_set 5)" \
  " ($(one_decimal "$(col wrk_default_hot 5)") / $(col redis_set 5) us)" "<=" 4
aim "  the same until drained" "$(col_ratio wrk_default_hot 8 redis_set 5)" \
  " ($(one_decimal "$(col wrk_default_hot 8)") / $(col redis_set 5) us)" "" ""
aim "  bare's (no AOF, flashsale load) / SET" "$(col_ratio bare_hot 5 redis_set 5)" \
  " ($(one_decimal "$(col bare_hot 5)") / $(col redis_set 5) us)" "" ""
aim "service CPU per hot request / nginx's" "$(col_ratio wrk_default_hot 4 wrk_nginx_hot 4)" \
  " ($(one_decimal "$(col wrk_default_hot 4)") / $(one_decimal "$(col wrk_nginx_hot 4)") us)" "<=" 1.3
aim "  the same until drained" "$(col_ratio wrk_default_hot 7 wrk_nginx_hot 4)" \
  " ($(one_decimal "$(col wrk_default_hot 7)") / $(one_decimal "$(col wrk_nginx_hot 4)") us)" "" ""
aim "  service + its Redis per request, until drained" \
  "$(awk -v a="$(col wrk_default_hot 7)" -v b="$(col wrk_default_hot 8)" 'BEGIN { printf "%.1f", a + b }')" \
  " us" "" ""
aim "  Node peer + its Redis per request" \
  "$(awk -v a="$(col wrk_peer_hot 4)" -v b="$(col wrk_peer_hot 5)" 'BEGIN { printf "%.1f", a + b }')" \
  " us" "" ""
aim "p99 at 128 connections (default, wrk)" "$(printf %.2f "$(col wrk_default_hot 2)")" " ms" "<=" 3
aim "p99 at 1024 connections (default, wrk)" "$(printf %.2f "$(col wrk_default_hot1k 2)")" " ms" "<=" 25
aim "Redis memory per order (default)" "$bytes_per_order" " B" "<=" 110
aim "sold out: default / nginx (flashsale load)" "$out_ratio" "" ">=" 0.95
echo "the wrk pairs' ratios, every round: default / nginx $(pair_spread wrk_default_hot wrk_nginx_hot);" \
  "default / Node peer $(pair_spread wrk_default_hot wrk_peer_hot)"
echo "Redis memory: used_memory $memory_before before and $memory_after after $memory_reserved orders" \
  "on a fresh activity (drained)"
echo
forks=$(redis-cli -s "$dir/default/redis.sock" info stats | awk -F: '/^total_forks/ { print $2 + 0 }')
echo "the default's redis-server forked $forks times (AOF rewrites); its AOF directory holds" \
  "$(du -sh "$dir/default/redis" | cut -f1)"
echo "the aim pairs' ratios, every round and pair: default / bare $(pair_spread default_hot \
  bare_hot default_hot2 bare_hot2); sold out / nginx $(pair_spread default_out nginx_out \
  default_out2 nginx_out2)"
verified=$(grep -l '^verified:' "$dir"/{default,consumer}_hot*-*.log 2>/dev/null | wc -l)
echo "hot runs verified (default, bare + consumer): $verified of $(((pairs + 2) * rounds)); took" \
  "$(($(date +%s) - started)) s"
[ "$verify_failed" -eq 0 ] && [ "$verified" -eq $(((pairs + 2) * rounds)) ]
