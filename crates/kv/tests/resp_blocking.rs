//! Byte-level tests of the blocking commands with several raw connections:
//! one blocks, another writes, and each must receive exactly the bytes
//! Redis 7.0 sends, in order. No sleeps: a test waits on replies, and on
//! INFO's `blocked_clients` to know a client is blocked.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::{Raw, TestServer};

/// Reads one reply line (through `\r\n`), and a bulk string's body.
fn read_reply(c: &mut Raw) -> Vec<u8> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        c.stream.read_exact(&mut byte).expect("a reply");
        line.push(byte[0]);
    }
    if line[0] == b'$' {
        let len: i64 = std::str::from_utf8(&line[1..line.len() - 2])
            .unwrap()
            .parse()
            .unwrap();
        if len >= 0 {
            let mut body = vec![0u8; len as usize + 2];
            c.stream.read_exact(&mut body).expect("a bulk body");
            line.extend_from_slice(&body);
        }
    }
    line
}

/// Waits until INFO reports `n` blocked clients.
fn wait_blocked(control: &mut Raw, n: usize) {
    let want = format!("blocked_clients:{n}\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        control.stream.write_all(b"INFO clients\r\n").unwrap();
        let info = String::from_utf8(read_reply(control)).unwrap();
        if info.contains(&want) {
            return;
        }
        assert!(Instant::now() < deadline, "never {want:?}: {info}");
        std::thread::yield_now();
    }
}

/// Sends `input` without waiting for a reply.
fn send(c: &mut Raw, input: &[u8]) {
    c.stream.write_all(input).unwrap();
}

/// Switches `c` to RESP3, consuming the HELLO reply (its client id varies).
fn resp3(c: &mut Raw) {
    c.stream.write_all(b"HELLO 3\r\nPING\r\n").unwrap();
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"+PONG\r\n") {
        c.stream.read_exact(&mut byte).expect("HELLO reply");
        got.push(byte[0]);
    }
}

#[test]
fn clients_are_served_first_blocked_first_then_run_their_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let (mut w, mut b1, mut b2, mut b3) = (server.raw(), server.raw(), server.raw(), server.raw());
    send(&mut b1, b"BLPOP k other 0\r\nPING\r\n");
    wait_blocked(&mut w, 1);
    send(&mut b2, b"BRPOP other k 0\r\n");
    wait_blocked(&mut w, 2);
    send(&mut b3, b"BLPOP k 0\r\n");
    wait_blocked(&mut w, 3);
    // Two elements for three clients: the first two blocked get them.
    w.check(b"RPUSH k a b\r\n", b":2\r\n");
    b1.check(b"", b"*2\r\n$1\r\nk\r\n$1\r\na\r\n+PONG\r\n");
    b2.check(b"", b"*2\r\n$1\r\nk\r\n$1\r\nb\r\n");
    wait_blocked(&mut w, 1);
    w.check(b"EXISTS k\r\nLPUSH k c\r\n", b":0\r\n:1\r\n");
    b3.check(b"", b"*2\r\n$1\r\nk\r\n$1\r\nc\r\n");
    wait_blocked(&mut w, 0);
    // Data already there: served at once, from the first non-empty key.
    w.check(b"RPUSH k2 x\r\n", b":1\r\n");
    b1.check(b"BLPOP k k2 0\r\n", b"*2\r\n$2\r\nk2\r\n$1\r\nx\r\n");
}

#[test]
fn a_transaction_wakes_clients_after_exec_and_never_blocks_inside() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let (mut w, mut b) = (server.raw(), server.raw());
    send(&mut b, b"BLPOP k 0\r\n");
    wait_blocked(&mut w, 1);
    // Pushed then deleted in one transaction: nothing to serve.
    w.check(
        b"MULTI\r\nLPUSH k a\r\nDEL k\r\nSET k str\r\nEXEC\r\n",
        b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n:1\r\n:1\r\n+OK\r\n",
    );
    wait_blocked(&mut w, 1);
    w.check(
        b"DEL k\r\nMULTI\r\nLPUSH k a\r\nLPUSH k b\r\nEXEC\r\n",
        b":1\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:1\r\n:2\r\n",
    );
    b.check(b"", b"*2\r\n$1\r\nk\r\n$1\r\nb\r\n");
    // Inside MULTI a blocking command answers as a timeout would.
    w.check(
        b"MULTI\r\nBLPOP none 0\r\nBRPOPLPUSH none x 0\r\nBZPOPMIN none 0\r\nBLMPOP 0 1 none LEFT\r\nWAIT 1 0\r\nBLPOP k 0\r\nEXEC\r\n",
        b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*6\r\n*-1\r\n$-1\r\n*-1\r\n*-1\r\n:0\r\n*2\r\n$1\r\nk\r\n$1\r\na\r\n",
    );
    resp3(&mut w);
    w.check(
        b"MULTI\r\nBLPOP none 0\r\nBLMOVE none x LEFT LEFT 0\r\nEXEC\r\n",
        b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n_\r\n_\r\n",
    );
}

#[test]
fn moves_chain_and_wrong_types_are_served_as_redis_serves_them() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let (mut w, mut b1, mut b2) = (server.raw(), server.raw(), server.raw());
    send(&mut b2, b"BLPOP dst 0\r\n");
    wait_blocked(&mut w, 1);
    send(&mut b1, b"BLMOVE src dst RIGHT LEFT 0\r\n");
    wait_blocked(&mut w, 2);
    w.check(b"RPUSH src v\r\n", b":1\r\n");
    b1.check(b"", b"$1\r\nv\r\n");
    b2.check(b"", b"*2\r\n$3\r\ndst\r\n$1\r\nv\r\n");
    w.check(b"EXISTS src dst\r\n", b":0\r\n");
    // A destination of another type is the served client's error, and
    // the element stays where it was.
    send(&mut b1, b"BRPOPLPUSH s2 d2 0\r\n");
    wait_blocked(&mut w, 1);
    w.check(b"SET d2 x\r\nRPUSH s2 a b\r\n", b"+OK\r\n:2\r\n");
    b1.check(
        b"",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    w.check(b"LLEN s2\r\n", b":2\r\n");
    // A sorted-set waiter is not served by a list, nor a list waiter by a
    // sorted set.
    send(&mut b1, b"BZPOPMIN mixed 0\r\n");
    send(&mut b2, b"BLPOP mixed 0\r\n");
    wait_blocked(&mut w, 2);
    w.check(b"RPUSH mixed 1\r\n", b":1\r\n");
    b2.check(b"", b"*2\r\n$5\r\nmixed\r\n$1\r\n1\r\n");
    w.check(b"ZADD mixed 2.5 m\r\n", b":1\r\n");
    b1.check(b"", b"*3\r\n$5\r\nmixed\r\n$1\r\nm\r\n$3\r\n2.5\r\n");
    // A key moved into place by RENAME serves too.
    send(&mut b1, b"BLMPOP 0 1 target LEFT COUNT 2\r\n");
    wait_blocked(&mut w, 1);
    w.check(
        b"RPUSH tmp x y z\r\nRENAME tmp target\r\n",
        b":3\r\n+OK\r\n",
    );
    b1.check(b"", b"*2\r\n$6\r\ntarget\r\n*2\r\n$1\r\nx\r\n$1\r\ny\r\n");
}

#[test]
fn timeouts_unblock_and_disconnects() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let (mut w, mut b) = (server.raw(), server.raw());
    b.check(b"BLPOP k 0.01\r\n", b"*-1\r\n");
    b.check(b"BRPOPLPUSH k d 0.01\r\n", b"*-1\r\n");
    b.check(b"WAIT 0 0\r\nWAIT 1 10\r\n", b":0\r\n:0\r\n");
    b.check(
        b"BLPOP k -1\r\nBLPOP k x\r\nWAIT 1 -1\r\nWAIT 1 x\r\n",
        b"-ERR timeout is negative\r\n-ERR timeout is not a float or out of range\r\n-ERR timeout is negative\r\n-ERR timeout is not an integer or out of range\r\n",
    );
    // CLIENT UNBLOCK: a timeout's reply, or an error; 0 for a client not
    // blocked.
    let id = String::from_utf8(read_reply_to(&mut b, b"CLIENT ID\r\n")).unwrap();
    let id = id.trim_start_matches(':').trim_end();
    send(&mut b, b"BZPOPMAX z 0\r\n");
    wait_blocked(&mut w, 1);
    let list = String::from_utf8(read_reply_to(&mut w, b"CLIENT LIST\r\n")).unwrap();
    assert!(
        list.contains(&format!("id={id} ")) && list.contains("flags=b "),
        "{list}"
    );
    w.check(format!("CLIENT UNBLOCK {id}\r\n").as_bytes(), b":1\r\n");
    b.check(b"", b"*-1\r\n");
    w.check(format!("CLIENT UNBLOCK {id}\r\n").as_bytes(), b":0\r\n");
    send(&mut b, b"WAIT 1 0\r\n");
    wait_blocked(&mut w, 1);
    w.check(
        format!("CLIENT UNBLOCK {id} ERROR\r\n").as_bytes(),
        b":1\r\n",
    );
    b.check(b"", b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n");
    w.check(
        b"CLIENT UNBLOCK 1 MAYBE\r\n",
        b"-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n",
    );
    resp3(&mut b);
    b.check(b"BLPOP k 0.01\r\nBZMPOP 0.01 1 z MIN\r\n", b"_\r\n_\r\n");
    // A blocked client that disconnects is forgotten: the push stays.
    send(&mut b, b"BLPOP gone 0\r\n");
    wait_blocked(&mut w, 1);
    drop(b);
    wait_blocked(&mut w, 0);
    w.check(b"RPUSH gone 1\r\nLLEN gone\r\n", b":1\r\n:1\r\n");
}

/// Sends `input` on `c` and returns its one reply.
fn read_reply_to(c: &mut Raw, input: &[u8]) -> Vec<u8> {
    send(c, input);
    read_reply(c)
}

#[test]
fn client_pause_holds_writes_until_unpause() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let (mut w, mut p, mut r) = (server.raw(), server.raw(), server.raw());
    w.check(b"CLIENT PAUSE 100000 WRITE\r\n", b"+OK\r\n");
    send(&mut p, b"SET k v\r\nGET k\r\n");
    wait_blocked(&mut w, 1);
    r.check(b"GET k\r\nPING\r\n", b"$-1\r\n+PONG\r\n");
    r.check(
        b"CLIENT PAUSE x\r\nCLIENT PAUSE 1 NONE\r\n",
        b"-ERR timeout is not an integer or out of range\r\n-ERR CLIENT PAUSE mode must be WRITE or ALL\r\n",
    );
    w.check(b"CLIENT UNPAUSE\r\n", b"+OK\r\n");
    p.check(b"", b"+OK\r\n$1\r\nv\r\n");
    // ALL holds every command, reads too, until the pause times out.
    let start = Instant::now();
    w.check(b"CLIENT PAUSE 100 ALL\r\n", b"+OK\r\n");
    r.check(b"PING\r\n", b"+PONG\r\n");
    assert!(start.elapsed() >= Duration::from_millis(90));
}

#[test]
fn a_served_blocked_pop_replays_to_the_same_state() {
    let dir = tempfile::tempdir().unwrap();
    {
        let server = TestServer::start(dir.path());
        let (mut w, mut b1, mut b2) = (server.raw(), server.raw(), server.raw());
        send(&mut b1, b"BLMOVE src dst LEFT RIGHT 0\r\n");
        wait_blocked(&mut w, 1);
        send(&mut b2, b"BZPOPMIN z 0\r\n");
        wait_blocked(&mut w, 2);
        w.check(b"RPUSH src a b c\r\nZADD z 1 m 2 n\r\n", b":3\r\n:2\r\n");
        b1.check(b"", b"$1\r\na\r\n");
        b2.check(b"", b"*3\r\n$1\r\nz\r\n$1\r\nm\r\n$1\r\n1\r\n");
        b1.check(
            b"BLMPOP 0 1 src RIGHT COUNT 1\r\n",
            b"*2\r\n$3\r\nsrc\r\n*1\r\n$1\r\nc\r\n",
        );
        server.stop();
    }
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"LRANGE src 0 -1\r\nLRANGE dst 0 -1\r\nZRANGE z 0 -1\r\n",
        b"*1\r\n$1\r\nb\r\n*1\r\n$1\r\na\r\n*1\r\n$1\r\nn\r\n",
    );
}
