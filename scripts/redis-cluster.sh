#!/usr/bin/env bash
# A Redis Cluster on loopback, for tests, the demo and benchmarks.
#
#   scripts/redis-cluster.sh start DIR [--masters N] [--replicas R] [--base-port P] [--appendonly yes|no]
#   scripts/redis-cluster.sh stop DIR
#
# start: N*(1+R) redis-server processes (default 3 primaries, 0 replicas) on 127.0.0.1, ports
# P, P+1, ... (default 30001), each with its directory DIR/<port> (config, nodes.conf, AOF, log)
# and its pid file DIR/<port>/redis.pid; joined by `redis-cli --cluster create`, then waited for
# until every node reports cluster_state:ok. Prints the seed URL for flashsale:
#   redis+cluster://127.0.0.1:P,127.0.0.1:P+1,...
# cluster-node-timeout is 5000 ms: on a loaded 2-core machine a lower one turns CPU starvation
# into false failovers.
# stop: SIGTERM to exactly the PIDs in DIR/*/redis.pid, then SIGKILL after 10 s; the directories
# are left (remove DIR to start afresh).
set -euo pipefail

usage() {
  sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

[[ $# -ge 2 ]] || usage
action=$1
dir=$2
shift 2
masters=3
replicas=0
base_port=30001
appendonly=yes
while [[ $# -gt 0 ]]; do
  case $1 in
    --masters) masters=$2; shift 2 ;;
    --replicas) replicas=$2; shift 2 ;;
    --base-port) base_port=$2; shift 2 ;;
    --appendonly) appendonly=$2; shift 2 ;;
    *) echo "redis-cluster.sh: unknown option $1" >&2; usage ;;
  esac
done
for value in "$masters" "$replicas" "$base_port"; do
  [[ $value =~ ^[0-9]+$ ]] || { echo "redis-cluster.sh: not a number: $value" >&2; exit 2; }
done

stop_cluster() {
  local pids=()
  for pidfile in "$dir"/*/redis.pid; do
    [[ -f $pidfile ]] || continue
    local pid
    pid=$(cat "$pidfile")
    if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  done
  rm -f "$dir"/*/redis.pid
  echo "redis-cluster: stopped ${#pids[@]} node(s) in $dir"
}

case $action in
  stop)
    stop_cluster
    exit 0
    ;;
  start) ;;
  *) usage ;;
esac

[[ $masters -ge 3 ]] || { echo "redis-cluster.sh: a cluster needs at least 3 primaries" >&2; exit 2; }
total=$((masters * (1 + replicas)))
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
nodes=()
for ((i = 0; i < total; i++)); do
  port=$((base_port + i))
  node_dir="$dir/$port"
  mkdir -p "$node_dir"
  if [[ -f $node_dir/redis.pid ]] && kill -0 "$(cat "$node_dir/redis.pid")" 2>/dev/null; then
    echo "redis-cluster.sh: a node already runs in $node_dir (stop it first)" >&2
    exit 1
  fi
  cat >"$node_dir/redis.conf" <<EOF
bind 127.0.0.1
port $port
dir $node_dir
pidfile $node_dir/redis.pid
logfile $node_dir/redis.log
daemonize yes
cluster-enabled yes
cluster-config-file nodes.conf
cluster-node-timeout 5000
cluster-require-full-coverage yes
appendonly $appendonly
appendfsync everysec
save ""
protected-mode no
EOF
  redis-server "$node_dir/redis.conf"
  nodes+=("127.0.0.1:$port")
done

# Wait for every node to answer.
for node in "${nodes[@]}"; do
  port=${node##*:}
  for attempt in $(seq 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    [[ $attempt -eq 100 ]] && { echo "redis-cluster.sh: node $port did not start (see $dir/$port/redis.log)" >&2; exit 1; }
    sleep 0.1
  done
done

# Join them, unless they already form a cluster (a restart over the same DIR keeps nodes.conf).
known=$(redis-cli -p "$base_port" cluster info | tr -d '\r' | sed -n 's/^cluster_known_nodes://p')
if [[ ${known:-1} -lt $total ]]; then
  redis-cli --cluster create "${nodes[@]}" --cluster-replicas "$replicas" --cluster-yes >"$dir/create.log" 2>&1 ||
    { cat "$dir/create.log" >&2; exit 1; }
fi

# Every node must see the whole cluster healthy before clients come.
for node in "${nodes[@]}"; do
  port=${node##*:}
  for attempt in $(seq 300); do
    state=$(redis-cli -p "$port" cluster info 2>/dev/null | tr -d '\r' | sed -n 's/^cluster_state://p')
    [[ $state == ok ]] && break
    [[ $attempt -eq 300 ]] && { echo "redis-cluster.sh: node $port not ok after 30 s" >&2; exit 1; }
    sleep 0.1
  done
done

seeds=$(IFS=,; echo "${nodes[*]:0:$masters}")
echo "redis-cluster: $masters primaries, $replicas replica(s) each, in $dir"
echo "redis+cluster://$seeds"
