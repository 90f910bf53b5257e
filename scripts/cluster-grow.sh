# Sourced by cluster-demo.sh once its cluster is up: adds a primary and a
# replica of it with `redis-cli --cluster add-node`, then moves
# $reshard_slots slots from every primary to the new one with
# `redis-cli --cluster reshard` while `redis-benchmark --cluster` keeps
# running SET and GET. redis-benchmark follows MOVED and ASK by fetching
# the slots again and stops at any other error reply (it only reports
# CLUSTERDOWN and goes on), so the load passes when every run exits 0 with
# nothing but followed redirections on its standard error. Its keys are
# limited to 1,000 per node (-r): GETKEYSINSLOT walks every key
# (docs/cluster.md), so a slot holding a large keyspace that keeps growing
# under the load would take the reshard a long time. Uses cluster-demo.sh's variables
# (first_port, count, work, addresses) and functions (start_node, wait_node).

[ "$reshard_slots" -ge 2 ] || { echo "RESHARD_SLOTS must be 0 or at least 2" >&2; exit 1; }
new_primary=$((first_port + count))
new_replica=$((first_port + count + 1))
start_node "$new_primary"
start_node "$new_replica"
wait_node "$new_primary"
wait_node "$new_replica"

# Waits (bounded) until the node on port $1 knows node ID $2 and the
# cluster's check is clean from it.
wait_known() {
    for _ in $(seq 1 100); do
        if redis-cli -p "$1" cluster nodes | grep -q "^$2 " &&
            redis-cli --cluster check "127.0.0.1:$1" | grep -q "All 16384 slots covered"; then
            return 0
        fi
        sleep 0.2
    done
    echo "node $2 never became known to 127.0.0.1:$1" >&2
    return 1
}

echo "adding 127.0.0.1:$new_primary as a primary"
redis-cli --cluster add-node "127.0.0.1:$new_primary" "${addresses[0]}"
new_id=$(redis-cli -p "$new_primary" cluster myid)
wait_known "$first_port" "$new_id"
echo "adding 127.0.0.1:$new_replica as its replica"
redis-cli --cluster add-node "127.0.0.1:$new_replica" "${addresses[0]}" \
    --cluster-slave --cluster-master-id "$new_id"
replica_id=$(redis-cli -p "$new_replica" cluster myid)
wait_known "$first_port" "$replica_id"
for _ in $(seq 1 100); do
    redis-cli -p "$new_replica" info replication | grep -q "master_link_status:up" && break
    sleep 0.2
done
redis-cli -p "$new_replica" info replication | grep -q "master_link_status:up"

echo "writing 300 keys through redis-cli -c"
for i in $(seq 1 300); do echo "set grow:$i value-$i"; done |
    redis-cli -c -p "$first_port" >/dev/null

# redis-benchmark (7.0) leaves out a primary that serves no slot when it
# reads CLUSTER NODES at start, and stops with "could not find node with
# ID" once CLUSTER SLOTS names that node after a redirection: a client
# limitation that real Redis meets the same way. So the new primary gets
# its first slot before the load starts, and the rest under the load.
redis-cli --cluster reshard "${addresses[0]}" --cluster-from all --cluster-to "$new_id" \
    --cluster-slots 1 --cluster-yes >"$work/reshard-first.log" 2>&1 || {
    tail -20 "$work/reshard-first.log" >&2
    echo "moving the first slot failed" >&2
    exit 1
}
for _ in $(seq 1 100); do
    redis-cli --cluster check "${addresses[0]}" | grep -q "All nodes agree" && break
    sleep 0.2
done

# The load: redis-benchmark runs back to back until the reshard is over.
rm -f "$work/reshard.done" "$work/load.failed"
: >"$work/load.out"
: >"$work/load.err"
(
    while [ ! -e "$work/reshard.done" ]; do
        if ! redis-benchmark --cluster -h 127.0.0.1 -p "$first_port" -t set,get \
            -n 20000 -r 1000 -c 20 -d 64 -q >>"$work/load.out" 2>>"$work/load.err"; then
            touch "$work/load.failed"
            break
        fi
    done
) &
load_pid=$!

echo "resharding $reshard_slots slots to 127.0.0.1:$new_primary under the load"
started=$(date +%s.%N)
redis-cli --cluster reshard "${addresses[0]}" --cluster-from all --cluster-to "$new_id" \
    --cluster-slots $((reshard_slots - 1)) --cluster-pipeline 100 --cluster-yes >"$work/reshard.log" 2>&1 || {
    tail -20 "$work/reshard.log" >&2
    touch "$work/reshard.done"
    wait "$load_pid" || true
    echo "reshard failed (log: $work/reshard.log)" >&2
    exit 1
}
finished=$(date +%s.%N)
touch "$work/reshard.done"
wait "$load_pid" || true

# redis-benchmark -q separates its progress lines with carriage returns.
tr '\r' '\n' <"$work/load.out" >"$work/load.txt"
runs=$(grep -c "^SET: [0-9.]* requests per second" "$work/load.txt" || true)
# redis-benchmark reports each redirection it follows as "WARNING: Cluster
# slots configuration changed"; anything else on its standard error is an
# error it did not follow.
if [ -e "$work/load.failed" ] || grep -v -q "^WARNING: Cluster slots configuration changed" "$work/load.err" ||
    [ "$runs" -lt 1 ]; then
    echo "the load saw errors ($runs runs):" >&2
    head -20 "$work/load.err" >&2
    exit 1
fi
printf 'reshard of %s slots: %.1f s; %s redis-benchmark runs during it, no error\n' \
    "$reshard_slots" "$(echo "$finished - $started" | bc)" "$runs"
grep -E "^(SET|GET): [0-9.]* requests per second" "$work/load.txt" | head -6

redis-cli --cluster check "${addresses[0]}" | tee "$work/check.log" | grep -E "slots|OK|ERR|WARN"
if grep -q -E "\[ERR\]|\[WARNING\]" "$work/check.log"; then
    echo "--cluster check is not clean after the reshard" >&2
    exit 1
fi
moved=$(redis-cli -p "$new_primary" cluster nodes | grep "^$new_id " | awk '{
    n = 0
    for (i = 9; i <= NF; i++) {
        split($i, r, "-")
        n += (r[2] == "" ? 1 : r[2] - r[1] + 1)
    }
    print n
}')
[ "$moved" = "$reshard_slots" ] || { echo "the new primary serves $moved slots" >&2; exit 1; }
for i in $(seq 1 300); do echo "get grow:$i"; done |
    redis-cli -c -p "$first_port" >"$work/readback.txt"
for i in 1 150 300; do
    grep -qx "value-$i" "$work/readback.txt" || { echo "grow:$i is lost" >&2; exit 1; }
done
[ "$(grep -c '^value-' "$work/readback.txt")" = 300 ] || {
    echo "not every key read back after the reshard" >&2
    exit 1
}
echo "add-node and reshard under load: ok ($moved slots on the new primary)"
