//! The kill -9 ledger test (`common/ledger.rs`) of the real `ferrite serve`
//! binary with its log on a write buffer (`log-device wbuf`): every
//! acknowledged write was only guaranteed to be in the buffer, so each
//! restart must recover the buffer into the log file before replaying it.
//! The buffers are small, so destage rounds, reclaim and write-through run
//! while the kills land. The buffer's PM is a mapped file, which survives
//! the process's crash (what SIGKILL is), not a power failure.
//! `FERRITE_CRASH_ITERS` sets the rounds per configuration.

mod common;

use common::ledger::crash_rounds;

#[test]
fn kill_9_loses_no_acknowledged_write_wbuf_log() {
    crash_rounds("wbuf", &["--log-device", "wbuf", "--log-wbuf-size", "1mb"]);
}

#[test]
fn kill_9_loses_no_acknowledged_write_wbuf_log_buffers_elsewhere() {
    let buffers = tempfile::tempdir().unwrap();
    let path = buffers.path().to_str().expect("a UTF-8 temporary path");
    crash_rounds(
        "wbuf, buffers in their own directory",
        &[
            "--log-device",
            "wbuf",
            "--log-wbuf-size",
            "2mb",
            "--log-wbuf-dir",
            path,
        ],
    );
}

/// Starts `ferrite serve` on `dir` with `flags` and expects it to refuse,
/// returning its error output.
fn refused(dir: &std::path::Path, flags: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(["serve", "--port", &common::free_port().to_string(), "--dir"])
        .arg(dir)
        .args(flags)
        .output()
        .expect("ferrite runs");
    assert!(!out.status.success(), "the server started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A log whose buffer is gone is refused (the buffer may hold acknowledged
/// writes the file lacks), and so is another log device on a directory
/// whose log is on a write buffer; with the buffer back, every
/// acknowledged write is there.
#[test]
fn a_log_without_its_buffer_or_on_another_device_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--appendfsync", "always", "--log-device", "wbuf"];
    let (mut child, port) = common::start_server(dir.path(), &flags);
    let mut c = common::Client::connect(port).unwrap();
    for i in 0..50 {
        let key = format!("k{i}");
        let reply = c.call(&[b"SET", key.as_bytes(), b"v"]).unwrap();
        assert_eq!(reply, common::Reply::Simple("OK".into()));
    }
    child.kill().expect("SIGKILL");
    let _ = child.wait();

    let buffer = dir.path().join("appendonly.aof.wbuf.pm");
    let aside = dir.path().join("buffer-aside");
    std::fs::rename(&buffer, &aside).unwrap();
    let stderr = refused(dir.path(), &flags);
    assert!(stderr.contains("does not exist"), "{stderr}");
    std::fs::rename(&aside, &buffer).unwrap();
    let stderr = refused(dir.path(), &["--log-device", "file"]);
    assert!(stderr.contains("use the matching log-device"), "{stderr}");

    let (mut child, port) = common::start_server(dir.path(), &flags);
    let mut c = common::Client::connect(port).unwrap();
    assert_eq!(c.call(&[b"DBSIZE"]).unwrap(), common::Reply::Int(50));
    // INFO's log figures are refreshed by the server's timer: poll until
    // they name the device.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let info = loop {
        let info = match c.call(&[b"INFO", b"persistence"]).unwrap() {
            common::Reply::Bulk(Some(text)) => String::from_utf8(text).unwrap(),
            other => panic!("INFO: {other:?}"),
        };
        if info.contains("ferrite_log_device:wbuf") || std::time::Instant::now() > deadline {
            break info;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(info.contains("ferrite_log_device:wbuf"), "{info}");
    assert!(info.contains("wbuf_blocks:"), "{info}");
    let _ = child.kill();
    let _ = child.wait();
}

/// `ferrite check` and `ferrite export` read a log on a write buffer
/// through its buffer: after a kill -9, with the buffers in their own
/// directory, they need `--log-wbuf-dir`, and with it they see every
/// acknowledged write.
#[test]
fn check_and_export_read_the_log_through_its_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let buffers = tempfile::tempdir().unwrap();
    let wbuf_dir = buffers.path().to_str().expect("a UTF-8 temporary path");
    let flags = [
        "--appendfsync",
        "always",
        "--log-device",
        "wbuf",
        "--log-wbuf-dir",
        wbuf_dir,
    ];
    let (mut child, port) = common::start_server(dir.path(), &flags);
    let mut c = common::Client::connect(port).unwrap();
    for i in 0..20 {
        let key = format!("k{i}");
        let reply = c.call(&[b"SET", key.as_bytes(), b"v"]).unwrap();
        assert_eq!(reply, common::Reply::Simple("OK".into()));
    }
    child.kill().expect("SIGKILL");
    let _ = child.wait();

    let ferrite = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_ferrite"))
            .args(args)
            .output()
            .expect("ferrite runs")
    };
    let data = dir.path().to_str().unwrap();
    let without = ferrite(&["check", data]);
    assert!(!without.status.success(), "checked without the buffer");
    let stderr = String::from_utf8_lossy(&without.stderr);
    assert!(stderr.contains("does not exist"), "{stderr}");

    let with = ferrite(&["check", "--log-wbuf-dir", wbuf_dir, data]);
    let stdout = String::from_utf8_lossy(&with.stdout);
    assert!(with.status.success(), "{stdout}");

    let out = dir.path().join("export.aof");
    let exported = ferrite(&[
        "export",
        "--log-wbuf-dir",
        wbuf_dir,
        data,
        out.to_str().unwrap(),
    ]);
    assert!(
        exported.status.success(),
        "{}",
        String::from_utf8_lossy(&exported.stderr)
    );
    let stdout = String::from_utf8_lossy(&exported.stdout);
    assert!(stdout.contains(": 20 keys"), "{stdout}");
}
