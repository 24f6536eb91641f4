#!/usr/bin/env bash
# A 3-node MariaDB Galera cluster on loopback, for the tests, the demo and a developer's machine.
#
#   scripts/galera.sh start DIR [--base-port P]   initialise (first time) and start the 3 nodes
#   scripts/galera.sh stop DIR                    stop exactly the nodes started in DIR
#
# Node i (1..3) lives in DIR/node<i> (data, my.cnf, error log, pid file, unix socket) and listens
# on 127.0.0.1 only. Ports, from the base P (default 4600):
#   MySQL  P+i-1     group communication (gcomm)  P+10+i-1
#   IST    P+20+i-1  SST (rsync daemon)           P+30+i-1
# Node 1 bootstraps the cluster (--wsrep-new-cluster); nodes 2 and 3 join it and receive its state
# by rsync SST. Accounts: root over the unix socket without a password, and `flashsale` with the
# password 'flashsale' from 127.0.0.1 (created once, replicated to every node).
#
# On success `start` prints one line per node: "node<i> port=<p> socket=<path> pid=<pid>".
# `stop` sends SIGTERM to the PIDs in DIR/node<i>/mariadbd.pid, waits up to 60 s, then SIGKILLs
# those PIDs; it never signals anything else. Every wait is bounded.
set -euo pipefail

usage() {
  echo "usage: $0 start DIR [--base-port P] | stop DIR" >&2
  exit 2
}

[ $# -ge 2 ] || usage
command=$1
dir=$2
shift 2
base_port=4600
while [ $# -gt 0 ]; do
  case $1 in
    --base-port) base_port=${2:?--base-port needs a number}; shift 2 ;;
    *) usage ;;
  esac
done
nodes=(1 2 3)
provider=/usr/lib/galera/libgalera_smm.so
start_timeout_s=${GALERA_START_TIMEOUT_S:-120}

port_of() { echo $((base_port + $1 - 1)); }
gcomm_of() { echo $((base_port + 10 + $1 - 1)); }
ist_of() { echo $((base_port + 20 + $1 - 1)); }
sst_of() { echo $((base_port + 30 + $1 - 1)); }

node_dir() { echo "$dir/node$1"; }
pid_of() {
  local file
  file="$(node_dir "$1")/mariadbd.pid"
  [ -s "$file" ] && cat "$file"
}
# The node's mariadbd is running: its PID is alive and still a mariadbd of this node's my.cnf (a
# stale pid file's PID may have been reused by something else, which is never signalled).
alive() {
  local pid
  pid=$(pid_of "$1") && kill -0 "$pid" 2>/dev/null &&
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "--defaults-file=$(node_dir "$1")/my.cnf"
}

# The configuration of node $1, read by mariadbd and by the SST script (which finds the datadir
# and the rsync port there).
write_config() {
  local i=$1 d addresses=""
  d=$(node_dir "$i")
  for n in "${nodes[@]}"; do addresses+="${addresses:+,}127.0.0.1:$(gcomm_of "$n")"; done
  local user_line=""
  if [ -n "$run_as" ]; then user_line="user=$run_as"; fi
  cat >"$d/my.cnf" <<EOF
[mysqld]
$user_line
datadir=$d/data
tmpdir=$d/tmp
socket=$d/mysqld.sock
pid-file=$d/mariadbd.pid
log-error=$d/mariadb.log
port=$(port_of "$i")
bind-address=127.0.0.1
skip-name-resolve
innodb-buffer-pool-size=32M
innodb-log-file-size=16M
binlog-format=ROW
default-storage-engine=InnoDB
innodb-autoinc-lock-mode=2
wsrep-on=ON
wsrep-provider=$provider
wsrep-cluster-name=flashsale-$base_port
wsrep-cluster-address=gcomm://$addresses
wsrep-node-name=node$i
wsrep-node-address=127.0.0.1:$(gcomm_of "$i")
wsrep-node-incoming-address=127.0.0.1:$(port_of "$i")
wsrep-sst-method=rsync
wsrep-sst-receive-address=127.0.0.1:$(sst_of "$i")
wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:$(gcomm_of "$i");ist.recv_addr=127.0.0.1:$(ist_of "$i");gcache.size=64M;evs.suspect_timeout=PT5S;evs.inactive_timeout=PT15S
EOF
}

# As root the nodes run as the mysql account, not as root: the SST script's rsync daemon, started
# by the joiner, would otherwise drop to `nobody` and could not write the joiner's data directory.
run_as=""
if [ "$(id -u)" -eq 0 ]; then run_as=mysql; fi

# Node 1's data directory, initialised once; the joiners get theirs by SST.
initialise() {
  for i in "${nodes[@]}"; do
    mkdir -p "$(node_dir "$i")/data" "$(node_dir "$i")/tmp"
    write_config "$i"
  done
  if [ -n "$run_as" ]; then
    chmod 755 "$dir"
    chown -R "$run_as:" "$dir"
  fi
  local d1
  d1=$(node_dir 1)
  if [ ! -d "$d1/data/mysql" ]; then
    mariadb-install-db --defaults-file="$d1/my.cnf" --auth-root-authentication-method=normal \
      --skip-test-db --wsrep-on=OFF >"$d1/install.log" 2>&1 || {
      echo "galera: mariadb-install-db failed; see $d1/install.log" >&2
      tail -20 "$d1/install.log" >&2
      exit 1
    }
  fi
}

# Starts node $1 in the background (extra arguments go to mariadbd) and waits until it is a
# synced member of the primary component.
start_node() {
  local i=$1 d
  shift
  d=$(node_dir "$i")
  if alive "$i"; then return 0; fi
  rm -f "$d/mariadbd.pid"
  nohup mariadbd --defaults-file="$d/my.cnf" "$@" >>"$d/mariadb.log" 2>&1 </dev/null &
  local launched=$!
  local deadline=$((SECONDS + start_timeout_s))
  while [ $SECONDS -lt $deadline ]; do
    if ! kill -0 "$launched" 2>/dev/null; then
      echo "galera: node$i exited while starting; the end of $d/mariadb.log:" >&2
      tail -30 "$d/mariadb.log" >&2
      return 1
    fi
    local state
    state=$(mariadb --no-defaults -uroot --socket="$d/mysqld.sock" --connect-timeout=2 -N -B \
      -e "SHOW STATUS LIKE 'wsrep_local_state_comment'" 2>/dev/null | cut -f2 || true)
    if [ "$state" = "Synced" ]; then return 0; fi
    sleep 0.5
  done
  echo "galera: node$i not synced within ${start_timeout_s} s; the end of $d/mariadb.log:" >&2
  tail -30 "$d/mariadb.log" >&2
  return 1
}

stop_nodes() {
  local pids=() i pid
  for i in "${nodes[@]}"; do
    if alive "$i"; then
      pid=$(pid_of "$i")
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  local deadline=$((SECONDS + 60))
  for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  done
}

case $command in
  start)
    if ! command -v mariadbd >/dev/null || [ ! -f "$provider" ]; then
      echo "galera: needs mariadb-server and galera-4 (scripts/install-deps.sh)" >&2
      exit 1
    fi
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    initialise
    # A cluster where every node is down starts again from node 1; a node that is still up is
    # left alone. grastate.dat's safe_to_bootstrap is set so node 1 may bootstrap after a stop.
    if ! alive 1 && ! alive 2 && ! alive 3; then
      grastate="$(node_dir 1)/data/grastate.dat"
      if [ -f "$grastate" ]; then sed -i 's/^safe_to_bootstrap: 0/safe_to_bootstrap: 1/' "$grastate"; fi
      start_node 1 --wsrep-new-cluster || { stop_nodes; exit 1; }
      mariadb --no-defaults -uroot --socket="$(node_dir 1)/mysqld.sock" -e "
        CREATE USER IF NOT EXISTS 'flashsale'@'127.0.0.1' IDENTIFIED BY 'flashsale';
        CREATE USER IF NOT EXISTS 'flashsale'@'localhost' IDENTIFIED BY 'flashsale';
        GRANT ALL PRIVILEGES ON *.* TO 'flashsale'@'127.0.0.1';
        GRANT ALL PRIVILEGES ON *.* TO 'flashsale'@'localhost';"
    else
      start_node 1 || { stop_nodes; exit 1; }
    fi
    for i in 2 3; do start_node "$i" || { stop_nodes; exit 1; }; done
    for i in "${nodes[@]}"; do
      echo "node$i port=$(port_of "$i") socket=$(node_dir "$i")/mysqld.sock pid=$(pid_of "$i")"
    done
    ;;
  stop)
    [ -d "$dir" ] || exit 0
    dir=$(cd "$dir" && pwd)
    stop_nodes
    ;;
  *) usage ;;
esac
