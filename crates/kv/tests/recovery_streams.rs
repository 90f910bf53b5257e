//! Streams with consumer groups and pending entries come back equal after
//! a restart (the log replayed through the same handlers), and after a
//! log rewrite into base parts then a restart: entries, IDs, counters,
//! groups, read counters, pending entries with their delivery times and
//! counts, and consumers.

mod common;

use std::time::{Duration, Instant};

use common::{connect, info_field, run, without_fields, TestServer};

/// The writes under test: every stream write, with the options that make
/// them non-deterministic (generated IDs, `~` trims, deliveries).
fn writes(con: &mut redis::Connection) {
    for i in 0..320 {
        let v = i.to_string();
        run(con, &["XADD", "s", "*", "n", &v, "k", "x"]);
    }
    run(con, &["XADD", "s", "MAXLEN", "~", "150", "*", "n", "last"]);
    run(con, &["XADD", "m", "5-1", "a", "1"]);
    run(con, &["XADD", "m", "5-*", "b", "2"]);
    run(con, &["XADD", "m", "9-0", "c", "3"]);
    run(con, &["XADD", "m", "MINID", "5-2", "10-0", "d", "4"]);
    run(con, &["XDEL", "m", "9-0"]);
    run(con, &["XSETID", "m", "20-0", "ENTRIESADDED", "50"]);
    run(con, &["XGROUP", "CREATE", "s", "g", "0"]);
    run(con, &["XGROUP", "CREATE", "s", "tail", "$"]);
    run(con, &["XGROUP", "CREATE", "e", "g", "$", "MKSTREAM"]);
    run(
        con,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "5",
            "STREAMS",
            "s",
            ">",
        ],
    );
    run(
        con,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "bob",
            "COUNT",
            "3",
            "STREAMS",
            "s",
            ">",
        ],
    );
    run(
        con,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "carol",
            "COUNT",
            "2",
            "NOACK",
            "STREAMS",
            "s",
            ">",
        ],
    );
    run(
        con,
        &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"],
    );
    let pending = run(con, &["XPENDING", "s", "g", "-", "+", "20"]);
    let ids = ids_of(&pending);
    run(con, &["XACK", "s", "g", &ids[0]]);
    run(
        con,
        &[
            "XCLAIM",
            "s",
            "g",
            "dave",
            "0",
            &ids[1],
            "IDLE",
            "5000",
            "RETRYCOUNT",
            "7",
        ],
    );
    run(con, &["XDEL", "s", &ids[2]]);
    run(
        con,
        &["XAUTOCLAIM", "s", "g", "erin", "0", "0", "COUNT", "3"],
    );
    run(con, &["XGROUP", "CREATECONSUMER", "s", "g", "frank"]);
    run(con, &["XGROUP", "DELCONSUMER", "s", "g", "bob"]);
    run(con, &["XGROUP", "CREATE", "s", "gone", "0"]);
    run(con, &["XGROUP", "DESTROY", "s", "gone"]);
    run(con, &["XTRIM", "s", "MINID", "~", &ids[0]]);
    run(
        con,
        &["XGROUP", "SETID", "s", "tail", "0", "ENTRIESREAD", "0"],
    );
}

/// The IDs of an extended XPENDING reply.
fn ids_of(pending: &redis::Value) -> Vec<String> {
    let redis::Value::Array(rows) = pending else {
        panic!("{pending:?}")
    };
    rows.iter()
        .map(|row| match row {
            redis::Value::Array(cols) => match &cols[0] {
                redis::Value::BulkString(b) => String::from_utf8(b.clone()).unwrap(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        })
        .collect()
}

/// Everything observable about the streams.
fn state(con: &mut redis::Connection) -> Vec<redis::Value> {
    let mut out = Vec::new();
    for key in ["s", "m", "e"] {
        out.push(run(con, &["XRANGE", key, "-", "+"]));
        let full = run(con, &["XINFO", "STREAM", key, "FULL", "COUNT", "0"]);
        out.push(without_fields(full, &["seen-time"]));
    }
    out
}

#[test]
fn streams_replay_to_the_same_state() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    writes(&mut con);
    let before = state(&mut con);
    let len: i64 = redis::cmd("XLEN").arg("s").query(&mut con).unwrap();
    assert!(
        (150..320).contains(&len),
        "the ~ trim removed whole blocks: {len}"
    );
    drop(con);
    server.stop();
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    assert_eq!(state(&mut con), before);
    // IDs stay monotonic after the restart.
    let next: String = redis::cmd("XADD")
        .arg("m")
        .arg("*")
        .arg("z")
        .arg("1")
        .query(&mut con)
        .unwrap();
    assert!(next.split('-').next().unwrap().parse::<u64>().unwrap() > 20);
}

#[test]
fn streams_survive_a_rewrite_and_replay() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    writes(&mut con);
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut con).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(&mut con, "aof_rewrites") == "0" {
        assert!(Instant::now() < deadline, "rewrite did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Writes after the rewrite land in the new log, on top of the parts.
    run(&mut con, &["XADD", "s", "*", "after", "rewrite"]);
    run(
        &mut con,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "2",
            "STREAMS",
            "s",
            ">",
        ],
    );
    let before = state(&mut con);
    drop(con);
    server.stop();
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    assert_eq!(state(&mut con), before);
}
