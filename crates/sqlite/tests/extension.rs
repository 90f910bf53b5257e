//! The loadable extension in real hosts: Debian's `sqlite3` CLI and
//! `/usr/bin/python3`'s sqlite3 module (each test is skipped, with the
//! reason printed, where that program is absent), and locking between
//! processes through it.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rusqlite::{Connection, ErrorCode, OpenFlags};

/// The cdylib cargo built beside this test binary.
fn extension() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("deps directory");
    for dir in [deps, deps.parent().unwrap_or(deps)] {
        let candidate = dir.join("libferrite_sqlite.so");
        if candidate.exists() {
            return candidate.with_extension("");
        }
    }
    panic!("libferrite_sqlite.so not found near {}", deps.display());
}

fn program(path: &str) -> Option<PathBuf> {
    let path = Path::new(path);
    if path.exists() {
        return Some(path.to_path_buf());
    }
    eprintln!("skipped: {} is not installed", path.display());
    None
}

fn open_rust(path: &Path, vfs: &str) -> rusqlite::Result<Connection> {
    ferrite_sqlite::register_defaults_linked().expect("register");
    Connection::open_with_flags_and_vfs(path, OpenFlags::default(), vfs)
}

#[test]
fn sqlite3_cli_loads_the_extension() {
    let Some(cli) = program("/usr/bin/sqlite3") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("cli.db");
    let script = format!(
        ".load {}\n.open file:{}?vfs=ferrite-pmem\nPRAGMA journal_mode=WAL;\n\
         CREATE TABLE t(x);\nINSERT INTO t VALUES (1),(2),(39);\nSELECT sum(x) FROM t;\n",
        extension().display(),
        db.display()
    );
    let mut child = Command::new(cli)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sqlite3");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("write script");
    let out = child.wait_with_output().expect("sqlite3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "sqlite3 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.lines().collect::<Vec<_>>(), ["wal", "42"]);
    // The same file, read through the Rust registration.
    let conn = open_rust(&db, "ferrite-pmem").expect("open from Rust");
    let sum: i64 = conn
        .query_row("SELECT sum(x) FROM t", [], |r| r.get(0))
        .expect("sum");
    assert_eq!(sum, 42);
}

/// A Python script that loads the extension, opens `db` on `vfs`, runs
/// `sql`, prints `ready`, waits for a line on stdin, commits, prints `done`.
fn python_holder(python: &Path, db: &Path, vfs: &str, sql: &str) -> std::process::Child {
    let script = format!(
        "import sqlite3, sys\n\
         m = sqlite3.connect(':memory:')\n\
         m.enable_load_extension(True)\n\
         m.load_extension({ext:?})\n\
         c = sqlite3.connect('file:{db}?vfs={vfs}', uri=True, isolation_level=None, timeout=0)\n\
         c.executescript({sql:?})\n\
         print('ready', flush=True)\n\
         sys.stdin.readline()\n\
         if c.in_transaction: c.execute('COMMIT')\n\
         print('done', flush=True)\n",
        ext = extension().display().to_string(),
        db = db.display(),
    );
    Command::new(python)
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn python3")
}

fn expect_line(reader: &mut impl BufRead, want: &str) {
    let mut line = String::new();
    reader.read_line(&mut line).expect("read from child");
    assert_eq!(line.trim(), want);
}

#[test]
fn python_loads_the_extension_and_locks_across_processes() {
    let Some(python) = program("/usr/bin/python3") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    for journal in ["DELETE", "WAL"] {
        let db = dir.path().join(format!("py-{journal}.db"));
        let sql = format!(
            "PRAGMA journal_mode={journal}; CREATE TABLE t(x); INSERT INTO t VALUES (1);\
             BEGIN IMMEDIATE; INSERT INTO t VALUES (2);"
        );
        let mut child = python_holder(&python, &db, "ferrite-file", &sql);
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        expect_line(&mut out, "ready");
        let conn = open_rust(&db, "ferrite-file").expect("open");
        conn.busy_timeout(std::time::Duration::ZERO)
            .expect("no busy wait");
        // Another process holds RESERVED: reading works, writing is busy.
        let n: i64 = conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .expect("read");
        assert_eq!(n, 1, "{journal}: uncommitted row invisible");
        let busy = conn
            .execute_batch("BEGIN IMMEDIATE")
            .expect_err("writer busy");
        assert_eq!(busy.sqlite_error_code(), Some(ErrorCode::DatabaseBusy));
        writeln!(child.stdin.as_mut().expect("stdin")).expect("signal commit");
        expect_line(&mut out, "done");
        assert!(child.wait().expect("python exits").success());
        let n: i64 = conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .expect("read");
        assert_eq!(n, 2, "{journal}: committed row visible");
        conn.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (3); COMMIT;")
            .expect("write after the other process is done");
    }
}

#[test]
fn pm_databases_refuse_a_second_process() {
    let Some(python) = program("/usr/bin/python3") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("pm.db");
    let mut child = python_holder(&python, &db, "ferrite-pmem", "CREATE TABLE t(x);");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    expect_line(&mut out, "ready");
    let refused = open_rust(&db, "ferrite-pmem").and_then(|c| c.execute_batch("SELECT * FROM t"));
    assert_eq!(
        refused
            .expect_err("second process refused")
            .sqlite_error_code(),
        Some(ErrorCode::CannotOpen)
    );
    writeln!(child.stdin.as_mut().expect("stdin")).expect("signal");
    expect_line(&mut out, "done");
    assert!(child.wait().expect("python exits").success());
    let conn = open_rust(&db, "ferrite-pmem").expect("open once the other process is gone");
    conn.execute_batch("INSERT INTO t VALUES (1)")
        .expect("write");
}
