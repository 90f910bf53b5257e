//! Start-up recovery on the wal: a torn tail is cut with a warning (or
//! refused with `aof-load-truncated no`), damage in the middle refuses to
//! start with a message naming file, offset, record and `ferrite check
//! --fix`, and `check_dir --fix` (now `rewrite::check`) repairs only after confirmation. Also the
//! log switch that the rewrite builds on.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::TestServer;
use ferrite_io::{Device, FileDevice};
use ferrite_kv::aof::{open_device_at, CheckReport, LogEnd};
use ferrite_kv::config::{AppendFsync, Config, LogDevice};
use ferrite_kv::rewrite::check::{check_dir, Checked, DirCheck};
use ferrite_kv::Server;
use ferrite_wal::LogReader;

const KEYS: usize = 30;

fn config(dir: &Path) -> Config {
    Config {
        port: 0,
        dir: dir.to_path_buf(),
        appendfsync: AppendFsync::Always,
        log_device: LogDevice::File,
        ..Config::default()
    }
}

fn log_path(dir: &Path) -> PathBuf {
    dir.join("appendonly.aof")
}

/// A log of `KEYS` acknowledged SETs, one record each (LSN i + 1 for k{i}).
fn write_log(dir: &Path) {
    let server = TestServer::start(dir);
    let mut c = server.raw();
    for i in 0..KEYS {
        c.check(format!("SET k{i} v{i}\r\n").as_bytes(), b"+OK\r\n");
    }
    server.stop();
}

/// Offset of the record with `lsn` in the log.
fn record_offset(dir: &Path, lsn: u64) -> u64 {
    let device: Arc<dyn Device> =
        Arc::new(FileDevice::open_existing(log_path(dir)).expect("log opens"));
    LogReader::open(device)
        .expect("reader")
        .map(|r| r.expect("intact"))
        .find(|r| r.lsn == lsn)
        .expect("record exists")
        .offset
}

fn flip_byte(path: &Path, offset: u64) {
    let mut bytes = std::fs::read(path).expect("read log");
    bytes[offset as usize] ^= 0x5a;
    std::fs::write(path, bytes).expect("write log");
}

/// The keys k0.. that a server in `dir` has, as a count of the prefix.
fn keys_present(dir: &Path) -> usize {
    let server = TestServer::start(dir);
    let mut c = server.raw();
    let mut present = 0;
    for i in 0..KEYS {
        c.stream
            .write_all(format!("EXISTS k{i}\r\n").as_bytes())
            .unwrap();
        // ":0\r\n" or ":1\r\n".
        let mut reply = [0u8; 4];
        std::io::Read::read_exact(&mut c.stream, &mut reply).unwrap();
        if &reply == b":1\r\n" {
            assert_eq!(present, i, "k{i} present after a missing key");
            present += 1;
        }
    }
    server.stop();
    present
}

#[test]
fn corruption_in_the_middle_refuses_to_start_and_check_fix_repairs() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path());
    let lsn = 10;
    let offset = record_offset(dir.path(), lsn);
    // A byte of record 10's payload: its checksum no longer matches, and
    // the 20 records after it prove it had been durable.
    flip_byte(&log_path(dir.path()), offset + 40);

    let error = Server::bind(config(dir.path()))
        .expect_err("a corrupt log must refuse to start")
        .to_string();
    for part in [
        log_path(dir.path()).display().to_string(),
        format!("offset {offset}"),
        format!("record {lsn}"),
        format!("ferrite check --fix {}", dir.path().display()),
    ] {
        assert!(error.contains(&part), "{part:?} missing from: {error}");
    }

    let name = "appendonly.aof";
    let checked = check_dir(dir.path(), name, false, |_| panic!("no --fix")).unwrap();
    assert!(!checked.is_ok());
    let report = last_log(&checked);
    assert_eq!(report.records, lsn - 1);
    assert!(
        matches!(report.end, LogEnd::Corrupt { offset: o, lsn: l, .. } if o == offset && l == lsn),
        "{:?}",
        report.end
    );

    // --fix asks first; a "no" changes nothing.
    let len = std::fs::metadata(log_path(dir.path())).unwrap().len();
    let refused = check_dir(dir.path(), name, true, |question| {
        assert!(question.contains(&format!("offset {offset}")), "{question}");
        false
    })
    .unwrap();
    assert_eq!(truncated(&refused), 0);
    assert_eq!(std::fs::metadata(log_path(dir.path())).unwrap().len(), len);

    let fixed = check_dir(dir.path(), name, true, |_| true).unwrap();
    assert_eq!(truncated(&fixed), len - offset);
    assert!(check_dir(dir.path(), name, false, |_| false)
        .unwrap()
        .is_ok());
    assert_eq!(keys_present(dir.path()), lsn as usize - 1);
}

#[test]
fn intact_record_with_a_bad_payload_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let device: Arc<dyn Device> = Arc::new(FileDevice::open(log_path(dir.path())).unwrap());
    let wal = ferrite_wal::Wal::open(device, ferrite_wal::WalConfig::default()).unwrap();
    wal.append_commit(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n")
        .unwrap();
    wal.append_commit(b"*2\r\n$7\r\nNOTACMD\r\n$1\r\na\r\n")
        .unwrap();
    wal.close().unwrap();
    let error = Server::bind(config(dir.path())).unwrap_err().to_string();
    assert!(
        error.contains("record 2") && error.contains("unknown command 'NOTACMD'"),
        "{error}"
    );
}

/// The replay runs records while recovery is still reading the log, a few
/// batches behind it: a bad record far from the end must stop both and be
/// the error reported, and the records on either side of a batch boundary
/// must all run.
#[test]
fn a_bad_record_stops_a_replay_that_recovery_reads_ahead_of() {
    let value = "v".repeat(2000);
    let set = |i: usize| format!("*3\r\n$3\r\nSET\r\n$5\r\nk{i:04}\r\n$2000\r\n{value}\r\n");
    let write = |dir: &Path, bad_at: Option<usize>| {
        let device: Arc<dyn Device> = Arc::new(FileDevice::open(log_path(dir)).unwrap());
        let wal = ferrite_wal::Wal::open(device, ferrite_wal::WalConfig::default()).unwrap();
        for i in 0..3000 {
            if Some(i) == bad_at {
                wal.append_commit(b"*2\r\n$7\r\nNOTACMD\r\n$1\r\na\r\n")
                    .unwrap();
            } else {
                wal.append_commit(set(i).as_bytes()).unwrap();
            }
        }
        wal.close().unwrap();
    };

    let bad = tempfile::tempdir().unwrap();
    write(bad.path(), Some(700));
    let error = Server::bind(config(bad.path())).unwrap_err().to_string();
    assert!(
        error.contains("record 701") && error.contains("unknown command 'NOTACMD'"),
        "{error}"
    );

    let good = tempfile::tempdir().unwrap();
    write(good.path(), None);
    let server = TestServer::start(good.path());
    let mut c = server.raw();
    c.check(b"DBSIZE\r\n", b":3000\r\n");
    c.check(b"STRLEN k2999\r\n", b":2000\r\n");
    server.stop();
}

#[test]
fn torn_tail_is_truncated_with_a_warning_unless_refused() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path());
    let path = log_path(dir.path());
    let len = std::fs::metadata(&path).unwrap().len();
    // What a crash during a write leaves: part of a record at the end.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    file.write_all(&[0xab; 100]).unwrap();
    drop(file);

    let error = Server::bind(Config {
        aof_load_truncated: false,
        ..config(dir.path())
    })
    .unwrap_err()
    .to_string();
    assert!(
        error.contains(&format!("offset {len}")) && error.contains("aof-load-truncated"),
        "{error}"
    );
    let report = last_log(&check_dir(dir.path(), "appendonly.aof", false, |_| false).unwrap());
    assert!(
        matches!(report.end, LogEnd::Torn { offset, bytes: 100, .. } if offset == len),
        "{:?}",
        report.end
    );

    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let info = String::from_utf8_lossy(&c.roundtrip_any(b"INFO persistence\r\n")).into_owned();
    assert!(info.contains("ferrite_truncated_bytes:100\r\n"), "{info}");
    c.check(b"GET k29\r\n", b"$3\r\nv29\r\n");
    c.check(b"SET after torn\r\n", b"+OK\r\n");
    server.stop();
    assert_eq!(keys_present(dir.path()), KEYS);
}

/// The log `config` opens, holding one `SET a 1` (LSN 1), written; and the
/// propagation buffer that appended it.
fn log_with_one_set(
    config: Config,
) -> (
    Box<dyn ferrite_kv::aof::CommandLog>,
    ferrite_kv::commands::Propagation,
) {
    let mut state = ferrite_kv::state::State::new(config);
    let opened = ferrite_kv::aof::open_log(&mut state, Box::new(|| {})).unwrap();
    let mut log = opened.log;
    let mut prop = ferrite_kv::commands::Propagation::default();
    prop.push(0, &[b"SET", b"a", b"1"]);
    assert_eq!(log.append(&prop), 1);
    log.flush();
    (log, prop)
}

#[test]
fn a_log_switch_continues_tickets_in_the_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, mut prop) = log_with_one_set(config(dir.path()));
    let incremental = dir.path().join("appendonly.aof.1.incr");
    let next = open_device_at(&incremental.clone(), false).unwrap();
    let point = log.switch(next).unwrap();
    assert_eq!(point.last_in_old, 1);
    assert_eq!(point.old_path, log_path(dir.path()));
    assert_eq!(point.new_path, incremental.clone());
    prop.clear();
    prop.push(2, &[b"SET", b"b", b"2"]);
    let ticket = log.append(&prop);
    assert_eq!(ticket, 2);
    log.flush();
    log.close().unwrap();
    assert!(log.acknowledged() >= ticket);

    // The new file starts at LSN 2 and its record names its database.
    let device: Arc<dyn Device> = Arc::new(FileDevice::open_existing(incremental.clone()).unwrap());
    let records: Vec<_> = LogReader::open(device)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].lsn, 2);
    assert!(records[0]
        .payload
        .starts_with(b"*2\r\n$6\r\nSELECT\r\n$1\r\n2\r\n"));
}

#[test]
fn the_wait_a_switch_prepares_makes_the_current_log_durable_on_its_thread() {
    // appendfsync no: no background syncer, so only the wait can sync.
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = log_with_one_set(Config {
        appendfsync: AppendFsync::No,
        ..config(dir.path())
    });
    let durable = |log: &dyn ferrite_kv::aof::CommandLog| {
        let mut info = ferrite_kv::state::LogInfo::default();
        log.info(&mut info);
        info.durable_lsn
    };
    assert_eq!(durable(log.as_ref()), 0);
    let wait = log.prepare_switch();
    std::thread::spawn(wait).join().unwrap().unwrap();
    assert_eq!(durable(log.as_ref()), 1);
    // The switch then has nothing left to wait for, and numbering goes on.
    let next = open_device_at(&dir.path().join("appendonly.aof.1.incr"), false).unwrap();
    assert_eq!(log.switch(next).unwrap().last_in_old, 1);
    log.close().unwrap();
}

/// The report on the log a directory check found last (the one appended to).
fn last_log(checked: &DirCheck) -> CheckReport {
    match checked.files.last().map(|f| &f.checked) {
        Some(Checked::Log { report, .. }) => report.clone(),
        other => panic!("no log checked: {other:?}"),
    }
}

/// Bytes a `--fix` cut.
fn truncated(checked: &DirCheck) -> u64 {
    checked.truncated.as_ref().map_or(0, |(_, bytes)| *bytes)
}
