//! `client-output-buffer-limit`: clients whose unsent replies pass their
//! class's limit are closed without those replies, as Redis closes them.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{resp, Raw, TestServer};

/// Whether a client named `name` is still connected.
fn connected(c: &mut Raw, name: &str) -> bool {
    let list = c.bulk(b"CLIENT LIST\r\n");
    String::from_utf8_lossy(&list).contains(&format!("name={name} "))
}

/// Reads until the server closes `stream`; returns what arrived.
fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut out = Vec::new();
    stream.read_to_end(&mut out).expect("closed, not timed out");
    out
}

/// A 150 KB list `big`, and a 100 KB hard limit for normal clients.
fn big_list_under_a_normal_limit(c: &mut Raw) {
    let item = "x".repeat(1000);
    let mut pipeline = Vec::new();
    for _ in 0..150 {
        pipeline.extend_from_slice(&resp(&["RPUSH", "big", &item]));
    }
    let replies: Vec<u8> = (1..=150)
        .flat_map(|n| format!(":{n}\r\n").into_bytes())
        .collect();
    c.check(&pipeline, &replies);
    c.check(
        b"CONFIG SET client-output-buffer-limit \"normal 100000 0 0\"\r\n",
        b"+OK\r\n",
    );
}

#[test]
fn a_reply_over_the_normal_hard_limit_closes_the_client_unanswered() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    big_list_under_a_normal_limit(&mut c);
    let mut victim = TcpStream::connect(server.addr).unwrap();
    // The LRANGE reply (150 KB) crosses the limit: no reply at all, and
    // the commands after it in the same pipeline do not run.
    victim
        .write_all(b"LRANGE big 0 -1\r\nSET after 1\r\n")
        .unwrap();
    assert_eq!(read_to_close(&mut victim), b"");
    c.check(b"EXISTS after\r\n", b":0\r\n");
    // A smaller reply is untouched.
    c.check(b"LLEN big\r\n", b":150\r\n");
}

#[test]
fn a_transaction_runs_whole_even_when_its_reply_closes_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    big_list_under_a_normal_limit(&mut c);
    let mut victim = TcpStream::connect(server.addr).unwrap();
    victim
        .write_all(b"MULTI\r\nSET k1 v1\r\nLRANGE big 0 -1\r\nSET k2 v2\r\nEXEC\r\n")
        .unwrap();
    // EXEC's reply crosses the limit while the pipeline's earlier replies
    // still wait in the buffer: none is sent, and EXEC ran whole.
    assert_eq!(read_to_close(&mut victim), b"");
    c.check(b"MGET k1 k2\r\n", b"*2\r\n$2\r\nv1\r\n$2\r\nv2\r\n");
}

/// Subscribes a client named `name` to `foo` that then reads nothing.
fn silent_subscriber(server: &TestServer, name: &str) -> TcpStream {
    let mut sub = TcpStream::connect(server.addr).unwrap();
    let hello = format!("CLIENT SETNAME {name}\r\nSUBSCRIBE foo\r\n");
    sub.write_all(hello.as_bytes()).unwrap();
    let expected = b"+OK\r\n*3\r\n$9\r\nsubscribe\r\n$3\r\nfoo\r\n:1\r\n";
    let mut got = vec![0; expected.len()];
    sub.read_exact(&mut got).unwrap();
    assert_eq!(got, expected);
    sub
}

#[test]
fn a_subscriber_that_does_not_read_is_closed_at_the_pubsub_hard_limit() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"CONFIG SET client-output-buffer-limit \"pubsub 100000 0 0\"\r\n",
        b"+OK\r\n",
    );
    let _sub = silent_subscriber(&server, "slow");
    let message = "m".repeat(1000);
    let mut pipeline = Vec::new();
    for _ in 0..200 {
        pipeline.extend_from_slice(&resp(&["PUBLISH", "foo", &message]));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    // The socket's buffers fill first; then the server's, up to the limit.
    while connected(&mut c, "slow") {
        c.stream.write_all(&pipeline).unwrap();
        // Each reply is `:1` or, once the subscriber is gone, `:0`.
        let mut replies = vec![0; 200 * 4];
        c.stream.read_exact(&mut replies).unwrap();
        assert!(replies.chunks(4).all(|r| r == b":1\r\n" || r == b":0\r\n"));
        assert!(Instant::now() < deadline, "the subscriber was never closed");
    }
    c.check(b"PUBSUB NUMSUB foo\r\n", b"*2\r\n$3\r\nfoo\r\n:0\r\n");
}

#[test]
fn the_soft_limit_closes_a_subscriber_after_its_time_without_more_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"CONFIG SET client-output-buffer-limit \"pubsub 0 100000 1\"\r\n",
        b"+OK\r\n",
    );
    let _sub = silent_subscriber(&server, "soft");
    let message = "m".repeat(1000);
    let mut pipeline = Vec::new();
    for _ in 0..100 {
        pipeline.extend_from_slice(&resp(&["PUBLISH", "foo", &message]));
    }
    let replies: Vec<u8> = (0..100).flat_map(|_| b":1\r\n".to_vec()).collect();
    // Fill the socket's buffers and then the server's past the soft limit.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        c.check(&pipeline, &replies);
        let list = String::from_utf8_lossy(&c.bulk(b"CLIENT LIST\r\n")).into_owned();
        let obl: usize = list
            .lines()
            .find(|l| l.contains("name=soft "))
            .and_then(|l| l.split(' ').find_map(|f| f.strip_prefix("obl=")))
            .and_then(|v| v.parse().ok())
            .expect("the subscriber is listed");
        if obl >= 100_000 {
            break;
        }
        assert!(Instant::now() < deadline, "the output never grew");
    }
    // No more traffic: the timer closes it once a second has passed.
    assert!(connected(&mut c, "soft"), "not closed before its time");
    let deadline = Instant::now() + Duration::from_secs(10);
    while connected(&mut c, "soft") {
        assert!(Instant::now() < deadline, "the soft limit never expired");
    }
}
