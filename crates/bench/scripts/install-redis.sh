#!/usr/bin/env bash
# Installs Debian's Redis 7 server and tools (redis-server, redis-benchmark),
# the baseline and load generator of the kv experiment, if they are missing.
set -euo pipefail
if command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null; then
    exit 0
fi
echo "installing redis-server and redis-tools (Debian packages) for the kv baseline" >&2
if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server redis-tools
# Debian starts a system Redis on 6379; the benchmark runs its own.
$SUDO service redis-server stop >/dev/null 2>&1 || true
