//! A replica's link carries `REPLCONF ACK` only: any other command from
//! a replica would put a reply into its stream, so the master drops the
//! replica at once, as Redis does, and other clients are unaffected.

mod common;

use std::io::{Read, Write};

use common::repl::sync;
use common::{resp, Raw, TestServer};

fn connected_replicas(server: &TestServer) -> String {
    let info = server.raw().bulk(&resp(&["INFO", "replication"]));
    String::from_utf8_lossy(&info)
        .lines()
        .find_map(|l| l.strip_prefix("connected_slaves:").map(str::to_string))
        .unwrap_or_default()
}

/// Whether the master closes the link: stream bytes before the end (its
/// PINGs) are skipped; the read timeout means it stayed open.
fn closed(raw: &mut Raw) -> bool {
    let mut buf = [0u8; 256];
    loop {
        match raw.stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return false,
            Err(_) => return true,
        }
    }
}

fn master(dir: &std::path::Path) -> TestServer {
    TestServer::start_with(dir, |c| {
        c.set("repl-diskless-sync-delay", &["0".to_string()])
            .expect("delay");
    })
}

#[test]
fn a_replica_sending_a_command_is_disconnected() {
    let dir = tempfile::tempdir().expect("dir");
    let server = master(dir.path());
    for command in [
        vec!["PING"],
        vec!["GET", "foo"],
        vec!["XINFO", "HELP"],
        vec!["NO-SUCH-COMMAND"],
    ] {
        let mut replica = server.raw();
        assert!(sync(&mut replica).starts_with(b"REDIS"));
        assert_eq!(connected_replicas(&server), "1");
        replica.stream.write_all(&resp(&command)).expect("send");
        assert!(
            closed(&mut replica),
            "{command:?} left the replica attached"
        );
        server.raw().check(&resp(&["PING"]), b"+PONG\r\n");
        assert_eq!(connected_replicas(&server), "0", "{command:?}");
    }
}

#[test]
fn acknowledgements_keep_the_replica_attached() {
    let dir = tempfile::tempdir().expect("dir");
    let server = master(dir.path());
    let mut replica = server.raw();
    assert!(sync(&mut replica).starts_with(b"REDIS"));
    replica
        .stream
        .write_all(&resp(&["REPLCONF", "ACK", "0"]))
        .expect("ACK");
    // A write after the ACK reaches the replica: it is still attached.
    server.raw().check(&resp(&["SET", "k", "v"]), b"+OK\r\n");
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&got).contains("$1\r\nv\r\n") {
        let n = replica.stream.read(&mut buf).expect("stream");
        assert!(n > 0, "replica closed: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(connected_replicas(&server), "1");
}
