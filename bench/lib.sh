# shellcheck shell=bash
# shellcheck disable=SC2154  # dir and pids are the caller's
# Shell functions the bench scripts share; sourced (`. bench/lib.sh`), never run. Each function
# says what it prints. Callers set `dir` (their temporary directory) and `pids` (an array of the
# processes they started) before calling bench_start_*; bench_cleanup stops exactly those.

# The release build of the given targets (build/release); quiet unless it fails.
bench_build_release() {  # target...
  cmake --preset release >/dev/null
  cmake --build --preset release --target "$@" >/dev/null
}

# Stops the processes in `pids` (ours only, by pid), waits for them, removes `dir`.
bench_cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$dir"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

wait_for() {  # command...: until it succeeds, at most 20 s
  for _ in $(seq 1 400); do "$@" >/dev/null 2>&1 && return 0; sleep 0.05; done
  echo "bench: gave up waiting for: $*" >&2
  return 1
}

# A redis-server of ours on a unix socket, no persistence; prints nothing, appends its pid.
bench_start_redis() {  # socket
  redis-server --port 0 --unixsocket "$1" --unixsocketperm 700 --dir "$dir" --save "" \
    --appendonly no --daemonize no --logfile "$1.log" &
  pids+=("$!")
  wait_for redis-cli -s "$1" ping
}

# nginx answering the two purchase replies as constants, from memory; appends its master's pid.
bench_start_nginx() {  # port workers hot_reply sold_out_reply
  mkdir -p "$dir/nginx"
  cat >"$dir/nginx/nginx.conf" <<CONF
worker_processes $2;
pid $dir/nginx/nginx.pid;
error_log $dir/nginx/error.log;
worker_rlimit_nofile 8192;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$1 reuseport backlog=4096;
    location ~ ^/api/v1/activities/(hot[^/]*)/purchase\$ { default_type application/json; return 200 '$3'; }
    location ~ ^/api/v1/activities/(gone[^/]*)/purchase\$ { default_type application/json; return 200 '$4'; }
  }
}
CONF
  nginx -c "$dir/nginx/nginx.conf" -p "$dir/nginx" -g 'daemon off;' &
  pids+=("$!")
  wait_for curl -sf -X POST "http://127.0.0.1:$1/api/v1/activities/gone/purchase"
}

# `flashsale load`'s report in a file -> "rps p99_ms errors requests".
bench_load_summary() {  # log
  awk '/^  requests/ { for (i = 1; i <= NF; i++) if ($i == "requests/s;") rps = $(i - 1); errors = $(NF - 1); answered = $4 }
       /^  latency/  { for (i = 1; i <= NF; i++) if ($i == "p99") p99 = $(i + 1) }
       END { print rps, p99, errors, answered }' "$1"
}

# CPU time a process has used so far, in clock ticks (utime + stime from /proc/<pid>/stat; with
# `children`, also its reaped children's, e.g. redis-server's AOF rewrites). 0 if it is gone.
bench_cpu_ticks() {  # pid [children]
  local stat
  [[ "$1" =~ ^[0-9]+$ ]] || { echo 0; return; }  # ("" would read /proc//stat, the system's)
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
  # Fields after the ")" that closes the command name: utime is the 12th, stime the 13th.
  stat=${stat##*) }
  awk -v children="${2:-}" '{ t = $12 + $13; if (children != "") t += $14 + $15; print t }' <<<"$stat"
}

# The machine, the versions and the load average, for the header of a report.
bench_machine_line() {
  local cpu
  cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
  echo "machine: $(nproc) cores, ${cpu:-unknown CPU}, Linux $(uname -r) $(uname -m)"
}
bench_versions_line() {
  local rev
  rev=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src 2>/dev/null || echo "+changes")
  echo "versions: flashsale $rev (release), redis $(redis-server --version | awk '{print $3}' | cut -d= -f2)," \
    "$(nginx -v 2>&1 | sed 's/^nginx version: //'), $(wrk -v 2>&1 | awk 'NR == 1 { print $1, $2 }')," \
    "g++ $(g++ -dumpfullversion)"
}

# redis-benchmark running one script call over and over -> "rps p99_ms 0". The call is what
# redis_client_bench prints (its __rand_int__ placeholders make fresh ids per request).
bench_redis_benchmark() {  # socket requests clients pipeline call...
  local socket=$1 requests=$2 clients=$3 pipeline=$4
  shift 4
  redis-benchmark -s "$socket" -c "$clients" -P "$pipeline" -n "$requests" -r 1000000000 --csv "$@" |
    awk -F'"' 'NR == 2 { print $4, $14, 0 }'
}

# wrk's purchase request, written to the given file: `flashsale load`'s (POST, a random user
# among a billion in X-User-Id, an empty body), so every request on a hot activity reserves. Its
# report -> "RESULT requests requests/s p99_ms errors" (errors: non-2xx, connect, read, write and
# timeouts).
bench_wrk_purchase_script() {  # file
  cat >"$1" <<'LUA'
wrk.method = "POST"
local threads = 0
setup = function(thread)
  thread:set("seed", os.time() * 1000 + threads * 7919)
  threads = threads + 1
end
local headers = {}
init = function() math.randomseed(seed) end
request = function()
  headers["X-User-Id"] = "u" .. math.random(0, 999999999)
  return wrk.format(nil, nil, headers, "")
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %.0f %.3f %d\n", summary.requests,
    summary.requests / (summary.duration / 1e6), latency:percentile(99) / 1000,
    e.status + e.connect + e.read + e.write + e.timeout))
end
LUA
}

# 0 once the order stream of an activity (namespace fs, the default's) has been read to its end by
# the group "persist" and nothing is pending: the order pipeline has taken every order. Read from
# Redis, which costs the service nothing.
bench_stream_drained() {  # redis_socket activity
  local key="fs:seckill:{$2}:stream" last delivered pending
  last=$(redis-cli -s "$1" xinfo stream "$key" |
    awk 'prev == "last-generated-id" { print; exit } { prev = $0 }')
  read -r delivered pending < <(redis-cli -s "$1" xinfo groups "$key" |
    awk 'prev == "last-delivered-id" { d = $0 } prev == "pending" { p = $0 } { prev = $0 }
         END { print d, p }')
  [ -n "$last" ] && [ "$last" = "$delivered" ] && [ "$pending" = 0 ]
}

# A private redis-server (AOF) rewrites its AOF at a quiet moment after a burst (its supervisor's
# rule, src/supervise/aof_rewrite.h): while it does, the fork's child takes CPU from whatever runs.
# Gives the supervisor three of its looks (one a second), then waits (at most two minutes) for a
# rewrite it started.
bench_settle_aof() {  # redis_socket
  local info
  sleep 3
  for _ in $(seq 1 1200); do
    info=$(redis-cli -s "$1" info persistence 2>/dev/null) || return 0
    grep -Eq '^aof_rewrite_(in_progress|scheduled):1' <<<"$info" || return 0
    sleep 0.1
  done
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
median() {  # numbers... -> their median; "-" if one is "-" (a figure that does not apply)
  printf '%s\n' "$@" | sort -g | awk '$1 == "-" { dash = 1 } { v[NR] = $1 }
    END { if (dash) print "-"; else print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

# The ARGV of one reserve script call of `batch` requests (fresh order ids and users through
# redis-benchmark's __rand_int__, one unit each, at now_ms, no idempotency key), in the layout the
# given sale_reserve.lua declares (its `-- ARGV:` line): before issue 30 six arguments a request;
# issue 30's floor_epoch floor_seq first; issue 34's floor_epoch floor_seq now_ms, then three a
# request (order_id user_id options, '' for one unit at now_ms). Prints one argument a line.
bench_reserve_argv() {  # script-source batch now_ms
  local decl i
  decl=$(grep -m1 '^-- ARGV:' <<<"$1")
  case $decl in
  *"now_ms request"*)
    printf '%s\n' 0 0 "$3"
    for i in $(seq 1 "$2"); do printf '%s\n' "o__rand_int____rand_int__" "u__rand_int__" ""; done
    ;;
  *floor_epoch*)
    printf '%s\n' 0 0
    for i in $(seq 1 "$2"); do printf '%s\n' "o__rand_int____rand_int__" "u__rand_int__" 1 "$3" 0 0; done
    ;;
  *)
    for i in $(seq 1 "$2"); do printf '%s\n' "o__rand_int____rand_int__" "u__rand_int__" 1 "$3" 0 0; done
    ;;
  esac
}
