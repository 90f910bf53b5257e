//! Every sorted-set, set and hash write command, random ones included,
//! logs a form that replays to the same data: the state read after a
//! restart equals the state read before it.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{connect, info_field, TestServer};

/// The writes under test, each with options that change what it does.
const WRITES: &[&[&str]] = &[
    &[
        "ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
    ],
    &["ZADD", "z", "GT", "CH", "0.5", "a", "9", "b"],
    &["ZADD", "z", "LT", "1.25", "c"],
    &["ZADD", "z", "XX", "INCR", "0.1", "d"],
    &["ZADD", "z", "NX", "7", "f", "100", "a"],
    &["ZINCRBY", "z", "-2.5", "e"],
    &[
        "ZADD", "lex", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e",
    ],
    &["ZREMRANGEBYLEX", "lex", "[b", "(d"],
    &["ZADD", "rank", "1", "a", "2", "b", "3", "c", "4", "d"],
    &["ZREMRANGEBYRANK", "rank", "1", "2"],
    &["ZREMRANGEBYSCORE", "z", "(5", "+inf"],
    &["SADD", "s", "a", "c", "x"],
    &[
        "ZUNIONSTORE",
        "u",
        "3",
        "z",
        "rank",
        "s",
        "WEIGHTS",
        "2",
        "0.5",
        "3",
        "AGGREGATE",
        "MAX",
    ],
    &["ZINTERSTORE", "i", "2", "z", "s", "WEIGHTS", "1.5", "2"],
    &["ZDIFFSTORE", "d", "2", "z", "s"],
    &[
        "ZRANGESTORE",
        "rs",
        "z",
        "+inf",
        "0",
        "BYSCORE",
        "REV",
        "LIMIT",
        "1",
        "2",
    ],
    &["ZRANGESTORE", "rl", "lex", "-", "+", "BYLEX"],
    &["SET", "gone", "x"],
    &["ZINTERSTORE", "gone", "2", "z", "nosuch"],
    &["ZADD", "p", "1", "a", "2", "b", "3", "c", "4", "d"],
    &["ZPOPMIN", "p", "2"],
    &["ZPOPMAX", "p"],
    &[
        "SADD", "pop", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10",
    ],
    &["SPOP", "pop"],
    &["SPOP", "pop", "3"],
    &["SADD", "src", "m", "n"],
    &["SMOVE", "src", "dst", "m"],
    &["SMOVE", "src", "dst", "n"],
    &["SADD", "t", "a", "b", "c"],
    &["SINTERSTORE", "si", "s", "t"],
    &["SUNIONSTORE", "su", "s", "t"],
    &["SDIFFSTORE", "sd", "t", "s"],
    &["SET", "emptied", "x"],
    &["SDIFFSTORE", "emptied", "s", "s"],
    &["HSET", "h", "n", "1"],
    &["HSETNX", "h", "n", "2"],
    &["HSETNX", "h", "m", "2"],
    &["HINCRBYFLOAT", "h", "f", "10.5"],
    &["HINCRBYFLOAT", "h", "f", "0.1"],
    &["HINCRBY", "h", "n", "41"],
];

/// Every key with its type and contents, in an order that does not depend
/// on hashing (set members and hash fields sorted).
fn state(con: &mut redis::Connection) -> BTreeMap<String, (String, Vec<Vec<u8>>)> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(con).unwrap();
    let mut out = BTreeMap::new();
    for k in keys {
        let kind: String = redis::cmd("TYPE").arg(&k).query(con).unwrap();
        let contents: Vec<Vec<u8>> = match kind.as_str() {
            "string" => vec![redis::cmd("GET").arg(&k).query(con).unwrap()],
            "zset" => redis::cmd("ZRANGE")
                .arg(&k)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query(con)
                .unwrap(),
            "set" => {
                let mut m: Vec<Vec<u8>> = redis::cmd("SMEMBERS").arg(&k).query(con).unwrap();
                m.sort();
                m
            }
            "hash" => {
                let h: BTreeMap<Vec<u8>, Vec<u8>> =
                    redis::cmd("HGETALL").arg(&k).query(con).unwrap();
                h.into_iter().flat_map(|(f, v)| [f, v]).collect()
            }
            other => panic!("unexpected type {other} at {k}"),
        };
        out.insert(k, (kind, contents));
    }
    out
}

fn run(con: &mut redis::Connection, write: &[&str]) {
    let mut cmd = redis::cmd(write[0]);
    for arg in &write[1..] {
        cmd.arg(*arg);
    }
    let reply: redis::RedisResult<redis::Value> = cmd.query(con);
    assert!(reply.is_ok(), "{write:?}: {reply:?}");
}

#[test]
fn collection_writes_replay_to_the_same_state() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    for write in WRITES {
        run(&mut con, write);
    }
    let before = state(&mut con);
    // Spot checks that the writes did what they say (so the comparison
    // below compares something).
    assert!(!before.contains_key("gone") && !before.contains_key("emptied"));
    assert_eq!(before["pop"].1.len(), 6);
    assert_eq!(
        before["h"].1,
        [
            b"f".to_vec(),
            b"10.6".to_vec(),
            b"m".to_vec(),
            b"2".to_vec(),
            b"n".to_vec(),
            b"42".to_vec()
        ]
    );
    drop(con);
    server.stop();
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    assert_eq!(state(&mut con), before);
}

/// The same after a log rewrite, with a sorted set large enough to span
/// many chunks of its order, and writes after the rewrite on top.
#[test]
fn collections_survive_a_rewrite_and_replay() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    let mut big = vec!["ZADD".to_string(), "big".to_string()];
    for i in 0..2000 {
        big.push(format!("{}", (i * 7919) % 1000));
        big.push(format!("m{i}"));
    }
    let big: Vec<&str> = big.iter().map(String::as_str).collect();
    run(&mut con, &big);
    for write in WRITES {
        run(&mut con, write);
    }
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut con).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(&mut con, "aof_rewrites") == "0" {
        assert!(Instant::now() < deadline, "rewrite did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    run(&mut con, &["ZREMRANGEBYRANK", "big", "100", "299"]);
    run(
        &mut con,
        &["ZUNIONSTORE", "after", "2", "big", "s", "AGGREGATE", "MIN"],
    );
    run(&mut con, &["SPOP", "pop", "2"]);
    let before = state(&mut con);
    assert_eq!(before["big"].1.len(), 2 * 1800);
    drop(con);
    server.stop();
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    assert_eq!(state(&mut con), before);
}
