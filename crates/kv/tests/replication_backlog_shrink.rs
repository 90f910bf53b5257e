//! CONFIG SET repl-backlog-size acts on the next byte of the stream: a
//! transaction that kills the replica's link, shrinks the backlog and then
//! writes more than the new size leaves the replica's offset outside the
//! history, so it must resynchronise in full, as with Redis (the
//! replication unit's swapdb tests force their full syncs this way).

mod common;

use common::repl::{call, eventually, info_field, Pair};

#[test]
fn a_backlog_shrunk_in_a_transaction_forgets_at_once() {
    let pair = Pair::start(|_| {});
    let (mut m, mut r) = (pair.master.raw(), pair.replica.raw());
    pair.link(&mut r);
    assert_eq!(call(&mut m, &["SET", "before", "1"]), "+OK\r\n");
    eventually("the replica follows", || {
        call(&mut r, &["GET", "before"]) == "$1\r\n1\r\n"
    });
    assert_eq!(info_field(&mut m, "sync_full"), "1");

    let big = "A".repeat(16384);
    assert_eq!(call(&mut m, &["MULTI"]), "+OK\r\n");
    for command in [
        vec!["CLIENT", "KILL", "TYPE", "replica"],
        vec!["CONFIG", "SET", "repl-backlog-size", "16384"],
    ] {
        assert_eq!(call(&mut m, &command), "+QUEUED\r\n");
    }
    for i in 0..10 {
        let key = format!("big{i}");
        assert_eq!(call(&mut m, &["SET", &key, &big]), "+QUEUED\r\n");
    }
    let exec = call(&mut m, &["EXEC"]);
    assert!(exec.starts_with("*12\r\n"), "{exec}");

    eventually("a second full sync", || {
        info_field(&mut m, "sync_full") == "2"
    });
    assert_eq!(info_field(&mut m, "sync_partial_ok"), "0");
    eventually("the replica has the writes", || {
        call(&mut r, &["STRLEN", "big9"]) == ":16384\r\n"
    });
}
