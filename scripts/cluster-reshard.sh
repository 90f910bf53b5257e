#!/usr/bin/env bash
# Moves slots between two primaries of a Ferrite cluster with the real
# `redis-cli --cluster reshard` while `redis-benchmark --cluster` keeps
# running SET and GET, as a Redis Cluster user reshards in production.
#
# Three primaries and three replicas of `ferrite serve` are joined with
# `redis-cli --cluster create`; the cluster is filled with KEYS keys; then
# SLOTS slots (default 1,000) move from the first primary to the second
# with `--cluster-pipeline 100` under the load. It passes when the reshard
# finishes, `--cluster check` is clean, the second primary serves the
# moved slots, no key of the fill is lost, no node was failed over, and
# the load saw no error other than the redirections it follows.
#
# Usage: scripts/cluster-reshard.sh [FIRST_PORT]
#   FIRST_PORT (default 32201; bus ports are 10000 above).
#   SLOTS (default 1000), KEYS (default 100000).
#   FERRITE_BIN runs an already built binary instead of building one.
# Needs redis-cli and redis-benchmark 7.x (redis-tools, installed with
# apt-get if missing and allowed). Every node it starts is stopped when it
# exits, however it exits.
set -euo pipefail

first_port=${1:-32201}
slots=${SLOTS:-1000}
keys=${KEYS:-100000}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ferrite-reshard.XXXXXX")

# shellcheck source=scripts/cluster-nodes.sh
source "$root/scripts/cluster-nodes.sh"
need_redis_tools redis-cli redis-benchmark

addresses=()
for i in 0 1 2 3 4 5; do
    port=$((first_port + i))
    start_node "$port"
    addresses+=("127.0.0.1:$port")
done
for address in "${addresses[@]}"; do
    wait_node "${address##*:}"
done
create_cluster 1 "${addresses[@]}"

# The primaries by the slots they serve: `create` gives the first range
# to the first address.
node_of_slot() {
    redis-cli -p "$first_port" cluster nodes | awk -v s="$1" '$3 ~ /master/ {
        for (i = 9; i <= NF; i++) {
            n = split($i, r, "-")
            lo = r[1]; hi = (n == 2 ? r[2] : r[1])
            if (s + 0 >= lo + 0 && s + 0 <= hi + 0) { print $1; exit }
        }
    }'
}
from_id=$(node_of_slot 0)
to_id=$(node_of_slot 6000)
# The primaries that serve slots (a replica that just joined shows as a
# primary without slots until its role spreads).
serving() {
    redis-cli -p "$first_port" cluster nodes | awk '$3 ~ /master/ && NF > 8 {print $1}' | sort
}
primaries_before=$(serving)

echo "filling the cluster with $keys keys"
redis-benchmark --cluster -h 127.0.0.1 -p "$first_port" -t set -n "$keys" -r "$keys" \
    -c 50 -P 16 -d 64 -q >/dev/null 2>"$work/fill.err"
# redis-benchmark puts a node's keys under hash tags of its own; keys
# written through redis-cli -c land in every slot, the moved ones too.
for i in $(seq 1 2000); do echo "set reshard:$i value-$i"; done |
    redis-cli -c -p "$first_port" >/dev/null
redis-cli --cluster call "${addresses[0]}" dbsize >"$work/dbsize.before"
in_moved=0
for ((slot = 0; slot < slots; slot++)); do
    in_moved=$((in_moved + $(redis-cli -p "$first_port" cluster countkeysinslot "$slot")))
done

# The load runs back to back until the reshard is over. redis-benchmark
# follows MOVED and ASK (it refetches the slots and prints a WARNING);
# any other error reply ends it with a non-zero status.
: >"$work/load.out"
: >"$work/load.err"
(
    while [ ! -e "$work/reshard.done" ]; do
        if ! redis-benchmark --cluster -h 127.0.0.1 -p "$first_port" -t set,get \
            -n 20000 -r "$keys" -c 20 -d 64 -q >>"$work/load.out" 2>>"$work/load.err"; then
            touch "$work/load.failed"
            break
        fi
    done
) &
load_pid=$!

echo "resharding $slots slots from $from_id to $to_id under the load"
started=$(date +%s.%N)
if ! redis-cli --cluster reshard "${addresses[0]}" --cluster-from "$from_id" \
    --cluster-to "$to_id" --cluster-slots "$slots" --cluster-pipeline 100 \
    --cluster-yes >"$work/reshard.log" 2>&1; then
    touch "$work/reshard.done"
    tail -20 "$work/reshard.log" >&2
    echo "the reshard failed (logs in $work)" >&2
    exit 1
fi
finished=$(date +%s.%N)
touch "$work/reshard.done"
wait "$load_pid" || true
load_pid=

failed=0
# redis-benchmark -q separates its progress lines with carriage returns.
tr '\r' '\n' <"$work/load.out" >"$work/load.txt"
runs=$(grep -c "^SET: [0-9.]* requests per second" "$work/load.txt" || true)
if [ -e "$work/load.failed" ] || [ "$runs" -lt 1 ] ||
    grep -v -q "^WARNING: Cluster slots configuration changed" "$work/load.err"; then
    echo "the load saw errors ($runs runs):" >&2
    head -20 "$work/load.err" >&2
    failed=1
fi
# The replicas learn the last moves from the next pings: the check is
# repeated (bounded) until every node agrees.
for _ in $(seq 1 50); do
    redis-cli --cluster check "${addresses[0]}" >"$work/check.log" || true
    grep -q -E "\[ERR\]|\[WARNING\]" "$work/check.log" || break
    sleep 0.2
done
if grep -q -E "\[ERR\]|\[WARNING\]" "$work/check.log"; then
    echo "--cluster check is not clean:" >&2
    grep -E "\[ERR\]|\[WARNING\]" "$work/check.log" >&2
    failed=1
fi
primaries_after=$(serving)
if [ "$primaries_before" != "$primaries_after" ]; then
    echo "a primary was failed over during the reshard" >&2
    failed=1
fi
for slot in 0 $((slots - 1)); do
    owner=$(node_of_slot "$slot")
    [ "$owner" = "$to_id" ] || { echo "slot $slot is served by $owner" >&2; failed=1; }
done
left=0
for ((slot = 0; slot < slots; slot++)); do
    left=$((left + $(redis-cli -p "$first_port" cluster countkeysinslot "$slot")))
done
[ "$left" = 0 ] || { echo "$left keys of the moved slots are still on the source" >&2; failed=1; }
for i in $(seq 1 2000); do echo "get reshard:$i"; done |
    redis-cli -c -p "$first_port" >"$work/readback.txt"
read_back=$(grep -c '^value-' "$work/readback.txt" || true)
[ "$read_back" = 2000 ] || { echo "$read_back of 2000 keys read back" >&2; failed=1; }
total_before=$(awk 'NR > 1 && $2 ~ /^[0-9]+$/ {s += $2} END {print s + 0}' "$work/dbsize.before")
redis-cli --cluster call "${addresses[0]}" dbsize >"$work/dbsize.after"
total_after=$(awk 'NR > 1 && $2 ~ /^[0-9]+$/ {s += $2} END {print s + 0}' "$work/dbsize.after")
if [ "$total_after" -lt "$total_before" ]; then
    echo "the cluster held $total_before keys (with replicas) and now $total_after" >&2
    failed=1
fi
[ "$failed" = 0 ] || { echo "logs in $work" >&2; exit 1; }
printf 'reshard of %s slots under load: %.1f s, %s redis-benchmark runs, no error\n' \
    "$slots" "$(echo "$finished - $started" | bc)" "$runs"
printf 'keys (primaries and replicas): %s before, %s after; %s keys were in the moved slots\n' \
    "$total_before" "$total_after" "$in_moved"
grep -E "^(SET|GET): [0-9.]* requests per second" "$work/load.txt" | tail -4
echo "cluster reshard under load: ok"
