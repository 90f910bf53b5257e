//! HyperLogLog and geo values through BGREWRITEAOF and a restart: the base
//! parts and the incremental log (PFADD, the PFCOUNT that caches, PFMERGE,
//! GEOADD's ZADD, stored searches written during the rewrite) load back to
//! the same bytes.

mod common;

use std::time::{Duration, Instant};

use common::{connect, TestServer};

fn rewrites_done(con: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("persistence")
        .query(con)
        .expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("aof_rewrites:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("aof_rewrites")
}

fn run(con: &mut redis::Connection, words: &[&str]) -> redis::Value {
    let mut cmd = redis::cmd(words[0]);
    for w in &words[1..] {
        cmd.arg(*w);
    }
    cmd.query(con).expect(words[0])
}

/// Everything the test compares, as raw values.
fn snapshot(con: &mut redis::Connection) -> Vec<redis::Value> {
    [
        &["GET", "small"][..],
        &["GET", "dense"],
        &["GET", "merged"],
        &["GET", "late"],
        &["ZRANGE", "Sicily", "0", "-1", "WITHSCORES"],
        &["ZRANGE", "near", "0", "-1", "WITHSCORES"],
        &["GEOPOS", "Sicily", "Palermo", "Catania", "Agrigento"],
    ]
    .iter()
    .map(|w| run(con, w))
    .collect()
}

#[test]
fn values_written_before_and_during_a_rewrite_load_back_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    run(&mut con, &["PFADD", "small", "a", "b", "c"]);
    run(&mut con, &["PFCOUNT", "small"]);
    let many: Vec<String> = (0..3000).map(|i| format!("e{i}")).collect();
    let mut pfadd = vec!["PFADD", "dense"];
    pfadd.extend(many.iter().map(String::as_str));
    run(&mut con, &pfadd);
    run(
        &mut con,
        &["GEOADD", "Sicily", "13.361389", "38.115556", "Palermo"],
    );
    run(
        &mut con,
        &["GEOADD", "Sicily", "15.087269", "37.502669", "Catania"],
    );
    let started: String = redis::cmd("BGREWRITEAOF").query(&mut con).unwrap();
    assert_eq!(started, "Background append only file rewriting started");
    run(&mut con, &["PFADD", "late", "x", "y"]);
    run(&mut con, &["PFCOUNT", "late"]);
    run(&mut con, &["PFMERGE", "merged", "small", "dense", "late"]);
    run(
        &mut con,
        &["GEOADD", "Sicily", "13.5833", "37.3167", "Agrigento"],
    );
    let stored = [
        "GEORADIUS",
        "Sicily",
        "15",
        "37",
        "200",
        "km",
        "STORE",
        "near",
    ];
    run(&mut con, &stored);
    let deadline = Instant::now() + Duration::from_secs(30);
    while rewrites_done(&mut con) < 1 {
        assert!(Instant::now() < deadline, "rewrite did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    run(&mut con, &["PFCOUNT", "merged"]);
    let before = snapshot(&mut con);
    drop(con);
    server.stop();
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    assert_eq!(before, snapshot(&mut con));
    let counts = run(&mut con, &["PFCOUNT", "small", "late"]);
    assert_eq!(counts, redis::Value::Int(5));
}
