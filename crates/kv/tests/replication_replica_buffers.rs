//! A replica's output buffer holds nothing once written: every byte of
//! the stream is also in the backlog, the one replication buffer the
//! replicas share, so a buffer kept after a burst would hold the same
//! bytes twice in `used_memory` (INFO's `mem_clients_slaves`). Redis's
//! replication-buffer unit compares exactly these figures.

mod common;

use std::io::Read;

use common::repl::{call, eventually, sync};
use common::{Raw, TestServer};

/// Reads the replica's stream until `marker` has arrived.
fn read_until(raw: &mut Raw, marker: &[u8]) {
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while !seen.windows(marker.len()).any(|w| w == marker) {
        let n = raw.stream.read(&mut buf).expect("stream");
        assert!(n > 0, "the master closed the stream");
        // Only the tail can still hold a marker that straddles reads.
        let keep = seen.len().saturating_sub(marker.len());
        seen.drain(..keep);
        seen.extend_from_slice(&buf[..n]);
    }
}

/// One transaction of 256 writes of 4 KiB (1 MiB of stream in one
/// round), ending with a write of `marker`.
fn burst(c: &mut Raw, marker: &str) {
    let value = "v".repeat(4096);
    assert_eq!(call(c, &["MULTI"]), "+OK\r\n");
    for i in 0..256 {
        call(c, &["SET", &format!("key:{i}"), &value]);
    }
    call(c, &["SET", marker, "1"]);
    let exec = call(c, &["EXEC"]);
    assert!(
        exec.starts_with("*257\r\n"),
        "EXEC: {}",
        &exec[..exec.len().min(64)]
    );
}

fn replica_output_bytes(c: &mut Raw) -> u64 {
    let info = call(c, &["INFO", "memory"]);
    info.lines()
        .find_map(|l| l.strip_prefix("mem_clients_slaves:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("mem_clients_slaves")
}

#[test]
fn a_replicas_output_buffer_is_released_once_written() {
    let dir = tempfile::tempdir().expect("dir");
    let master = TestServer::start(dir.path());
    let mut replica = master.raw();
    sync(&mut replica);
    let mut writer = master.raw();
    // Two rounds of the same size: a client keeps a buffer for rounds
    // like these, a replica must not.
    burst(&mut writer, "first-burst-done");
    read_until(&mut replica, b"first-burst-done");
    burst(&mut writer, "second-burst-done");
    read_until(&mut replica, b"second-burst-done");
    eventually("the replica's buffer released", || {
        replica_output_bytes(&mut writer) < 64 * 1024
    });
    // The backlog still holds the stream for partial resyncs.
    let info = call(&mut writer, &["INFO", "memory"]);
    let backlog: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("mem_replication_backlog:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("mem_replication_backlog");
    assert!(backlog >= 1024 * 1024, "backlog {backlog}");
}
