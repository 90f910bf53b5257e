//! Interoperability with Redis's append-only files: start-up from a Redis 6
//! `appendonly.aof` and from a Redis 7 `appendonlydir` (RESP, written by
//! hand here), refusal of an RDB base, and `ferrite export`, parsed back by
//! Ferrite and, where `/usr/bin/redis-server` exists, loaded by Redis.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, start_server, Client, Reply};

const REDIS_SERVER: &str = "/usr/bin/redis-server";

fn resp(commands: &[&[&str]]) -> Vec<u8> {
    let mut out = Vec::new();
    for args in commands {
        out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in *args {
            out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
    }
    out
}

/// A Redis-style AOF touching every type, two databases and a transaction.
fn sample() -> Vec<u8> {
    let mut all = sample_base();
    all.extend(sample_incr());
    all
}

fn sample_incr() -> Vec<u8> {
    resp(&[&["SELECT", "3"], &["SET", "other", "db3"]])
}

fn sample_base() -> Vec<u8> {
    resp(&[
        &["SELECT", "0"],
        &["SET", "s", "hello"],
        &["APPEND", "s", " world"],
        &["INCR", "n"],
        &["INCRBY", "n", "41"],
        &["RPUSH", "l", "a", "b"],
        &["LPUSH", "l", "z"],
        &["SADD", "set", "x", "y"],
        &["HSET", "h", "f", "v", "g", "w"],
        &["ZADD", "z", "1.5", "one", "2", "two"],
        &["SET", "ttl", "t"],
        &["PEXPIREAT", "ttl", "4102444800000"],
        &["MULTI"],
        &["SET", "tx", "1"],
        &["DEL", "gone"],
        &["EXEC"],
    ])
}

fn serve(dir: &Path, device: &str) -> (Child, u16) {
    start_server(dir, &["--appendfsync", "always", "--log-device", device])
}

fn wait_up(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Client::connect(port).is_err() {
        assert!(
            Instant::now() < deadline,
            "server did not come up on {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn bulk(c: &mut Client, args: &[&[u8]]) -> Vec<u8> {
    match c.call(args).unwrap() {
        Reply::Bulk(Some(v)) => v,
        other => panic!("{args:?}: {other:?}"),
    }
}

fn strings(reply: Reply) -> Vec<String> {
    let Reply::Array(items) = reply else {
        panic!("not an array: {reply:?}")
    };
    let mut out: Vec<String> = items
        .into_iter()
        .map(|i| match i {
            Reply::Bulk(Some(v)) => String::from_utf8(v).unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    out.sort();
    out
}

/// Checks the sample's dataset on a server (Ferrite or Redis).
fn verify_sample(port: u16) {
    let mut c = Client::connect(port).unwrap();
    assert_eq!(bulk(&mut c, &[b"GET", b"s"]), b"hello world");
    assert_eq!(bulk(&mut c, &[b"GET", b"n"]), b"42");
    let list = c.call(&[b"LRANGE", b"l", b"0", b"-1"]).unwrap();
    let Reply::Array(list) = list else { panic!() };
    let list: Vec<Reply> = list;
    assert_eq!(
        list,
        ["z", "a", "b"]
            .map(|s| Reply::Bulk(Some(s.into())))
            .to_vec()
    );
    assert_eq!(strings(c.call(&[b"SMEMBERS", b"set"]).unwrap()), ["x", "y"]);
    assert_eq!(
        strings(c.call(&[b"HGETALL", b"h"]).unwrap()),
        ["f", "g", "v", "w"]
    );
    assert_eq!(bulk(&mut c, &[b"ZSCORE", b"z", b"one"]), b"1.5");
    assert_eq!(
        c.call(&[b"PEXPIRETIME", b"ttl"]).unwrap(),
        Reply::Int(4102444800000)
    );
    assert_eq!(bulk(&mut c, &[b"GET", b"tx"]), b"1");
    c.call(&[b"SELECT", b"3"]).unwrap();
    assert_eq!(bulk(&mut c, &[b"GET", b"other"]), b"db3");
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn starts_from_a_redis_6_aof_and_sets_it_aside() {
    for device in ["file", "pmem-emulated"] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("appendonly.aof"), sample()).unwrap();
        let (child, port) = serve(dir.path(), device);
        verify_sample(port);
        stop(child);
        assert!(dir.path().join("appendonly.aof.manifest").exists());
        assert_eq!(
            std::fs::read(dir.path().join("appendonly.aof.redis-imported")).unwrap(),
            sample(),
            "the Redis file is kept, renamed"
        );
        // The second start loads Ferrite's own files.
        let (child, port) = serve(dir.path(), device);
        verify_sample(port);
        stop(child);
    }
}

#[test]
fn starts_from_a_redis_7_appendonlydir() {
    let dir = tempfile::tempdir().unwrap();
    let redis = dir.path().join("appendonlydir");
    std::fs::create_dir(&redis).unwrap();
    std::fs::write(redis.join("appendonly.aof.1.base.aof"), sample_base()).unwrap();
    std::fs::write(redis.join("appendonly.aof.1.incr.aof"), sample_incr()).unwrap();
    std::fs::write(
        redis.join("appendonly.aof.manifest"),
        "file appendonly.aof.1.base.aof seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n",
    )
    .unwrap();
    let (child, port) = serve(dir.path(), "file");
    verify_sample(port);
    stop(child);
}

#[test]
fn an_rdb_base_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("appendonly.aof"),
        b"REDIS0011\xfa\x09redis-ver",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(["serve", "--port", &free_port().to_string(), "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("aof-use-rdb-preamble no"), "{stderr}");
    assert!(stderr.contains("BGREWRITEAOF"), "{stderr}");
}

#[test]
fn export_is_read_back_by_ferrite_and_by_redis() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("appendonly.aof"), sample()).unwrap();
    let (child, port) = serve(dir.path(), "file");
    let mut c = Client::connect(port).unwrap();
    c.call(&[b"BGREWRITEAOF"]).unwrap();
    c.call(&[b"SET", b"after", b"rewrite"]).unwrap();
    stop(child);
    let exported = tempfile::tempdir().unwrap();
    let file = exported.path().join("appendonly.aof");
    let out = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .arg("export")
        .arg(dir.path())
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::read(&file)
        .unwrap()
        .starts_with(b"*2\r\n$6\r\nSELECT\r\n"));
    // Parsed back: the exported file is itself a Redis AOF Ferrite imports.
    let again = tempfile::tempdir().unwrap();
    std::fs::copy(&file, again.path().join("appendonly.aof")).unwrap();
    let (child, port) = serve(again.path(), "file");
    verify_sample(port);
    assert_eq!(
        bulk(&mut Client::connect(port).unwrap(), &[b"GET", b"after"]),
        b"rewrite"
    );
    stop(child);
    if !Path::new(REDIS_SERVER).exists() {
        eprintln!("skipping the Redis half: {REDIS_SERVER} is not installed");
        return;
    }
    let version = Command::new(REDIS_SERVER)
        .arg("--version")
        .output()
        .unwrap();
    eprintln!(
        "loading the export into {}",
        String::from_utf8_lossy(&version.stdout).trim()
    );
    // Redis 7 takes a lone `appendfilename` in `dir` as the base of a new
    // `appendonlydir` (its upgrade path); Redis 6 reads it directly.
    let port = free_port();
    let mut redis = Command::new(REDIS_SERVER)
        .args(["--port", &port.to_string(), "--dir"])
        .arg(exported.path())
        .args(["--appendonly", "yes", "--appendfilename", "appendonly.aof"])
        .args(["--save", "", "--daemonize", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server starts");
    wait_up(port);
    // Redis answers LOADING while it reads the file.
    let deadline = Instant::now() + Duration::from_secs(30);
    while matches!(
        Client::connect(port).unwrap().call(&[b"GET", b"s"]),
        Ok(Reply::Error(_))
    ) {
        assert!(Instant::now() < deadline, "redis did not load");
        std::thread::sleep(Duration::from_millis(20));
    }
    verify_sample(port);
    assert_eq!(
        bulk(&mut Client::connect(port).unwrap(), &[b"GET", b"after"]),
        b"rewrite"
    );
    let _ = redis.kill();
    let _ = redis.wait();
}
