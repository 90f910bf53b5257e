#!/usr/bin/env bash
# Fills a fresh server with 1,000,000 keys `key:%012d` of incompressible
# values of the given size (the rewrite experiment's dataset), waits past
# jemalloc's 10 s dirty-page decay, and prints the server's memory as it
# reports it (INFO memory, MEMORY STATS, MEMORY USAGE of one key) and as the
# kernel sees it (RssAnon, RssFile).
#
# usage: kv-memory-per-key.sh BENCH_EXE ferrite|redis VALUE_BYTES [KEYS]
# BENCH_EXE is a ferrite-bench binary: it serves (`kv-serve`) for
# `ferrite` and fills (`kv-load --op fill`) for both.
set -euo pipefail
exe=$1 system=$2 bytes=$3 keys=${4:-1000000}
port=$((20000 + RANDOM % 10000))
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
common=(--appendonly yes --appendfsync everysec --auto-aof-rewrite-percentage 0)
case $system in
ferrite) "$exe" kv-serve --port "$port" --dir "$dir" "${common[@]}" \
    --log-device file --aof-rewrite-threads 2 >"$dir/server.log" 2>&1 &
    pid=$! ;;
redis) redis-server --port "$port" --save "" --dir "$dir" "${common[@]}" \
    --aof-use-rdb-preamble yes >"$dir/server.log" 2>&1 &
    pid=$! ;;
*) echo "system: ferrite or redis" >&2; exit 2 ;;
esac
for _ in $(seq 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.1
done
"$exe" kv-load --port "$port" --op fill --requests "$keys" --value-bytes "$bytes" --random-values >/dev/null
sleep 12
echo "system $system values $bytes keys $(redis-cli -p "$port" dbsize)"
redis-cli -p "$port" info memory | grep -E '^(used_memory|used_memory_rss|used_memory_overhead|used_memory_dataset|used_memory_startup|allocator_allocated|allocator_active|allocator_resident|allocator_frag_bytes|mem_clients_normal|mem_aof_buffer):'
redis-cli -p "$port" memory stats | paste - - | grep -E 'overhead.total|keys.bytes-per-key|dataset.bytes|keys.count|db.0' || true
echo "memory_usage_one_key $(redis-cli -p "$port" memory usage key:000000000001)"
grep -E '^(RssAnon|RssFile|RssShmem|VmRSS)' "/proc/$pid/status"
