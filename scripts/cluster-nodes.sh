# Sourced by cluster-demo.sh and cluster-reshard.sh: what both need to run
# a Redis Cluster of `ferrite serve` processes on this machine.
#
# Expects `root` (the repository) and `work` (a scratch directory) set by
# the caller. Provides:
#   need_redis_tools TOOL...  each tool on PATH, else redis-tools installed
#                             with apt-get when it is there, else exit 1;
#   ferrite                   the binary: FERRITE_BIN, or a release build;
#   start_node PORT           a cluster node on PORT (bus PORT+10000), its
#                             files and log in $work/PORT;
#   wait_node PORT            returns once it answers PING (bounded);
#   create_cluster REPLICAS ADDRESS...
#                             `redis-cli --cluster create`, then waits
#                             (bounded) until the check sees every slot;
#   load_pid                  set it to a background job's PID to have it
#                             stopped with the nodes.
# Every node started is stopped when the caller exits, however it exits.

need_redis_tools() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null 2>&1 && continue
        echo "$tool not found; installing redis-tools" >&2
        if command -v apt-get >/dev/null 2>&1; then
            apt-get install -y redis-tools >/dev/null
        fi
        command -v "$tool" >/dev/null 2>&1 || {
            echo "install $tool 7.x and run again" >&2
            exit 1
        }
    done
}

ferrite=${FERRITE_BIN:-}
if [ -z "$ferrite" ]; then
    echo "building ferrite (release)"
    cargo build --release -p ferrite --manifest-path "$root/Cargo.toml" >/dev/null
    ferrite="$root/target/release/ferrite"
fi

pids=()
load_pid=
stop_nodes() {
    if [ -n "$load_pid" ]; then
        kill "$load_pid" 2>/dev/null || true
    fi
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
}
trap stop_nodes EXIT

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

# The replicas' roles reach every node through the bus within a few
# pings; the check is clean once they have.
create_cluster() {
    local replicas=$1
    shift
    redis-cli --cluster create "$@" --cluster-replicas "$replicas" --cluster-yes \
        >"$work/create.log"
    for _ in $(seq 1 100); do
        redis-cli --cluster check "$1" 2>/dev/null | grep -q "All 16384 slots covered" && break
        sleep 0.2
    done
    redis-cli --cluster check "$1" | grep -q "All 16384 slots covered"
}
