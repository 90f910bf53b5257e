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

# FERRITE_BIN runs an already built binary instead of building one.
# shellcheck source=scripts/cluster-nodes.sh
source "$root/scripts/cluster-nodes.sh"
need_redis_tools redis-cli redis-benchmark

addresses=()
for ((i = 0; i < count; i++)); do
    port=$((first_port + i))
    start_node "$port"
    addresses+=("127.0.0.1:$port")
done
for address in "${addresses[@]}"; do
    wait_node "${address##*:}"
done

create_cluster "$replicas" "${addresses[@]}"
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
