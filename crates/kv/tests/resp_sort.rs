//! Byte-level protocol tests of SORT and SORT_RO, RESP2 and RESP3, the
//! expected bytes as Redis 7.0 replies; and SORT ... STORE's recovery
//! from the log.

mod common;

use common::{resp, TestServer};

#[test]
fn sort_replies_as_redis_does() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(&resp(&["RPUSH", "l", "3", "1", "2", "10"]), b":4\r\n");
    c.check(
        &resp(&["SORT", "l"]),
        b"*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\n10\r\n",
    );
    c.check(
        &resp(&["SORT", "l", "DESC"]),
        b"*4\r\n$2\r\n10\r\n$1\r\n3\r\n$1\r\n2\r\n$1\r\n1\r\n",
    );
    c.check(
        &resp(&["SORT", "l", "ALPHA"]),
        b"*4\r\n$1\r\n1\r\n$2\r\n10\r\n$1\r\n2\r\n$1\r\n3\r\n",
    );
    c.check(
        &resp(&["SORT", "l", "ALPHA", "DESC"]),
        b"*4\r\n$1\r\n3\r\n$1\r\n2\r\n$2\r\n10\r\n$1\r\n1\r\n",
    );
    c.check(
        &resp(&["SORT", "l", "LIMIT", "1", "2"]),
        b"*2\r\n$1\r\n2\r\n$1\r\n3\r\n",
    );
    c.check(
        &resp(&["SORT", "l", "LIMIT", "-5", "2"]),
        b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n",
    );
    c.check(
        &resp(&["SORT", "l", "LIMIT", "2", "-1"]),
        b"*2\r\n$1\r\n3\r\n$2\r\n10\r\n",
    );
    c.check(&resp(&["SORT", "l", "LIMIT", "10", "5"]), b"*0\r\n");
    c.check(
        &resp(&["SORT", "l", "LIMIT", "1"]),
        b"-ERR syntax error\r\n",
    );
    c.check(
        &resp(&["SORT", "l", "LIMIT", "a", "1"]),
        b"-ERR value is not an integer or out of range\r\n",
    );
    c.check(
        &resp(&["SORT", "l", "BY", "nosort"]),
        b"*4\r\n$1\r\n3\r\n$1\r\n1\r\n$1\r\n2\r\n$2\r\n10\r\n",
    );
    c.check(
        &resp(&["SORT", "l", "BY", "nosort", "DESC"]),
        b"*4\r\n$2\r\n10\r\n$1\r\n2\r\n$1\r\n1\r\n$1\r\n3\r\n",
    );
    c.check(
        &resp(&["SORT", "l", "BY", "nosort", "LIMIT", "1", "2"]),
        b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n",
    );
    c.check(
        &resp(&["SORT", "l", "BY", "nosort", "DESC", "LIMIT", "1", "2"]),
        b"*2\r\n$1\r\n2\r\n$1\r\n1\r\n",
    );
    c.check(
        &resp(&["MSET", "w_1", "30", "w_2", "20", "w_3", "10", "w_10", "x"]),
        b"+OK\r\n",
    );
    c.check(
        &resp(&["SORT", "l", "BY", "w_*"]),
        b"-ERR One or more scores can't be converted into double\r\n",
    );
    c.check(&resp(&["MSET", "w_10", "40"]), b"+OK\r\n");
    c.check(
        &resp(&["SORT", "l", "BY", "w_*"]),
        b"*4\r\n$1\r\n3\r\n$1\r\n2\r\n$1\r\n1\r\n$2\r\n10\r\n",
    );
    c.check(&resp(&["SORT", "l", "BY", "w_*", "DESC", "GET", "#", "GET", "w_*"]), b"*8\r\n$2\r\n10\r\n$2\r\n40\r\n$1\r\n1\r\n$2\r\n30\r\n$1\r\n2\r\n$2\r\n20\r\n$1\r\n3\r\n$2\r\n10\r\n");
    c.check(
        &resp(&["SORT", "l", "BY", "missing_*"]),
        b"*4\r\n$1\r\n1\r\n$2\r\n10\r\n$1\r\n2\r\n$1\r\n3\r\n",
    );
    c.check(
        &resp(&["SORT", "l", "BY", "missing_*", "ALPHA"]),
        b"*4\r\n$1\r\n3\r\n$1\r\n1\r\n$1\r\n2\r\n$2\r\n10\r\n",
    );
    c.check(&resp(&["HSET", "o_1", "f", "3", "g", "one"]), b":2\r\n");
    c.check(&resp(&["HSET", "o_2", "f", "1", "g", "two"]), b":2\r\n");
    c.check(&resp(&["SORT", "l", "BY", "o_*->f", "GET", "o_*->g", "GET", "#"]), b"*8\r\n$-1\r\n$2\r\n10\r\n$-1\r\n$1\r\n3\r\n$3\r\ntwo\r\n$1\r\n2\r\n$3\r\none\r\n$1\r\n1\r\n");
    c.check(
        &resp(&[
            "SORT", "l", "BY", "o_*->f", "ALPHA", "DESC", "GET", "o_*->g",
        ]),
        b"*4\r\n$3\r\none\r\n$3\r\ntwo\r\n$-1\r\n$-1\r\n",
    );
    c.check(
        &resp(&["SORT", "l", "GET", "o_*->"]),
        b"*4\r\n$-1\r\n$-1\r\n$-1\r\n$-1\r\n",
    );
    c.check(
        &resp(&["SORT", "l", "GET", "nostar"]),
        b"*4\r\n$-1\r\n$-1\r\n$-1\r\n$-1\r\n",
    );
    c.check(&resp(&["SORT", "l", "STORE", "dst"]), b":4\r\n");
    c.check(
        &resp(&["LRANGE", "dst", "0", "-1"]),
        b"*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\n10\r\n",
    );
    c.check(
        &resp(&["SORT", "l", "LIMIT", "0", "0", "STORE", "dst"]),
        b":0\r\n",
    );
    c.check(&resp(&["EXISTS", "dst"]), b":0\r\n");
    c.check(
        &resp(&["SORT", "l", "GET", "o_*->g", "STORE", "dst"]),
        b":4\r\n",
    );
    c.check(
        &resp(&["LRANGE", "dst", "0", "-1"]),
        b"*4\r\n$3\r\none\r\n$3\r\ntwo\r\n$0\r\n\r\n$0\r\n\r\n",
    );
    c.check(
        &resp(&["SORT_RO", "l", "STORE", "dst"]),
        b"-ERR syntax error\r\n",
    );
    c.check(
        &resp(&["SORT_RO", "l", "DESC", "LIMIT", "0", "2"]),
        b"*2\r\n$2\r\n10\r\n$1\r\n3\r\n",
    );
    c.check(&resp(&["SORT", "l", "BOGUS"]), b"-ERR syntax error\r\n");
    c.check(&resp(&["SORT", "l", "BY"]), b"-ERR syntax error\r\n");
    c.check(&resp(&["SORT", "l", "GET"]), b"-ERR syntax error\r\n");
    c.check(&resp(&["SORT", "l", "STORE"]), b"-ERR syntax error\r\n");
    c.check(&resp(&["SADD", "s", "5", "-1", "2.5", "1e1"]), b":4\r\n");
    c.check(
        &resp(&["SORT", "s"]),
        b"*4\r\n$2\r\n-1\r\n$3\r\n2.5\r\n$1\r\n5\r\n$3\r\n1e1\r\n",
    );
    c.check(
        &resp(&["SORT", "s", "DESC", "LIMIT", "0", "2"]),
        b"*2\r\n$3\r\n1e1\r\n$1\r\n5\r\n",
    );
    c.check(&resp(&["SADD", "bad", "1", "x"]), b":2\r\n");
    c.check(
        &resp(&["SORT", "bad"]),
        b"-ERR One or more scores can't be converted into double\r\n",
    );
    c.check(
        &resp(&["SORT", "bad", "ALPHA"]),
        b"*2\r\n$1\r\n1\r\n$1\r\nx\r\n",
    );
    c.check(
        &resp(&["SORT", "bad", "STORE", "dst"]),
        b"-ERR One or more scores can't be converted into double\r\n",
    );
    c.check(
        &resp(&["LRANGE", "dst", "0", "-1"]),
        b"*4\r\n$3\r\none\r\n$3\r\ntwo\r\n$0\r\n\r\n$0\r\n\r\n",
    );
    c.check(
        &resp(&["SORT", "s", "BY", "nosort", "STORE", "dst"]),
        b":4\r\n",
    );
    c.check(
        &resp(&["LRANGE", "dst", "0", "-1"]),
        b"*4\r\n$2\r\n-1\r\n$3\r\n1e1\r\n$3\r\n2.5\r\n$1\r\n5\r\n",
    );
    c.check(
        &resp(&["SORT", "s", "BY", "nosort", "ALPHA", "STORE", "dst", "DESC"]),
        b":4\r\n",
    );
    c.check(
        &resp(&["LRANGE", "dst", "0", "-1"]),
        b"*4\r\n$1\r\n5\r\n$3\r\n2.5\r\n$3\r\n1e1\r\n$2\r\n-1\r\n",
    );
    c.check(
        &resp(&["ZADD", "z", "3", "a", "1", "b", "2", "c"]),
        b":3\r\n",
    );
    c.check(
        &resp(&["SORT", "z", "BY", "nosort"]),
        b"*3\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\na\r\n",
    );
    c.check(
        &resp(&["SORT", "z", "BY", "nosort", "DESC"]),
        b"*3\r\n$1\r\na\r\n$1\r\nc\r\n$1\r\nb\r\n",
    );
    c.check(
        &resp(&["SORT", "z", "BY", "nosort", "LIMIT", "1", "5"]),
        b"*2\r\n$1\r\nc\r\n$1\r\na\r\n",
    );
    c.check(
        &resp(&["SORT", "z", "BY", "nosort", "DESC", "LIMIT", "1", "1"]),
        b"*1\r\n$1\r\nc\r\n",
    );
    c.check(
        &resp(&["SORT", "z", "ALPHA"]),
        b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
    );
    c.check(&resp(&["SET", "str", "x"]), b"+OK\r\n");
    c.check(
        &resp(&["SORT", "str"]),
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    c.check(
        &resp(&["SORT", "str", "BY", "nosort"]),
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    c.check(&resp(&["SORT", "nokey"]), b"*0\r\n");
    c.check(&resp(&["SORT", "nokey", "STORE", "dst"]), b":0\r\n");
    c.check(&resp(&["EXISTS", "dst"]), b":0\r\n");
    c.check(&resp(&["RPUSH", "e", ""]), b":1\r\n");
    c.check(&resp(&["SORT", "e"]), b"*1\r\n$0\r\n\r\n");
    c.check(
        &resp(&["RPUSH", "inf", "inf", "-inf", "0", "+inf"]),
        b":4\r\n",
    );
    c.check(
        &resp(&["SORT", "inf"]),
        b"*4\r\n$4\r\n-inf\r\n$1\r\n0\r\n$4\r\n+inf\r\n$3\r\ninf\r\n",
    );
    c.check(&resp(&["RPUSH", "nan", "nan"]), b":1\r\n");
    c.check(
        &resp(&["SORT", "nan"]),
        b"-ERR One or more scores can't be converted into double\r\n",
    );
    c.check(&resp(&["RPUSH", "ws", " 1"]), b":1\r\n");
    c.check(&resp(&["SORT", "ws"]), b"*1\r\n$2\r\n 1\r\n");
    c.check(&resp(&["RPUSH", "big", "1e400"]), b":1\r\n");
    c.check(
        &resp(&["SORT", "big"]),
        b"-ERR One or more scores can't be converted into double\r\n",
    );
}

/// Weights are read as C's `strtod` reads them (hexadecimal too), and a
/// constant BY anywhere turns sorting off even when a later BY has a `*`.
#[test]
fn sort_weights_in_hex_and_a_sticky_nosort() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        &resp(&["RPUSH", "h", "0x10", "1", "-0x1p1", "0X1.8"]),
        b":4\r\n",
    );
    c.check(
        &resp(&["SORT", "h"]),
        b"*4\r\n$6\r\n-0x1p1\r\n$1\r\n1\r\n$5\r\n0X1.8\r\n$4\r\n0x10\r\n",
    );
    c.check(&resp(&["MSET", "w_a", "1", "w_b", "2"]), b"+OK\r\n");
    c.check(&resp(&["RPUSH", "c", "b", "a"]), b":2\r\n");
    c.check(
        &resp(&["SORT", "c", "BY", "nosort", "BY", "w_*"]),
        b"*2\r\n$1\r\nb\r\n$1\r\na\r\n",
    );
    c.check(
        &resp(&["SORT", "c", "BY", "w_*", "BY", "nosort"]),
        b"*2\r\n$1\r\nb\r\n$1\r\na\r\n",
    );
    c.check(
        &resp(&["SORT", "c", "BY", "w_*"]),
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
    );
}

#[test]
fn sort_in_resp3() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.hello3();
    c.check(&resp(&["RPUSH", "l", "2", "1"]), b":2\r\n");
    c.check(
        &resp(&["SORT", "l", "GET", "#", "GET", "nokey_*"]),
        b"*4\r\n$1\r\n1\r\n_\r\n$1\r\n2\r\n_\r\n",
    );
    c.check(
        &resp(&["SORT_RO", "l", "LIMIT", "0", "1"]),
        b"*1\r\n$1\r\n1\r\n",
    );
    c.check(&resp(&["SORT", "l", "STORE", "dst"]), b":2\r\n");
}

/// SORT ... STORE reads weights from keys it does not name; its log record
/// is the stored list itself, so changing the weights afterwards cannot
/// change what a replay stores.
#[test]
fn sort_store_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(&resp(&["RPUSH", "ids", "1", "2", "3"]), b":3\r\n");
    c.check(
        &resp(&["MSET", "w_1", "3", "w_2", "1", "w_3", "2"]),
        b"+OK\r\n",
    );
    c.check(&resp(&["SET", "out", "old"]), b"+OK\r\n");
    c.check(&resp(&["EXPIRE", "out", "1000"]), b":1\r\n");
    c.check(
        &resp(&["SORT", "ids", "BY", "w_*", "STORE", "out"]),
        b":3\r\n",
    );
    c.check(
        &resp(&["MSET", "w_1", "1", "w_2", "2", "w_3", "3"]),
        b"+OK\r\n",
    );
    c.check(&resp(&["SORT", "nothing", "STORE", "gone"]), b":0\r\n");
    c.check(&resp(&["SET", "emptied", "x"]), b"+OK\r\n");
    c.check(&resp(&["SORT", "nothing", "STORE", "emptied"]), b":0\r\n");
    drop(c);
    server.stop();

    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        &resp(&["LRANGE", "out", "0", "-1"]),
        b"*3\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n1\r\n",
    );
    c.check(&resp(&["TTL", "out"]), b":-1\r\n");
    c.check(&resp(&["EXISTS", "gone", "emptied"]), b":0\r\n");
    drop(c);
    server.stop();
}
