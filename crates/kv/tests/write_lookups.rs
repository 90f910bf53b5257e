//! INCR, HSET and XADD find their key with one write lookup
//! (`Keyspace::get_mut_checked`): a refused write leaves a WATCH intact,
//! a write counts no keyspace hit or miss (as Redis's write lookups), the
//! counter is rewritten in place with its TTL, and all of it replays the
//! same after a restart. Command statistics are counted per command,
//! inside scripts too.

mod common;

use common::TestServer;

const WRONGTYPE: &[u8] = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
const NOT_INTEGER: &[u8] = b"-ERR value is not an integer or out of range\r\n";

/// The value of field `name` in INFO `section`.
fn info_field(c: &mut common::Raw, section: &str, name: &str) -> String {
    let cmd = format!("INFO {section}\r\n");
    let text = String::from_utf8(c.bulk(cmd.as_bytes())).expect("utf-8");
    let prefix = format!("{name}:");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {name} in INFO {section}: {text}"))
        .to_string()
}

#[test]
fn refused_writes_leave_a_watch_intact() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"RPUSH l a\r\n", b":1\r\n");
    c.check(b"SET s notanumber\r\n", b"+OK\r\n");
    c.check(b"SET big 9223372036854775807\r\n", b"+OK\r\n");
    c.check(b"WATCH l s big\r\n", b"+OK\r\n");
    c.check(b"INCR l\r\n", WRONGTYPE);
    c.check(b"HSET l f v\r\n", WRONGTYPE);
    c.check(b"XADD l * f v\r\n", WRONGTYPE);
    c.check(b"INCR s\r\n", NOT_INTEGER);
    c.check(
        b"INCR big\r\n",
        b"-ERR increment or decrement would overflow\r\n",
    );
    c.check(b"MULTI\r\n", b"+OK\r\n");
    c.check(b"PING\r\n", b"+QUEUED\r\n");
    // None of the refused writes touched a watched key: EXEC runs.
    c.check(b"EXEC\r\n", b"*1\r\n+PONG\r\n");
    // A write that succeeds does touch it.
    c.check(b"WATCH big\r\n", b"+OK\r\n");
    c.check(b"DECR big\r\n", b":9223372036854775806\r\n");
    c.check(b"MULTI\r\n", b"+OK\r\n");
    c.check(b"PING\r\n", b"+QUEUED\r\n");
    c.check(b"EXEC\r\n", b"*-1\r\n");
}

#[test]
fn writes_count_no_keyspace_hits_or_misses() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"INCR n\r\n", b":1\r\n");
    c.check(b"INCR n\r\n", b":2\r\n");
    c.check(b"HSET h f v\r\n", b":1\r\n");
    c.check(b"HSET h g v\r\n", b":1\r\n");
    c.check(b"XADD x 1-1 f v\r\n", b"$3\r\n1-1\r\n");
    c.check(b"XADD x 1-2 f v\r\n", b"$3\r\n1-2\r\n");
    c.check(b"XADD y NOMKSTREAM * f v\r\n", b"$-1\r\n");
    assert_eq!(info_field(&mut c, "stats", "keyspace_hits"), "0");
    assert_eq!(info_field(&mut c, "stats", "keyspace_misses"), "0");
    // A read still counts.
    c.check(b"GET n\r\n", b"$1\r\n2\r\n");
    c.check(b"GET nothere\r\n", b"$-1\r\n");
    assert_eq!(info_field(&mut c, "stats", "keyspace_hits"), "1");
    assert_eq!(info_field(&mut c, "stats", "keyspace_misses"), "1");
    // NOMKSTREAM created nothing.
    c.check(b"EXISTS y\r\n", b":0\r\n");
}

#[test]
fn counters_keep_their_ttl_and_everything_replays() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"SET n 10 EX 1000\r\n", b"+OK\r\n");
    c.check(b"INCRBY n 5\r\n", b":15\r\n");
    c.check(b"DECR n\r\n", b":14\r\n");
    c.check(b"TTL n\r\n", b":1000\r\n");
    c.check(b"INCR fresh\r\n", b":1\r\n");
    c.check(b"TTL fresh\r\n", b":-1\r\n");
    c.check(b"HSET h a 1 b 2\r\n", b":2\r\n");
    c.check(b"HSET h a 3\r\n", b":0\r\n");
    for i in 1..=30 {
        let cmd = format!("XADD x MAXLEN ~ 5 {i}-0 f v\r\n");
        let reply = format!("${}\r\n{i}-0\r\n", format!("{i}-0").len());
        c.check(cmd.as_bytes(), reply.as_bytes());
    }
    let deadline = c.roundtrip_any(b"PEXPIRETIME n\r\n");
    let length = c.roundtrip_any(b"XLEN x\r\n");
    let first = c.roundtrip_any(b"XRANGE x - + COUNT 1\r\n");
    drop(c);
    server.stop();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"GET n\r\n", b"$2\r\n14\r\n");
    assert_eq!(c.roundtrip_any(b"PEXPIRETIME n\r\n"), deadline);
    c.check(b"GET fresh\r\n", b"$1\r\n1\r\n");
    c.check(b"HGET h a\r\n", b"$1\r\n3\r\n");
    c.check(b"HLEN h\r\n", b":2\r\n");
    // The approximate trim was logged exactly: the same entries remain.
    assert_eq!(c.roundtrip_any(b"XLEN x\r\n"), length);
    assert_eq!(c.roundtrip_any(b"XRANGE x - + COUNT 1\r\n"), first);
}

#[test]
fn command_stats_count_each_command_and_script_calls() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"INCR k\r\n", b":1\r\n");
    c.check(b"INCR k\r\n", b":2\r\n");
    c.check(b"INCR k\r\n", b":3\r\n");
    c.check(
        b"EVAL \"redis.call('INCR', KEYS[1]); return redis.call('HSET', KEYS[2], 'f', 'v')\" 2 k h\r\n",
        b":1\r\n",
    );
    let incr = info_field(&mut c, "commandstats", "cmdstat_incr");
    assert!(incr.starts_with("calls=4,"), "{incr}");
    let hset = info_field(&mut c, "commandstats", "cmdstat_hset");
    assert!(hset.starts_with("calls=1,"), "{hset}");
    let eval = info_field(&mut c, "commandstats", "cmdstat_eval");
    assert!(eval.starts_with("calls=1,"), "{eval}");
    // A subcommand is counted under its container's name.
    c.check(
        b"CONFIG GET maxmemory\r\n",
        b"*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n",
    );
    let config_get = info_field(&mut c, "commandstats", "cmdstat_config|get");
    assert!(config_get.starts_with("calls=1,"), "{config_get}");
    c.check(b"CONFIG RESETSTAT\r\n", b"+OK\r\n");
    let text = String::from_utf8(c.bulk(b"INFO commandstats\r\n")).expect("utf-8");
    assert!(!text.contains("cmdstat_incr"), "{text}");
    c.check(b"INCR k\r\n", b":5\r\n");
    let incr = info_field(&mut c, "commandstats", "cmdstat_incr");
    assert!(incr.starts_with("calls=1,"), "{incr}");
}
