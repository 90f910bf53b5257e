//! MIGRATE between two servers: keys move with their TTL, COPY and
//! REPLACE, the target's refusals, missing keys and unreachable targets.

mod common;

use std::net::TcpListener;

use common::{resp, TestServer};

#[test]
fn keys_move_to_the_target_and_leave_the_source() {
    let dir_a = tempfile::tempdir().unwrap();
    let dir_b = tempfile::tempdir().unwrap();
    let a = TestServer::start(dir_a.path());
    let b = TestServer::start(dir_b.path());
    let (mut ca, mut cb) = (a.raw(), b.raw());
    let port = b.addr.port().to_string();
    ca.check(
        b"SET k v\r\nPEXPIRE k 100000\r\nRPUSH l x y\r\nSET kept 1\r\n",
        b"+OK\r\n:1\r\n:2\r\n+OK\r\n",
    );
    // Nothing to move: NOKEY, without a connection.
    ca.check(
        &resp(&["MIGRATE", "127.0.0.1", "1", "nosuch", "0", "100"]),
        b"+NOKEY\r\n",
    );
    ca.check(
        &resp(&["MIGRATE", "127.0.0.1", &port, "k", "2", "5000"]),
        b"+OK\r\n",
    );
    ca.check(b"EXISTS k\r\n", b":0\r\n");
    cb.check(b"SELECT 2\r\nGET k\r\n", b"+OK\r\n$1\r\nv\r\n");
    let ttl = cb.roundtrip_any(b"PTTL k\r\n");
    let ttl: i64 = String::from_utf8_lossy(&ttl[1..]).trim().parse().unwrap();
    assert!(ttl > 90_000 && ttl <= 100_000, "{ttl}");
    // KEYS with COPY: both stay.
    ca.check(
        &resp(&[
            "MIGRATE",
            "127.0.0.1",
            &port,
            "",
            "2",
            "5000",
            "COPY",
            "KEYS",
            "l",
            "kept",
            "gone",
        ]),
        b"+OK\r\n",
    );
    ca.check(b"EXISTS l kept\r\n", b":2\r\n");
    cb.check(
        b"LRANGE l 0 -1\r\nGET kept\r\n",
        b"*2\r\n$1\r\nx\r\n$1\r\ny\r\n$1\r\n1\r\n",
    );
    // The target refuses an existing key unless REPLACE.
    ca.check(
        &resp(&["MIGRATE", "127.0.0.1", &port, "kept", "2", "5000"]),
        b"-ERR Target instance replied with error: BUSYKEY Target key name already exists.\r\n",
    );
    ca.check(b"EXISTS kept\r\n", b":1\r\n");
    ca.check(b"SET kept 2\r\n", b"+OK\r\n");
    ca.check(
        &resp(&[
            "MIGRATE",
            "127.0.0.1",
            &port,
            "kept",
            "2",
            "5000",
            "REPLACE",
        ]),
        b"+OK\r\n",
    );
    cb.check(b"GET kept\r\n", b"$1\r\n2\r\n");
    ca.check(
        &resp(&["MIGRATE", "127.0.0.1", &port, "kept", "2", "5000", "KEYS", "l"]),
        b"-ERR When using MIGRATE KEYS option, the key argument must be set to the empty string\r\n",
    );
    ca.check(
        &resp(&["MIGRATE", "127.0.0.1", &port, "l", "2", "5000", "BOGUS"]),
        b"-ERR syntax error\r\n",
    );
}

#[test]
fn an_unreachable_target_is_an_ioerr_and_keeps_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let a = TestServer::start(dir.path());
    let mut c = a.raw();
    // A port nobody listens on.
    let port = {
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port().to_string()
    };
    c.check(b"SET k v\r\n", b"+OK\r\n");
    c.check(
        &resp(&[
            "MIGRATE",
            "127.0.0.1",
            &port,
            "k",
            "0",
            "200",
            "AUTH",
            "secret",
        ]),
        b"-IOERR error or timeout connecting to the client\r\n",
    );
    c.check(b"EXISTS k\r\n", b":1\r\n");
    // The password is redacted in the slow log.
    c.check(b"CONFIG SET slowlog-log-slower-than 0\r\n", b"+OK\r\n");
    c.check(
        &resp(&[
            "MIGRATE",
            "127.0.0.1",
            &port,
            "nosuch",
            "0",
            "200",
            "AUTH2",
            "u",
            "p",
        ]),
        b"+NOKEY\r\n",
    );
    let log = String::from_utf8_lossy(&c.roundtrip_any(b"SLOWLOG GET 2\r\n")).into_owned();
    assert!(
        log.contains("(redacted)") && !log.contains("$1\r\np\r\n"),
        "{log}"
    );
}
