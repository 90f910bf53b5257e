#!/usr/bin/env python3
"""Replication between Ferrite and real Redis 7, both ways, on a large
dataset of every type.

1. A redis-server primary is loaded with KEYS keys (default 1,000,000):
   strings, lists, hashes, sets, sorted sets and streams in turn, one key
   in ten with a TTL far in the future. A `ferrite serve` replica is
   attached with REPLICAOF; once its link is up and its offset matches,
   every key is read from both servers (TYPE, then the whole value by
   type, TTL to the second) and compared. Then more writes go to the
   primary and are compared again on the replica: it follows.
2. The same with the roles swapped: a Ferrite primary, a redis-server
   replica.

It exits 0 when both directions converge, and prints the figures.
Usage: scripts/redis-interop.py [KEYS]
Needs redis-server 7.x on PATH (redis-tools / redis-server packages) and
builds Ferrite in release mode unless FERRITE_BIN names a binary. Only
the Python standard library is used.
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

TYPES = ("string", "list", "hash", "set", "zset", "stream")
BATCH = 2000


class Conn:
    """A pipelining RESP2 client: enough for this script's commands."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def send(self, commands):
        out = bytearray()
        for args in commands:
            out += b"*%d\r\n" % len(args)
            for a in args:
                a = a if isinstance(a, bytes) else str(a).encode()
                out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest
        if kind == b"-":
            return ("error", rest)
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise ValueError("bad reply line %r" % line)

    def pipeline(self, commands):
        self.send(commands)
        return [self.reply() for _ in commands]

    def call(self, *args):
        return self.pipeline([args])[0]

    def info(self, field):
        text = self.call("INFO").decode()
        for line in text.splitlines():
            if line.startswith(field + ":"):
                return line.split(":", 1)[1]
        return ""


def wait_port(port, what):
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            c = Conn(port)
            if c.call("PING") == b"PONG":
                return c
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit("%s did not start on port %d" % (what, port))


def eventually(what, check, seconds=600):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if check():
            return
        time.sleep(0.2)
    sys.exit("timed out waiting for " + what)


def writes(first, count):
    """The commands that create keys first..first+count, by type."""
    out = []
    for i in range(first, first + count):
        kind = TYPES[i % len(TYPES)]
        key = "k:%s:%d" % (kind, i)
        if kind == "string":
            out.append(("SET", key, "v%d" % i * 3))
        elif kind == "list":
            out.append(["RPUSH", key] + ["e%d-%d" % (i, j) for j in range(5)])
        elif kind == "hash":
            out.append(["HSET", key] + [x for j in range(5) for x in ("f%d" % j, "%d" % (i * j))])
        elif kind == "set":
            out.append(["SADD", key] + ["m%d" % ((i + j) % 97) for j in range(5)])
        elif kind == "zset":
            out.append(["ZADD", key] + [x for j in range(5) for x in ("%d.5" % j, "z%d" % j)])
        else:
            for j in range(3):
                out.append(("XADD", key, "*", "n", "%d" % j, "i", "%d" % i))
        if i % 10 == 0:
            out.append(("EXPIRE", key, 86400 * 30))
    return out


def load(conn, first, count):
    commands = writes(first, count)
    for at in range(0, len(commands), BATCH):
        for r in conn.pipeline(commands[at:at + BATCH]):
            if isinstance(r, tuple):
                sys.exit("a load command failed: %r" % (r,))


def read_commands(key, kind):
    if kind == b"string":
        return [("GET", key)]
    if kind == b"list":
        return [("LRANGE", key, 0, -1)]
    if kind == b"hash":
        return [("HGETALL", key)]
    if kind == b"set":
        return [("SMEMBERS", key)]
    if kind == b"zset":
        return [("ZRANGE", key, 0, -1, "WITHSCORES")]
    return [("XRANGE", key, "-", "+")]


def normalise(kind, value):
    # Hash fields and set members come in an order each server picks.
    if kind == b"hash":
        return sorted(zip(value[::2], value[1::2]))
    if kind == b"set":
        return sorted(value)
    return value


def scan_keys(conn):
    keys, cursor = [], b"0"
    while True:
        cursor, batch = conn.call("SCAN", cursor, "COUNT", 10000)
        keys.extend(batch)
        if cursor == b"0":
            return keys


def compare(primary, replica):
    """Every key of the primary, read from both; returns the key count."""
    keys = scan_keys(primary)
    if primary.call("DBSIZE") != replica.call("DBSIZE"):
        sys.exit("DBSIZE differs: %r vs %r" % (primary.call("DBSIZE"), replica.call("DBSIZE")))
    for at in range(0, len(keys), BATCH):
        batch = keys[at:at + BATCH]
        kinds = primary.pipeline([("TYPE", k) for k in batch])
        other = replica.pipeline([("TYPE", k) for k in batch])
        if kinds != other:
            sys.exit("types differ in keys %d..%d" % (at, at + len(batch)))
        commands = [c for k, t in zip(batch, kinds) for c in read_commands(k, t)]
        ttl = [("TTL", k) for k in batch]
        a = primary.pipeline(commands + ttl)
        b = replica.pipeline(commands + ttl)
        for i, k in enumerate(batch):
            if normalise(kinds[i], a[i]) != normalise(kinds[i], b[i]):
                sys.exit("key %r differs: %r vs %r" % (k, a[i], b[i]))
            ta, tb = a[len(batch) + i], b[len(batch) + i]
            if abs(ta - tb) > 2:
                sys.exit("TTL of %r differs: %d vs %d" % (k, ta, tb))
    return len(keys)


def caught_up(primary, replica):
    return (
        replica.info("master_link_status") == "up"
        and primary.info("master_repl_offset") == replica.info("master_repl_offset")
    )


def direction(name, start_primary, start_replica, keys):
    primary_port, replica_port = start_primary[1], start_replica[1]
    primary = wait_port(primary_port, name + " primary")
    replica = wait_port(replica_port, name + " replica")
    began = time.time()
    load(primary, 0, keys)
    loaded = time.time()
    replica.call("REPLICAOF", "127.0.0.1", primary_port)
    eventually("the replica's full sync", lambda: caught_up(primary, replica))
    synced = time.time()
    n = compare(primary, replica)
    # It follows: more writes, of every type, then the same compare.
    load(primary, keys, max(keys // 100, 600))
    eventually("the replica to follow", lambda: caught_up(primary, replica))
    m = compare(primary, replica)
    print(
        "%s: %d keys loaded in %.1f s, full sync %.1f s, %d keys identical; "
        "after %d more writes %d keys identical"
        % (name, n, loaded - began, synced - loaded, n, m - n, m)
    )


def spawn(args, log):
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)


def main():
    keys = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    if shutil.which("redis-server") is None:
        sys.exit("redis-server not found: install redis-server 7.x")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ferrite = os.environ.get("FERRITE_BIN")
    if not ferrite:
        subprocess.run(
            ["cargo", "build", "--release", "-p", "ferrite"], cwd=root, check=True
        )
        ferrite = os.path.join(root, "target", "release", "ferrite")
    work = tempfile.mkdtemp(prefix="ferrite-interop.")
    procs = []
    try:
        def redis(port):
            d = os.path.join(work, "redis-%d" % port)
            os.makedirs(d)
            log = open(os.path.join(d, "log"), "w")
            procs.append(spawn(["redis-server", "--port", str(port), "--dir", d,
                                "--save", "", "--appendonly", "no"], log))
            return ("redis", port)

        def ferrite_node(port):
            d = os.path.join(work, "ferrite-%d" % port)
            os.makedirs(d)
            log = open(os.path.join(d, "log"), "w")
            procs.append(spawn([ferrite, "serve", "--port", str(port), "--dir", d], log))
            return ("ferrite", port)

        direction("Ferrite replica of a Redis primary", redis(26401), ferrite_node(26402), keys)
        direction("Redis replica of a Ferrite primary", ferrite_node(26403), redis(26404), keys)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    print("interop: ok (logs in %s)" % work)


if __name__ == "__main__":
    main()
