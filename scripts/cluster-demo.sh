#!/usr/bin/env bash
# Builds a Redis Cluster of Ferrite nodes on this machine with the real
# `redis-cli --cluster create`, checks it with `redis-cli --cluster check`,
# writes and reads keys through `redis-cli -c`; then adds a primary and its
# replica with `redis-cli --cluster add-node` and moves RESHARD_SLOTS slots
# to the new primary with `redis-cli --cluster reshard` while
# `redis-benchmark --cluster` runs SET and GET against the cluster, which
# must see no error it does not follow; then stops the nodes.
#
# Usage: scripts/cluster-demo.sh [PRIMARIES] [REPLICAS_PER_PRIMARY] [FIRST_PORT]
#   defaults: 3 primaries, 1 replica each, ports from 31001 (bus ports +10000).
#   RESHARD_SLOTS (default 1000; 0 skips adding nodes and resharding).
# Needs redis-cli and redis-benchmark 7.x (redis-tools, installed with
# apt-get if missing and allowed).
set -euo pipefail

primaries=${1:-3}
replicas=${2:-1}
first_port=${3:-31001}
count=$((primaries * (replicas + 1)))
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ferrite-cluster.XXXXXX")

if ! command -v redis-cli >/dev/null 2>&1; then
    echo "redis-cli not found; installing redis-tools" >&2
    if command -v apt-get >/dev/null 2>&1; then
        apt-get install -y redis-tools >/dev/null
    else
        echo "install redis-cli 7.x and run again" >&2
        exit 1
    fi
fi

# FERRITE_BIN runs an already built binary instead of building one.
ferrite=${FERRITE_BIN:-}
if [ -z "$ferrite" ]; then
    echo "building ferrite (release)"
    cargo build --release -p ferrite --manifest-path "$root/Cargo.toml" >/dev/null
    ferrite="$root/target/release/ferrite"
fi

pids=()
stop_nodes() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
}
trap stop_nodes EXIT

# Starts a node on port $1 and waits (bounded) until it answers.
start_node() {
    local port=$1
    mkdir -p "$work/$port"
    "$ferrite" serve --port "$port" --cluster-enabled yes --dir "$work/$port" \
        --cluster-node-timeout 5000 >"$work/$port/log" 2>&1 &
    pids+=("$!")
}
wait_node() {
    local port=$1
    for _ in $(seq 1 100); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && break
        sleep 0.1
    done
    redis-cli -p "$port" ping >/dev/null
}

addresses=()
for ((i = 0; i < count; i++)); do
    port=$((first_port + i))
    start_node "$port"
    addresses+=("127.0.0.1:$port")
done
for address in "${addresses[@]}"; do
    wait_node "${address##*:}"
done

redis-cli --cluster create "${addresses[@]}" --cluster-replicas "$replicas" --cluster-yes
# The replicas' roles reach every node through the bus within a few
# pings; check once they have.
for _ in $(seq 1 50); do
    if redis-cli --cluster check "${addresses[0]}" | grep -q "All 16384 slots covered"; then
        break
    fi
    sleep 0.2
done
redis-cli --cluster check "${addresses[0]}"

echo "writing and reading keys through redis-cli -c"
for key in alpha beta gamma delta; do
    redis-cli -c -p "$first_port" set "$key" "value-of-$key" >/dev/null
done
for key in alpha beta gamma delta; do
    got=$(redis-cli -c -p "$first_port" get "$key")
    [ "$got" = "value-of-$key" ] || { echo "GET $key returned $got" >&2; exit 1; }
done
redis-cli -p "$first_port" cluster info | head -7

reshard_slots=${RESHARD_SLOTS:-1000}
if [ "$reshard_slots" -gt 0 ]; then
    # shellcheck source=scripts/cluster-grow.sh
    source "$root/scripts/cluster-grow.sh"
fi
echo "cluster demo: ok (node logs and nodes.conf in $work)"
