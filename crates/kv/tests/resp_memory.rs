//! Memory accounting: `used_memory` from a counting allocator (as the
//! binaries count with jemalloc), eviction under every `maxmemory-policy`,
//! the OOM refusal, INFO memory, MEMORY USAGE and STATS.
//!
//! The counter is the process's, so the tests take turns ([`serial`]):
//! one server at a time allocates.

mod common;

use std::alloc::System;

use common::{connect, counting_turn as serial, resp, TestServer};

/// The system allocator behind the counter the binaries use.
#[global_allocator]
static ALLOCATOR: ferrite_alloc::Counting<System> = ferrite_alloc::Counting::new(System);

fn info_field(con: &mut redis::Connection, name: &str) -> String {
    let text: String = redis::cmd("INFO").arg("memory").query(con).unwrap();
    let prefix = format!("{name}:");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("INFO memory has no {name}"))
        .to_string()
}

fn used(con: &mut redis::Connection) -> u64 {
    info_field(con, "used_memory").parse().unwrap()
}

fn evicted(con: &mut redis::Connection) -> u64 {
    let text: String = redis::cmd("INFO").arg("stats").query(con).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("evicted_keys:"))
        .unwrap()
        .parse()
        .unwrap()
}

fn config_set(con: &mut redis::Connection, name: &str, value: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query(con)
        .unwrap();
}

/// Bytes the limit is set above `used_memory` in the eviction tests.
const HEADROOM: u64 = 256 * 1024;
/// Slack for what INFO itself allocates while measuring.
const SLACK: u64 = 16 * 1024;

#[test]
fn eviction_under_each_policy_brings_used_memory_under_maxmemory() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    let value = "v".repeat(1000);
    for policy in [
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
        config_set(&mut con, "maxmemory", "0");
        let limit = used(&mut con) + HEADROOM;
        config_set(&mut con, "maxmemory", &limit.to_string());
        config_set(&mut con, "maxmemory-policy", policy);
        let before = evicted(&mut con);
        // 1 MB of values against 256 KiB of room: even keys without a
        // TTL, which the volatile policies must keep.
        for i in 0..1000 {
            let key = format!("key:{i}");
            let mut cmd = redis::cmd("SET");
            cmd.arg(&key).arg(&value);
            if i % 2 == 1 {
                cmd.arg("EX").arg(10_000 + i);
            }
            // A volatile policy may run out of volatile keys: then OOM.
            let _: redis::RedisResult<()> = cmd.query(&mut con);
        }
        let now = used(&mut con);
        assert!(now < limit + SLACK, "{policy}: {now} over {limit}");
        assert!(evicted(&mut con) > before, "{policy} evicted nothing");
        if policy.starts_with("volatile") {
            for i in (0..1000).step_by(2) {
                let exists: bool = redis::cmd("EXISTS")
                    .arg(format!("key:{i}"))
                    .query(&mut con)
                    .unwrap();
                if !exists {
                    // Only keys refused before they were written are
                    // missing; none was evicted.
                    let size: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
                    assert!(size > 0);
                }
            }
        }
    }
    config_set(&mut con, "maxmemory", "0");
    drop(con);
    server.stop();
}

#[test]
fn volatile_policies_keep_persistent_keys_and_refuse_when_none_is_volatile() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    let value = "p".repeat(1000);
    let limit = used(&mut con) + HEADROOM;
    config_set(&mut con, "maxmemory", &limit.to_string());
    config_set(&mut con, "maxmemory-policy", "volatile-lru");
    let mut refused = None;
    for i in 0..1000 {
        let r: redis::RedisResult<()> = redis::cmd("SET")
            .arg(format!("p:{i}"))
            .arg(&value)
            .query(&mut con);
        if let Err(e) = r {
            refused = Some((i, e.to_string()));
            break;
        }
    }
    let (written, text) = refused.expect("the server refused a write");
    assert!(
        text.contains("command not allowed when used memory > 'maxmemory'"),
        "{text}"
    );
    // Nothing evicted: every key written is still there, reads still work.
    let size: usize = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(size, written);
    assert_eq!(evicted(&mut con), 0);
    let got: String = redis::cmd("GET").arg("p:0").query(&mut con).unwrap();
    assert_eq!(got, value);
    drop(con);
    // The exact refusal, as Redis words it (a limit far below use).
    let mut raw = server.raw();
    raw.check(&resp(&["CONFIG", "SET", "maxmemory", "1"]), b"+OK\r\n");
    raw.check(
        &resp(&["SET", "one-more", "x"]),
        b"-OOM command not allowed when used memory > 'maxmemory'.\r\n",
    );
    // Commands that do not grow memory still run; without the limit,
    // writes go through again.
    raw.check(&resp(&["DEL", "p:0"]), b":1\r\n");
    raw.check(&resp(&["CONFIG", "SET", "maxmemory", "0"]), b"+OK\r\n");
    raw.check(&resp(&["SET", "one-more", "x"]), b"+OK\r\n");
    drop(raw);
    server.stop();
}

#[test]
fn used_memory_falls_after_flushall() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    let empty = used(&mut con);
    let value = "f".repeat(1000);
    for i in 0..4000 {
        let _: () = redis::cmd("SET")
            .arg(format!("k:{i}"))
            .arg(&value)
            .query(&mut con)
            .unwrap();
    }
    let full = used(&mut con);
    assert!(full > empty + 4_000_000, "{empty} -> {full}");
    let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
    let flushed = used(&mut con);
    assert!(
        flushed < empty + 512 * 1024,
        "{empty} -> {full} -> {flushed}"
    );
    // The peak remembers the full dataset.
    let peak: u64 = info_field(&mut con, "used_memory_peak").parse().unwrap();
    assert!(peak >= full);
    drop(con);
    server.stop();
}

#[test]
fn memory_usage_rounds_to_size_classes() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    // An entry (53 bytes: the entry, its vector's spare room and its
    // position in its chunk's table) and the string's block: 16 bytes of
    // counts and length with the bytes, rounded to jemalloc's class.
    c.check(&resp(&["SET", "k", "bar"]), b"+OK\r\n");
    c.check(&resp(&["MEMORY", "USAGE", "k"]), b":85\r\n");
    let big = "A".repeat(100_000);
    c.check(&resp(&["SET", "k", &big]), b"+OK\r\n");
    c.check(&resp(&["MEMORY", "USAGE", "k"]), b":114741\r\n");
    // Redis's "trim on SET with big value": a 33,000-byte value counts
    // its 40 KiB class, whatever buffer the larger one left.
    let smaller = "A".repeat(33_000);
    c.check(&resp(&["SET", "k", &smaller]), b"+OK\r\n");
    c.check(&resp(&["MEMORY", "USAGE", "k"]), b":41013\r\n");
    // A 1 KiB string keeps its bytes in a block of their own (1024)
    // beside a 32-byte one: with the 16-byte header inline it would take
    // the 1280-byte class.
    let kib = "B".repeat(1024);
    c.check(&resp(&["SET", "k", &kib]), b"+OK\r\n");
    c.check(&resp(&["MEMORY", "USAGE", "k"]), b":1109\r\n");
    // A key longer than 19 bytes has its own block.
    let long = "L".repeat(30);
    c.check(&resp(&["SET", &long, "bar"]), b"+OK\r\n");
    c.check(&resp(&["MEMORY", "USAGE", &long]), b":117\r\n");
    c.check(&resp(&["MEMORY", "USAGE", "nokey"]), b"$-1\r\n");
    c.check(
        &resp(&["MEMORY", "USAGE", "k", "SAMPLES", "-1"]),
        b"-ERR syntax error\r\n",
    );
    c.check(
        &resp(&["MEMORY", "USAGE", "k", "SAMPLE", "1"]),
        b"-ERR syntax error\r\n",
    );
    // A collection: its Arc, table and sampled members.
    c.check(&resp(&["SADD", "s", "a", "b", "c"]), b":3\r\n");
    let reply = c.roundtrip_any(&resp(&["MEMORY", "USAGE", "s", "SAMPLES", "0"]));
    let n: usize = std::str::from_utf8(&reply[1..reply.len() - 2])
        .unwrap()
        .parse()
        .unwrap();
    assert!((150..1000).contains(&n), "{n}");
    drop(c);
    server.stop();
}

#[test]
fn info_memory_and_memory_stats() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut con).unwrap();
    let used = used(&mut con);
    for field in [
        "used_memory_human",
        "used_memory_rss",
        "used_memory_peak_perc",
        "used_memory_overhead",
        "used_memory_startup",
        "used_memory_dataset",
        "used_memory_dataset_perc",
        "allocator_allocated",
        "allocator_frag_ratio",
        "mem_fragmentation_ratio",
        "mem_not_counted_for_evict",
        "maxmemory_policy",
    ] {
        info_field(&mut con, field);
    }
    assert_eq!(info_field(&mut con, "mem_allocator"), "libc");
    let overhead: u64 = info_field(&mut con, "used_memory_overhead")
        .parse()
        .unwrap();
    let dataset: u64 = info_field(&mut con, "used_memory_dataset").parse().unwrap();
    assert!(overhead + dataset >= used.saturating_sub(SLACK));
    let stats: Vec<redis::Value> = redis::cmd("MEMORY").arg("STATS").query(&mut con).unwrap();
    // 27 figures and db.0, name and value each.
    assert_eq!(stats.len(), 2 * 28);
    let names: Vec<String> = stats
        .iter()
        .step_by(2)
        .map(|v| redis::from_redis_value(v).unwrap())
        .collect();
    assert_eq!(names[0], "peak.allocated");
    assert_eq!(names[10], "db.0");
    assert_eq!(names[27], "fragmentation.bytes");
    let keys: i64 = redis::from_redis_value(&stats[2 * 12 + 1]).unwrap();
    assert_eq!((names[12].as_str(), keys), ("keys.count", 1));
    drop(con);
    let mut raw = server.raw();
    raw.check(
        &resp(&["MEMORY", "MALLOC-STATS"]),
        b"$45\r\nStats not supported for the current allocator\r\n",
    );
    raw.check(&resp(&["MEMORY", "PURGE"]), b"+OK\r\n");
    drop(raw);
    server.stop();
}

#[test]
fn eviction_invalidates_before_the_reply_of_the_command_that_evicted() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    let mut c = server.raw();
    let _ = c.roundtrip_any(&resp(&["HELLO", "3"]));
    c.check(&resp(&["CLIENT", "TRACKING", "on"]), b"+OK\r\n");
    c.check(&resp(&["SETEX", "volatile-key", "10000", "x"]), b"+OK\r\n");
    c.check(&resp(&["GET", "volatile-key"]), b"$1\r\nx\r\n");
    let limit = used(&mut con) + 100 * 1024;
    config_set(&mut con, "maxmemory-policy", "volatile-random");
    config_set(&mut con, "maxmemory", &limit.to_string());
    // 200 KB in one value: the next command evicts the volatile key, and
    // its invalidation comes before that command's reply.
    c.check(&resp(&["SETBIT", "big-key", "1600000", "0"]), b":0\r\n");
    c.check(
        &resp(&["GETBIT", "big-key", "0"]),
        b">2\r\n$10\r\ninvalidate\r\n*1\r\n$12\r\nvolatile-key\r\n:0\r\n",
    );
    config_set(&mut con, "maxmemory", "0");
    drop((c, con));
    server.stop();
}
