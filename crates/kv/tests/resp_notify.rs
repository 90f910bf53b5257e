//! Byte-level tests of keyspace notifications (`notify-keyspace-events`):
//! the exact messages a pattern subscriber receives for other clients'
//! commands, for expiry, and the CONFIG GET/SET of the flags.

mod common;

use common::{Raw, TestServer};

/// The pmessage bytes for pattern `*`.
fn pmessage(channel: &str, message: &str) -> Vec<u8> {
    format!(
        "*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n${}\r\n{channel}\r\n${}\r\n{message}\r\n",
        channel.len(),
        message.len()
    )
    .into_bytes()
}

/// Both messages of one event on key `key` of database 0.
fn both(key: &str, event: &str) -> Vec<u8> {
    let mut out = pmessage(&format!("__keyspace@0__:{key}"), event);
    out.extend(pmessage(&format!("__keyevent@0__:{event}"), key));
    out
}

fn subscriber(server: &TestServer) -> Raw {
    let mut sub = server.raw();
    sub.check(
        b"PSUBSCRIBE *\r\n",
        b"*3\r\n$10\r\npsubscribe\r\n$1\r\n*\r\n:1\r\n",
    );
    sub
}

#[test]
fn config_flags_normalise_as_redis() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let get = b"CONFIG GET notify-keyspace-events\r\n";
    c.check(get, b"*2\r\n$22\r\nnotify-keyspace-events\r\n$0\r\n\r\n");
    for (set, shown) in [
        ("gKE", "gKE"),
        ("$lshzxeKE", "$lshzxeKE"),
        ("KA", "AK"),
        ("EA", "AE"),
    ] {
        c.check(
            format!("CONFIG SET notify-keyspace-events {set}\r\n").as_bytes(),
            b"+OK\r\n",
        );
        c.check(
            get,
            format!(
                "*2\r\n$22\r\nnotify-keyspace-events\r\n${}\r\n{shown}\r\n",
                shown.len()
            )
            .as_bytes(),
        );
    }
    c.check(
        b"CONFIG SET notify-keyspace-events KQ\r\n",
        b"-ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'.\r\n",
    );
}

#[test]
fn events_of_each_family() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"CONFIG SET notify-keyspace-events KEA\r\n", b"+OK\r\n");
    let mut sub = subscriber(&server);
    c.check(b"SET foo bar\r\n", b"+OK\r\n");
    sub.check(b"", &both("foo", "set"));
    c.check(b"SET foo bar EX 100\r\n", b"+OK\r\n");
    sub.check(b"", &[both("foo", "set"), both("foo", "expire")].concat());
    c.check(b"INCRBY n 2\r\nAPPEND foo x\r\n", b":2\r\n:4\r\n");
    sub.check(b"", &[both("n", "incrby"), both("foo", "append")].concat());
    c.check(b"RENAME foo bar\r\nDEL bar nope\r\n", b"+OK\r\n:1\r\n");
    sub.check(
        b"",
        &[
            both("foo", "rename_from"),
            both("bar", "rename_to"),
            both("bar", "del"),
        ]
        .concat(),
    );
    c.check(b"LPUSH l a\r\nRPOP l\r\n", b":1\r\n$1\r\na\r\n");
    sub.check(
        b"",
        &[both("l", "lpush"), both("l", "rpop"), both("l", "del")].concat(),
    );
    c.check(b"HSET h f v\r\nHINCRBY h n 1\r\n", b":1\r\n:1\r\n");
    sub.check(b"", &[both("h", "hset"), both("h", "hincrby")].concat());
    c.check(
        b"SADD s a\r\nSREM s x\r\nSREM s a\r\n",
        b":1\r\n:0\r\n:1\r\n",
    );
    sub.check(
        b"",
        &[both("s", "sadd"), both("s", "srem"), both("s", "del")].concat(),
    );
    c.check(b"ZADD z 1 a\r\nZINCRBY z 1 a\r\n", b":1\r\n$1\r\n2\r\n");
    sub.check(b"", &[both("z", "zadd"), both("z", "zincr")].concat());
    // Nothing for commands that change nothing, nor for other classes.
    c.check(b"CONFIG SET notify-keyspace-events Kl\r\n", b"+OK\r\n");
    c.check(
        b"SET x 1\r\nLPUSHX nope a\r\nRPUSH l2 a\r\n",
        b"+OK\r\n:0\r\n:1\r\n",
    );
    sub.check(b"", &pmessage("__keyspace@0__:l2", "rpush"));
}

#[test]
fn new_keys_and_selected_database() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"CONFIG SET notify-keyspace-events En\r\n", b"+OK\r\n");
    let mut sub = subscriber(&server);
    c.check(
        b"SET foo bar\r\nSET foo baz\r\nSET bar bar\r\n",
        b"+OK\r\n+OK\r\n+OK\r\n",
    );
    sub.check(
        b"",
        &[
            pmessage("__keyevent@0__:new", "foo"),
            pmessage("__keyevent@0__:new", "bar"),
        ]
        .concat(),
    );
    c.check(
        b"CONFIG SET notify-keyspace-events K$\r\nSELECT 3\r\nSET k v\r\n",
        b"+OK\r\n+OK\r\n+OK\r\n",
    );
    sub.check(b"", &pmessage("__keyspace@3__:k", "set"));
}

#[test]
fn expired_keys_lazy_and_active() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"CONFIG SET notify-keyspace-events Ex\r\n", b"+OK\r\n");
    let mut sub = subscriber(&server);
    // Active expiry: the timer finds the key; the subscriber waits for
    // the message (a read with a timeout, no sleep).
    c.check(b"PSETEX foo 20 1\r\n", b"+OK\r\n");
    sub.check(b"", &pmessage("__keyevent@0__:expired", "foo"));
    // Lazy expiry (or the timer, whichever comes first): read the key
    // until it is gone; either way one `expired` is published.
    c.check(b"PSETEX bar 1 1\r\n", b"+OK\r\n");
    loop {
        let mut probe = server.raw();
        if probe.roundtrip_any(b"EXISTS bar\r\n") == b":0\r\n" {
            break;
        }
    }
    sub.check(b"", &pmessage("__keyevent@0__:expired", "bar"));
}

#[test]
fn resp3_subscriber_gets_its_own_events_as_pushes() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.hello3();
    c.check(
        b"CONFIG SET notify-keyspace-events E$\r\nSUBSCRIBE __keyevent@0__:set\r\n",
        b"+OK\r\n>3\r\n$9\r\nsubscribe\r\n$18\r\n__keyevent@0__:set\r\n:1\r\n",
    );
    // The push precedes SET's reply, as Redis sends it.
    c.check(
        b"SET k v\r\n",
        b">3\r\n$7\r\nmessage\r\n$18\r\n__keyevent@0__:set\r\n$1\r\nk\r\n+OK\r\n",
    );
}
