//! A full sync streamed from the RDB producer (`docs/rdb.md`, "Full
//! sync"): `$EOF:<mark>`, the RDB in chunks, the mark; writes made while
//! the RDB is produced wait in the backlog, past `repl-backlog-size`, and
//! reach the replica only after its first ACK, so nothing follows the
//! mark until the replica has loaded; a replica that goes away stops the
//! production.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::repl::{call, eventually, info_field};
use common::{resp, Raw, TestServer};

/// Reads one line (through its CRLF).
fn line(c: &mut Raw) -> String {
    let mut out = Vec::new();
    let mut byte = [0u8; 1];
    while !out.ends_with(b"\r\n") {
        c.stream.read_exact(&mut byte).expect("line");
        out.push(byte[0]);
    }
    String::from_utf8_lossy(&out).trim_end().to_string()
}

/// Reads until the payload ends with `mark`; returns the payload.
fn payload(c: &mut Raw, mark: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    while !out.ends_with(mark) {
        let n = c.stream.read(&mut buf).expect("payload");
        assert!(n > 0, "the master closed the sync");
        out.extend_from_slice(&buf[..n]);
    }
    out.truncate(out.len() - mark.len());
    out
}

fn persistence_field(c: &mut Raw, field: &str) -> String {
    let info = call(c, &["INFO", "persistence"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Starts a replica's handshake on `r` and returns the `+FULLRESYNC`
/// line.
fn psync(r: &mut Raw) -> String {
    assert_eq!(
        call(r, &["REPLCONF", "capa", "eof", "capa", "psync2"]),
        "+OK\r\n"
    );
    r.stream
        .write_all(&resp(&["PSYNC", "?", "-1"]))
        .expect("send");
    line(r)
}

#[test]
fn writes_during_the_production_follow_the_mark_after_the_first_ack() {
    let dir = tempfile::tempdir().expect("dir");
    let server = TestServer::start_with(dir.path(), |c| {
        c.repl_diskless_sync_delay_s = 0;
        c.repl_backlog_size_bytes = 16 * 1024;
        // No PING in the stream: the test reads it byte for byte.
        c.repl_ping_replica_period_s = 3600;
    });
    let mut client = server.raw();
    for i in 0..300 {
        let key = format!("k{i}");
        assert_eq!(call(&mut client, &["SET", &key, "v"]), "+OK\r\n");
    }
    // 20 ms a key: the production lasts while the writes below happen.
    call(
        &mut client,
        &["CONFIG", "SET", "rdb-key-save-delay", "20000"],
    );
    let mut replica = server.raw();
    let full = psync(&mut replica);
    assert!(full.starts_with("+FULLRESYNC "), "{full}");
    let offset: i64 = full
        .rsplit(' ')
        .next()
        .unwrap_or("")
        .parse()
        .expect("offset");
    let eof = line(&mut replica);
    let mark = eof.strip_prefix("$EOF:").expect("an EOF-marked payload");
    assert_eq!(mark.len(), 40);
    assert_eq!(
        persistence_field(&mut client, "rdb_bgsave_in_progress"),
        "1"
    );
    assert!(call(&mut client, &["INFO", "replication"]).contains("state=wait_bgsave"));
    // 40 KB of writes: more than the backlog's 16 KB, all kept.
    let value = "x".repeat(1000);
    for i in 0..40 {
        let key = format!("w{i}");
        assert_eq!(call(&mut client, &["SET", &key, &value]), "+OK\r\n");
    }
    let histlen: usize = info_field(&mut client, "repl_backlog_histlen")
        .parse()
        .expect("histlen");
    assert!(
        histlen > 40_000,
        "the backlog keeps the sync's stream: {histlen}"
    );
    call(&mut client, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    let rdb = payload(&mut replica, mark.as_bytes());
    assert!(rdb.starts_with(b"REDIS0010"));
    let mut keys = 0;
    ferrite_kv::rdb::file::decode(&rdb, 16, |_| keys += 1).expect("the RDB decodes");
    assert_eq!(
        keys, 300,
        "the snapshot holds the keys before the sync only"
    );
    // Nothing after the mark until the replica acknowledges.
    replica
        .stream
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut probe = [0u8; 1];
    assert!(
        replica.stream.read(&mut probe).is_err(),
        "bytes before the ACK"
    );
    replica
        .stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let ack = offset.to_string();
    replica
        .stream
        .write_all(&resp(&["REPLCONF", "ACK", &ack]))
        .expect("ack");
    let mut expected = resp(&["SELECT", "0"]);
    expected.extend(resp(&["SET", "w0", &value]));
    let mut got = vec![0u8; expected.len()];
    replica.stream.read_exact(&mut got).expect("stream");
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&expected)
    );
    eventually("the backlog back to its size", || {
        call(&mut client, &["PING"]);
        info_field(&mut client, "repl_backlog_histlen")
            .parse::<usize>()
            .unwrap_or(0)
            <= 16 * 1024
    });
    assert_eq!(
        persistence_field(&mut client, "rdb_bgsave_in_progress"),
        "0"
    );
}

#[test]
fn a_replica_leaving_stops_the_production() {
    let dir = tempfile::tempdir().expect("dir");
    let server = TestServer::start_with(dir.path(), |c| c.repl_diskless_sync_delay_s = 0);
    let mut client = server.raw();
    for i in 0..100 {
        let key = format!("k{i}");
        call(&mut client, &["SET", &key, "v"]);
    }
    call(
        &mut client,
        &["CONFIG", "SET", "rdb-key-save-delay", "1000000"],
    );
    let mut replica = server.raw();
    assert!(psync(&mut replica).starts_with("+FULLRESYNC "));
    assert_eq!(
        persistence_field(&mut client, "rdb_bgsave_in_progress"),
        "1"
    );
    drop(replica);
    eventually("the production to stop", || {
        persistence_field(&mut client, "rdb_bgsave_in_progress") == "0"
    });
    assert_eq!(info_field(&mut client, "connected_slaves"), "0");
}
