#!/usr/bin/env bash
# What scales on a Redis Cluster: the same hot load (every request reserves a unit) on one Redis
# and on a 3-primary cluster (scripts/redis-cluster.sh), through one and through three
# `flashsale serve` instances, and one hot activity alone on the cluster (its ceiling).
#
#   bench/cluster_bench.sh [SECONDS] [CONNECTIONS] [BINARY]
#
# Three activities, chosen so that their slots live on three different primaries, each driven by
# its own `flashsale load` process (CONNECTIONS/3 connections, spread over the instances), at the
# same time. Printed per configuration: requests/s (all three loads), reserved units, and the
# Redis CPU time (user + system, from /proc/<pid>/stat of every redis-server) per reservation,
# with each primary's share. The instances run one I/O thread each, one order consumer each
# (persisting into one shared SQLite file), the scheduled jobs off. Every process shares this
# machine's cores: on a 2-core machine the cluster cannot show more than the cores it has; the
# figures say where the work goes, not what a 3-machine cluster would do.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-8}
connections=${2:-48}
bin=${3:-}
if [[ -z $bin ]]; then
  bin=build/release/src/flashsale
  [[ -x $bin ]] || bin=build/dev/src/flashsale
fi
[[ -x $bin ]] || { echo "cluster_bench: no flashsale binary at $bin (build it first)" >&2; exit 2; }
build=$(basename "$(dirname "$(dirname "$bin")")")

dir=$(mktemp -d /tmp/flashsale-cluster-bench-XXXXXX)
pids=()
cluster_dir=$dir/cluster
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  scripts/redis-cluster.sh stop "$cluster_dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_for() {  # command...: until it succeeds, at most 20 s
  for _ in $(seq 1 400); do "$@" >/dev/null 2>&1 && return 0; sleep 0.05; done
  echo "cluster_bench: gave up waiting for: $*" >&2
  return 1
}
ticks() {  # pids... -> their user+system CPU, clock ticks
  local total=0
  for pid in "$@"; do
    read -r -a stat <"/proc/$pid/stat"
    total=$((total + stat[13] + stat[14]))
  done
  echo "$total"
}
hz=$(getconf CLK_TCK)

# One Redis on TCP (like the cluster's nodes), no persistence on either.
single_port=$(free_port)
redis-server --port "$single_port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly no \
  --daemonize no --logfile "$dir/single.log" &
pids+=($!)
single_pid=$!
wait_for redis-cli -p "$single_port" ping

# A base port with base..base+2 and their cluster bus ports (+10000) free.
base=$(python3 -c '
import random, socket
def free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); return True
    except OSError:
        return False
    finally:
        s.close()
while True:
    b = random.randint(20000, 40000)
    if all(free(p) and free(p + 10000) for p in range(b, b + 3)):
        print(b); break
')
scripts/redis-cluster.sh start "$cluster_dir" --masters 3 --base-port "$base" --appendonly no \
  >"$dir/cluster.log"
cluster_ports=("$base" $((base + 1)) $((base + 2)))
cluster_url="redis+cluster://127.0.0.1:$base,127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2))"
cluster_pids=()
for port in "${cluster_ports[@]}"; do cluster_pids+=("$(cat "$cluster_dir/$port/redis.pid")"); done

# Activity ids whose slots are on the three primaries, in port order.
activities=()
for port in "${cluster_ports[@]}"; do
  for i in $(seq 0 200); do
    if [[ $(redis-cli -p "$port" exists "{hot$i}") == 0 ]]; then
      activities+=("hot$i")
      break
    fi
  done
done
[[ ${#activities[@]} -eq 3 ]] || { echo "cluster_bench: no activity id per primary" >&2; exit 1; }

# Starts `count` instances on `redis_url`, sharing a new SQLite file; sets `urls` and `serve_pids`.
start_instances() {  # redis_url count tag
  local redis_url=$1 count=$2 tag=$3
  urls=()
  serve_pids=()
  for ((i = 0; i < count; i++)); do
    local port
    port=$(free_port)
    "$bin" serve --listen "127.0.0.1:$port" --data-dir "$dir/$tag-$i" --redis-url "$redis_url" \
      --db-url "sqlite:$dir/$tag.db" --identity gateway --threads 1 --log-level warn \
      --admin-token bench-admin-token --secret bench-secret-0123456789 \
      --reconcile-every-ms 0 --prewarm-every-ms 0 --expire-every-ms 0 --registry-poll-ms 100 \
      >"$dir/$tag-$i.log" 2>&1 &
    serve_pids+=($!)
    pids+=($!)
    urls+=("http://127.0.0.1:$port")
    wait_for curl -sf "http://127.0.0.1:$port/healthz"
  done
}
stop_instances() {
  for pid in "${serve_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${serve_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
create_activities() {
  for id in "${activities[@]}"; do
    curl -sf -H "Authorization: Bearer bench-admin-token" \
      -d "{\"id\":\"$id\",\"stock\":1000000000000,\"per_user_limit\":1000000000,\"start_ms\":0,\"end_ms\":4000000000000}" \
      "${urls[0]}/api/v1/admin/activities" >/dev/null
  done
  sleep 0.5  # the other instances' registry poll (100 ms)
  for url in "${urls[@]}"; do
    for id in "${activities[@]}"; do wait_for curl -sf "$url/api/v1/activities/$id"; done
  done
}

# Runs the loads (one per activity given, at once) -> "rps reserved cpu_us_per_reservation shares"
measure() {  # label redis_pids_var activities...
  local label=$1
  local -n redis_pids=$2
  shift 2
  local targets
  targets=$(IFS=,; echo "${urls[*]}")
  local per=$((connections / $#))
  local before
  before=$(ticks "${redis_pids[@]}")
  local each_before=()
  for pid in "${redis_pids[@]}"; do each_before+=("$(ticks "$pid")"); done
  local load_pids=()
  for id in "$@"; do
    "$bin" load --url "$targets" --activity "$id" --connections "$per" --threads 1 \
      --duration "$seconds" --user-ids random --users 1000000000 --no-verify \
      >"$dir/load-$label-$id.log" 2>&1 &
    load_pids+=($!)
  done
  for pid in "${load_pids[@]}"; do wait "$pid" || true; done
  local after
  after=$(ticks "${redis_pids[@]}")
  local shares=""
  local i=0
  for pid in "${redis_pids[@]}"; do
    local t
    t=$(ticks "$pid")
    shares+="$(((t - each_before[i]) * 100 / ((after - before) > 0 ? (after - before) : 1)))% "
    i=$((i + 1))
  done
  cat "$dir"/load-"$label"-*.log | awk -v cpu=$((after - before)) -v hz="$hz" -v shares="$shares" '
    /^  requests/ { for (i = 1; i <= NF; i++) if ($i == "requests/s;") rps += $(i - 1) }
    /^  outcomes/ { for (i = 1; i <= NF; i++) if ($i == "reserved:") { v = $(i + 1); sub(";", "", v); reserved += v } }
    END { printf "%8.0f %10d %8.1f   %s\n", rps, reserved, (reserved > 0 ? cpu * 1e6 / hz / reserved : 0), shares }'
}

if ! "$bin" load --help 2>/dev/null | grep -q -- --no-verify; then
  echo "cluster_bench: $bin has no 'load --no-verify'" >&2
  exit 2
fi

echo "flashsale cluster bench ($build build): ${seconds}s per run, $connections connections in all," \
  "closed loop, random users, every request reserves"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //');" \
  "redis $(redis-server --version | awk '{print $3}' | cut -d= -f2); activities ${activities[*]}"
printf "%-42s %8s %10s %8s   %s\n" configuration "req/s" reserved "us/res" "redis CPU share"

single_pids=("$single_pid")
start_instances "redis://127.0.0.1:$single_port" 1 single1
create_activities
printf "%-42s %s\n" "one Redis, 1 instance, 3 activities" "$(measure s1 single_pids "${activities[@]}")"
stop_instances
start_instances "redis://127.0.0.1:$single_port/1" 3 single3
create_activities
printf "%-42s %s\n" "one Redis, 3 instances, 3 activities" "$(measure s3 single_pids "${activities[@]}")"
stop_instances

start_instances "$cluster_url" 1 cluster1
create_activities
printf "%-42s %s\n" "cluster 3 primaries, 1 instance, 3 act." "$(measure c1 cluster_pids "${activities[@]}")"
stop_instances
start_instances "$cluster_url" 3 cluster3
# New ids for a fresh sale: re-pick so that the slots stay on three primaries.
activities=()
for port in "${cluster_ports[@]}"; do
  for i in $(seq 0 200); do
    if [[ $(redis-cli -p "$port" exists "{warm$i}") == 0 ]]; then
      activities+=("warm$i")
      break
    fi
  done
done
create_activities
printf "%-42s %s\n" "cluster 3 primaries, 3 instances, 3 act." "$(measure c3 cluster_pids "${activities[@]}")"
printf "%-42s %s\n" "cluster, 3 instances, ONE hot activity" "$(measure c3one cluster_pids "${activities[0]}")"
stop_instances
echo "us/res: Redis CPU microseconds (all redis-server processes) per reserved unit;" \
  "shares: each redis-server's part of that CPU (cluster: primaries in port order)"
