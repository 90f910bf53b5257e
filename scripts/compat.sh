#!/usr/bin/env bash
# Runs units of Redis 7.0.15's own test suite against `ferrite serve` and
# against real redis-server 7.0 in the same way, and prints a per-unit table
# of passed tests (the baseline is what real Redis passes).
#
#   scripts/compat.sh REDIS_SRC [unit ...]
#
# REDIS_SRC is a checkout of the Redis source at tag 7.0.15 (github
# redis/redis); only its tests/ directory is used, unmodified. The harness
# runs in external mode (`--singledb --ignore-encoding --ignore-digest`)
# against a fresh server per unit. Installs tclsh and redis-server/redis-cli
# from Debian's packages if they are missing. Results go to
# target/compat/<server>/<unit>.log; the table to stdout.
#
# Environment: FERRITE_BIN (default: target/release/ferrite, built here),
# COMPAT_SERVERS (default "ferrite redis"), COMPAT_TIMEOUT (seconds a unit
# may take, default 600), COMPAT_PORT (the server's port, default 21600; give
# concurrent runs different ports), COMPAT_MODE (default "external"),
# COMPAT_HARNESS_ARGS (more test_helper.tcl options, e.g. `--tags -needs:debug`
# to see what a unit's exceptions hide; not for the reported ratios),
# COMPAT_TLS (1: external mode over TLS, below).
#
# COMPAT_TLS=1 runs external mode over TLS: each server listens on
# COMPAT_PORT as its `tls-port` only (`port 0`), with the certificates that
# Redis's utils/gen-test-certs.sh writes into the scratch copy's tests/tls
# (client certificates required, as the harness presents one), and the
# harness runs with `--tls` (Tcl's tls package, Debian's tcl-tls, is
# installed if missing). Results go to target/compat/tls/<server>.
#
# COMPAT_MODE=own runs the harness the way Redis's own CI does: it starts
# its own servers (`start_server` blocks, tests tagged external:skip too)
# from config files it writes, through the suite's src/redis-server, which
# here is a small script that runs `ferrite serve <config file> [args]`
# (or the installed redis-server for the baseline). Spawned servers take
# ports from a range derived from COMPAT_PORT, so concurrent runs with
# different COMPAT_PORTs do not meet.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
src="${1:?usage: scripts/compat.sh REDIS_SRC [unit ...]}"
shift
src="$(cd "$src" && pwd)"
units=("$@")
if [ ${#units[@]} -eq 0 ]; then
  units=(type/string type/incr type/hash type/list type/list-2 type/list-3 type/set
    type/zset expire keyspace multi protocol scan info-command info introspection
    introspection-2 bitops bitfield hyperloglog geo sort dump pubsub pubsubshard
    slowlog latency-monitor tracking maxmemory pause querybuf limits quit)
fi
servers=(${COMPAT_SERVERS:-ferrite redis})
timeout_s="${COMPAT_TIMEOUT:-600}"

need=()
command -v tclsh >/dev/null || need+=(tcl)
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-cli >/dev/null || need+=(redis-tools)
tls="${COMPAT_TLS:-0}"
if [ "$tls" = 1 ]; then
  command -v openssl >/dev/null || need+=(openssl)
  echo 'package require tls' | tclsh >/dev/null 2>&1 || need+=(tcl-tls)
fi
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
fi
ferrite="$(realpath "${FERRITE_BIN:-$root/target/release/ferrite}")"
if [ -z "${FERRITE_BIN:-}" ]; then
  (cd "$root" && cargo build --release -q -p ferrite)
fi

# The harness reads helpers from its own src/ (redis-cli, redis-benchmark):
# run it from a scratch copy of tests/ with those pointing at the installed ones.
work="$root/target/compat"
rm -rf "$work/suite" && mkdir -p "$work/suite/src"
cp -r "$src/tests" "$work/suite/tests"
cp "$src/runtest" "$work/suite/" 2>/dev/null || true
for tool in redis-cli redis-benchmark redis-check-aof redis-check-rdb; do
  if command -v "$tool" >/dev/null; then ln -sf "$(command -v "$tool")" "$work/suite/src/$tool"; fi
done
port="${COMPAT_PORT:-21600}"
mode="${COMPAT_MODE:-external}"
tls_args=()
server_tls=()
cli_tls=()
if [ "$tls" = 1 ]; then
  [ "$mode" = external ] || { echo "COMPAT_TLS=1 needs COMPAT_MODE=external" >&2; exit 2; }
  # The suite's certificates, made in the scratch copy (the checkout is
  # only read). Kept across runs: making DH parameters takes a while.
  certs="$root/target/compat/tls-certs"
  if [ ! -s "$certs/redis.dh" ]; then
    rm -rf "$certs" && mkdir -p "$certs"
    (cd "$certs" && bash "$src/utils/gen-test-certs.sh" >/dev/null 2>&1)
  fi
  cp -r "$certs/tests/tls" "$work/suite/tests/tls"
  t="$work/suite/tests/tls"
  tls_args=(--tls)
  server_tls=(--port 0 --tls-port "$port" --tls-cert-file "$t/server.crt" --tls-key-file "$t/server.key"
    --tls-ca-cert-file "$t/ca.crt" --tls-dh-params-file "$t/redis.dh")
  cli_tls=(--tls --cert "$t/client.crt" --key "$t/client.key" --cacert "$t/ca.crt")
fi
# 250 ports per COMPAT_PORT from 30000 for the servers the harness starts
# (own mode) and, 32 below its base, its own test clients (both modes):
# concurrent runs would otherwise all take the harness's default ports.
# COMPAT_PORTs whose tens differ modulo 85 (21600, 21650, 22100...) get
# distinct ranges, all below 55,500: the harness also probes each port
# plus 10,000 (a cluster bus port), which must stay below 65,536.
own_base=$(( 30000 + (port / 10 % 85) * 300 + 32 ))

# Points the suite's src/redis-server at `server`'s binary.
install_server_wrapper() { # server
  local target=$work/suite/src/redis-server
  rm -f "$target"
  case $1 in
    # The harness waits for " PID: <pid>" in the server's output; exec
    # keeps the script's pid. Ferrite logs to stderr: both go to stdout.
    ferrite) printf '#!/bin/sh\necho "ferrite started PID: $$"\nexec %q serve "$@" 2>&1\n' "$ferrite" >"$target" ;;
    redis) ln -s "$(command -v redis-server)" "$target" ;;
  esac
  chmod +x "$target"
}

# Tests that look up the pid of the server's forked RDB child (the suite's
# get_child_pid, which runs `pgrep -P`). Ferrite produces RDB on a thread,
# never in a child, and there the lookup raises a Tcl error that ends the
# whole unit, so every later test of the unit would go unrun. Ferrite's runs
# skip these by name; they count as not passed, as any other failure.
fork_child_tests=(
  "diskless replication child being killed is collected"
  "replication child dies when parent is killed - diskless: yes"
  "replication child dies when parent is killed - diskless: no"
  "Temp rdb will be deleted if we use bg_unlink when shutdown"
  "CONFIG SET oom-score-adj works as expected"
)

# integration/corrupt-dump tests that give Redis, with
# `sanitize-dump-payload no`, a payload it accepts unchecked and then
# expect an assertion or a crash from a later command. Ferrite checks every
# payload in full whatever the setting, so RESTORE refuses it, and the
# refusal, raised outside an assertion, would end the whole unit. Ferrite's
# runs skip these by name; they count as not passed.
unsanitized_crash_tests=(
  "corrupt payload: fuzzer findings - infinite loop"
  "corrupt payload: fuzzer findings - negative reply length"
  "corrupt payload: fuzzer findings - stream listpack valgrind issue"
  "corrupt payload: fuzzer findings - lpFind invalid access"
)

run_unit() { # server unit log
  local server=$1 unit=$2 log=$3
  if [ "$mode" = own ]; then
    install_server_wrapper "$server"
    local skips=()
    if [ "$server" = ferrite ]; then
      for t in "${fork_child_tests[@]}" "${unsanitized_crash_tests[@]}"; do
        skips+=(--skiptest "$t")
      done
    fi
    (cd "$work/suite" && timeout "$timeout_s" tclsh tests/test_helper.tcl --baseport "$own_base" \
      --portcount 250 --ignore-encoding --ignore-digest --single "unit/$unit" --clients 1 \
      "${skips[@]}" ${COMPAT_HARNESS_ARGS:-} >"$log" 2>&1) || true
    return
  fi
  local dir="$work/$server/data-${unit//\//_}"
  rm -rf "$dir" && mkdir -p "$dir"
  local pid
  pid=$(start_server "$server" "$dir")
  (cd "$work/suite" && timeout "$timeout_s" tclsh tests/test_helper.tcl --host 127.0.0.1 \
    --port "$port" --baseport "$own_base" --portcount 250 --singledb --ignore-encoding --ignore-digest --single "unit/$unit" \
    --clients 1 "${tls_args[@]}" ${COMPAT_HARNESS_ARGS:-} >"$log" 2>&1) || true
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

start_server() { # server dir -> pid
  local server=$1 dir=$2
  case $server in
    ferrite) "$ferrite" serve --port "$port" --dir "$dir" --enable-debug-command yes \
      "${server_tls[@]}" >"$dir/server.log" 2>&1 & ;;
    redis) redis-server --port "$port" --dir "$dir" --save '' --appendonly no \
      --enable-debug-command yes "${server_tls[@]}" >"$dir/server.log" 2>&1 & ;;
  esac
  echo $!
  for _ in $(seq 100); do
    redis-cli "${cli_tls[@]}" -p "$port" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
}

# Results by mode: external in target/compat/<server>, own in
# target/compat/own/<server>. The baseline is Redis's list of passed tests
# from this run or, with COMPAT_SERVERS=ferrite, from an earlier one.
results="$work"
[ "$mode" = own ] && results="$work/own"
[ "$tls" = 1 ] && results="$work/tls"
declare -A total_ok
for s in "${servers[@]}"; do total_ok[$s]=0; done
total_both=0
total_base=0
printf '%-18s' unit
for s in "${servers[@]}"; do printf ' %9s' "$s"; done
printf ' %9s %7s\n' "both" "ratio"
for unit in "${units[@]}"; do
  printf '%-18s' "$unit"
  for s in "${servers[@]}"; do
    mkdir -p "$results/$s"
    log="$results/$s/${unit//\//_}.log"
    run_unit "$s" "$unit" "$log"
    sed 's/\x1b\[[0-9;]*m//g' "$log" >"$log.plain"
    grep '^\[ok\]: ' "$log.plain" | sed 's/^\[ok\]: //; s/ ([0-9]* ms)$//' | sort -u \
      >"${log%.log}.passed" || true
    ok=$(wc -l <"${log%.log}.passed")
    total_ok[$s]=$(( ${total_ok[$s]} + ok ))
    printf ' %9s' "$ok"
  done
  # Tests both servers pass, against what Redis passes.
  first="${servers[0]}"
  baseline="$results/redis/${unit//\//_}.passed"
  [ -f "$baseline" ] || baseline=/dev/null
  both=$(comm -12 "$results/$first/${unit//\//_}.passed" "$baseline" | wc -l)
  basen=$(wc -l <"$baseline")
  total_both=$(( total_both + both ))
  total_base=$(( total_base + basen ))
  printf ' %9s %7s\n' "$both" "$(awk -v a="$both" -v b="$basen" 'BEGIN { if (b > 0) printf "%.1f%%", 100 * a / b; else print "-" }')"
done
printf '%-18s' total
for s in "${servers[@]}"; do printf ' %9s' "${total_ok[$s]}"; done
printf ' %9s %7s\n' "$total_both" "$(awk -v a="$total_both" -v b="$total_base" 'BEGIN { if (b > 0) printf "%.1f%%", 100 * a / b; else print "-" }')"
