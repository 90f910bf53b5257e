#!/usr/bin/env bash
# Same-run A/B of ferrite-bench binaries built with different allocators
# (docs/results/allocator.md): for each round, each binary in turn serves
# (`kv-serve`, pinned to core 0, log on disk with appendfsync everysec)
# while its own load generator (`kv-load`, core 1, 50 clients, 256-byte
# values) measures SET and GET at pipeline 1 and 16; then a fresh server
# is filled with 1M keys of 100 bytes and its resident set read.
#
# Usage: allocator-ab.sh ROUNDS NAME=BINARY [NAME=BINARY...]
set -euo pipefail
rounds="$1"; shift
port=17990
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

serve() { # binary -> pid
  rm -rf "$dir/data"; mkdir -p "$dir/data"
  taskset -c 0 "$1" kv-serve --port "$port" --dir "$dir/data" \
    --appendfsync everysec --log-device file >/dev/null 2>&1 &
  echo $!
}
wait_port() {
  for _ in $(seq 300); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}
stop() { # pid: the server is not this shell's child (started in $(...)),
  # so `wait` cannot be used: poll until it is gone and its port is free.
  kill "$1" 2>/dev/null || true
  while kill -0 "$1" 2>/dev/null; do sleep 0.1; done
}
load() { # binary op pipeline requests
  taskset -c 1 "$1" kv-load --port "$port" --op "$2" --clients 50 \
    --pipeline "$3" --requests "$4" --value-bytes 256
}

echo "round,allocator,set_p1,get_p1,set_p16,get_p16,rss_mib_1m_x_100b"
for round in $(seq "$rounds"); do
  for pair in "$@"; do
    name="${pair%%=*}"; bin="${pair#*=}"
    pid=$(serve "$bin"); wait_port
    s1=$(load "$bin" set 1 100000); g1=$(load "$bin" get 1 100000)
    s16=$(load "$bin" set 16 500000); g16=$(load "$bin" get 16 500000)
    stop "$pid"
    pid=$(serve "$bin"); wait_port
    taskset -c 1 "$bin" kv-load --port "$port" --op fill --clients 50 \
      --requests 1000000 --value-bytes 100 >/dev/null
    rss=$(awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$pid/status")
    stop "$pid"
    echo "$round,$name,$s1,$g1,$s16,$g16,$rss"
  done
done
