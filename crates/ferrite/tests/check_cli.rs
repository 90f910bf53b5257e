//! `ferrite check [--fix] [--yes] DIR` and `ferrite serve` on damaged logs,
//! through the real binary: what the user reads on the terminal names the
//! file, the offset, the record and the command that fixes it, and `--fix`
//! truncates only after a "y" or with `--yes`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use ferrite_io::{Device, FileDevice};
use ferrite_wal::{LogReader, Wal, WalConfig};

const RECORDS: usize = 20;

fn log_path(dir: &Path) -> PathBuf {
    dir.join("appendonly.aof")
}

/// A log of `RECORDS` SETs, each committed before the next; returns the
/// offset of record `lsn`.
fn write_log(dir: &Path, lsn: u64) -> u64 {
    let device: Arc<dyn Device> = Arc::new(FileDevice::open(log_path(dir)).unwrap());
    let wal = Wal::open(Arc::clone(&device), WalConfig::default()).unwrap();
    for i in 0..RECORDS {
        let (key, value) = (format!("k{i}"), format!("v{i}"));
        let payload = format!(
            "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{value}\r\n",
            key.len(),
            value.len()
        );
        wal.append_commit(payload.as_bytes()).unwrap();
    }
    wal.close().unwrap();
    LogReader::open(device)
        .unwrap()
        .map(|r| r.unwrap())
        .find(|r| r.lsn == lsn)
        .unwrap()
        .offset
}

fn ferrite(args: &[&str], dir: &Path, stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(args)
        .arg(dir)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(mut input) = child.stdin.take() {
        let _ = input.write_all(stdin.as_bytes());
    }
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn check_reports_and_fixes_only_when_confirmed() {
    let dir = tempfile::tempdir().unwrap();
    let offset = write_log(dir.path(), 7);
    let ok = ferrite(&["check"], dir.path(), "");
    assert!(ok.status.success(), "{}", text(&ok.stdout));
    assert!(text(&ok.stdout).contains("OK: the log is complete"));

    let mut bytes = std::fs::read(log_path(dir.path())).unwrap();
    bytes[offset as usize + 40] ^= 0x20;
    std::fs::write(log_path(dir.path()), &bytes).unwrap();

    let bad = ferrite(&["check"], dir.path(), "");
    let out = text(&bad.stdout);
    assert!(!bad.status.success());
    assert!(
        out.contains(&format!("CORRUPT record 7 at offset {offset}"))
            && out.contains(&log_path(dir.path()).display().to_string())
            && out.contains("ferrite check --fix"),
        "{out}"
    );

    let declined = ferrite(&["check", "--fix"], dir.path(), "n\n");
    assert!(!declined.status.success());
    assert!(text(&declined.stderr).contains("[y/N]"));
    assert_eq!(std::fs::read(log_path(dir.path())).unwrap(), bytes);

    let fixed = ferrite(&["check", "--fix", "--yes"], dir.path(), "");
    assert!(fixed.status.success(), "{}", text(&fixed.stdout));
    assert!(text(&fixed.stdout).contains("FIXED"));
    assert_eq!(
        std::fs::metadata(log_path(dir.path())).unwrap().len(),
        offset
    );
}

#[test]
fn serve_refuses_a_corrupt_log_and_cuts_a_torn_tail_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let offset = write_log(dir.path(), 5);
    let clean = std::fs::read(log_path(dir.path())).unwrap();
    let mut bytes = clean.clone();
    bytes[offset as usize + 36] ^= 0x01;
    std::fs::write(log_path(dir.path()), &bytes).unwrap();
    let refused = ferrite(&["serve", "--port", "0", "--dir"], dir.path(), "");
    let err = text(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        err.contains(&format!("offset {offset}"))
            && err.contains(&log_path(dir.path()).display().to_string())
            && err.contains(&format!("ferrite check --fix {}", dir.path().display())),
        "{err}"
    );

    // A torn tail: part of a record that a crash cut short.
    let mut torn = clean.clone();
    torn.extend_from_slice(&clean[offset as usize..offset as usize + 20]);
    std::fs::write(log_path(dir.path()), &torn).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(["serve", "--port", "0", "--dir"])
        .arg(dir.path())
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut warned = false;
    for line in BufReader::new(stderr).lines() {
        let line = line.unwrap();
        warned |= line.contains("WARN")
            && line.contains("incomplete record")
            && line.contains("truncated");
        if line.contains("Ready to accept connections") {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(warned, "no warning about the torn tail");
    assert_eq!(std::fs::read(log_path(dir.path())).unwrap(), clean);
}
