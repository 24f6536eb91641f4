#!/usr/bin/env bash
# Orders persisted per second by one order consumer, SQLite and MariaDB, batch sizes 1 to 1000:
# builds the release preset's pipeline_bench and runs it (it starts its own redis-server and
# mariadbd; nothing needs to be running). Arguments go to pipeline_bench:
#
#   bench/pipeline_bench.sh [--rounds R] [--orders N] [--backends sqlite,mariadb]
#                           [--batches 1,10,100,1000]
#
# Prints the machine, then one row per backend and batch size (the best of R rounds, default 3):
# orders/s, the slowest round, the database's share of the time, and whether the aim (SQLite
# 50,000 and MariaDB 20,000 orders/s with batching) is met. Exits 1 only if a run did not end
# with exactly one row per order intent.
set -euo pipefail
cd "$(dirname "$0")/.."

cmake --preset release >/dev/null
cmake --build --preset release --target pipeline_bench >/dev/null
exec build/release/bench/pipeline_bench "$@"
