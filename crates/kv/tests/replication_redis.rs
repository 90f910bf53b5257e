//! Replication with real Redis, both ways: a Ferrite replica of a
//! `redis-server` master (both RDB payload forms: the bulk length of a
//! disk-based sync, the EOF marker of a diskless one) and a `redis-server`
//! replica of a Ferrite master. Each converges on the same data. Skipped,
//! with the reason printed, when `redis-server` is not installed.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::TestServer;

/// A `redis-server` on a free port, killed on drop.
struct Redis {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// Starts redis-server with `args`, or `None` (printing why) if absent.
fn redis(args: &[&str]) -> Option<Redis> {
    if Command::new("redis-server")
        .arg("--version")
        .output()
        .is_err()
    {
        // The brief asks for a printed reason when a test is skipped.
        #[allow(clippy::print_stderr)]
        {
            eprintln!("skipped: redis-server is not installed");
        }
        return None;
    }
    let dir = tempfile::tempdir().expect("dir");
    let port = free_port();
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--bind",
            "127.0.0.1",
        ])
        .args(["--dir", dir.path().to_str().expect("utf-8 dir")])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server starts");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    eventually("redis-server to listen", || {
        TcpStream::connect(addr).is_ok()
    });
    Some(Redis {
        child,
        addr,
        _dir: dir,
    })
}

fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A client connection that sends commands and reads whole replies.
struct Client(TcpStream);

impl Client {
    fn to(addr: SocketAddr) -> Client {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        Client(s)
    }

    fn call(&mut self, args: &[&str]) -> String {
        self.0.write_all(&common::resp(args)).expect("send");
        let mut out = Vec::new();
        self.read_reply(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    fn read_reply(&mut self, out: &mut Vec<u8>) {
        let start = out.len();
        let mut byte = [0u8; 1];
        while out.len() - start < 3 || !out.ends_with(b"\r\n") {
            self.0.read_exact(&mut byte).expect("reply");
            out.push(byte[0]);
        }
        let line = String::from_utf8_lossy(&out[start + 1..out.len() - 2]).into_owned();
        let n: i64 = line.parse().unwrap_or(-1);
        match out[start] {
            b'$' if n >= 0 => {
                let mut body = vec![0u8; n as usize + 2];
                self.0.read_exact(&mut body).expect("bulk");
                out.extend_from_slice(&body);
            }
            b'*' => (0..n.max(0)).for_each(|_| self.read_reply(out)),
            _ => {}
        }
    }

    fn info(&mut self, field: &str) -> String {
        let info = self.call(&["INFO", "replication"]);
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .unwrap_or("")
            .trim()
            .to_string()
    }
}

/// Writes values of every type, in Redis's compact and large encodings,
/// with and without expiries, in two databases.
fn write_dataset(c: &mut Client) {
    let ok = |reply: String| assert!(!reply.starts_with('-'), "{reply}");
    ok(c.call(&["SET", "s", "text"]));
    ok(c.call(&["SET", "n", "12345"]));
    ok(c.call(&["SET", "e", "v", "PX", "500000"]));
    ok(c.call(&["RPUSH", "l", "a", "b", "1"]));
    ok(c.call(&["HSET", "h", "f", "v", "g", "2"]));
    ok(c.call(&["SADD", "si", "1", "2", "3"]));
    ok(c.call(&["SADD", "ss", "x", "y"]));
    ok(c.call(&["ZADD", "z", "1.5", "a", "-2", "b"]));
    for i in 0..300 {
        let (k, v) = (format!("f{i}"), "x".repeat(i % 70));
        ok(c.call(&["HSET", "bigh", &k, &v]));
        ok(c.call(&["RPUSH", "bigl", &v]));
        ok(c.call(&["SADD", "bigs", &k]));
        ok(c.call(&["ZADD", "bigz", &i.to_string(), &k]));
    }
    ok(c.call(&["SET", "long", &"abc".repeat(3000)]));
    ok(c.call(&["SELECT", "5"]));
    ok(c.call(&["SET", "in5", "yes"]));
    ok(c.call(&["SELECT", "0"]));
}

/// Then a stream of writes: a transaction, an expiry, a deletion.
fn write_stream(c: &mut Client) {
    assert_eq!(c.call(&["MULTI"]), "+OK\r\n");
    c.call(&["INCR", "counter"]);
    c.call(&["LPUSH", "l", "first"]);
    assert!(c.call(&["EXEC"]).starts_with("*2"));
    c.call(&["EXPIRE", "s", "100000"]);
    c.call(&["DEL", "ss"]);
    c.call(&["ZINCRBY", "bigz", "0.5", "f7"]);
}

/// What both servers must agree on.
fn digest(c: &mut Client) -> Vec<String> {
    let mut out = Vec::new();
    for args in [
        &["MGET", "s", "n", "e", "counter"][..],
        &["STRLEN", "long"],
        &["GETRANGE", "long", "8990", "-1"],
        &["LRANGE", "l", "0", "-1"],
        &["HGET", "h", "f"],
        &["HGET", "h", "g"],
        &["HLEN", "h"],
        &["SMEMBERS", "si"],
        &["EXISTS", "ss"],
        &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
        &["HLEN", "bigh"],
        &["HGET", "bigh", "f69"],
        &["LINDEX", "bigl", "150"],
        &["SCARD", "bigs"],
        &["ZSCORE", "bigz", "f7"],
        &["DBSIZE"],
    ] {
        let reply = c.call(args);
        if args[0] == "SMEMBERS" {
            let mut lines: Vec<&str> = reply.lines().collect();
            lines.sort_unstable();
            out.push(lines.join(","));
        } else {
            out.push(reply);
        }
    }
    let ttl: i64 = c.call(&["TTL", "s"])[1..].trim().parse().expect("ttl");
    out.push(format!("ttl-set:{}", ttl > 90_000));
    out.push(c.call(&["SELECT", "5"]) + &c.call(&["GET", "in5"]) + &c.call(&["SELECT", "0"]));
    out
}

fn ferrite_replica_of_redis(redis_args: &[&str]) {
    let Some(master) = redis(redis_args) else {
        return;
    };
    let mut m = Client::to(master.addr);
    write_dataset(&mut m);
    let dir = tempfile::tempdir().unwrap();
    let replica = TestServer::start(dir.path());
    let mut r = Client::to(replica.addr);
    let port = master.addr.port().to_string();
    assert_eq!(r.call(&["REPLICAOF", "127.0.0.1", &port]), "+OK\r\n");
    eventually("the link", || r.info("master_link_status") == "up");
    write_stream(&mut m);
    eventually("the offsets to meet", || {
        r.info("master_repl_offset") == m.info("master_repl_offset")
    });
    assert_eq!(digest(&mut r), digest(&mut m));
    // Redis sees the replica and its acknowledged offset.
    eventually("the replica's ACK", || {
        let line = m.info("slave0");
        line.contains(&format!("offset={}", m.info("master_repl_offset")))
    });
}

#[test]
fn ferrite_replicates_redis_disk_based_sync() {
    ferrite_replica_of_redis(&["--repl-diskless-sync", "no"]);
}

#[test]
fn ferrite_replicates_redis_diskless_sync() {
    ferrite_replica_of_redis(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ]);
}

#[test]
fn redis_replicates_ferrite() {
    let dir = tempfile::tempdir().unwrap();
    let master = TestServer::start(dir.path());
    let mut m = Client::to(master.addr);
    write_dataset(&mut m);
    assert_eq!(
        m.call(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"]),
        "+OK\r\n"
    );
    let port = master.addr.port().to_string();
    let Some(replica) = redis(&["--replicaof", "127.0.0.1", &port]) else {
        return;
    };
    let mut r = Client::to(replica.addr);
    eventually("the link", || r.info("master_link_status") == "up");
    write_stream(&mut m);
    eventually("the offsets to meet", || {
        r.info("master_repl_offset") == m.info("master_repl_offset")
    });
    assert_eq!(digest(&mut r), digest(&mut m));
    assert_eq!(m.call(&["WAIT", "1", "5000"]), ":1\r\n");
    let role = m.call(&["ROLE"]);
    assert!(
        role.contains(&format!("$5\r\n{}\r\n", replica.addr.port())),
        "{role}"
    );
}
