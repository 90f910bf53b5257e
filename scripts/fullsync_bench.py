#!/usr/bin/env python3
"""Full sync of a loaded primary to a new replica: Ferrite against Redis.

    scripts/fullsync_bench.py [--keys N] [--value-bytes B] [--out FILE]

For each server (`ferrite serve`, then redis-server 7.0), in the same run:
a primary is started in a fresh directory and filled with N keys of B
bytes (DEBUG POPULATE, 100,000 keys a command), then a replica of the same server is started and
told REPLICAOF. Measured:

- the time from REPLICAOF to the replica's `master_link_status:up`;
- the primary's memory before the sync and its peak during it, as the
  proportional set size (PSS, /proc/PID/smaps_rollup) of the primary and
  of every child it forks, sampled every 20 ms. PSS counts a page shared
  by a parent and its fork child once, split between them, so a fork's
  copy-on-write copies count and its shared pages do not count twice.

Ferrite builds the sync's RDB stream from its copy-before-write snapshot
in the primary's process (no fork); Redis forks a child that streams the
RDB (`repl-diskless-sync yes`, the 7.0 default). Both primaries send at
once (`repl-diskless-sync-delay 0`). Configurations: `ferrite` (the
replica keeps its log, so it writes the new dataset to it before the
link is up), `ferrite_replica_nolog` (the replica with `appendonly no`,
as the Redis replica), `redis` (the replica with `appendonly no` and
`save ""`, which loads the stream from a temporary RDB file on disk,
`repl-diskless-load disabled`).

Writes JSON (the figures and the settings) to --out, default
target/fullsync/fullsync.json. FERRITE_BIN selects the Ferrite binary
(default target/release/ferrite).
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

POPULATE_CHUNK = 100_000

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(port, *args, timeout=600):
    """Runs one command through redis-cli and returns its output."""
    out = subprocess.run(
        ["redis-cli", "-p", str(port), *map(str, args)],
        capture_output=True, text=True, timeout=timeout, check=True,
    )
    return out.stdout.strip()


def info_field(port, section, field):
    for line in cli(port, "INFO", section).splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    return None


def wait_ping(port, proc):
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server on port {port} exited with {proc.returncode}")
        try:
            if cli(port, "PING", timeout=5) == "PONG":
                return
        except subprocess.SubprocessError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not answer")


# Configurations: the server, and extra arguments for the replica.
CONFIGS = {
    "ferrite": ("ferrite", []),
    "ferrite_replica_nolog": ("ferrite", ["--appendonly", "no", "--save", ""]),
    "redis": ("redis", []),
}


def start(kind, port, data_dir, ferrite_bin, log, extra=()):
    if kind == "ferrite":
        cmd = [ferrite_bin, "serve", "--port", str(port), "--dir", data_dir,
               "--enable-debug-command", "yes", *extra]
    else:
        cmd = ["redis-server", "--port", str(port), "--dir", data_dir,
               "--save", "", "--appendonly", "no", "--enable-debug-command", "yes", *extra]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    wait_ping(port, proc)
    return proc


def pss_kib(pid):
    """PSS of `pid` in KiB, or 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except FileNotFoundError:
        return []


def tree_pss_kib(pid):
    return pss_kib(pid) + sum(pss_kib(c) for c in children(pid))


class Sampler(threading.Thread):
    """Samples the PSS of a process and its children until stopped."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            self.peak = max(self.peak, tree_pss_kib(self.pid))
            time.sleep(0.02)


def run_one(config, keys, value_bytes, ferrite_bin, scratch):
    kind, replica_extra = CONFIGS[config]
    primary_dir = os.path.join(scratch, config, "primary")
    replica_dir = os.path.join(scratch, config, "replica")
    os.makedirs(primary_dir)
    os.makedirs(replica_dir)
    pport, rport = free_port(), free_port()
    with open(os.path.join(scratch, config, "primary.log"), "w") as plog, \
            open(os.path.join(scratch, config, "replica.log"), "w") as rlog:
        primary = start(kind, pport, primary_dir, ferrite_bin, plog)
        replica = None
        try:
            cli(pport, "CONFIG", "SET", "repl-diskless-sync-delay", "0")
            t0 = time.time()
            # In commands of at most 100,000 keys: one command is one log
            # record on Ferrite, and the filling is not what is measured.
            for chunk, start_key in enumerate(range(0, keys, POPULATE_CHUNK)):
                count = min(POPULATE_CHUNK, keys - start_key)
                cli(pport, "DEBUG", "POPULATE", count, f"key{chunk}", value_bytes, timeout=3600)
            load_s = time.time() - t0
            dbsize = int(cli(pport, "DBSIZE"))
            if dbsize != keys:
                raise RuntimeError(f"{kind}: DBSIZE {dbsize}, wanted {keys}")
            time.sleep(1)
            before = tree_pss_kib(primary.pid)
            replica = start(kind, rport, replica_dir, ferrite_bin, rlog, replica_extra)
            sampler = Sampler(primary.pid)
            sampler.start()
            t0 = time.time()
            cli(rport, "REPLICAOF", "127.0.0.1", pport)
            while info_field(rport, "replication", "master_link_status") != "up":
                if time.time() - t0 > 3600:
                    raise RuntimeError(f"{kind}: the link did not come up")
                time.sleep(0.01)
            sync_s = time.time() - t0
            sampler.done.set()
            sampler.join()
            replica_keys = int(cli(rport, "DBSIZE"))
            if replica_keys != keys:
                raise RuntimeError(f"{kind}: replica has {replica_keys} keys")
            return {
                "config": config,
                "load_s": round(load_s, 3),
                "sync_s": round(sync_s, 3),
                "primary_pss_before_mib": round(before / 1024, 1),
                "primary_pss_peak_mib": round(max(sampler.peak, before) / 1024, 1),
                "primary_pss_growth_mib": round(max(sampler.peak - before, 0) / 1024, 1),
            }
        finally:
            for proc in (replica, primary):
                if proc is not None:
                    proc.kill()
                    proc.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--out", default=os.path.join(ROOT, "target/fullsync/fullsync.json"))
    args = parser.parse_args()
    ferrite_bin = os.environ.get("FERRITE_BIN", os.path.join(ROOT, "target/release/ferrite"))
    for tool in ("redis-server", "redis-cli"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed")
    if not os.access(ferrite_bin, os.X_OK):
        sys.exit(f"no Ferrite binary at {ferrite_bin} (cargo build --release -p ferrite)")
    scratch = tempfile.mkdtemp(prefix="fullsync-")
    try:
        results = [run_one(config, args.keys, args.value_bytes, ferrite_bin, scratch)
                   for config in CONFIGS]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    by = {r["config"]: r for r in results}
    report = {
        "experiment": "fullsync",
        "keys": args.keys,
        "value_bytes": args.value_bytes,
        "cores": os.cpu_count(),
        "results": results,
        "ratios_over_redis": {
            config: {
                "sync_s": round(by[config]["sync_s"] / by["redis"]["sync_s"], 3),
                "primary_pss_peak": round(by[config]["primary_pss_peak_mib"]
                                          / by["redis"]["primary_pss_peak_mib"], 3),
                "primary_pss_growth_mib_minus_redis": round(
                    by[config]["primary_pss_growth_mib"]
                    - by["redis"]["primary_pss_growth_mib"], 1),
            }
            for config in CONFIGS if config != "redis"
        },
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
