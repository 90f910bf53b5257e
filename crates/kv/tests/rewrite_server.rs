//! BGREWRITEAOF end to end: replies as Redis's, writes (INCR, APPEND,
//! LPUSH) before, during and after the rewrite, INFO, and a restart that
//! loads the base parts and the incremental log to the same data.

mod common;

use std::time::{Duration, Instant};

use common::{connect, info_field, TestServer};
use redis::Commands;

fn wait_rewrites(con: &mut redis::Connection, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(con, "aof_rewrites")
        .parse::<u64>()
        .expect("number")
        < n
    {
        assert!(Instant::now() < deadline, "rewrite did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn bgrewriteaof_then_restart_loads_the_same_data() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = TestServer::start_with(dir.path(), |c| {
        c.set("aof-rewrite-threads", &["2".to_string()])
            .expect("valid");
    });
    let mut con = connect(&server);
    for i in 0..3000 {
        let _: () = con.set(format!("k{i}"), format!("v{i}"))?;
    }
    let _: () = con.set_ex("ttl", "x", 1000)?;
    let reply: String = redis::cmd("BGREWRITEAOF").query(&mut con)?;
    assert_eq!(reply, "Background append only file rewriting started");
    let again: redis::RedisResult<String> = redis::cmd("BGREWRITEAOF").query(&mut con);
    let err = again.expect_err("second BGREWRITEAOF while one runs");
    assert!(err.to_string().contains("already in progress"), "{err}");
    for i in 0..500 {
        let _: i64 = con.incr("counter", 1)?;
        let _: i64 = con.append("s", "x")?;
        let _: i64 = con.lpush("l", i)?;
        let _: () = con.set(format!("k{i}"), format!("new{i}"))?;
    }
    wait_rewrites(&mut con, 1);
    assert_eq!(info_field(&mut con, "aof_last_bgrewrite_status"), "ok");
    assert_eq!(info_field(&mut con, "ferrite_rewrite_parts"), "2");
    // Only the 500 SETs of existing keys sent during the rewrite can have
    // superseded a key (how many did depends on how fast the workers were).
    let left_out: u64 = info_field(&mut con, "ferrite_rewrite_superseded_keys").parse()?;
    assert!(left_out <= 500, "{left_out}");
    let _: u64 = info_field(&mut con, "ferrite_rewrite_pieces").parse()?;
    // Every command of the load names one key: none forced a capture.
    assert_eq!(info_field(&mut con, "ferrite_rewrite_captured_early"), "0");
    let _: i64 = con.incr("counter", 1)?;
    server.stop();
    let names: Vec<String> = std::fs::read_dir(dir.path())?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()?;
    assert!(
        names.iter().any(|n| n == "appendonly.aof.manifest"),
        "{names:?}"
    );
    assert!(
        !names.iter().any(|n| n == "appendonly.aof"),
        "legacy log removed: {names:?}"
    );

    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    assert_eq!(con.get::<_, i64>("counter")?, 501);
    assert_eq!(con.strlen::<_, i64>("s")?, 500);
    assert_eq!(con.llen::<_, i64>("l")?, 500);
    assert_eq!(con.get::<_, String>("k10")?, "new10");
    assert_eq!(con.get::<_, String>("k2999")?, "v2999");
    assert!(con.ttl::<_, i64>("ttl")? > 900);
    let size: i64 = redis::cmd("DBSIZE").query(&mut con)?;
    assert_eq!(size, 3004);
    // A second rewrite from a manifest, then one more restart.
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut con)?;
    wait_rewrites(&mut con, 1);
    server.stop();
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    assert_eq!(con.get::<_, i64>("counter")?, 501);
    let size: i64 = redis::cmd("DBSIZE").query(&mut con)?;
    assert_eq!(size, 3004);
    server.stop();
    Ok(())
}

/// A crash after a rewrite's new manifest is durable and before the log
/// switch leaves a blank incremental log named last. The server appends
/// there after the restart, and those records must continue the LSNs of
/// the logs before it: starting at 1, a later load took them for records
/// the base parts (captured at higher LSNs) already held, and dropped
/// acknowledged writes.
#[test]
fn a_blank_last_log_continues_the_lsns_of_the_logs_before_it() -> anyhow::Result<()> {
    use ferrite_kv::rewrite::dir::{AofDir, Layout};
    use ferrite_kv::rewrite::fs::RealFs;
    use ferrite_kv::rewrite::manifest::IncrKind;

    let dir = tempfile::tempdir()?;
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    for i in 0..1000 {
        let _: () = con.set(format!("k{i}"), i)?;
    }
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut con)?;
    wait_rewrites(&mut con, 1);
    server.stop();
    // The crash window: the next rewrite's manifest (naming a new, empty
    // log) is durable, the switch never happened.
    let aof = AofDir::new(std::sync::Arc::new(RealFs), dir.path(), "appendonly.aof");
    let Layout::Manifest(current) = aof.layout()? else {
        panic!("the rewrite left a manifest");
    };
    aof.start(&current, IncrKind::File)?;
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    for _ in 0..5 {
        let _: i64 = con.incr("counter", 1)?;
    }
    server.stop();
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    assert_eq!(con.get::<_, i64>("counter")?, 5);
    assert_eq!(con.get::<_, i64>("k999")?, 999);
    server.stop();
    Ok(())
}

/// The capture position of every global segment in the base parts the
/// manifest of `dir` names.
fn capture_positions(dir: &std::path::Path) -> anyhow::Result<Vec<u64>> {
    use ferrite_kv::rewrite::dir::{AofDir, Layout};
    use ferrite_kv::rewrite::fs::RealFs;
    use ferrite_kv::rewrite::load::{capture_table, read_part};

    let aof = AofDir::new(std::sync::Arc::new(RealFs), dir, "appendonly.aof");
    let Layout::Manifest(m) = aof.layout()? else {
        anyhow::bail!("no manifest");
    };
    let parts = m
        .bases
        .iter()
        .map(|base| read_part(&aof, base, None, |_| true))
        .collect::<Result<Vec<_>, _>>()?;
    // The test servers have Redis's 16 databases.
    Ok(capture_table(16, &parts))
}

/// Runs `more` with keys `k0`..`k{keys - 1}` set to their index, then
/// starts a rewrite held to 1% of the machine's CPU time, so that a client writing
/// meanwhile runs between the segments' captures (the more keys, the more
/// bursts the rewrite takes, and the more captures fall between writes).
fn start_slow_rewrite(
    con: &mut redis::Connection,
    mut more: redis::Pipeline,
    keys: usize,
) -> anyhow::Result<()> {
    for i in 0..keys {
        more.set(format!("k{i}"), i).ignore();
    }
    let _: () = more.query(con)?;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("aof-rewrite-cpu-share")
        .arg("1")
        .query(con)?;
    let _: String = redis::cmd("BGREWRITEAOF").query(con)?;
    Ok(())
}

#[test]
fn a_log_cut_below_the_parts_capture_positions_continues_in_a_new_log() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    // Segments are captured at positions past the log switch.
    // A segment must be captured after the new log's second record: with
    // 20k keys a loaded machine could capture them all in one burst
    // before the client's second write came in.
    let keys = 100_000;
    start_slow_rewrite(&mut con, redis::pipe(), keys)?;
    let mut i = 0;
    while info_field(&mut con, "aof_rewrites") != "1" {
        let _: i64 = con.incr(format!("k{}", i % keys), 1)?;
        i += 1;
        assert!(i < 5_000_000, "rewrite did not finish");
    }
    server.stop();
    // Damage the first record of the new log and let `ferrite check
    // --fix` cut the log there: below the capture positions.
    let aof = ferrite_kv::rewrite::dir::AofDir::new(
        std::sync::Arc::new(ferrite_kv::rewrite::fs::RealFs),
        dir.path(),
        "appendonly.aof",
    );
    let ferrite_kv::rewrite::dir::Layout::Manifest(m) = aof.layout()? else {
        panic!("the rewrite left a manifest");
    };
    let last = aof.path(&m.incrs.last().expect("a log").file);
    let mut bytes = std::fs::read(&last)?;
    let at = ferrite_wal::record::LOG_HEADER_LEN + ferrite_wal::record::RECORD_HEADER_LEN + 2;
    bytes[at] ^= 0xff;
    std::fs::write(&last, &bytes)?;
    let mut cut_at = None;
    let fixed =
        ferrite_kv::rewrite::check::check_dir(dir.path(), "appendonly.aof", true, |what| {
            cut_at = what
                .split("discarding record ")
                .nth(1)
                .and_then(|rest| rest.split(' ').next())
                .and_then(|lsn| lsn.parse::<u64>().ok());
            true
        })?;
    assert!(fixed.truncated.is_some(), "the log was cut");
    let cut_at = cut_at.expect("the fix names the record");
    // The first record after the fix takes the cut record's LSN: a key of
    // a segment captured after it is the one such a record could lose.
    let captures = capture_positions(dir.path())?;
    let late = (0..)
        .map(|i| format!("late{i}"))
        .take(100_000)
        .find(|k| {
            let global = ferrite_kv::keyspace::segment_of(k.as_bytes());
            captures.get(global).is_some_and(|&c| c > cut_at)
        })
        .expect("a segment captured after the cut record");
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    let _: () = con.set(&late, "kept")?;
    let mut after = redis::pipe();
    for i in 0..2000 {
        after.set(format!("after{i}"), i).ignore();
    }
    let _: () = after.query(&mut con)?;
    server.stop();
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    assert_eq!(
        con.get::<_, Option<String>>(&late)?.as_deref(),
        Some("kept")
    );
    for i in 0..2000 {
        assert_eq!(
            con.get::<_, Option<i64>>(format!("after{i}"))?,
            Some(i),
            "after{i}"
        );
    }
    server.stop();
    Ok(())
}

/// Every key and its value (a set's members sorted), for the string and
/// set keys the tests here write.
fn dump(con: &mut redis::Connection) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(con)?;
    keys.sort();
    let (sets, strings): (Vec<String>, Vec<String>) =
        keys.into_iter().partition(|k| k.starts_with("set"));
    let mut out = std::collections::BTreeMap::new();
    for chunk in strings.chunks(1000) {
        let values: Vec<String> = redis::cmd("MGET").arg(chunk).query(con)?;
        out.extend(chunk.iter().cloned().zip(values));
    }
    let mut pipe = redis::pipe();
    for key in &sets {
        pipe.smembers(key);
    }
    let members: Vec<Vec<String>> = pipe.query(con)?;
    for (key, mut m) in sets.into_iter().zip(members) {
        m.sort();
        out.insert(key, m.join(","));
    }
    Ok(out)
}

/// Rule C1 on the real server: during a slow rewrite, commands naming
/// keys of several segments (MSET, RENAME, SMOVE, a MULTI/EXEC of INCRs)
/// find some of their segments captured and some not, and capture the
/// rest first. The reload must give exactly the data the clients saw.
#[test]
fn multi_key_commands_during_a_rewrite_capture_early_and_reload_exactly() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    let mut sets = redis::pipe();
    for i in 0..100 {
        sets.sadd(format!("set{i}"), i).ignore();
    }
    start_slow_rewrite(&mut con, sets, 100_000)?;
    let mut round = 0u64;
    while info_field(&mut con, "aof_rewrites") != "1" {
        let (a, b) = (round * 7 % 20_000, round * 13 % 20_000 + 1);
        let _: () = con.mset(&[
            (format!("k{a}"), format!("m{round}")),
            (format!("k{b}"), format!("n{round}")),
        ])?;
        let _: () = redis::pipe()
            .atomic()
            .incr(format!("c{}", round % 50), 1)
            .incr(format!("d{}", round % 37), 2)
            .query(&mut con)?;
        let from = format!("set{}", round % 100);
        let to = format!("set{}", (round + 1) % 100);
        let _: bool = redis::cmd("SMOVE")
            .arg(&from)
            .arg(&to)
            .arg(round % 100)
            .query(&mut con)?;
        round += 1;
        assert!(round < 2_000_000, "rewrite did not finish");
    }
    let early: u64 = info_field(&mut con, "ferrite_rewrite_captured_early").parse()?;
    assert!(
        early > 0,
        "no command straddled the captures ({round} rounds)"
    );
    // Everything the clients can see now, to compare after the reload.
    let before = dump(&mut con)?;
    server.stop();
    let server = TestServer::start(dir.path());
    let mut con = connect(&server);
    assert_eq!(dump(&mut con)?, before);
    server.stop();
    Ok(())
}
