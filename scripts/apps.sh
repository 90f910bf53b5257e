#!/usr/bin/env bash
# Runs real applications against `ferrite serve` and against real
# redis-server 7.0 in the same run, each on its own port with a fresh data
# directory: a Python RQ queue (200 jobs with checked results, a job
# scheduled for later and run by a worker started `--with-scheduler`, a
# failing job that must land in the failed job registry) and a Celery worker
# with the Redis broker and Redis result backend (100 tasks, results
# fetched and checked). Each check prints PASS or FAIL; a summary per server
# follows; the exit status is non-zero when any check fails on either.
#
#   scripts/apps.sh
#
# Installs rq, celery and redis-py with pip into a virtualenv under
# target/apps/ (never from the tests). Environment: APPS_PORT (Ferrite's
# port, default 21630; Redis gets the next one), APPS_SERVERS (default
# "ferrite redis"), FERRITE_BIN (default: target/release/ferrite, built
# here). Worker logs go to target/apps/logs/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$root/target/apps"
port="${APPS_PORT:-21630}"
servers=(${APPS_SERVERS:-ferrite redis})

ferrite="${FERRITE_BIN:-$root/target/release/ferrite}"
if [ -z "${FERRITE_BIN:-}" ]; then
  (cd "$root" && cargo build --release -q -p ferrite)
fi
command -v redis-server >/dev/null || {
  apt-get update -qq && apt-get install -y -qq redis-server >/dev/null
}

venv="$work/venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check \
  "rq==3.0.0" "celery==5.7.0" "redis==8.1.0" "packaging"

mkdir -p "$work/logs"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

# Starts one server on its port with a fresh data directory.
start_server() { # name port
  local name="$1" p="$2" dir="$work/data/$1"
  rm -rf "$dir" && mkdir -p "$dir"
  case "$name" in
    ferrite) "$ferrite" serve --port "$p" --dir "$dir" >"$work/logs/$name.log" 2>&1 & ;;
    redis) redis-server --port "$p" --dir "$dir" --save '' --appendonly no \
      >"$work/logs/$name.log" 2>&1 & ;;
  esac
  pids+=($!)
  for _ in $(seq 1 100); do
    redis-cli -p "$p" ping 2>/dev/null | grep -q PONG && return 0
    sleep 0.1
  done
  echo "FAIL $name: the server did not start (see $work/logs/$name.log)"
  return 1
}

status=0
summary=()
i=0
for name in "${servers[@]}"; do
  p=$((port + i))
  i=$((i + 1))
  if ! start_server "$name" "$p"; then
    status=1
    summary+=("$name: server did not start")
    continue
  fi
  if "$venv/bin/python" "$root/scripts/apps/check.py" "$name" "redis://127.0.0.1:$p/0" \
    "$work/logs" | tee "$work/logs/check-$name.log"; then
    :
  else
    status=1
  fi
  summary+=("$(grep '^SUMMARY' "$work/logs/check-$name.log" || echo "$name: no summary")")
done

echo
echo "== Applications summary"
printf '%s\n' "${summary[@]}"
exit "$status"
