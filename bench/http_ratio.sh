#!/usr/bin/env bash
# flashsale's HTTP purchase path against the HTTP limit of this machine, in one run: wrk drives
# POST /api/v1/activities/<id>/purchase at `flashsale serve` (release build, its own
# redis-server and SQLite, gateway identity), and the same request at nginx answering a constant
# reply of the same size. Two phases:
#   hot       every request reserves a unit (huge stock, a fresh user per request): HTTP + Redis
#   sold out  the activity is sold out: answered from the local flag, no Redis round trip
# Prints requests/s, p99 and flashsale's ratio to nginx for each phase.
#
#   bench/http_ratio.sh [seconds per run] [connections]     (defaults: 10, 64)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
connections=${2:-64}
threads=2

cmake --preset release >/dev/null
cmake --build --preset release --target flashsale >/dev/null
bin=build/release/src/flashsale

dir=$(mktemp -d /tmp/flashsale-http-bench-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
fs_port=$(free_port)
nginx_port=$(free_port)

# flashsale: one activity 'hot' (stock and limit so large every request reserves), one 'gone'
# (sold out).
"$bin" serve --listen "127.0.0.1:$fs_port" --data-dir "$dir/fs" --identity gateway \
  --threads "$threads" --log-level warn --admin-token bench-admin-token >"$dir/fs.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$fs_port/healthz" >/dev/null && break; sleep 0.05; done
admin=(-H "Authorization: Bearer bench-admin-token")
curl -sf "${admin[@]}" -d '{"id":"hot","stock":1000000000000,"per_user_limit":1000000000,"end_ms":4000000000000,"start_ms":0}' \
  "http://127.0.0.1:$fs_port/api/v1/admin/activities" >/dev/null
curl -sf "${admin[@]}" -d '{"id":"gone","stock":1,"end_ms":4000000000000,"start_ms":0}' \
  "http://127.0.0.1:$fs_port/api/v1/admin/activities" >/dev/null
curl -sf -X POST -H 'X-User-Id: first' "http://127.0.0.1:$fs_port/api/v1/activities/gone/purchase" >/dev/null
sold_out_reply=$(curl -s -X POST -H 'X-User-Id: someone' "http://127.0.0.1:$fs_port/api/v1/activities/gone/purchase")
hot_reply=$(curl -s -X POST -H 'X-User-Id: probe' "http://127.0.0.1:$fs_port/api/v1/activities/hot/purchase")

# nginx: the same replies, constant, from memory.
mkdir -p "$dir/nginx"
cat >"$dir/nginx/nginx.conf" <<CONF
worker_processes $threads;
pid $dir/nginx/nginx.pid;
error_log $dir/nginx/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$nginx_port reuseport;
    location /api/v1/activities/hot/purchase { default_type application/json; return 200 '$hot_reply'; }
    location /api/v1/activities/gone/purchase { default_type application/json; return 200 '$sold_out_reply'; }
  }
}
CONF
nginx -c "$dir/nginx/nginx.conf" -p "$dir/nginx" -g 'daemon off;' &
pids+=($!)
for _ in $(seq 1 200); do curl -sf -X POST "http://127.0.0.1:$nginx_port/api/v1/activities/gone/purchase" >/dev/null && break; sleep 0.05; done

# wrk: POST with a fresh X-User-Id per request.
cat >"$dir/purchase.lua" <<'LUA'
wrk.method = "POST"
local counter = 0
local thread_id = 0
setup = function(thread) thread:set("tid", thread_id); thread_id = thread_id + 1 end
request = function()
  counter = counter + 1
  return wrk.format(nil, nil, {["X-User-Id"] = "u" .. tid .. "-" .. counter})
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT %.0f %.3f %d %d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(99) / 1000, summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
LUA

run() {  # port activity -> "rps p99_ms non2xx socket_errors"
  wrk -t "$threads" -c "$connections" -d "${seconds}s" -s "$dir/purchase.lua" \
    "http://127.0.0.1:$1/api/v1/activities/$2/purchase" | awk '/^RESULT/ { print $2, $3, $4, $5 }'
}

echo "machine: $(nproc) cores, Linux $(uname -r); $(nginx -v 2>&1); redis $(redis-server --version | awk '{print $3}' | cut -d= -f2)"
echo "wrk: $threads threads, $connections connections, ${seconds}s per run; servers: $threads threads each"
read -r fs_hot fs_hot_p99 fs_hot_bad fs_hot_err < <(run "$fs_port" hot)
read -r ng_hot ng_hot_p99 _ _ < <(run "$nginx_port" hot)
read -r fs_out fs_out_p99 fs_out_bad fs_out_err < <(run "$fs_port" gone)
read -r ng_out ng_out_p99 _ _ < <(run "$nginx_port" gone)
reserved=$(curl -s "${admin[@]}" "http://127.0.0.1:$fs_port/api/v1/admin/activities/hot" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["redis"]["reserved"])')

printf '\n%-26s %12s %10s %12s %10s %8s\n' phase "flashsale/s" "p99 ms" "nginx/s" "p99 ms" ratio
printf '%-26s %12.0f %10.2f %12.0f %10.2f %8.2f\n' "hot (every request reserves)" "$fs_hot" "$fs_hot_p99" "$ng_hot" "$ng_hot_p99" "$(awk -v a="$fs_hot" -v b="$ng_hot" 'BEGIN{print a/b}')"
printf '%-26s %12.0f %10.2f %12.0f %10.2f %8.2f\n' "sold out (local answer)" "$fs_out" "$fs_out_p99" "$ng_out" "$ng_out_p99" "$(awk -v a="$fs_out" -v b="$ng_out" 'BEGIN{print a/b}')"
echo "flashsale non-2xx: hot $fs_hot_bad, sold out $fs_out_bad; socket errors: $fs_hot_err, $fs_out_err; units reserved in Redis: $reserved"
echo "aims: hot >= 0.80, sold out >= 0.95 of nginx"
