//! SIGTERM and SIGINT to the real binary, as Redis 7.0 handles them: the
//! shutdown waits for the timer (so `DEBUG PAUSE-CRON` holds it and
//! `SHUTDOWN ABORT` cancels it), a save that fails keeps the server
//! serving, and a completed shutdown leaves every acknowledged write
//! readable after a restart.

mod common;

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::{start_server_env, Client, Reply};

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{name} failed");
}

/// Waits for the process to exit; panics after 30 s.
fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        assert!(Instant::now() < deadline, "the server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the server's log holds `line`; panics after 30 s.
fn wait_log(log: &Path, line: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(log)
        .unwrap_or_default()
        .contains(line)
    {
        assert!(Instant::now() < deadline, "no log line {line:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn set_keys(c: &mut Client, n: usize) {
    for i in 0..n {
        let k = format!("k{i}");
        assert_eq!(
            c.call(&[b"SET", k.as_bytes(), k.as_bytes()]).unwrap(),
            Reply::Simple("OK".into())
        );
    }
}

fn assert_keys(c: &mut Client, n: usize) {
    for i in 0..n {
        let k = format!("k{i}");
        assert_eq!(
            c.call(&[b"GET", k.as_bytes()]).unwrap(),
            Reply::Bulk(Some(k.clone().into_bytes()))
        );
    }
}

#[test]
fn shutdown_abort_cancels_a_sigterm_held_by_pause_cron() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let flags = ["--enable-debug-command", "yes"];
    let (mut child, port) = start_server_env(dir.path(), &flags, &[], Some(&log));
    let mut c = Client::connect(port).unwrap();
    assert!(matches!(
        c.call(&[b"SHUTDOWN", b"ABORT"]).unwrap(),
        Reply::Error(e) if e.contains("No shutdown in progress")
    ));
    assert_eq!(
        c.call(&[b"DEBUG", b"PAUSE-CRON", b"1"]).unwrap(),
        Reply::Simple("OK".into())
    );
    set_keys(&mut c, 10);
    signal(&child, "TERM");
    wait_log(&log, "Received SIGTERM");
    assert_eq!(
        c.call(&[b"SHUTDOWN", b"ABORT"]).unwrap(),
        Reply::Simple("OK".into())
    );
    wait_log(&log, "Shutdown manually aborted");
    c.call(&[b"DEBUG", b"PAUSE-CRON", b"0"]).unwrap();
    // The timer runs again and finds nothing to do: the server serves on.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.call(&[b"PING"]).unwrap(), Reply::Simple("PONG".into()));
    assert_keys(&mut c, 10);
    assert!(child.try_wait().unwrap().is_none());
    signal(&child, "TERM");
    assert!(wait_exit(&mut child).success());
    wait_log(&log, "ready to exit, bye bye");
}

#[test]
fn sigterm_keeps_every_acknowledged_write_with_the_log_and_with_dump_rdb() {
    for flags in [
        &["--appendonly", "yes"][..],
        &["--appendonly", "no", "--save", "900 1"][..],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (mut child, port) = start_server_env(dir.path(), flags, &[], None);
        let mut c = Client::connect(port).unwrap();
        set_keys(&mut c, 200);
        signal(&child, "TERM");
        assert!(wait_exit(&mut child).success(), "{flags:?}");
        let (mut child, port) = start_server_env(dir.path(), flags, &[], None);
        assert_keys(&mut Client::connect(port).unwrap(), 200);
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

#[test]
fn a_failed_save_keeps_the_server_serving_until_shutdown_nosave() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let flags = ["--appendonly", "no", "--save", "900 1"];
    let (mut child, port) = start_server_env(dir.path(), &flags, &[], Some(&log));
    let mut c = Client::connect(port).unwrap();
    set_keys(&mut c, 20);
    // A directory where dump.rdb goes makes the save's rename fail.
    std::fs::create_dir(dir.path().join("dump.rdb")).unwrap();
    signal(&child, "INT");
    wait_log(&log, "Error trying to save the DB, can't exit");
    assert_eq!(c.call(&[b"PING"]).unwrap(), Reply::Simple("PONG".into()));
    assert!(matches!(
        c.call(&[b"SHUTDOWN"]).unwrap(),
        Reply::Error(e) if e.contains("Errors trying to SHUTDOWN")
    ));
    assert_keys(&mut c, 20);
    assert!(child.try_wait().unwrap().is_none());
    c.send(&[b"SHUTDOWN", b"NOSAVE"]).unwrap();
    assert!(wait_exit(&mut child).success());
    wait_log(&log, "ready to exit, bye bye");
}

#[test]
fn shutdown_on_sigterm_flags_decide_the_save() {
    // `nosave`: the signal's shutdown writes no dump.rdb.
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--appendonly", "no", "--save", "900 1"];
    let (mut child, port) = start_server_env(dir.path(), &flags, &[], None);
    let mut c = Client::connect(port).unwrap();
    set_keys(&mut c, 5);
    c.call(&[b"CONFIG", b"SET", b"shutdown-on-sigterm", b"nosave"])
        .unwrap();
    signal(&child, "TERM");
    assert!(wait_exit(&mut child).success());
    assert!(!dir.path().join("dump.rdb").exists());

    // `force`: a failed save does not keep the server up.
    let dir = tempfile::tempdir().unwrap();
    let (mut child, port) = start_server_env(dir.path(), &flags, &[], None);
    let mut c = Client::connect(port).unwrap();
    set_keys(&mut c, 5);
    std::fs::create_dir(dir.path().join("dump.rdb")).unwrap();
    c.call(&[b"CONFIG", b"SET", b"shutdown-on-sigterm", b"force"])
        .unwrap();
    signal(&child, "TERM");
    assert!(wait_exit(&mut child).success());
}
