//! Byte-level protocol tests of the generic key commands (COPY, MOVE,
//! RENAME, the EXPIRE family, TTL, PERSIST, TOUCH, EXISTS, TYPE, DEL,
//! SCAN with TYPE), RESP2 and RESP3, the expected bytes as Redis 7.0
//! replies; and their recovery from the log.

mod common;

use common::{info_field, resp, TestServer};

#[test]
fn key_commands_reply_as_redis_does() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(&resp(&["SET", "a", "hello"]), b"+OK\r\n");
    c.check(
        &resp(&["COPY", "a", "a"]),
        b"-ERR source and destination objects are the same\r\n",
    );
    c.check(
        &resp(&["COPY", "a", "b", "DB", "99"]),
        b"-ERR DB index is out of range\r\n",
    );
    c.check(
        &resp(&["COPY", "a", "b", "DB", "-1"]),
        b"-ERR DB index is out of range\r\n",
    );
    c.check(
        &resp(&["COPY", "a", "b", "DB", "x"]),
        b"-ERR value is not an integer or out of range\r\n",
    );
    c.check(
        &resp(&["COPY", "a", "b", "DB", "1", "DB"]),
        b"-ERR syntax error\r\n",
    );
    c.check(
        &resp(&["COPY", "a", "b", "REPLACE", "x"]),
        b"-ERR syntax error\r\n",
    );
    c.check(
        &resp(&["COPY", "a", "b", "DB", "2147483648"]),
        b"-ERR value is out of range, value must between -2147483648 and 2147483647\r\n",
    );
    c.check(&resp(&["COPY", "nokey", "b"]), b":0\r\n");
    c.check(&resp(&["COPY", "a", "b"]), b":1\r\n");
    c.check(&resp(&["GET", "b"]), b"$5\r\nhello\r\n");
    c.check(&resp(&["COPY", "a", "b"]), b":0\r\n");
    c.check(&resp(&["SET", "a", "world"]), b"+OK\r\n");
    c.check(&resp(&["COPY", "a", "b", "REPLACE"]), b":1\r\n");
    c.check(&resp(&["GET", "b"]), b"$5\r\nworld\r\n");
    c.check(&resp(&["EXPIRE", "a", "1000"]), b":1\r\n");
    c.check(&resp(&["COPY", "a", "c"]), b":1\r\n");
    c.check(&resp(&["TTL", "c"]), b":1000\r\n");
    c.check(&resp(&["COPY", "a", "d", "DB", "1"]), b":1\r\n");
    c.check(&resp(&["SELECT", "1"]), b"+OK\r\n");
    c.check(&resp(&["GET", "d"]), b"$5\r\nworld\r\n");
    c.check(&resp(&["TTL", "d"]), b":1000\r\n");
    c.check(&resp(&["SELECT", "0"]), b"+OK\r\n");
    c.check(&resp(&["SET", "m", "1"]), b"+OK\r\n");
    c.check(
        &resp(&["MOVE", "m", "0"]),
        b"-ERR source and destination objects are the same\r\n",
    );
    c.check(
        &resp(&["MOVE", "m", "16"]),
        b"-ERR DB index is out of range\r\n",
    );
    c.check(
        &resp(&["MOVE", "m", "x"]),
        b"-ERR value is not an integer or out of range\r\n",
    );
    c.check(&resp(&["MOVE", "nokey", "1"]), b":0\r\n");
    c.check(&resp(&["SET", "d", "other"]), b"+OK\r\n");
    c.check(&resp(&["MOVE", "d", "1"]), b":0\r\n");
    c.check(&resp(&["MOVE", "m", "1"]), b":1\r\n");
    c.check(&resp(&["EXISTS", "m"]), b":0\r\n");
    c.check(&resp(&["SELECT", "1"]), b"+OK\r\n");
    c.check(&resp(&["GET", "m"]), b"$1\r\n1\r\n");
    c.check(&resp(&["SELECT", "0"]), b"+OK\r\n");
    c.check(&resp(&["RENAME", "nokey", "x"]), b"-ERR no such key\r\n");
    c.check(&resp(&["RENAMENX", "nokey", "x"]), b"-ERR no such key\r\n");
    c.check(&resp(&["RENAME", "a", "a"]), b"+OK\r\n");
    c.check(&resp(&["RENAMENX", "a", "a"]), b":0\r\n");
    c.check(&resp(&["TTL", "a"]), b":1000\r\n");
    c.check(&resp(&["RENAME", "a", "ren"]), b"+OK\r\n");
    c.check(&resp(&["TTL", "ren"]), b":1000\r\n");
    c.check(&resp(&["EXISTS", "a"]), b":0\r\n");
    c.check(&resp(&["SET", "t", "1"]), b"+OK\r\n");
    c.check(&resp(&["RENAMENX", "t", "ren"]), b":0\r\n");
    c.check(&resp(&["RENAME", "t", "ren"]), b"+OK\r\n");
    c.check(&resp(&["TTL", "ren"]), b":-1\r\n");
    c.check(
        &resp(&["EXPIRE", "ren", "100", "NX", "XX"]),
        b"-ERR NX and XX, GT or LT options at the same time are not compatible\r\n",
    );
    c.check(
        &resp(&["EXPIRE", "ren", "100", "GT", "LT"]),
        b"-ERR GT and LT options at the same time are not compatible\r\n",
    );
    c.check(
        &resp(&["EXPIRE", "ren", "100", "bogus"]),
        b"-ERR Unsupported option bogus\r\n",
    );
    c.check(
        &resp(&["EXPIRE", "ren", "abc"]),
        b"-ERR value is not an integer or out of range\r\n",
    );
    c.check(
        &resp(&["EXPIRE", "ren", "9223372036854775807"]),
        b"-ERR invalid expire time in 'expire' command\r\n",
    );
    c.check(
        &resp(&["PEXPIRE", "ren", "9223372036854775807"]),
        b"-ERR invalid expire time in 'pexpire' command\r\n",
    );
    c.check(
        &resp(&["EXPIREAT", "ren", "9223372036854775807"]),
        b"-ERR invalid expire time in 'expireat' command\r\n",
    );
    c.check(
        &resp(&["PEXPIREAT", "ren", "9223372036854775807"]),
        b":1\r\n",
    );
    c.check(&resp(&["EXPIRE", "ren", "100"]), b":1\r\n");
    c.check(&resp(&["EXPIRE", "ren", "200", "NX"]), b":0\r\n");
    c.check(&resp(&["EXPIRE", "ren", "50", "GT"]), b":0\r\n");
    c.check(&resp(&["EXPIRE", "ren", "50", "LT"]), b":1\r\n");
    c.check(&resp(&["EXPIRE", "ren", "200", "XX", "GT"]), b":1\r\n");
    c.check(&resp(&["TTL", "ren"]), b":200\r\n");
    c.check(&resp(&["PEXPIREAT", "ren", "4102444800000"]), b":1\r\n");
    c.check(&resp(&["EXPIRETIME", "ren"]), b":4102444800\r\n");
    c.check(&resp(&["PEXPIRETIME", "ren"]), b":4102444800000\r\n");
    c.check(&resp(&["EXPIRETIME", "nokey"]), b":-2\r\n");
    c.check(&resp(&["PTTL", "nokey"]), b":-2\r\n");
    c.check(&resp(&["TTL", "b"]), b":-1\r\n");
    c.check(&resp(&["PERSIST", "ren"]), b":1\r\n");
    c.check(&resp(&["PERSIST", "ren"]), b":0\r\n");
    c.check(&resp(&["PERSIST", "nokey"]), b":0\r\n");
    c.check(&resp(&["TTL", "ren"]), b":-1\r\n");
    c.check(&resp(&["EXPIRE", "nokey", "10"]), b":0\r\n");
    c.check(&resp(&["SET", "gone", "1"]), b"+OK\r\n");
    c.check(&resp(&["PEXPIRE", "gone", "-1"]), b":1\r\n");
    c.check(&resp(&["EXISTS", "gone"]), b":0\r\n");
    c.check(&resp(&["SET", "gone", "1"]), b"+OK\r\n");
    c.check(&resp(&["EXPIREAT", "gone", "1"]), b":1\r\n");
    c.check(&resp(&["EXISTS", "gone"]), b":0\r\n");
    c.check(&resp(&["TOUCH", "b", "b", "nokey"]), b":2\r\n");
    c.check(&resp(&["EXISTS", "b", "b", "nokey"]), b":2\r\n");
    c.check(&resp(&["TYPE", "b"]), b"+string\r\n");
    c.check(&resp(&["TYPE", "nokey"]), b"+none\r\n");
    c.check(&resp(&["LPUSH", "lst", "x"]), b":1\r\n");
    c.check(&resp(&["TYPE", "lst"]), b"+list\r\n");
    c.check(&resp(&["DEL", "b", "nokey", "lst"]), b":2\r\n");
    c.check(&resp(&["UNLINK", "ren", "nokey"]), b":1\r\n");
    c.check(&resp(&["DBSIZE"]), b":2\r\n");
    c.check(&resp(&["KEYS", "c*"]), b"*1\r\n$1\r\nc\r\n");
    c.check(&resp(&["FLUSHDB"]), b"+OK\r\n");
    c.check(&resp(&["RANDOMKEY"]), b"$-1\r\n");
    c.check(
        &resp(&["SCAN", "0", "TYPE", "string"]),
        b"*2\r\n$1\r\n0\r\n*0\r\n",
    );
    c.check(&resp(&["SET", "s1", "v"]), b"+OK\r\n");
    c.check(&resp(&["HSET", "h", "f", "v"]), b":1\r\n");
    c.check(
        &resp(&["SCAN", "0", "TYPE", "hash"]),
        b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\nh\r\n",
    );
    c.check(
        &resp(&["SCAN", "0", "TYPE", "nosuchtype"]),
        b"*2\r\n$1\r\n0\r\n*0\r\n",
    );
    c.check(
        &resp(&["SCAN", "0", "COUNT", "0"]),
        b"-ERR syntax error\r\n",
    );
    c.check(&resp(&["SCAN", "abc"]), b"-ERR invalid cursor\r\n");
    c.check(&resp(&["SCAN", "0", "MATCH"]), b"-ERR syntax error\r\n");
}

#[test]
fn key_commands_in_resp3() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.hello3();
    c.check(&resp(&["RANDOMKEY"]), b"_\r\n");
    c.check(&resp(&["SET", "a", "1"]), b"+OK\r\n");
    c.check(&resp(&["COPY", "a", "b"]), b":1\r\n");
    c.check(&resp(&["MOVE", "a", "1"]), b":1\r\n");
    c.check(&resp(&["TTL", "a"]), b":-2\r\n");
    c.check(&resp(&["TYPE", "b"]), b"+string\r\n");
    c.check(
        &resp(&["SCAN", "0", "TYPE", "string"]),
        b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\nb\r\n",
    );
}

/// COPY and MOVE across databases, with expiry, replay to the same state.
#[test]
fn copy_and_move_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(&resp(&["RPUSH", "src", "a", "b"]), b":2\r\n");
    c.check(&resp(&["PEXPIREAT", "src", "4102444800000"]), b":1\r\n");
    c.check(&resp(&["COPY", "src", "dst", "DB", "3"]), b":1\r\n");
    c.check(&resp(&["COPY", "src", "same"]), b":1\r\n");
    c.check(&resp(&["RPUSH", "same", "c"]), b":3\r\n");
    c.check(&resp(&["SET", "m", "moved"]), b"+OK\r\n");
    c.check(&resp(&["MOVE", "m", "5"]), b":1\r\n");
    c.check(&resp(&["SET", "stay", "here"]), b"+OK\r\n");
    c.check(&resp(&["SELECT", "5"]), b"+OK\r\n");
    c.check(&resp(&["SET", "stay", "there"]), b"+OK\r\n");
    c.check(&resp(&["SELECT", "0"]), b"+OK\r\n");
    c.check(&resp(&["MOVE", "stay", "5"]), b":0\r\n");
    drop(c);
    server.stop();

    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        &resp(&["LRANGE", "src", "0", "-1"]),
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
    );
    c.check(
        &resp(&["LRANGE", "same", "0", "-1"]),
        b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
    );
    c.check(&resp(&["PEXPIRETIME", "same"]), b":4102444800000\r\n");
    c.check(&resp(&["EXISTS", "m", "dst"]), b":0\r\n");
    c.check(&resp(&["GET", "stay"]), b"$4\r\nhere\r\n");
    c.check(&resp(&["SELECT", "3"]), b"+OK\r\n");
    c.check(
        &resp(&["LRANGE", "dst", "0", "-1"]),
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
    );
    c.check(&resp(&["PEXPIRETIME", "dst"]), b":4102444800000\r\n");
    c.check(&resp(&["SELECT", "5"]), b"+OK\r\n");
    c.check(
        &resp(&["MGET", "m", "stay"]),
        b"*2\r\n$5\r\nmoved\r\n$5\r\nthere\r\n",
    );
    drop(c);
    server.stop();
}

/// The segments a command touches (what the rewrite captures together and
/// what a replay decides on) include the key MOVE and COPY ... DB write in
/// the other database.
#[test]
fn cross_database_commands_touch_the_target_segment() {
    use ferrite_kv::commands::{lookup, touched_segments};
    use ferrite_kv::keyspace::{segment_of, SEGMENTS_PER_DB};
    use ferrite_kv::resp::Args;

    let touched = |parts: &[&[u8]], db: usize| {
        let mut base = Vec::new();
        let mut ranges = Vec::new();
        for p in parts {
            ranges.push((base.len(), base.len() + p.len()));
            base.extend_from_slice(p);
        }
        let args = Args::new(&base, &ranges);
        let spec = lookup(parts[0]).expect("known command");
        let mut out = Vec::new();
        touched_segments(spec, &args, db, 16, &mut out);
        out.sort_unstable();
        out
    };
    let at = |db: usize, key: &[u8]| (db * SEGMENTS_PER_DB + segment_of(key)) as u32;
    let mut expected = vec![at(2, b"k"), at(5, b"k")];
    expected.sort_unstable();
    assert_eq!(touched(&[b"MOVE", b"k", b"5"], 2), expected);
    assert_eq!(touched(&[b"MOVE", b"k", b"99"], 2), vec![at(2, b"k")]);
    let mut expected = vec![at(0, b"a"), at(0, b"b"), at(7, b"b")];
    expected.sort_unstable();
    assert_eq!(
        touched(&[b"COPY", b"a", b"b", b"REPLACE", b"DB", b"7"], 0),
        expected
    );
    let mut expected = vec![at(0, b"a"), at(0, b"b")];
    expected.sort_unstable();
    assert_eq!(touched(&[b"COPY", b"a", b"b"], 0), expected);
}

/// Every key of databases `0..4` with its DUMP payload (strings and lists
/// only, whose payloads do not depend on iteration order).
fn dump_all(con: &mut redis::Connection) -> std::collections::BTreeMap<(u8, Vec<u8>), Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    for db in 0..4u8 {
        let _: () = redis::cmd("SELECT").arg(db).query(con).expect("SELECT");
        let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(con).expect("KEYS");
        for key in keys {
            let payload: Vec<u8> = redis::cmd("DUMP").arg(&key).query(con).expect("DUMP");
            out.insert((db, key), payload);
        }
    }
    let _: () = redis::cmd("SELECT").arg(0).query(con).expect("SELECT");
    out
}

/// Rule C1 for keys in two databases: during a slow rewrite, MOVE and
/// COPY ... DB find the source's segment captured and the target's (in a
/// later database) not yet, and must capture it first; SORT ... STORE and
/// RESTORE run alongside. The reload must give exactly what clients saw.
#[test]
fn cross_database_writes_during_a_rewrite_reload_exactly() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = TestServer::start(dir.path());
    let client = redis::Client::open(format!("redis://{}/", server.addr))?;
    let mut con = client.get_connection()?;
    let mut fill = redis::pipe();
    for i in 0..30_000 {
        fill.cmd("SET").arg(format!("k{i}")).arg(i).ignore();
    }
    fill.cmd("RPUSH").arg("ids").arg(&[3, 1, 2]).ignore();
    let _: () = fill.query(&mut con)?;
    let payload: Vec<u8> = redis::cmd("DUMP").arg("ids").query(&mut con)?;
    // 50 µs a key: the rewrite of 30,000 keys lasts at least 1.5 s
    // whatever the host's load, so the loop below runs commands while
    // segments are still being captured.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("rdb-key-save-delay")
        .arg("50")
        .query(&mut con)?;
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut con)?;
    let mut round = 0u64;
    while info_field(&mut con, "aof_rewrites") != "1" {
        let (a, b) = (round * 7 % 30_000, round * 13 % 30_000);
        let _: i64 = redis::cmd("MOVE")
            .arg(format!("k{a}"))
            .arg(1 + round % 3)
            .query(&mut con)?;
        let _: i64 = redis::cmd("COPY")
            .arg(format!("k{b}"))
            .arg(format!("c{}", round % 500))
            .arg("DB")
            .arg(2)
            .arg("REPLACE")
            .query(&mut con)?;
        let _: i64 = redis::cmd("SORT")
            .arg("ids")
            .arg("BY")
            .arg("k*")
            .arg("STORE")
            .arg(format!("s{}", round % 50))
            .query(&mut con)?;
        let _: () = redis::cmd("RESTORE")
            .arg(format!("r{}", round % 50))
            .arg(1_000_000)
            .arg(&payload)
            .arg("REPLACE")
            .query(&mut con)?;
        round += 1;
        assert!(round < 1_000_000, "rewrite did not finish");
    }
    let early: u64 = info_field(&mut con, "ferrite_rewrite_captured_early").parse()?;
    assert!(
        early > 0,
        "no command straddled the captures ({round} rounds)"
    );
    let before = dump_all(&mut con);
    drop(con);
    server.stop();
    let server = TestServer::start(dir.path());
    let mut con = redis::Client::open(format!("redis://{}/", server.addr))?.get_connection()?;
    let after = dump_all(&mut con);
    let differ: Vec<_> = before
        .iter()
        .filter(|(k, v)| after.get(*k) != Some(*v))
        .map(|(k, _)| k)
        .chain(after.keys().filter(|k| !before.contains_key(*k)))
        .take(10)
        .collect();
    assert!(
        differ.is_empty(),
        "keys differ after the reload: {differ:?}"
    );
    drop(con);
    server.stop();
    Ok(())
}

/// RANDOMKEY in a database holding only expired keys deletes them, as
/// Redis's does with the expired keys it meets, and answers nil.
#[test]
fn randomkey_deletes_the_expired_keys_it_meets() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c| {
        c.set("enable-debug-command", &["yes".into()]).unwrap()
    });
    let mut c = server.raw();
    c.check(
        b"DEBUG SET-ACTIVE-EXPIRE 0\r\nSET a 1 PX 1\r\nSET b 2 PX 1\r\n",
        b"+OK\r\n+OK\r\n+OK\r\n",
    );
    // Let the two keys' millisecond expiry pass (active expiry is off).
    std::thread::sleep(std::time::Duration::from_millis(20));
    c.check(b"DBSIZE\r\n", b":2\r\n");
    c.check(b"RANDOMKEY\r\nDBSIZE\r\n", b"$-1\r\n:0\r\n");
}
