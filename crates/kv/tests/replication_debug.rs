//! DEBUG REPLICATE (a command for the replicas only) and DEBUG
//! CHANGE-REPL-ID (a new history that no replica can continue).

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::{Raw, TestServer};
use ferrite_kv::config::ProtectedAction;

fn call(c: &mut Raw, args: &[&str]) -> String {
    c.stream.write_all(&common::resp(args)).expect("send");
    let mut out = Vec::new();
    let mut byte = [0u8; 1];
    while !out.ends_with(b"\r\n") {
        c.stream.read_exact(&mut byte).expect("reply");
        out.push(byte[0]);
    }
    if out.first() == Some(&b'$') {
        let n: i64 = String::from_utf8_lossy(&out[1..out.len() - 2])
            .parse()
            .expect("length");
        if n >= 0 {
            let mut body = vec![0u8; n as usize + 2];
            c.stream.read_exact(&mut body).expect("bulk");
            out.extend_from_slice(&body);
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn field(c: &mut Raw, name: &str) -> String {
    let info = call(c, &["INFO", "replication"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or("")
        .trim()
        .to_string()
}

fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn server(dir: &std::path::Path) -> TestServer {
    TestServer::start_with(dir, |c| c.enable_debug_command = ProtectedAction::Yes)
}

#[test]
fn debug_replicate_reaches_the_replicas_only_and_change_repl_id_starts_a_history() {
    let (a, b) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let master = server(a.path());
    let replica = server(b.path());
    let (mut m, mut r) = (master.raw(), replica.raw());
    call(&mut m, &["CONFIG", "SET", "repl-diskless-sync-delay", "0"]);
    let port = master.addr.port().to_string();
    assert_eq!(call(&mut r, &["REPLICAOF", "127.0.0.1", &port]), "+OK\r\n");
    eventually("the link", || field(&mut r, "master_link_status") == "up");
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
    let (a, b) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let master = server(a.path());
    let replica = server(b.path());
    let (mut m, mut r) = (master.raw(), replica.raw());
    call(&mut m, &["CONFIG", "SET", "repl-diskless-sync-delay", "0"]);
    call(&mut m, &["CONFIG", "SET", "repl-backlog-ttl", "1"]);
    let port = master.addr.port().to_string();
    call(&mut r, &["REPLICAOF", "127.0.0.1", &port]);
    eventually("the link", || field(&mut r, "master_link_status") == "up");
    let id = field(&mut m, "master_replid");
    assert_eq!(field(&mut m, "repl_backlog_active"), "1");
    call(&mut r, &["REPLICAOF", "NO", "ONE"]);
    eventually("the backlog to go", || {
        field(&mut m, "repl_backlog_active") == "0"
    });
    assert_ne!(field(&mut m, "master_replid"), id, "a new history");
}
