//! UNLINK, FLUSHDB/FLUSHALL ASYNC and the `lazyfree-lazy-user-*` settings
//! free large values on the lazyfree thread: the replies are the same as
//! freeing in place, and INFO memory counts what the thread freed.

mod common;

use std::time::{Duration, Instant};

use common::{resp, Raw, TestServer};

fn memory_field(c: &mut Raw, name: &str) -> u64 {
    let text = String::from_utf8(c.bulk(&resp(&["INFO", "memory"]))).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in INFO memory"))
}

/// Waits (bounded) until the thread has freed everything handed to it.
fn drained(c: &mut Raw) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while memory_field(c, "lazyfree_pending_objects") != 0 {
        assert!(Instant::now() < deadline, "lazyfree never drained");
        std::thread::yield_now();
    }
}

fn fill_set(c: &mut Raw, key: &str, members: usize) {
    let mut args = vec!["SADD".to_string(), key.to_string()];
    args.extend((0..members).map(|i| i.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    c.check(&resp(&refs), format!(":{members}\r\n").as_bytes());
}

#[test]
fn unlink_frees_large_values_on_the_thread_and_small_ones_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    fill_set(&mut c, "big", 1000);
    fill_set(&mut c, "small", 10);
    c.check(&resp(&["SET", "s", "v"]), b"+OK\r\n");
    c.check(
        &resp(&["UNLINK", "big", "small", "s", "missing"]),
        b":3\r\n",
    );
    c.check(&resp(&["EXISTS", "big", "small", "s"]), b":0\r\n");
    drained(&mut c);
    assert_eq!(memory_field(&mut c, "lazyfreed_objects"), 1);
    // DEL frees in place unless told otherwise.
    fill_set(&mut c, "big", 1000);
    c.check(&resp(&["DEL", "big"]), b":1\r\n");
    assert_eq!(memory_field(&mut c, "lazyfreed_objects"), 1);
    c.check(
        &resp(&["CONFIG", "SET", "lazyfree-lazy-user-del", "yes"]),
        b"+OK\r\n",
    );
    fill_set(&mut c, "big", 1000);
    c.check(&resp(&["DEL", "big"]), b":1\r\n");
    drained(&mut c);
    assert_eq!(memory_field(&mut c, "lazyfreed_objects"), 2);
    c.check(&resp(&["CONFIG", "RESETSTAT"]), b"+OK\r\n");
    assert_eq!(memory_field(&mut c, "lazyfreed_objects"), 0);
    server.stop();
}

#[test]
fn flush_async_frees_every_key_on_the_thread() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    for i in 0..5 {
        c.check(&resp(&["SET", &format!("k{i}"), "v"]), b"+OK\r\n");
    }
    c.check(&resp(&["FLUSHDB", "ASYNC"]), b"+OK\r\n");
    c.check(&resp(&["DBSIZE"]), b":0\r\n");
    drained(&mut c);
    assert_eq!(memory_field(&mut c, "lazyfreed_objects"), 5);
    c.check(&resp(&["SET", "a", "1"]), b"+OK\r\n");
    c.check(&resp(&["SELECT", "1"]), b"+OK\r\n");
    c.check(&resp(&["SET", "b", "1"]), b"+OK\r\n");
    c.check(&resp(&["FLUSHALL", "SYNC"]), b"+OK\r\n");
    assert_eq!(memory_field(&mut c, "lazyfreed_objects"), 5);
    c.check(
        &resp(&["CONFIG", "SET", "lazyfree-lazy-user-flush", "yes"]),
        b"+OK\r\n",
    );
    c.check(&resp(&["SET", "b", "1"]), b"+OK\r\n");
    c.check(&resp(&["FLUSHALL"]), b"+OK\r\n");
    drained(&mut c);
    assert_eq!(memory_field(&mut c, "lazyfreed_objects"), 6);
    c.check(&resp(&["FLUSHALL", "LAZY"]), b"-ERR syntax error\r\n");
    server.stop();
}
