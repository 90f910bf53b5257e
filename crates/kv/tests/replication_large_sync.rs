//! A full sync whose RDB payload is larger than a replica's output limit
//! (256 MB) survives stream writes made before the replica has read it:
//! the payload does not count against the limit, only the stream behind
//! it does, as in Redis.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::{Raw, TestServer};
use ferrite_kv::config::ProtectedAction;

fn call(c: &mut Raw, args: &[&str]) -> String {
    c.stream.write_all(&common::resp(args)).expect("send");
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        c.stream.read_exact(&mut byte).expect("reply");
        line.push(byte[0]);
    }
    String::from_utf8_lossy(&line).into_owned()
}

fn connected_replicas(c: &mut Raw) -> String {
    c.stream
        .write_all(&common::resp(&["INFO", "replication"]))
        .expect("send");
    let mut header = Vec::new();
    let mut byte = [0u8; 1];
    while !header.ends_with(b"\r\n") {
        c.stream.read_exact(&mut byte).expect("reply");
        header.push(byte[0]);
    }
    let len: usize = String::from_utf8_lossy(&header[1..header.len() - 2])
        .parse()
        .expect("bulk length");
    let mut body = vec![0u8; len + 2];
    c.stream.read_exact(&mut body).expect("bulk");
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix("connected_slaves:"))
        .unwrap_or("")
        .to_string()
}

#[test]
fn a_payload_over_the_output_limit_is_not_a_reason_to_drop_the_replica() {
    let dir = tempfile::tempdir().expect("tempdir");
    let master = TestServer::start_with(dir.path(), |c| {
        c.appendonly = false;
        c.enable_debug_command = ProtectedAction::Yes;
    });
    let mut m = master.raw();
    call(&mut m, &["CONFIG", "SET", "repl-diskless-sync-delay", "0"]);
    // 300 values of 1 MiB: a payload of about 300 MB.
    assert_eq!(
        call(&mut m, &["DEBUG", "POPULATE", "300", "big", "1048576"]),
        "+OK\r\n"
    );
    // A replica that asks for a full sync and then reads nothing.
    let mut replica = master.raw();
    replica
        .stream
        .write_all(&common::resp(&["PSYNC", "?", "-1"]))
        .expect("send");
    let deadline = Instant::now() + Duration::from_secs(60);
    while connected_replicas(&mut m) != "1" {
        assert!(Instant::now() < deadline, "the replica never attached");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Stream bytes behind the unread payload.
    for i in 0..10 {
        let key = format!("k{i}");
        assert_eq!(call(&mut m, &["SET", &key, "v"]), "+OK\r\n");
    }
    assert_eq!(connected_replicas(&mut m), "1", "the replica was dropped");
    // A stream of its own over the limit still drops it.
    let big = "x".repeat(64 << 20);
    for i in 0..5 {
        let key = format!("big-stream-{i}");
        assert_eq!(call(&mut m, &["SET", &key, &big]), "+OK\r\n");
    }
    assert_eq!(
        connected_replicas(&mut m),
        "0",
        "the stream's own limit holds"
    );
}
