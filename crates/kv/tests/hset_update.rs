//! HSET replaces an existing field's value in place (the field keeps its
//! name) and adds the missing ones: the count it answers is of the fields
//! added, a field named twice in one call takes the last value, and the
//! result replays the same after a restart.

mod common;

use common::TestServer;

#[test]
fn updates_and_additions_are_counted_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    {
        let mut c = server.raw();
        c.check(b"HSET h a 1 b 2\r\n", b":2\r\n");
        // One update, one addition.
        c.check(b"HSET h a 10 c 3\r\n", b":1\r\n");
        // A field new to the hash named twice: added once, last value.
        c.check(b"HSET h d 4 d 5\r\n", b":1\r\n");
        // Only updates.
        c.check(b"HSET h a 11 b 22\r\n", b":0\r\n");
        c.check(b"HMSET h c 33\r\n", b"+OK\r\n");
        c.check(b"HLEN h\r\n", b":4\r\n");
        c.check(b"HGET h a\r\n", b"$2\r\n11\r\n");
        c.check(b"HGET h d\r\n", b"$1\r\n5\r\n");
        // Inside a script, as the rate limiter calls it.
        c.check(
            b"EVAL \"return redis.call('HSET', KEYS[1], 'count', ARGV[1])\" 1 h 7\r\n",
            b":1\r\n",
        );
        c.check(
            b"EVAL \"return redis.call('HSET', KEYS[1], 'count', ARGV[1])\" 1 h 8\r\n",
            b":0\r\n",
        );
    }
    server.stop();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"HLEN h\r\n", b":5\r\n");
    c.check(b"HGET h a\r\n", b"$2\r\n11\r\n");
    c.check(b"HGET h b\r\n", b"$2\r\n22\r\n");
    c.check(b"HGET h c\r\n", b"$2\r\n33\r\n");
    c.check(b"HGET h d\r\n", b"$1\r\n5\r\n");
    c.check(b"HGET h count\r\n", b"$1\r\n8\r\n");
}
