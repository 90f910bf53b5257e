//! Byte-level protocol tests of the string commands' options and edge
//! cases (SET, GETEX, INCRBYFLOAT, SETRANGE, LCS...) in RESP2 and RESP3,
//! and their replay after a restart.

mod common;

use common::{resp, TestServer};

const SYNTAX: &[u8] = b"-ERR syntax error\r\n";
const NOT_INTEGER: &[u8] = b"-ERR value is not an integer or out of range\r\n";
const NOT_FLOAT: &[u8] = b"-ERR value is not a valid float\r\n";
const WRONGTYPE: &[u8] = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

#[test]
fn set_options() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    // An option may repeat; two kinds of expiry may not.
    c.check(b"SET k v EX 10 EX 20\r\n", b"+OK\r\n");
    c.check(b"TTL k\r\n", b":20\r\n");
    c.check(b"SET k v NX NX\r\n", b"$-1\r\n");
    c.check(b"SET k v2 XX XX GET GET\r\n", b"$1\r\nv\r\n");
    c.check(b"TTL k\r\n", b":-1\r\n");
    c.check(b"SET k v EX 10 PX 10\r\n", SYNTAX);
    c.check(b"SET k v EXAT 10 PXAT 10\r\n", SYNTAX);
    c.check(b"SET k v KEEPTTL EX 10\r\n", SYNTAX);
    c.check(b"SET k v PX 10 KEEPTTL\r\n", SYNTAX);
    c.check(b"SET k v EX\r\n", SYNTAX);
    // Syntax is checked before the expiry's value, that before the key.
    c.check(b"SET k v EX abc FOO\r\n", SYNTAX);
    c.check(b"SET k v EX abc\r\n", NOT_INTEGER);
    c.check(
        b"SET k v PX -5\r\n",
        b"-ERR invalid expire time in 'set' command\r\n",
    );
    c.check(
        b"SET k v EX 9223372036854775807\r\n",
        b"-ERR invalid expire time in 'set' command\r\n",
    );
    c.check(b"RPUSH l a\r\n", b":1\r\n");
    c.check(
        b"SET l v EX 0 GET\r\n",
        b"-ERR invalid expire time in 'set' command\r\n",
    );
    c.check(b"SET l v GET\r\n", WRONGTYPE);
    c.check(b"SET l v GET NX\r\n", WRONGTYPE);
    c.check(b"SET n v NX GET\r\n", b"$-1\r\n");
    c.check(b"SET n v2 NX GET\r\n", b"$1\r\nv\r\n");
    c.check(b"GET n\r\n", b"$1\r\nv\r\n");
    c.check(b"SET k v PXAT 1\r\n", b"+OK\r\n");
    c.check(b"EXISTS k\r\n", b":0\r\n");
    c.check(b"SET k v EX 100\r\n", b"+OK\r\n");
    c.check(b"SET k w KEEPTTL KEEPTTL\r\n", b"+OK\r\n");
    c.check(b"TTL k\r\n", b":100\r\n");
}

#[test]
fn getex_order_and_past_times() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    // A missing key answers nil before its expiry is looked at.
    c.check(b"GETEX nokey EX 0\r\n", b"$-1\r\n");
    c.check(b"GETEX nokey EX abc\r\n", b"$-1\r\n");
    c.check(b"GETEX nokey FOO\r\n", SYNTAX);
    c.check(b"GETEX nokey EX 1 PX 1\r\n", SYNTAX);
    c.check(b"GETEX nokey PERSIST EX 1\r\n", SYNTAX);
    c.check(b"GETEX nokey KEEPTTL\r\n", SYNTAX);
    c.check(b"RPUSH l a\r\n", b":1\r\n");
    c.check(b"GETEX l EX abc\r\n", WRONGTYPE);
    c.check(b"SET k v\r\n", b"+OK\r\n");
    c.check(
        b"GETEX k EX 0\r\n",
        b"-ERR invalid expire time in 'getex' command\r\n",
    );
    c.check(b"GETEX k EX 10 EX 30\r\n", b"$1\r\nv\r\n");
    c.check(b"TTL k\r\n", b":30\r\n");
    c.check(b"GETEX k PERSIST PERSIST\r\n", b"$1\r\nv\r\n");
    c.check(b"TTL k\r\n", b":-1\r\n");
    // A past absolute time deletes the key after answering it.
    c.check(b"GETEX k EXAT 1\r\n", b"$1\r\nv\r\n");
    c.check(b"EXISTS k\r\n", b":0\r\n");
    c.check(b"GETEX k\r\n", b"$-1\r\n");
    c.check(
        b"GETEX\r\n",
        b"-ERR wrong number of arguments for 'getex' command\r\n",
    );
}

#[test]
fn incrbyfloat_as_redis_prints_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"INCRBYFLOAT f 3.0\r\n", b"$1\r\n3\r\n");
    c.check(b"INCRBYFLOAT f 0.1\r\n", b"$3\r\n3.1\r\n");
    // 17 decimals in the 64-bit significand of a long double.
    c.check(
        b"INCRBYFLOAT f 1.23456789012345678\r\n",
        b"$19\r\n4.33456789012345678\r\n",
    );
    c.check(b"SET h 5000\r\n", b"+OK\r\n");
    c.check(
        b"INCRBYFLOAT h 1e20\r\n",
        b"$21\r\n100000000000000005000\r\n",
    );
    c.check(b"INCRBYFLOAT x 0x10\r\n", b"$2\r\n16\r\n");
    c.check(b"INCRBYFLOAT x -16.0\r\n", b"$1\r\n0\r\n");
    c.check(b"INCRBYFLOAT x 1e-20\r\n", b"$1\r\n0\r\n");
    c.check(
        b"INCRBYFLOAT x +inf\r\n",
        b"-ERR increment would produce NaN or Infinity\r\n",
    );
    c.check(b"INCRBYFLOAT x nan\r\n", NOT_FLOAT);
    c.check(b"INCRBYFLOAT x 1e99999\r\n", NOT_FLOAT);
    c.check(b"INCRBYFLOAT x 1e\r\n", NOT_FLOAT);
    c.check(b"INCRBYFLOAT x \" 1\"\r\n", NOT_FLOAT);
    c.check(b"SET s 1\r\n", b"+OK\r\n");
    c.check(b"SETRANGE s 2 2\r\n", b":3\r\n");
    c.check(b"INCRBYFLOAT s 1\r\n", NOT_FLOAT);
    // The key's type is checked before the increment is parsed.
    c.check(b"RPUSH l a\r\n", b":1\r\n");
    c.check(b"INCRBYFLOAT l abc\r\n", WRONGTYPE);
    // A long double holds values past a double's range.
    // Read as whole replies: a read that waits for silence would take a
    // reply delayed on a loaded machine for the next command's.
    let big = c.bulk(b"INCRBYFLOAT big 1e308\r\n");
    assert_eq!(big.len(), 308);
    assert!(big.starts_with(b"99999999999999999996685879655"));
    let big = c.bulk(b"INCRBYFLOAT big 1e308\r\n");
    assert_eq!(big.len(), 309);
    assert!(big.starts_with(b"19999999999999999999337175931"));
    c.hello3();
    c.check(b"INCRBYFLOAT f 1\r\n", b"$19\r\n5.33456789012345678\r\n");
}

#[test]
fn ranges_and_limits() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"SETRANGE k 9223372036854775807 A\r\n",
        b"-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n",
    );
    c.check(
        b"SETRANGE k 536870912 A\r\n",
        b"-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n",
    );
    c.check(b"SETRANGE k -1 A\r\n", b"-ERR offset is out of range\r\n");
    c.check(b"SETRANGE k x A\r\n", NOT_INTEGER);
    c.check(&resp(&["SETRANGE", "k", "5", ""]), b":0\r\n");
    c.check(b"EXISTS k\r\n", b":0\r\n");
    c.check(b"SETRANGE k 2 ab\r\n", b":4\r\n");
    c.check(b"GET k\r\n", b"$4\r\n\x00\x00ab\r\n");
    c.check(b"GETRANGE k -2 -1\r\n", b"$2\r\nab\r\n");
    c.check(
        b"GETRANGE k 0 9223372036854775807\r\n",
        b"$4\r\n\x00\x00ab\r\n",
    );
    c.check(b"GETRANGE k -1 -2\r\n", b"$0\r\n\r\n");
    c.check(b"SUBSTR k 3 100\r\n", b"$1\r\nb\r\n");
    c.check(b"GETRANGE nokey 0 -1\r\n", b"$0\r\n\r\n");
    c.check(b"STRLEN k\r\n", b":4\r\n");
    // Inside the string (changed in place), then past its end.
    c.check(b"SET h hello\r\n", b"+OK\r\n");
    c.check(b"SETRANGE h 1 EY\r\n", b":5\r\n");
    c.check(b"GET h\r\n", b"$5\r\nhEYlo\r\n");
    c.check(b"SETRANGE h 4 !!\r\n", b":6\r\n");
    c.check(b"GET h\r\n", b"$6\r\nhEYl!!\r\n");
    c.check(b"RPUSH l a\r\n", b":1\r\n");
    c.check(b"SETRANGE l 0 x\r\n", WRONGTYPE);
    c.check(
        b"MSETNX a 1 b\r\n",
        b"-ERR wrong number of arguments for 'msetnx' command\r\n",
    );
    c.check(b"MSETNX a 1 a 2\r\n", b":1\r\n");
    c.check(b"GET a\r\n", b"$1\r\n2\r\n");
    c.check(b"SET m 9223372036854775807\r\n", b"+OK\r\n");
    c.check(
        b"INCR m\r\n",
        b"-ERR increment or decrement would overflow\r\n",
    );
    c.check(
        b"DECRBY m -9223372036854775808\r\n",
        b"-ERR decrement would overflow\r\n",
    );
    c.check(b"SET m \" 1\"\r\n", b"+OK\r\n");
    c.check(b"INCR m\r\n", NOT_INTEGER);
}

#[test]
fn lcs() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"MSET a ohmytext b mynewtext\r\n", b"+OK\r\n");
    c.check(b"LCS a b\r\n", b"$6\r\nmytext\r\n");
    c.check(b"LCS a b LEN\r\n", b":6\r\n");
    c.check(
        b"LCS a b IDX\r\n",
        b"*4\r\n$7\r\nmatches\r\n*2\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n*2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n$3\r\nlen\r\n:6\r\n",
    );
    c.check(
        b"LCS a b IDX MINMATCHLEN 4 WITHMATCHLEN\r\n",
        b"*4\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n$3\r\nlen\r\n:6\r\n",
    );
    c.check(b"LCS a nokey\r\n", b"$0\r\n\r\n");
    c.check(
        b"LCS a nokey IDX\r\n",
        b"*4\r\n$7\r\nmatches\r\n*0\r\n$3\r\nlen\r\n:0\r\n",
    );
    c.check(
        b"LCS a b IDX LEN\r\n",
        b"-ERR If you want both the length and indexes, please just use IDX.\r\n",
    );
    c.check(b"LCS a b MINMATCHLEN\r\n", SYNTAX);
    c.check(b"LCS a b MINMATCHLEN x\r\n", NOT_INTEGER);
    c.check(b"LCS a b FOO\r\n", SYNTAX);
    c.check(b"RPUSH l x\r\n", b":1\r\n");
    // The keys' types are checked before the options.
    c.check(
        b"LCS l a FOO\r\n",
        b"-ERR The specified keys must contain string values\r\n",
    );
    c.check(
        b"LCS a\r\n",
        b"-ERR wrong number of arguments for 'lcs' command\r\n",
    );
    c.hello3();
    c.check(
        b"LCS a b IDX MINMATCHLEN 4\r\n",
        b"%2\r\n$7\r\nmatches\r\n*1\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n$3\r\nlen\r\n:6\r\n",
    );
}

#[test]
fn string_writes_replay_to_the_same_state() {
    let dir = tempfile::tempdir().unwrap();
    {
        let server = TestServer::start(dir.path());
        let mut c = server.raw();
        c.check(
            b"INCRBYFLOAT f 1.23456789012345678\r\n",
            b"$19\r\n1.23456789012345678\r\n",
        );
        c.check(b"PEXPIRE f 100000000\r\n", b":1\r\n");
        c.check(b"INCRBYFLOAT f 2\r\n", b"$19\r\n3.23456789012345678\r\n");
        c.check(b"SET e v EX 100000 GET\r\n", b"$-1\r\n");
        c.check(b"SET g v\r\n", b"+OK\r\n");
        c.check(b"GETEX g PX 100000000\r\n", b"$1\r\nv\r\n");
        c.check(b"SET d v\r\n", b"+OK\r\n");
        c.check(b"GETEX d PXAT 1\r\n", b"$1\r\nv\r\n");
        c.check(b"SETRANGE r 3 xyz\r\n", b":6\r\n");
        c.check(b"APPEND r !\r\n", b":7\r\n");
        c.check(b"SETRANGE r 0 ab\r\n", b":7\r\n");
        c.check(b"MSETNX m1 a m2 b\r\n", b":1\r\n");
        server.stop();
    }
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"GET f\r\n", b"$19\r\n3.23456789012345678\r\n");
    c.check(b"GET e\r\n", b"$1\r\nv\r\n");
    c.check(b"GET g\r\n", b"$1\r\nv\r\n");
    c.check(b"EXISTS d\r\n", b":0\r\n");
    c.check(b"GET r\r\n", b"$7\r\nab\x00xyz!\r\n");
    c.check(b"MGET m1 m2\r\n", b"*2\r\n$1\r\na\r\n$1\r\nb\r\n");
    // Expiries come back as the absolute times they were logged with.
    for (key, floor) in [("f", 99_990u64), ("e", 99_990), ("g", 99_990)] {
        let ttl = c.roundtrip_any(format!("TTL {key}\r\n").as_bytes());
        let text = String::from_utf8_lossy(&ttl);
        let secs: u64 = text.trim().trim_start_matches(':').parse().unwrap();
        assert!(secs >= floor, "TTL {key} = {secs}");
    }
}
