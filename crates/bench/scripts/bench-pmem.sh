#!/usr/bin/env bash
# Runs the pmem experiment with the libpmem baseline: installs Debian's
# libpmem-dev if it is missing, builds with the `libpmem` feature, and makes
# libpmem treat the emulated PM on tmpfs as PM (flushes, not msync).
# Usage: crates/bench/scripts/bench-pmem.sh [--out DIR] [--quick] [--runs N]
set -euo pipefail
cd "$(dirname "$0")/../../.."
if ! ldconfig -p | grep -q 'libpmem\.so\b'; then
    echo "installing libpmem-dev (Debian package) for the libpmem baseline"
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq libpmem-dev
fi
export PMEM_IS_PMEM_FORCE=1
exec cargo run --release -p ferrite-bench --features libpmem -- pmem "$@"
