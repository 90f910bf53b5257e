//! DEBUG REPLICATE (a command for the replicas only) and DEBUG
//! CHANGE-REPL-ID (a new history that no replica can continue).

mod common;

use common::repl::{call, eventually, info_field as field, Pair};
use ferrite_kv::config::ProtectedAction;

#[test]
fn debug_replicate_reaches_the_replicas_only_and_change_repl_id_starts_a_history() {
    let pair = Pair::start(|c| c.enable_debug_command = ProtectedAction::Yes);
    let (mut m, mut r) = (pair.master.raw(), pair.replica.raw());
    pair.link(&mut r);
    assert_eq!(
        call(&mut m, &["DEBUG", "REPLICATE", "SET", "only-there", "1"]),
        "+OK\r\n"
    );
    eventually("the replicated command", || {
        call(&mut r, &["GET", "only-there"]) == "$1\r\n1\r\n"
    });
    assert_eq!(call(&mut m, &["GET", "only-there"]), "$-1\r\n");
    let before = field(&mut m, "master_replid");
    assert_eq!(call(&mut m, &["DEBUG", "CHANGE-REPL-ID"]), "+OK\r\n");
    let after = field(&mut m, "master_replid");
    assert_ne!(after, before);
    assert_eq!(after.len(), 40);
    assert_eq!(
        field(&mut m, "master_replid2"),
        "0000000000000000000000000000000000000000"
    );
}

#[test]
fn a_master_frees_its_backlog_after_repl_backlog_ttl_without_replicas() {
    let pair = Pair::start(|c| {
        c.set("repl-backlog-ttl", &["1".to_string()])
            .expect("repl-backlog-ttl");
    });
    let (mut m, mut r) = (pair.master.raw(), pair.replica.raw());
    pair.link(&mut r);
    let id = field(&mut m, "master_replid");
    assert_eq!(field(&mut m, "repl_backlog_active"), "1");
    call(&mut r, &["REPLICAOF", "NO", "ONE"]);
    eventually("the backlog to go", || {
        field(&mut m, "repl_backlog_active") == "0"
    });
    assert_ne!(field(&mut m, "master_replid"), id, "a new history");
}
