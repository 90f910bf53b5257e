//! Byte-level tests of OBJECT: encodings named as Redis 7.0 names them
//! for the value's size, reference counts, and the per-key access clock
//! behind IDLETIME and FREQ (reads and writes touch it; TYPE, EXISTS, TTL
//! and OBJECT do not).

mod common;

use common::{resp, TestServer};

#[test]
fn encodings_follow_the_size_of_the_value() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let long = "x".repeat(45);
    let big = (0..129).map(|i| i.to_string()).collect::<Vec<_>>();
    let mut zadd = vec!["ZADD".to_string(), "bigz".into()];
    for m in &big {
        zadd.push("1".into());
        zadd.push(format!("m{m}"));
    }
    let zadd: Vec<&str> = zadd.iter().map(String::as_str).collect();
    let _ = c.roundtrip_any(&resp(&zadd));
    c.check(
        &[
            resp(&["SET", "i", "123"]),
            resp(&["SET", "e", "hello"]),
            resp(&["SET", "r", &long]),
            resp(&["RPUSH", "l", "a"]),
            resp(&["SADD", "si", "1", "2"]),
            resp(&["SADD", "sh", "1", "a"]),
            resp(&["HSET", "h", "f", "v"]),
            resp(&["ZADD", "z", "1", "a"]),
        ]
        .concat(),
        b"+OK\r\n+OK\r\n+OK\r\n:1\r\n:2\r\n:2\r\n:1\r\n:1\r\n",
    );
    c.check(
        b"OBJECT ENCODING i\r\nOBJECT ENCODING e\r\nOBJECT ENCODING r\r\nOBJECT ENCODING l\r\n\
OBJECT ENCODING si\r\nOBJECT ENCODING sh\r\nOBJECT ENCODING h\r\nOBJECT ENCODING z\r\nOBJECT ENCODING bigz\r\n",
        b"$3\r\nint\r\n$6\r\nembstr\r\n$3\r\nraw\r\n$9\r\nquicklist\r\n$6\r\nintset\r\n\
$9\r\nhashtable\r\n$8\r\nlistpack\r\n$8\r\nlistpack\r\n$8\r\nskiplist\r\n",
    );
    c.check(b"OBJECT ENCODING nosuch\r\n", b"$-1\r\n");
    c.check(
        b"OBJECT REFCOUNT i\r\nOBJECT REFCOUNT e\r\n",
        b":2147483647\r\n:1\r\n",
    );
    c.check(
        b"OBJECT NOPE k\r\n",
        b"-ERR unknown subcommand 'NOPE'. Try OBJECT HELP.\r\n",
    );
    c.check(
        b"OBJECT ENCODING\r\n",
        b"-ERR wrong number of arguments for 'object|encoding' command\r\n",
    );
    server.stop();
}

#[test]
fn idletime_and_freq_follow_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"SET k v\r\nOBJECT IDLETIME k\r\n", b"+OK\r\n:0\r\n");
    c.check(b"OBJECT FREQ k\r\n", b"-ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.\r\n");
    c.check(
        b"CONFIG SET maxmemory-policy allkeys-lfu\r\nOBJECT IDLETIME k\r\n",
        b"+OK\r\n-ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.\r\n",
    );
    // A new key starts at 5; with lfu-log-factor 0 every access counts.
    c.check(
        b"CONFIG SET lfu-log-factor 0\r\nSET f v\r\nOBJECT FREQ f\r\nGET f\r\nGET f\r\nTYPE f\r\nEXISTS f\r\nOBJECT FREQ f\r\n",
        b"+OK\r\n+OK\r\n:5\r\n$1\r\nv\r\n$1\r\nv\r\n+string\r\n:1\r\n:7\r\n",
    );
    c.check(b"TOUCH f nosuch\r\nOBJECT FREQ f\r\n", b":1\r\n:8\r\n");
    server.stop();
}
