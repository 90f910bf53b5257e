//! Byte-level protocol tests of DUMP and RESTORE, RESP2 and RESP3: errors
//! as Redis 7.0 words them, payloads real Redis 7.0.15 produced for each
//! of its encodings, and RESTORE's recovery from the log.

mod common;

use common::{hex, resp, resp_bytes, TestServer};
use ferrite_kv::rdb;

/// A payload around `body` with a correct version and checksum.
fn sealed(body: &[u8]) -> Vec<u8> {
    let mut out = body.to_vec();
    out.extend_from_slice(&rdb::RDB_VERSION.to_le_bytes());
    let crc = rdb::crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

#[test]
fn dump_and_restore_errors_as_redis_words_them() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(&resp(&["SET", "foo", "bar"]), b"+OK\r\n");
    c.check(
        &resp(&["DUMP", "foo"]),
        b"$15\r\n\x00\x03bar\n\x00\xe6\xbeI`\xeef\xfd\x17\r\n",
    );
    c.check(&resp(&["SET", "n", "12345"]), b"+OK\r\n");
    c.check(
        &resp(&["DUMP", "n"]),
        b"$14\r\n\x00\xc190\n\x00\x9d\x94\xea'\x93\xfc\x08\xb9\r\n",
    );
    c.check(&resp(&["DUMP", "nokey"]), b"$-1\r\n");
    c.check(
        &resp(&["RESTORE", "foo", "0", "abc"]),
        b"-BUSYKEY Target key name already exists.\r\n",
    );
    c.check(
        &resp(&["RESTORE", "foo", "0", "abc", "REPLACE"]),
        b"-ERR DUMP payload version or checksum are wrong\r\n",
    );
    c.check(
        &resp(&["RESTORE", "foo", "-1", "abc", "REPLACE"]),
        b"-ERR Invalid TTL value, must be >= 0\r\n",
    );
    c.check(
        &resp(&["RESTORE", "foo", "x", "abc", "REPLACE"]),
        b"-ERR value is not an integer or out of range\r\n",
    );
    c.check(
        &resp(&["RESTORE", "foo", "0", "abc", "REPLACE", "IDLETIME", "-1"]),
        b"-ERR Invalid IDLETIME value, must be >= 0\r\n",
    );
    c.check(
        &resp(&["RESTORE", "foo", "0", "abc", "REPLACE", "IDLETIME", "x"]),
        b"-ERR value is not an integer or out of range\r\n",
    );
    c.check(
        &resp(&["RESTORE", "foo", "0", "abc", "REPLACE", "FREQ", "256"]),
        b"-ERR Invalid FREQ value, must be >= 0 and <= 255\r\n",
    );
    c.check(
        &resp(&["RESTORE", "foo", "0", "abc", "REPLACE", "FREQ", "-1"]),
        b"-ERR Invalid FREQ value, must be >= 0 and <= 255\r\n",
    );
    c.check(
        &resp(&[
            "RESTORE", "foo", "0", "abc", "REPLACE", "FREQ", "1", "IDLETIME", "2",
        ]),
        b"-ERR syntax error\r\n",
    );
    c.check(
        &resp(&[
            "RESTORE", "foo", "0", "abc", "REPLACE", "IDLETIME", "1", "FREQ", "2",
        ]),
        b"-ERR syntax error\r\n",
    );
    c.check(
        &resp(&["RESTORE", "foo", "0", "abc", "REPLACE", "IDLETIME"]),
        b"-ERR syntax error\r\n",
    );
    c.check(
        &resp(&["RESTORE", "foo", "0", "abc", "REPLACE", "bogus"]),
        b"-ERR syntax error\r\n",
    );
    c.check(
        &resp(&["RESTORE", "foo", "0", "abc", "REPLACE", "ABSTTL"]),
        b"-ERR DUMP payload version or checksum are wrong\r\n",
    );
    c.check(
        &resp(&["RESTORE", "foo", "-1", "abc"]),
        b"-BUSYKEY Target key name already exists.\r\n",
    );
    let stream = sealed(&[15, 0]);
    c.check(
        &resp_bytes(&[b"RESTORE", b"s", b"0", &stream]),
        b"-ERR Bad data format\r\n",
    );
    let truncated = sealed(&[0, 5, b'a']);
    c.check(
        &resp_bytes(&[b"RESTORE", b"s", b"0", &truncated]),
        b"-ERR Bad data format\r\n",
    );
    c.check(&resp(&["EXISTS", "s"]), b":0\r\n");
}

/// Every encoding Redis 7.0 DUMPs (listpack, quicklist, intset,
/// hashtable, skiplist, integer and LZF strings) restores here.
#[test]
fn payloads_from_redis_restore() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let cases: &[(&str, &str, &str, &[u8])] = &[
        (
            "lz",
            "00c30b40780361626361e069020162630a00c494a1702ae23e06",
            "STRLEN",
            b":120\r\n",
        ),
        (
            "list",
            "120102121200000004008161020101816202ded402ff0a00583e1f56153956f2",
            "LLEN",
            b":4\r\n",
        ),
        (
            "intset",
            "0b0e0200000003000000fdff010002000a00d1b78ed9bc07c27f",
            "SCARD",
            b":3\r\n",
        ),
        (
            "lphash",
            "1012120000000400816602817602816e020501ff0a008490939f57b4f3c2",
            "HLEN",
            b":2\r\n",
        ),
        (
            "lpzset",
            "111d1d0000000600816302842d696e660581610283312e35048162020201ff0a0017dce91ab8436c89",
            "ZCARD",
            b":3\r\n",
        ),
        (
            "skiplist",
            "0503016200000000000000400161000000000000f83f0163000000000000f0ff0a0071650286e46a3ac7",
            "ZCARD",
            b":3\r\n",
        ),
    ];
    for (key, payload, count, expected) in cases {
        let payload = hex(payload);
        c.check(
            &resp_bytes(&[b"RESTORE", key.as_bytes(), b"0", &payload]),
            b"+OK\r\n",
        );
        c.check(&resp(&[count, key]), expected);
    }
    c.check(
        &resp(&["LRANGE", "list", "0", "-1"]),
        b"*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$4\r\n-300\r\n",
    );
    c.check(&resp(&["HGET", "lphash", "n"]), b"$1\r\n5\r\n");
    c.check(&resp(&["ZSCORE", "lpzset", "c"]), b"$4\r\n-inf\r\n");
    c.check(
        &resp(&["ZRANGE", "skiplist", "0", "-1"]),
        b"*3\r\n$1\r\nc\r\n$1\r\na\r\n$1\r\nb\r\n",
    );
    c.check(&resp(&["SISMEMBER", "intset", "-3"]), b":1\r\n");
    // What Ferrite DUMPs restores again, here too.
    let dumped = c.roundtrip_any(&resp(&["DUMP", "skiplist"]));
    let start = dumped
        .iter()
        .position(|&b| b == b'\n')
        .expect("bulk header")
        + 1;
    let payload = &dumped[start..dumped.len() - 2];
    c.check(
        &resp_bytes(&[b"RESTORE", b"copy", b"0", payload]),
        b"+OK\r\n",
    );
    c.check(
        &resp(&["ZRANGE", "copy", "0", "-1", "WITHSCORES"]),
        b"*6\r\n$1\r\nc\r\n$4\r\n-inf\r\n$1\r\na\r\n$3\r\n1.5\r\n$1\r\nb\r\n$1\r\n2\r\n",
    );
}

#[test]
fn restore_ttls_and_dump_in_resp3() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.hello3();
    c.check(&resp(&["DUMP", "nokey"]), b"_\r\n");
    let bar = hex("00036261720a00e6be4960ee66fd17");
    c.check(
        &resp_bytes(&[b"RESTORE", b"k", b"4102444800000", &bar, b"ABSTTL"]),
        b"+OK\r\n",
    );
    c.check(&resp(&["PEXPIRETIME", "k"]), b":4102444800000\r\n");
    c.check(
        &resp_bytes(&[b"RESTORE", b"k", b"1", &bar, b"ABSTTL", b"REPLACE"]),
        b"+OK\r\n",
    );
    c.check(&resp(&["EXISTS", "k"]), b":0\r\n");
    c.check(
        &resp_bytes(&[b"RESTORE", b"k", b"100000", &bar]),
        b"+OK\r\n",
    );
    let ttl = c.roundtrip_any(&resp(&["TTL", "k"]));
    assert!(ttl == b":100\r\n" || ttl == b":99\r\n", "{ttl:?}");
}

/// RESTORE with a relative TTL is logged with the absolute expiry: the
/// key comes back with the same expiry time, not one counted from the
/// restart.
#[test]
fn restore_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let bar = hex("00036261720a00e6be4960ee66fd17");
    let list = hex("120102121200000004008161020101816202ded402ff0a00583e1f56153956f2");
    c.check(
        &resp_bytes(&[b"RESTORE", b"s", b"500000", &bar]),
        b"+OK\r\n",
    );
    c.check(&resp_bytes(&[b"RESTORE", b"l", b"0", &list]), b"+OK\r\n");
    c.check(&resp(&["SET", "r", "old"]), b"+OK\r\n");
    c.check(
        &resp_bytes(&[b"RESTORE", b"r", b"0", &bar, b"REPLACE"]),
        b"+OK\r\n",
    );
    c.check(&resp(&["SET", "gone", "x"]), b"+OK\r\n");
    c.check(
        &resp_bytes(&[b"RESTORE", b"gone", b"1", &bar, b"REPLACE", b"ABSTTL"]),
        b"+OK\r\n",
    );
    let before = c.roundtrip_any(&resp(&["PEXPIRETIME", "s"]));
    drop(c);
    server.stop();

    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    assert_eq!(c.roundtrip_any(&resp(&["PEXPIRETIME", "s"])), before);
    c.check(
        &resp(&["MGET", "s", "r", "gone"]),
        b"*3\r\n$3\r\nbar\r\n$3\r\nbar\r\n$-1\r\n",
    );
    c.check(
        &resp(&["LRANGE", "l", "0", "-1"]),
        b"*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$4\r\n-300\r\n",
    );
    drop(c);
    server.stop();
}
