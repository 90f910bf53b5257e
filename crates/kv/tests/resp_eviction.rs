//! Byte-level tests of eviction under `maxmemory`: the policies' pools
//! (all keys, or only keys with a TTL), OOM once nothing is left to
//! evict, `evicted_keys`, and evicted keys logged as DEL so a restart
//! sees the same data.

mod common;

use common::TestServer;

/// The value of INFO field `name`.
fn info_field(c: &mut common::Raw, name: &str) -> String {
    let text = String::from_utf8_lossy(&c.roundtrip_any(b"INFO stats\r\n")).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[test]
fn allkeys_policy_evicts_until_under_maxmemory_then_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"SET a 1\r\nSET b 2\r\nSET c 3\r\n",
        b"+OK\r\n+OK\r\n+OK\r\n",
    );
    // With noeviction, a limit below use refuses writes and keeps data.
    c.check(
        b"CONFIG SET maxmemory 1\r\nSET d 4\r\nDBSIZE\r\n",
        b"+OK\r\n-OOM command not allowed when used memory > 'maxmemory'.\r\n:3\r\n",
    );
    // An allkeys policy evicts every key trying to get under 1 byte.
    c.check(
        b"CONFIG SET maxmemory-policy allkeys-lru\r\nDBSIZE\r\n",
        b"+OK\r\n:0\r\n",
    );
    assert_eq!(info_field(&mut c, "evicted_keys"), "3");
    c.check(
        b"SET e 5\r\n",
        b"-OOM command not allowed when used memory > 'maxmemory'.\r\n",
    );
    c.check(b"CONFIG SET maxmemory 0\r\nSET f 6\r\n", b"+OK\r\n+OK\r\n");
    server.stop();
    // The evictions were logged: a restart has only f.
    let server = TestServer::start(dir.path());
    server
        .raw()
        .check(b"DBSIZE\r\nGET f\r\n", b":1\r\n$1\r\n6\r\n");
    server.stop();
}

#[test]
fn volatile_policies_evict_only_keys_with_a_ttl() {
    for policy in [
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(dir.path());
        let mut c = server.raw();
        c.check(
            b"SET keep 1\r\nSET t1 1 EX 100\r\nSET t2 1 EX 200\r\n",
            b"+OK\r\n+OK\r\n+OK\r\n",
        );
        let set = format!("CONFIG SET maxmemory-policy {policy}\r\nCONFIG SET maxmemory 1\r\n");
        c.check(set.as_bytes(), b"+OK\r\n+OK\r\n");
        c.check(b"EXISTS keep t1 t2\r\n", b":1\r\n");
        c.check(
            b"SET x 1\r\n",
            b"-OOM command not allowed when used memory > 'maxmemory'.\r\n",
        );
        assert_eq!(info_field(&mut c, "evicted_keys"), "2", "{policy}");
        server.stop();
    }
}
