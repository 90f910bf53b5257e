//! `ferrite check [--fix] DIR` on a data directory with a manifest: a clean
//! directory passes; a torn tail of the last incremental log is reported
//! and cut by `--fix --yes`; a damaged base part is named with its offset,
//! fails the check, and `--fix` leaves it alone.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{start_server, Client, Reply};

/// Runs a server on `dir`, writes keys, rewrites once, writes more, and
/// kills it (the log is `appendfsync always`, so everything is on disk).
fn make_dir_with_manifest(dir: &Path, device: &str) {
    let (mut child, port) = start_server(dir, &["--appendfsync", "always", "--log-device", device]);
    let mut c = Client::connect(port).expect("connect");
    let deadline = Instant::now() + Duration::from_secs(30);
    for i in 0..500 {
        let key = format!("k{i}");
        assert_eq!(
            c.call(&[b"SET", key.as_bytes(), b"v"]).unwrap(),
            Reply::Simple("OK".into())
        );
    }
    c.call(&[b"BGREWRITEAOF"]).unwrap();
    loop {
        let Reply::Bulk(Some(info)) = c.call(&[b"INFO", b"persistence"]).unwrap() else {
            panic!("INFO failed")
        };
        if String::from_utf8_lossy(&info).contains("aof_rewrites:1") {
            break;
        }
        assert!(Instant::now() < deadline, "rewrite did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    for i in 0..50 {
        c.call(&[b"INCR", format!("n{i}").as_bytes()]).unwrap();
    }
    child.kill().expect("SIGKILL");
    let _ = child.wait();
}

fn check(dir: &Path, extra: &[&str]) -> (bool, String) {
    let Output { status, stdout, .. } = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .arg("check")
        .args(extra)
        .arg(dir)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("ferrite check runs");
    (
        status.success(),
        String::from_utf8_lossy(&stdout).into_owned(),
    )
}

fn manifest_files(dir: &Path, kind: &str) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("appendonly.aof.manifest")).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix(&format!("{kind} ")))
        .map(|rest| rest.split(' ').next().unwrap().to_string())
        .collect()
}

#[test]
fn a_clean_manifest_directory_passes_on_both_devices() {
    for device in ["file", "pmem-emulated"] {
        let dir = tempfile::tempdir().unwrap();
        make_dir_with_manifest(dir.path(), device);
        let (ok, out) = check(dir.path(), &[]);
        assert!(ok, "{device}: {out}");
        assert!(out.contains("manifest OK"), "{out}");
        let bases = manifest_files(dir.path(), "base");
        assert!(!bases.is_empty(), "the rewrite wrote base parts");
        for base in &bases {
            assert!(out.contains(&format!("{base}: base part")), "{out}");
        }
        assert!(out.contains("50 commands"), "{device}: {out}");
    }
}

#[test]
fn a_torn_last_log_is_reported_and_fixed_only_with_yes() {
    let dir = tempfile::tempdir().unwrap();
    make_dir_with_manifest(dir.path(), "file");
    let incr = dir
        .path()
        .join(manifest_files(dir.path(), "incr").pop().unwrap());
    let mut bytes = std::fs::read(&incr).unwrap();
    let clean_len = bytes.len();
    // Half of a record header: what a crash in the middle of a write leaves.
    bytes.extend_from_slice(&[0x5a; 12]);
    std::fs::write(&incr, &bytes).unwrap();
    let (ok, out) = check(dir.path(), &[]);
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!("TORN at offset {clean_len}")),
        "{out}"
    );
    // --fix without --yes and with no answer on stdin changes nothing.
    let (ok, _) = check(dir.path(), &["--fix"]);
    assert!(!ok);
    assert_eq!(std::fs::read(&incr).unwrap().len(), bytes.len());
    let (ok, out) = check(dir.path(), &["--fix", "--yes"]);
    assert!(ok, "{out}");
    assert!(out.contains("FIXED: truncated 12 bytes"), "{out}");
    let (ok, out) = check(dir.path(), &[]);
    assert!(ok, "{out}");
}

#[test]
fn a_damaged_base_part_is_named_and_never_fixed() {
    let dir = tempfile::tempdir().unwrap();
    make_dir_with_manifest(dir.path(), "file");
    let base = manifest_files(dir.path(), "base").remove(0);
    let path = dir.path().join(&base);
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let (ok, out) = check(dir.path(), &[]);
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!("{base}: base part DAMAGED at offset")),
        "{out}"
    );
    let (ok, out) = check(dir.path(), &["--fix", "--yes"]);
    assert!(!ok, "{out}");
    assert!(!out.contains("FIXED"), "{out}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "--fix changed a base part"
    );
}

#[test]
fn a_manifest_naming_a_missing_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    make_dir_with_manifest(dir.path(), "file");
    let base = manifest_files(dir.path(), "base").remove(0);
    std::fs::remove_file(dir.path().join(&base)).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .arg("check")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&base), "{stderr}");
}
