//! kill -9 of the real `ferrite serve` binary across `CONFIG SET
//! appendonly yes` (`docs/aof-runtime.md`): the data directory holds an
//! old dataset (from an earlier run with the log on), the server runs with
//! `appendonly no` on a different dataset, turns the log on while a client
//! keeps INCRementing a counter (`appendfsync always`), and is killed at a
//! different moment each round: before, during or after the first rewrite.
//! A restart with `appendonly yes` must load either the old dataset
//! exactly or the new one (every live key, and the counter at its
//! acknowledged value): never the new log without its base. `FERRITE_CRASH_ITERS` sets the rounds.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{start_server, Client, Reply};

const ROUNDS_DEFAULT: usize = 10;
const OLD_KEYS: usize = 200;
const LIVE_KEYS: usize = 3000;

fn rounds() -> usize {
    std::env::var("FERRITE_CRASH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ROUNDS_DEFAULT)
}

fn ok(c: &mut Client, args: &[&[u8]]) {
    let reply = c.call(args).expect("reply");
    assert!(
        matches!(reply, Reply::Simple(ref s) if s == "OK"),
        "{args:?}: {reply:?}"
    );
}

fn dbsize(c: &mut Client) -> i64 {
    match c.call(&[b"DBSIZE"]).expect("DBSIZE") {
        Reply::Int(n) => n,
        other => panic!("DBSIZE: {other:?}"),
    }
}

/// An old dataset, written with the log on and a clean shutdown.
fn write_old_dataset(dir: &Path) {
    let (mut child, port) = start_server(dir, &["--appendonly", "yes", "--save", ""]);
    let mut c = Client::connect(port).expect("connect");
    for i in 0..OLD_KEYS {
        ok(&mut c, &[b"SET", format!("old{i}").as_bytes(), b"v"]);
    }
    let _ = c.call(&[b"SHUTDOWN"]);
    child.wait().expect("exits");
}

/// One round: returns whether the restart found the old dataset.
fn round(dir: &Path, kill_after: Duration) -> bool {
    let flags = [
        "--appendonly",
        "no",
        "--save",
        "",
        "--appendfsync",
        "always",
    ];
    let (mut child, port) = start_server(dir, &flags);
    let mut c = Client::connect(port).expect("connect");
    ok(&mut c, &[b"FLUSHALL"]);
    for i in 0..LIVE_KEYS {
        ok(&mut c, &[b"SET", format!("live{i}").as_bytes(), b"v"]);
    }
    // A slower rewrite, so that kills land inside it too.
    ok(&mut c, &[b"CONFIG", b"SET", b"rdb-key-save-delay", b"20"]);
    ok(&mut c, &[b"CONFIG", b"SET", b"appendonly", b"yes"]);
    // The kill comes between two INCRs: the last reply is the value.
    let mut acked = 0i64;
    let started = Instant::now();
    while started.elapsed() < kill_after {
        match c.call(&[b"INCR", b"counter"]) {
            Ok(Reply::Int(n)) => acked = n,
            other => panic!("INCR before the kill: {other:?}"),
        }
    }
    child.kill().expect("kill -9");
    child.wait().expect("reaped");

    let (mut child, port) = start_server(dir, &["--appendonly", "yes", "--save", ""]);
    let mut c = Client::connect(port).expect("connect");
    let size = dbsize(&mut c);
    let old = c.call(&[b"EXISTS", b"old0"]).expect("EXISTS") == Reply::Int(1);
    let found_old = if old {
        assert_eq!(size, OLD_KEYS as i64, "the old dataset, exactly");
        true
    } else {
        assert_eq!(size, LIVE_KEYS as i64 + 1, "every live key and the counter");
        let counter = match c.call(&[b"GET", b"counter"]).expect("GET") {
            Reply::Bulk(Some(v)) => String::from_utf8_lossy(&v).parse::<i64>().expect("n"),
            other => panic!("counter: {other:?}"),
        };
        assert_eq!(counter, acked, "the counter as acknowledged");
        false
    };
    // Back to the old dataset for the next round: the log on, rewritten.
    if !found_old {
        ok(&mut c, &[b"FLUSHALL"]);
        for i in 0..OLD_KEYS {
            ok(&mut c, &[b"SET", format!("old{i}").as_bytes(), b"v"]);
        }
        let _ = c.call(&[b"BGREWRITEAOF"]);
    }
    let _ = c.call(&[b"SHUTDOWN"]);
    child.wait().expect("exits");
    found_old
}

#[test]
fn kill_9_across_turning_the_log_on_loads_the_old_or_the_new_dataset() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_old_dataset(dir.path());
    let (mut olds, mut news) = (0, 0);
    for r in 0..rounds() {
        // Spread over the first 1.2 s after the turn-on, in a scattered
        // order.
        let kill_after = Duration::from_millis((r as u64 * 157 + 11) % 1200);
        if round(dir.path(), kill_after) {
            olds += 1;
        } else {
            news += 1;
        }
    }
    eprintln!("restarts found the old dataset {olds} times, the new one {news} times");
}
