//! Byte-level protocol tests of the bitmap commands (SETBIT, GETBIT,
//! BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO) in RESP2 and RESP3,
//! and their recovery from the log.

mod common;

use common::{resp, Raw, TestServer};

const WRONGTYPE: &[u8] = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
const BAD_OFFSET: &[u8] = b"-ERR bit offset is not an integer or out of range\r\n";
const BAD_BIT: &[u8] = b"-ERR bit is not an integer or out of range\r\n";
const SYNTAX: &[u8] = b"-ERR syntax error\r\n";
const NOT_INTEGER: &[u8] = b"-ERR value is not an integer or out of range\r\n";
const BAD_TYPE: &[u8] = b"-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.\r\n";

fn arity(name: &str) -> Vec<u8> {
    format!("-ERR wrong number of arguments for '{name}' command\r\n").into_bytes()
}

#[test]
fn setbit_getbit() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"SETBIT b 7 1\r\n", b":0\r\n");
    c.check(b"SETBIT b 7 1\r\n", b":1\r\n");
    c.check(b"SETBIT b 9 1\r\n", b":0\r\n");
    c.check(b"GET b\r\n", b"$2\r\n\x01\x40\r\n");
    c.check(b"GETBIT b 9\r\n", b":1\r\n");
    c.check(b"GETBIT b 10\r\n", b":0\r\n");
    c.check(b"GETBIT b 100000\r\n", b":0\r\n");
    c.check(b"GETBIT nokey 0\r\n", b":0\r\n");
    // A zero bit still creates or grows the key.
    c.check(b"SETBIT z 15 0\r\n", b":0\r\n");
    c.check(b"STRLEN z\r\n", b":2\r\n");
    c.check(b"SETBIT b -1 1\r\n", BAD_OFFSET);
    c.check(b"SETBIT b x 1\r\n", BAD_OFFSET);
    // 512 MB of bits is the limit (proto-max-bulk-len).
    c.check(b"SETBIT b 4294967296 1\r\n", BAD_OFFSET);
    c.check(b"GETBIT b 4294967296\r\n", BAD_OFFSET);
    c.check(b"SETBIT b 0 2\r\n", BAD_BIT);
    c.check(b"SETBIT b 0 -1\r\n", BAD_BIT);
    c.check(b"SETBIT b 0 x\r\n", BAD_BIT);
    c.check(b"SETBIT b 0\r\n", &arity("setbit"));
    c.check(b"GETBIT b\r\n", &arity("getbit"));
    c.check(b"RPUSH l a\r\n", b":1\r\n");
    c.check(b"SETBIT l 0 1\r\n", WRONGTYPE);
    c.check(b"GETBIT l 0\r\n", WRONGTYPE);
    // The offset is checked before the key's type.
    c.check(b"GETBIT l -1\r\n", BAD_OFFSET);
    // An integer-looking value is read as its digits.
    c.check(b"SET n 1\r\n", b"+OK\r\n");
    c.check(b"GETBIT n 2\r\n", b":1\r\n");
    c.check(b"GETBIT n 7\r\n", b":1\r\n");
}

#[test]
fn bitcount_and_bitpos() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(&resp(&["SET", "s", "foobar"]), b"+OK\r\n");
    c.check(b"BITCOUNT s\r\n", b":26\r\n");
    c.check(b"BITCOUNT s 1 1\r\n", b":6\r\n");
    c.check(b"BITCOUNT s 1 1 BYTE\r\n", b":6\r\n");
    c.check(b"BITCOUNT s 5 30 bit\r\n", b":17\r\n");
    c.check(b"BITCOUNT s -2 -1\r\n", b":7\r\n");
    c.check(b"BITCOUNT s 4 2\r\n", b":0\r\n");
    c.check(b"BITCOUNT s 100 200\r\n", b":0\r\n");
    // Redis answers a reversed negative range before reading the unit.
    c.check(b"BITCOUNT s -1 -2 FOO\r\n", b":0\r\n");
    c.check(b"BITCOUNT s 0 1 FOO\r\n", SYNTAX);
    c.check(b"BITCOUNT s 0\r\n", SYNTAX);
    c.check(b"BITCOUNT s 0 1 BIT x\r\n", SYNTAX);
    c.check(b"BITCOUNT s a 1\r\n", NOT_INTEGER);
    c.check(b"BITCOUNT nokey 0\r\n", b":0\r\n");
    c.check(b"BITCOUNT\r\n", &arity("bitcount"));

    c.check(b"SET p \xff\xf0\x00\r\n", b"+OK\r\n");
    c.check(b"BITPOS p 0\r\n", b":12\r\n");
    c.check(b"BITPOS p 1\r\n", b":0\r\n");
    c.check(b"BITPOS p 0 0 -1 bit\r\n", b":12\r\n");
    c.check(b"BITPOS p 1 2\r\n", b":-1\r\n");
    c.check(b"BITPOS p 1 13 -1 BIT\r\n", b":-1\r\n");
    c.check(b"SET ones \xff\xff\r\n", b"+OK\r\n");
    // Without an end, the string counts as followed by zero bits.
    c.check(b"BITPOS ones 0\r\n", b":16\r\n");
    c.check(b"BITPOS ones 0 1\r\n", b":16\r\n");
    c.check(b"BITPOS ones 0 0 -1\r\n", b":-1\r\n");
    c.check(b"BITPOS nokey 0\r\n", b":0\r\n");
    c.check(b"BITPOS nokey 1\r\n", b":-1\r\n");
    c.check(
        b"BITPOS p 2\r\n",
        b"-ERR The bit argument must be 1 or 0.\r\n",
    );
    c.check(b"BITPOS p x\r\n", NOT_INTEGER);
    c.check(b"BITPOS p 1 0 1 BYTE x\r\n", SYNTAX);
    c.check(b"BITPOS p 1 0 1 WORD\r\n", SYNTAX);
    c.check(b"BITPOS p\r\n", &arity("bitpos"));
    c.check(b"LPUSH l a\r\n", b":1\r\n");
    c.check(b"BITCOUNT l\r\n", WRONGTYPE);
    c.check(b"BITPOS l 1\r\n", WRONGTYPE);
}

#[test]
fn bitop() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"SET a \x0f\xf0\r\n", b"+OK\r\n");
    c.check(b"SET b \xff\r\n", b"+OK\r\n");
    c.check(b"BITOP AND d a b\r\n", b":2\r\n");
    c.check(b"GET d\r\n", b"$2\r\n\x0f\x00\r\n");
    c.check(b"BITOP or d a b\r\n", b":2\r\n");
    c.check(b"GET d\r\n", b"$2\r\n\xff\xf0\r\n");
    c.check(b"BITOP XOR d a b nokey\r\n", b":2\r\n");
    c.check(b"GET d\r\n", b"$2\r\n\xf0\xf0\r\n");
    c.check(b"BITOP NOT d a\r\n", b":2\r\n");
    c.check(b"GET d\r\n", b"$2\r\n\xf0\x0f\r\n");
    // The destination loses its TTL; an empty result deletes it.
    c.check(b"EXPIRE d 100\r\n", b":1\r\n");
    c.check(b"BITOP AND d a\r\n", b":2\r\n");
    c.check(b"TTL d\r\n", b":-1\r\n");
    c.check(b"BITOP OR d nokey other\r\n", b":0\r\n");
    c.check(b"EXISTS d\r\n", b":0\r\n");
    c.check(
        b"BITOP NOT d a b\r\n",
        b"-ERR BITOP NOT must be called with a single source key.\r\n",
    );
    c.check(b"BITOP NAND d a b\r\n", SYNTAX);
    c.check(b"BITOP AND d\r\n", &arity("bitop"));
    c.check(b"LPUSH l a\r\n", b":1\r\n");
    c.check(b"BITOP AND d a l\r\n", WRONGTYPE);
    // A list as the destination is simply replaced.
    c.check(b"BITOP AND l a\r\n", b":2\r\n");
    c.check(b"TYPE l\r\n", b"+string\r\n");
}

#[test]
fn bitfield() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"BITFIELD f SET i8 0 -100 GET u8 0 INCRBY u4 8 20\r\n",
        b"*3\r\n:0\r\n:156\r\n:4\r\n",
    );
    c.check(
        b"BITFIELD f GET i8 #0 GET u4 #2\r\n",
        b"*2\r\n:-100\r\n:4\r\n",
    );
    c.check(b"BITFIELD f\r\n", b"*0\r\n");
    c.check(
        b"BITFIELD f OVERFLOW SAT INCRBY u8 #0 200 INCRBY i8 #0 -300\r\n",
        b"*2\r\n:255\r\n:-128\r\n",
    );
    c.check(
        b"BITFIELD f OVERFLOW FAIL INCRBY u8 #0 1 OVERFLOW WRAP INCRBY u8 #0 1\r\n",
        b"*2\r\n:129\r\n:130\r\n",
    );
    c.check(
        b"BITFIELD f OVERFLOW FAIL INCRBY u8 #0 126 INCRBY i8 #0 -1\r\n",
        b"*2\r\n$-1\r\n:-127\r\n",
    );
    c.check(
        b"BITFIELD f SET u8 0 -1 GET u8 0\r\n",
        b"*2\r\n:129\r\n:255\r\n",
    );
    c.check(
        b"BITFIELD f GET i64 0 GET u63 0\r\n",
        b"*2\r\n:-54043195528445952\r\n:9196350439090552832\r\n",
    );
    c.check(b"BITFIELD f GET u64 0\r\n", BAD_TYPE);
    c.check(b"BITFIELD f GET i65 0\r\n", BAD_TYPE);
    c.check(b"BITFIELD f GET i0 0\r\n", BAD_TYPE);
    c.check(b"BITFIELD f GET x8 0\r\n", BAD_TYPE);
    c.check(b"BITFIELD f GET u8 -1\r\n", BAD_OFFSET);
    c.check(b"BITFIELD f GET u8 #x\r\n", BAD_OFFSET);
    c.check(b"BITFIELD f GET u8 4294967296\r\n", BAD_OFFSET);
    c.check(b"BITFIELD f SET u8 0 x\r\n", NOT_INTEGER);
    c.check(b"BITFIELD f SET u8 0\r\n", SYNTAX);
    c.check(b"BITFIELD f FOO\r\n", SYNTAX);
    c.check(
        b"BITFIELD f OVERFLOW MAYBE\r\n",
        b"-ERR Invalid OVERFLOW type specified\r\n",
    );
    c.check(b"BITFIELD\r\n", &arity("bitfield"));
    c.check(b"BITFIELD_RO f GET u8 0\r\n", b"*1\r\n:255\r\n");
    c.check(
        b"BITFIELD_RO f GET u8 0 SET u8 0 1\r\n",
        b"-ERR BITFIELD_RO only supports the GET subcommand\r\n",
    );
    // GETs alone never create the key.
    c.check(b"BITFIELD g GET u8 100\r\n", b"*1\r\n:0\r\n");
    c.check(b"EXISTS g\r\n", b":0\r\n");
    // A write that fails still grows the key, as in Redis.
    c.check(
        b"BITFIELD g OVERFLOW FAIL SET u2 14 9\r\n",
        b"*1\r\n$-1\r\n",
    );
    c.check(b"STRLEN g\r\n", b":2\r\n");
    c.check(b"LPUSH l a\r\n", b":1\r\n");
    c.check(b"BITFIELD l GET u8 0\r\n", WRONGTYPE);
    c.check(b"BITFIELD_RO l GET u8 0\r\n", WRONGTYPE);

    // RESP3: the FAIL null is `_`.
    c.hello3();
    c.check(
        b"BITFIELD f OVERFLOW FAIL INCRBY u8 0 1\r\n",
        b"*1\r\n_\r\n",
    );
    c.check(b"BITCOUNT f\r\n", b":9\r\n");
}

/// Reads one reply of unknown content: a bulk string's bytes.
fn get_bytes(c: &mut Raw, key: &str) -> Vec<u8> {
    c.roundtrip_any(&resp(&["GET", key]))
}

#[test]
fn bit_writes_replay_to_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let keys = ["s", "f", "o", "n", "g"];
    let before: Vec<Vec<u8>> = {
        let server = TestServer::start(dir.path());
        let mut c = server.raw();
        c.check(b"SETBIT s 100 1\r\n", b":0\r\n");
        c.check(b"SETBIT s 3 1\r\n", b":0\r\n");
        c.check(b"SETBIT s 3 1\r\n", b":1\r\n");
        c.check(b"SETBIT s 200 0\r\n", b":0\r\n");
        c.check(
            b"BITFIELD f SET i5 3 -7 INCRBY u12 #3 5000 OVERFLOW SAT INCRBY i8 40 -1000\r\n",
            b"*3\r\n:0\r\n:904\r\n:-128\r\n",
        );
        c.check(
            b"BITFIELD g OVERFLOW FAIL SET u2 30 9\r\n",
            b"*1\r\n$-1\r\n",
        );
        c.check(b"BITOP OR o s f\r\n", b":26\r\n");
        c.check(b"BITOP NOT n f\r\n", b":6\r\n");
        c.check(b"PEXPIRE s 100000000\r\n", b":1\r\n");
        c.check(b"SETBIT s 250 1\r\n", b":0\r\n");
        // Bits flipped in place while a rewrite may hold the strings.
        let _ = c.roundtrip_any(b"BGREWRITEAOF\r\n");
        for (bit, old) in [(0, 0), (9, 0), (100, 1), (0, 1)] {
            let reply = format!(":{old}\r\n");
            c.check(format!("SETBIT s {bit} 1\r\n").as_bytes(), reply.as_bytes());
        }
        let before = keys.iter().map(|k| get_bytes(&mut c, k)).collect();
        server.stop();
        before
    };
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    for (key, bytes) in keys.iter().zip(&before) {
        c.check(&resp(&["GET", key]), bytes);
    }
    // SETBIT keeps the key's TTL across the restart.
    let ttl = c.roundtrip_any(b"TTL s\r\n");
    assert!(
        ttl.starts_with(b":9999"),
        "{:?}",
        String::from_utf8_lossy(&ttl)
    );
}
