//! `dump.rdb` persistence with `appendonly no` (`docs/rdb.md`): BGSAVE
//! and SAVE write it, the exit saves when save points are configured,
//! SHUTDOWN NOSAVE does not, start-up loads it, and INFO and LASTSAVE
//! report it as Redis does.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use common::{Raw, TestServer};

fn start(dir: &Path) -> TestServer {
    TestServer::start_with(dir, |c| c.appendonly = false)
}

/// Sends one command and returns its reply's text (a bulk's contents,
/// else the line).
fn call(raw: &mut Raw, args: &[&str]) -> String {
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    raw.stream.write_all(out.as_bytes()).expect("send");
    let mut reader = BufReader::new(&raw.stream);
    let mut line = String::new();
    reader.read_line(&mut line).expect("reply");
    if let Some(len) = line.strip_prefix('$') {
        let Ok(len) = len.trim().parse::<usize>() else {
            return String::new();
        };
        let mut body = vec![0u8; len + 2];
        reader.read_exact(&mut body).expect("bulk");
        body.truncate(len);
        return String::from_utf8_lossy(&body).into_owned();
    }
    line.trim_end().to_string()
}

fn info_field(raw: &mut Raw, name: &str) -> String {
    let info = call(raw, &["INFO", "persistence"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_default()
        .to_string()
}

/// Waits (bounded) for the running save to end.
fn wait_saved(raw: &mut Raw) {
    let until = Instant::now() + Duration::from_secs(20);
    while info_field(raw, "rdb_bgsave_in_progress") != "0" {
        assert!(Instant::now() < until, "BGSAVE did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn bgsave_and_exit_save_are_loaded_at_start_up() {
    let dir = tempfile::tempdir().expect("dir");
    let server = start(dir.path());
    let mut c = server.raw();
    assert_eq!(call(&mut c, &["SET", "a", "1"]), "+OK");
    assert_eq!(call(&mut c, &["HSET", "h", "f", "v"]), ":1");
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "2");
    assert_eq!(call(&mut c, &["BGSAVE"]), "+Background saving started");
    wait_saved(&mut c);
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
    assert_eq!(info_field(&mut c, "rdb_saves"), "1");
    assert!(dir.path().join("dump.rdb").exists());
    // Written after the BGSAVE: only the exit's save (default save points)
    // holds it.
    assert_eq!(call(&mut c, &["SET", "b", "2"]), "+OK");
    drop(c);
    server.stop();
    let server = start(dir.path());
    let mut c = server.raw();
    assert_eq!(call(&mut c, &["GET", "a"]), "1");
    assert_eq!(call(&mut c, &["GET", "b"]), "2");
    assert_eq!(call(&mut c, &["HGET", "h", "f"]), "v");
    assert_eq!(info_field(&mut c, "rdb_last_load_keys_loaded"), "3");
    assert_eq!(info_field(&mut c, "rdb_last_load_keys_expired"), "0");
}

#[test]
fn save_lastsave_and_shutdown_nosave() {
    let dir = tempfile::tempdir().expect("dir");
    let server = start(dir.path());
    let mut c = server.raw();
    assert_eq!(call(&mut c, &["SET", "kept", "1"]), "+OK");
    assert_eq!(call(&mut c, &["SAVE"]), "+OK");
    let lastsave: i64 = call(&mut c, &["LASTSAVE"])
        .trim_start_matches(':')
        .parse()
        .expect("integer");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    assert!((now - lastsave).abs() <= 2, "{lastsave} vs {now}");
    assert_eq!(call(&mut c, &["SET", "lost", "1"]), "+OK");
    c.stream.write_all(b"SHUTDOWN NOSAVE\r\n").expect("send");
    let mut rest = Vec::new();
    let _ = c.stream.read_to_end(&mut rest);
    assert!(rest.is_empty(), "SHUTDOWN replies nothing: {rest:?}");
    drop(server);
    let server = start(dir.path());
    let mut c = server.raw();
    assert_eq!(call(&mut c, &["GET", "kept"]), "1");
    assert_eq!(call(&mut c, &["EXISTS", "lost"]), ":0");
}

#[test]
fn a_bad_dump_file_stops_start_up_with_its_reason() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("dump.rdb"), b"REDIS0010\xfe").expect("write");
    let mut config = ferrite_kv::config::Config {
        port: 0,
        dir: dir.path().to_path_buf(),
        ..Default::default()
    };
    config.appendonly = false;
    let error = ferrite_kv::server::Server::bind(config).expect_err("refused");
    assert!(error.to_string().contains("RDB"), "{error}");
}

/// Replication INFO field.
fn repl_field(raw: &mut Raw, name: &str) -> String {
    let info = call(raw, &["INFO", "replication"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_master_deletes_expired_keys_of_the_file_into_its_history() {
    use ferrite_kv::keyspace::Keyspace;
    use ferrite_kv::rdb::produce::{Controls, History, Snapshot};
    use ferrite_kv::types::{Str, Value};
    let dir = tempfile::tempdir().expect("dir");
    let mut ks = Keyspace::new(16);
    for i in 0..10 {
        let key = format!("gone{i}");
        ks.set(0, key.as_bytes(), Value::Str(Str::new(b"v")), false);
        ks.set_expire(0, key.as_bytes(), 1_000);
    }
    ks.set(0, b"kept", Value::Str(Str::new(b"v")), false);
    let history = History {
        replid: "b".repeat(40),
        offset: 500,
        stream_db: 0,
    };
    let snapshot = Snapshot::take(&ks, Vec::new(), Some(history), 0);
    let fs = ferrite_kv::rewrite::fs::RealFs;
    ferrite_kv::rdb::dump::save(&fs, dir.path(), "dump.rdb", snapshot, &Controls::default())
        .expect("file written");
    let server = start(dir.path());
    let mut c = server.raw();
    assert_eq!(info_field(&mut c, "rdb_last_load_keys_expired"), "10");
    assert_eq!(info_field(&mut c, "rdb_last_load_keys_loaded"), "1");
    assert_eq!(call(&mut c, &["DBSIZE"]), ":1");
    // The file's history is the secondary one, and the DELs follow it.
    assert_eq!(repl_field(&mut c, "master_replid2"), "b".repeat(40));
    assert_eq!(repl_field(&mut c, "second_repl_offset"), "501");
    let offset: i64 = repl_field(&mut c, "master_repl_offset")
        .parse()
        .expect("offset");
    let select = "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n".len() as i64;
    let dels = (0..10)
        .map(|i| format!("*2\r\n$3\r\nDEL\r\n$5\r\ngone{i}\r\n").len() as i64)
        .sum::<i64>();
    assert_eq!(offset, 500 + select + dels);
}
