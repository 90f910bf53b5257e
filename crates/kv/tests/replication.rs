//! SYNC: the dataset as an RDB file, then every write as the log gets it,
//! byte for byte.

mod common;

use std::io::{Read, Write};

use common::{resp, Raw, TestServer};

/// Reads exactly `n` bytes from the replica's stream.
fn read_exact(c: &mut Raw, n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    c.stream.read_exact(&mut out).expect("replica stream");
    out
}

/// Reads SYNC's bulk length line and returns the payload.
fn read_payload(c: &mut Raw) -> Vec<u8> {
    let mut line = Vec::new();
    while !line.ends_with(b"\r\n") {
        line.extend(read_exact(c, 1));
    }
    let text = String::from_utf8(line).unwrap();
    let len: usize = text.trim().trim_start_matches('$').parse().unwrap();
    read_exact(c, len)
}

#[test]
fn sync_sends_the_dataset_then_the_writes() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.raw();
    client.check(b"SET pre 1\r\n", b"+OK\r\n");
    client.check(b"RPUSH l a b\r\n", b":2\r\n");
    let mut replica = server.raw();
    replica.stream.write_all(b"SYNC\r\n").expect("send SYNC");
    let rdb = read_payload(&mut replica);
    assert!(rdb.starts_with(b"REDIS0010\xfe\x00"), "{rdb:?}");
    assert!(rdb.ends_with(b"\xff\0\0\0\0\0\0\0\0"));
    // Key `pre` as a string (an integer's text in the integer encoding, as
    // Redis saves it), `l` as a plain list.
    let has = |needle: &[u8]| rdb.windows(needle.len()).any(|w| w == needle);
    assert!(has(b"\x00\x03pre\xc0\x01"));
    assert!(has(b"\x01\x01l\x02\x01a\x01b"));

    client.check(b"SET foo bar\r\n", b"+OK\r\n");
    client.check(b"GETDEL foo\r\n", b"$3\r\nbar\r\n");
    client.check(b"GETEX pre\r\n", b"$1\r\n1\r\n");
    client.check(b"SELECT 2\r\n", b"+OK\r\n");
    client.check(b"INCRBYFLOAT f 1.5\r\n", b"$3\r\n1.5\r\n");
    client.check(b"MULTI\r\n", b"+OK\r\n");
    client.check(b"SET x 1\r\n", b"+QUEUED\r\n");
    client.check(b"GET x\r\n", b"+QUEUED\r\n");
    client.check(b"SET y 2\r\n", b"+QUEUED\r\n");
    client.check(b"EXEC\r\n", b"*3\r\n+OK\r\n$1\r\n1\r\n+OK\r\n");
    let mut expected = resp(&["SELECT", "0"]);
    expected.extend(resp(&["SET", "foo", "bar"]));
    expected.extend(resp(&["DEL", "foo"]));
    expected.extend(resp(&["SELECT", "2"]));
    expected.extend(resp(&["SET", "f", "1.5", "KEEPTTL"]));
    expected.extend(resp(&["MULTI"]));
    expected.extend(resp(&["SET", "x", "1"]));
    expected.extend(resp(&["SET", "y", "2"]));
    expected.extend(resp(&["EXEC"]));
    assert_eq!(
        String::from_utf8_lossy(&read_exact(&mut replica, expected.len())),
        String::from_utf8_lossy(&expected)
    );
    client.check(b"MULTI\r\n", b"+OK\r\n");
    client.check(
        b"SYNC\r\n",
        b"-ERR Command not allowed inside a transaction\r\n",
    );
}
