//! Integration tests through a real client library (the `redis` crate):
//! what applications do, including pipelining, transactions and RESP3.

mod common;

use common::{connect, TestServer};
use redis::Commands;

#[test]
fn everyday_commands() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    let _: () = con.set("greeting", "hello")?;
    let got: String = con.get("greeting")?;
    assert_eq!(got, "hello");
    let n: i64 = con.incr("counter", 5)?;
    assert_eq!(n, 5);
    let _: () = con.hset_multiple("user:1", &[("name", "ada"), ("lang", "rust")])?;
    let user: std::collections::HashMap<String, String> = con.hgetall("user:1")?;
    assert_eq!(user["name"], "ada");
    let _: () = con.rpush("queue", &["a", "b", "c"])?;
    let items: Vec<String> = con.lrange("queue", 0, -1)?;
    assert_eq!(items, ["a", "b", "c"]);
    let _: () = con.sadd("tags", &["x", "y"])?;
    let count: usize = con.scard("tags")?;
    assert_eq!(count, 2);
    let _: () = con.zadd_multiple("board", &[(10, "ann"), (20, "bob")])?;
    let top: Vec<(String, f64)> = con.zrevrange_withscores("board", 0, 0)?;
    assert_eq!(top, [("bob".to_string(), 20.0)]);
    let _: () = con.set_ex("temp", "v", 100)?;
    let ttl: i64 = con.ttl("temp")?;
    assert!((99..=100).contains(&ttl));
    let err = con.lpush::<_, _, ()>("greeting", "x").unwrap_err();
    assert_eq!(err.code(), Some("WRONGTYPE"));
    Ok(())
}

#[test]
fn pipelines_and_transactions() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.set(format!("k{i}"), i).ignore();
    }
    pipe.get("k999");
    let (last,): (i64,) = pipe.query(&mut con)?;
    assert_eq!(last, 999);
    let (a, b): (i64, i64) = redis::pipe()
        .atomic()
        .incr("t", 1)
        .incr("t", 2)
        .query(&mut con)?;
    assert_eq!((a, b), (1, 3));
    let (keys,): (Vec<String>,) = redis::transaction(&mut con, &["t"], |con, pipe| {
        let current: i64 = con.get("t")?;
        pipe.set("t", current * 10).ignore().keys("t").query(con)
    })?;
    assert_eq!(keys, ["t"]);
    let t: i64 = con.get("t")?;
    assert_eq!(t, 30);
    let mut seen = std::collections::HashSet::new();
    let iter: redis::Iter<String> = con.scan_match("k*")?;
    for key in iter {
        seen.insert(key);
    }
    assert_eq!(seen.len(), 1000);
    Ok(())
}

#[test]
fn resp3_connection() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = TestServer::start(dir.path());
    let client = redis::Client::open(format!("redis://{}/?protocol=resp3", server.addr))?;
    let mut con = client.get_connection()?;
    let _: () = con.hset("h", "f", "v")?;
    let map: std::collections::HashMap<String, String> = con.hgetall("h")?;
    assert_eq!(map["f"], "v");
    let missing: Option<String> = con.get("nope")?;
    assert_eq!(missing, None);
    let score: f64 = con.zincr("z", "m", 1.5)?;
    assert_eq!(score, 1.5);
    Ok(())
}

#[test]
fn data_survives_a_restart() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    let _: () = con.set("a", "1")?;
    let _: () = redis::cmd("SELECT").arg(3).query(&mut con)?;
    let _: () = con.rpush("l", &["x", "y"])?;
    let _: () = con.set_ex("gone", "v", 1000)?;
    let _: f64 = con.incr("f", 0.5)?;
    let _: Option<String> = con.spop("nothing")?;
    let _: () = con.sadd("s", &["1", "2", "3"])?;
    let popped: String = con.spop("s")?;
    drop(con);
    server.stop();
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    let a: String = con.get("a")?;
    assert_eq!(a, "1");
    let _: () = redis::cmd("SELECT").arg(3).query(&mut con)?;
    let l: Vec<String> = con.lrange("l", 0, -1)?;
    assert_eq!(l, ["x", "y"]);
    let ttl: i64 = con.ttl("gone")?;
    assert!(ttl > 990, "TTL {ttl} was not kept as an absolute time");
    let f: String = con.get("f")?;
    assert_eq!(f, "0.5");
    let members: std::collections::HashSet<String> = con.smembers("s")?;
    assert_eq!(members.len(), 2);
    assert!(
        !members.contains(&popped),
        "the log replayed a different SPOP"
    );
    Ok(())
}
