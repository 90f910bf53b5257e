//! A log rewrite that runs while clients keep adding to one large stream
//! (and reading it through a consumer group, acknowledging, deleting)
//! leaves base parts and a log that load back to the same stream: its
//! entries and IDs, groups, pending entries, consumers, last ID,
//! entries-added and max-deleted ID (`docs/streams.md`, "The value";
//! `docs/capture.md` for the capture argument).
//!
//! The stream's segment is captured at some point of the rewrite; the
//! writes before it are in the part and skipped on replay, those after it
//! are replayed on top, and the event loop's writes after the capture
//! change the live stream while the worker encodes the captured one.

mod common;

use std::time::{Duration, Instant};

use common::{connect, info_field, run, without_fields, TestServer};

/// Appends `n` entries to `big` in one pipeline.
fn add(con: &mut redis::Connection, n: usize, tag: &str) {
    let mut pipe = redis::pipe();
    for i in 0..n {
        pipe.cmd("XADD")
            .arg("big")
            .arg("*")
            .arg("tag")
            .arg(tag)
            .arg("i")
            .arg(i)
            .ignore();
    }
    let _: () = pipe.query(con).expect("XADD pipeline");
}

/// The ID of the first entry of an XRANGE/XREADGROUP entry list.
fn first_id(entries: &redis::Value) -> Option<String> {
    let redis::Value::Array(rows) = entries else {
        return None;
    };
    match rows.first()? {
        redis::Value::Array(cols) => match cols.first()? {
            redis::Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
            _ => None,
        },
        _ => None,
    }
}

/// One round of the clients' load during the rewrite: appends, a
/// delivery to a consumer, an acknowledgement and a deletion.
fn round(con: &mut redis::Connection, n: usize) {
    let tag = n.to_string();
    add(con, 50, &tag);
    let consumer = format!("c{}", n % 3);
    run(
        con,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            &consumer,
            "COUNT",
            "4",
            "STREAMS",
            "big",
            ">",
        ],
    );
    let pending = run(con, &["XPENDING", "big", "g", "-", "+", "1"]);
    if let Some(id) = first_id(&pending) {
        run(con, &["XACK", "big", "g", &id]);
    }
    let oldest = run(con, &["XRANGE", "big", "-", "+", "COUNT", "1"]);
    if let Some(id) = first_id(&oldest) {
        run(con, &["XDEL", "big", &id]);
    }
}

/// The first place two replies differ, as a path of indices and the two
/// values there (a whole stream's reply is too long to print).
fn first_difference(a: &redis::Value, b: &redis::Value) -> Option<String> {
    match (a, b) {
        (redis::Value::Array(x), redis::Value::Array(y)) => {
            for (i, (p, q)) in x.iter().zip(y.iter()).enumerate() {
                if let Some(d) = first_difference(p, q) {
                    return Some(format!("[{i}] {d}"));
                }
            }
            (x.len() != y.len()).then(|| format!("lengths {} and {}", x.len(), y.len()))
        }
        _ => (a != b).then(|| format!("{a:?} != {b:?}")),
    }
}

/// An extended XPENDING reply without each entry's idle time (the time
/// since its delivery, which goes on between the two readings; XINFO
/// STREAM FULL compares the delivery times themselves).
fn without_idle(v: redis::Value) -> redis::Value {
    let redis::Value::Array(rows) = v else {
        return v;
    };
    let rows = rows
        .into_iter()
        .map(|row| match row {
            redis::Value::Array(mut cols) if cols.len() == 4 => {
                cols[2] = redis::Value::Nil;
                redis::Value::Array(cols)
            }
            other => other,
        })
        .collect();
    redis::Value::Array(rows)
}

/// Everything observable about the stream.
fn state(con: &mut redis::Connection) -> Vec<redis::Value> {
    vec![
        run(con, &["XRANGE", "big", "-", "+"]),
        without_fields(
            run(con, &["XINFO", "STREAM", "big", "FULL", "COUNT", "0"]),
            &["seen-time", "active-time"],
        ),
        without_idle(run(con, &["XPENDING", "big", "g", "-", "+", "100000"])),
    ]
}

#[test]
fn a_rewrite_during_xadd_of_a_large_stream_replays_to_the_same_stream() {
    let dir = tempfile::tempdir().expect("dir");
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    // Other keys, so that a rewrite slowed to 1% of the machine lasts
    // while the clients write.
    let mut pipe = redis::pipe();
    for i in 0..100_000 {
        pipe.cmd("SET").arg(format!("k{i}")).arg(i).ignore();
    }
    let _: () = pipe.query(&mut con).expect("SET pipeline");
    for _ in 0..40 {
        add(&mut con, 1000, "before");
    }
    run(&mut con, &["XGROUP", "CREATE", "big", "g", "0"]);
    run(
        &mut con,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c0",
            "COUNT",
            "300",
            "STREAMS",
            "big",
            ">",
        ],
    );
    run(&mut con, &["CONFIG", "SET", "aof-rewrite-cpu-share", "1"]);
    run(&mut con, &["BGREWRITEAOF"]);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut rounds = 0;
    while info_field(&mut con, "aof_rewrites") == "0" {
        assert!(Instant::now() < deadline, "rewrite did not finish");
        round(&mut con, rounds);
        rounds += 1;
    }
    assert_eq!(info_field(&mut con, "aof_last_bgrewrite_status"), "ok");
    assert!(rounds > 0);
    // Writes after the rewrite land in the new log, on top of the parts.
    round(&mut con, rounds);
    let before = state(&mut con);
    let len: i64 = redis::cmd("XLEN").arg("big").query(&mut con).expect("XLEN");
    assert!(len >= 40_000, "{len}");
    let last: String = {
        let info = run(&mut con, &["XINFO", "STREAM", "big"]);
        format!("{info:?}")
    };
    drop(con);
    server.stop();

    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    let after = state(&mut con);
    for (part, (a, b)) in after.iter().zip(before.iter()).enumerate() {
        assert_eq!(
            first_difference(a, b),
            None,
            "state part {part} after {rounds} rounds during the rewrite"
        );
    }
    let again = format!("{:?}", run(&mut con, &["XINFO", "STREAM", "big"]));
    assert_eq!(again, last);
    // IDs stay monotonic after the restart: a new entry goes after the
    // last ID the stream ever had.
    let next: String = redis::cmd("XADD")
        .arg("big")
        .arg("*")
        .arg("after")
        .arg("restart")
        .query(&mut con)
        .expect("XADD");
    let tail = run(&mut con, &["XREVRANGE", "big", "+", "-", "COUNT", "2"]);
    let redis::Value::Array(rows) = tail else {
        panic!("{tail:?}")
    };
    assert_eq!(rows.len(), 2);
    assert_eq!(
        first_id(&redis::Value::Array(rows[..1].to_vec())),
        Some(next)
    );
}
