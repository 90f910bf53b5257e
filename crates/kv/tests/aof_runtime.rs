//! CONFIG SET appendonly yes|no at run time (`docs/aof-runtime.md`): the
//! replies and INFO fields Redis 7.0 gives, the data a restart loads after
//! each sequence, a turn-off during a slowed rewrite, quick on/off/on, and
//! MULTI.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{connect, info_field, TestServer};
use redis::Commands;

/// Waits until INFO shows `n` completed rewrites and none running.
fn wait_rewrites(con: &mut redis::Connection, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let done: u64 = info_field(con, "aof_rewrites").parse().expect("number");
        if done >= n && info_field(con, "aof_rewrite_in_progress") == "0" {
            return;
        }
        assert!(Instant::now() < deadline, "rewrite did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until INFO shows a rewrite running.
fn wait_running(con: &mut redis::Connection) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(con, "aof_rewrite_in_progress") != "1" {
        assert!(Instant::now() < deadline, "rewrite did not start");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn config_set(con: &mut redis::Connection, name: &str, value: &str) -> redis::RedisResult<String> {
    redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query(con)
}

fn off(dir: &Path) -> TestServer {
    TestServer::start_with(dir, |c| {
        c.appendonly = false;
        c.set("save", &[String::new()]).expect("valid");
        c.set("enable-debug-command", &["yes".to_string()])
            .expect("valid");
    })
}

fn on(dir: &Path) -> TestServer {
    TestServer::start_with(dir, |c| {
        c.appendonly = true;
        c.set("save", &[String::new()]).expect("valid");
        c.set("enable-debug-command", &["yes".to_string()])
            .expect("valid");
    })
}

/// Starts a server on `dir` with `appendonly` as given, returns its keys
/// and stops it: what a restart loads.
fn restart_keys(dir: &Path, appendonly: bool) -> BTreeSet<String> {
    let server = if appendonly { on(dir) } else { off(dir) };
    let mut con = connect(&server);
    let keys: BTreeSet<String> = con.keys("*").expect("KEYS");
    drop(con);
    server.stop();
    keys
}

/// The log files in `dir` (base parts, logs, manifest).
fn log_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .expect("list")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("appendonly.aof"))
        .collect()
}

/// Every file the manifest names exists, and no log file is left that it
/// does not name.
fn assert_manifest_consistent(dir: &Path) {
    let text = std::fs::read_to_string(dir.join("appendonly.aof.manifest")).expect("manifest");
    let named: BTreeSet<String> = text
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            match words.next() {
                Some("base" | "incr") => words.next().map(str::to_string),
                _ => None,
            }
        })
        .collect();
    let mut present = log_files(dir);
    present.remove("appendonly.aof.manifest");
    assert_eq!(
        present, named,
        "files on disk are exactly those the manifest names"
    );
}

#[test]
fn turned_on_log_holds_every_write_after_a_restart() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = off(dir.path());
    let mut con = connect(&server);
    for i in 0..2000 {
        let _: () = con.set(format!("before{i}"), i)?;
    }
    assert_eq!(info_field(&mut con, "aof_enabled"), "0");
    assert_eq!(config_set(&mut con, "appendonly", "yes")?, "OK");
    assert_eq!(info_field(&mut con, "aof_enabled"), "1");
    for i in 0..500 {
        let _: i64 = con.incr("counter", 1)?;
        let _: () = con.set(format!("during{i}"), i)?;
    }
    wait_rewrites(&mut con, 1);
    assert_eq!(info_field(&mut con, "aof_last_bgrewrite_status"), "ok");
    // The same value again is a no-op.
    assert_eq!(config_set(&mut con, "appendonly", "yes")?, "OK");
    let _: () = con.set("after", "x")?;
    let digest: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut con)?;
    drop(con);
    server.stop();
    assert_manifest_consistent(dir.path());

    let server = on(dir.path());
    let mut con = connect(&server);
    let again: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut con)?;
    assert_eq!(again, digest, "the restart loads base and log");
    let counter: i64 = con.get("counter")?;
    assert_eq!(counter, 500);
    Ok(())
}

#[test]
fn on_then_off_leaves_dump_rdb_the_persistence() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = off(dir.path());
    let mut con = connect(&server);
    let _: () = con.set("x", "1")?;
    assert_eq!(config_set(&mut con, "appendonly", "yes")?, "OK");
    wait_rewrites(&mut con, 1);
    let _: () = con.set("logged", "1")?;
    assert_eq!(config_set(&mut con, "appendonly", "no")?, "OK");
    assert_eq!(info_field(&mut con, "aof_enabled"), "0");
    assert_eq!(config_set(&mut con, "appendonly", "no")?, "OK");
    let _: () = con.set("unlogged", "1")?;
    let saved: String = redis::cmd("SAVE").query(&mut con)?;
    assert_eq!(saved, "OK");
    drop(con);
    server.stop();
    assert!(dir.path().join("dump.rdb").exists(), "SAVE wrote dump.rdb");
    assert_manifest_consistent(dir.path());

    // appendonly no: the snapshot, with everything.
    assert_eq!(
        restart_keys(dir.path(), false),
        ["logged", "unlogged", "x"].map(String::from).into()
    );

    // appendonly yes: the log as it was turned off.
    assert_eq!(
        restart_keys(dir.path(), true),
        ["logged", "x"].map(String::from).into()
    );
    Ok(())
}

#[test]
fn off_during_a_slowed_rewrite_stops_it_and_the_directory_stays_consistent() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = on(dir.path());
    let mut con = connect(&server);
    for i in 0..50 {
        let _: () = con.set(format!("k{i}"), i)?;
    }
    // Ten seconds a key: the rewrite would run for minutes.
    assert_eq!(
        config_set(&mut con, "rdb-key-save-delay", "10000000")?,
        "OK"
    );
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut con)?;
    wait_running(&mut con);
    let _: () = con.set("during", "1")?;
    let started = Instant::now();
    assert_eq!(config_set(&mut con, "appendonly", "no")?, "OK");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the stop waited out the key delay ({:?})",
        started.elapsed()
    );
    assert_eq!(info_field(&mut con, "aof_rewrite_in_progress"), "0");
    assert_eq!(info_field(&mut con, "aof_last_bgrewrite_status"), "ok");
    assert_eq!(config_set(&mut con, "rdb-key-save-delay", "0")?, "OK");
    drop(con);
    server.stop();
    assert_manifest_consistent(dir.path());

    let server = on(dir.path());
    let mut con = connect(&server);
    let size: usize = redis::cmd("DBSIZE").query(&mut con)?;
    assert_eq!(size, 51, "every write up to the turn-off is loaded");
    Ok(())
}

#[test]
fn turning_off_the_first_rewrite_leaves_the_old_directory() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    // An old dataset in the directory, from when the log was on.
    let server = on(dir.path());
    let mut con = connect(&server);
    let _: () = con.set("old", "1")?;
    drop(con);
    server.stop();
    let before = log_files(dir.path());

    let server = off(dir.path());
    let mut con = connect(&server);
    let _: () = con.set("new", "1")?;
    assert_eq!(
        config_set(&mut con, "rdb-key-save-delay", "10000000")?,
        "OK"
    );
    assert_eq!(config_set(&mut con, "appendonly", "yes")?, "OK");
    wait_running(&mut con);
    assert_ne!(log_files(dir.path()), before, "the new log exists");
    assert_eq!(config_set(&mut con, "appendonly", "no")?, "OK");
    assert_eq!(
        log_files(dir.path()),
        before,
        "the new log and parts are gone"
    );
    // On again at once, then let it finish.
    assert_eq!(config_set(&mut con, "appendonly", "yes")?, "OK");
    assert_eq!(config_set(&mut con, "appendonly", "no")?, "OK");
    assert_eq!(config_set(&mut con, "rdb-key-save-delay", "0")?, "OK");
    assert_eq!(config_set(&mut con, "appendonly", "yes")?, "OK");
    wait_rewrites(&mut con, 1);
    let _: () = con.set("last", "1")?;
    drop(con);
    server.stop();
    assert_manifest_consistent(dir.path());

    assert_eq!(
        restart_keys(dir.path(), true),
        ["last", "new"].map(String::from).into()
    );
    Ok(())
}

#[test]
fn multi_with_config_set_appendonly_starts_the_log_after_exec() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = off(dir.path());
    let mut con = connect(&server);
    let replies: (String, String) = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("foo")
        .arg("bar")
        .cmd("CONFIG")
        .arg("SET")
        .arg("appendonly")
        .arg("yes")
        .query(&mut con)?;
    assert_eq!(replies, ("OK".into(), "OK".into()));
    assert_eq!(info_field(&mut con, "aof_enabled"), "1");
    wait_rewrites(&mut con, 1);
    let (reply,): (String,) = redis::pipe().atomic().cmd("BGREWRITEAOF").query(&mut con)?;
    assert_eq!(reply, "Background append only file rewriting scheduled");
    wait_rewrites(&mut con, 2);
    drop(con);
    server.stop();
    let server = on(dir.path());
    let mut con = connect(&server);
    let foo: String = con.get("foo")?;
    assert_eq!(foo, "bar");
    Ok(())
}

#[test]
fn a_log_that_cannot_start_is_an_error_and_stays_off() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = off(dir.path());
    let mut con = connect(&server);
    // A file where the log's file must go: it cannot be created.
    std::fs::create_dir(dir.path().join("appendonly.aof.1.incr"))?;
    let err = config_set(&mut con, "appendonly", "yes").expect_err("cannot start");
    assert!(
        err.to_string().contains(
            "CONFIG SET failed (possibly related to argument 'appendonly') - Unable to turn on AOF. Check server logs."
        ),
        "{err}"
    );
    let value: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendonly")
        .query(&mut con)?;
    assert_eq!(value, ["appendonly", "no"]);
    assert_eq!(info_field(&mut con, "aof_enabled"), "0");
    let _: () = con.set("still", "works")?;
    Ok(())
}

#[test]
fn bgrewriteaof_with_the_log_off_writes_the_dataset_as_it_was() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = off(dir.path());
    let mut con = connect(&server);
    for i in 0..300 {
        let _: () = con.set(format!("k{i}"), i)?;
    }
    let code = "#!lua name=lib\nredis.register_function('one', function() return 1 end)";
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(code)
        .query(&mut con)?;
    let reply: String = redis::cmd("BGREWRITEAOF").query(&mut con)?;
    assert_eq!(reply, "Background append only file rewriting started");
    // Not in the parts: they hold the dataset at the rewrite's start.
    let _: () = con.set("later", "1")?;
    wait_rewrites(&mut con, 1);
    assert_eq!(info_field(&mut con, "aof_enabled"), "0");
    assert_eq!(info_field(&mut con, "aof_last_bgrewrite_status"), "ok");
    // DEBUG LOADAOF with the log off loads what the rewrite wrote, the
    // function libraries included.
    let _: String = redis::cmd("FUNCTION").arg("FLUSH").query(&mut con)?;
    let _: String = redis::cmd("DEBUG").arg("LOADAOF").query(&mut con)?;
    let one: i64 = redis::cmd("FCALL").arg("one").arg(0).query(&mut con)?;
    assert_eq!(one, 1);
    let later: Option<String> = con.get("later")?;
    assert_eq!(later, None);
    let _: () = con.set("after-load", "1")?;
    drop(con);
    server.stop();
    assert_manifest_consistent(dir.path());

    let server = on(dir.path());
    let mut con = connect(&server);
    let size: usize = redis::cmd("DBSIZE").query(&mut con)?;
    assert_eq!(size, 300);
    let later: Option<String> = con.get("after-load")?;
    assert_eq!(later, None);
    let one: i64 = redis::cmd("FCALL").arg("one").arg(0).query(&mut con)?;
    assert_eq!(one, 1);
    Ok(())
}

#[test]
fn a_log_turned_on_with_emulated_pm_is_a_pm_log() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let pm = |c: &mut ferrite_kv::config::Config| {
        c.log_device = ferrite_kv::config::LogDevice::PmemEmulated;
        c.set("save", &[String::new()]).expect("valid");
    };
    let server = TestServer::start_with(dir.path(), |c| {
        pm(c);
        c.appendonly = false;
    });
    let mut con = connect(&server);
    let _: () = con.set("before", "1")?;
    assert_eq!(config_set(&mut con, "appendonly", "yes")?, "OK");
    let _: () = con.set("after", "1")?;
    wait_rewrites(&mut con, 1);
    drop(con);
    server.stop();
    assert!(
        log_files(dir.path()).contains("appendonly.aof.1.incr.pm"),
        "{:?}",
        log_files(dir.path())
    );
    assert_manifest_consistent(dir.path());
    let server = TestServer::start_with(dir.path(), |c| {
        pm(c);
        c.appendonly = true;
    });
    let mut con = connect(&server);
    let keys: BTreeSet<String> = con.keys("*")?;
    assert_eq!(keys, ["after", "before"].map(String::from).into());
    Ok(())
}
