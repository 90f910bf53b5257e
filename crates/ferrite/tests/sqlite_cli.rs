//! `ferrite sqlite export|import` through the real binary, and the round
//! trip the README shows: a database on `ferrite-pmem` becomes a plain file
//! that stock SQLite opens (by the command or by `VACUUM INTO` on the unix
//! VFS), and a plain file becomes a `ferrite-pmem` database again.

use std::path::Path;
use std::process::{Command, Output};

use rusqlite::{Connection, OpenFlags};

const ROWS: i64 = 500;

/// The tests of this file run one at a time. A `ferrite-pmem` file is
/// owned by one process through an OFD lock, and a child being spawned
/// holds copies of the parent's descriptors until it executes: a test
/// reopening its database while another test spawns `ferrite` can find
/// the lock still held by that child for a moment.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn ferrite(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(args)
        .output()
        .expect("run ferrite")
}

fn open_pmem(path: &Path) -> Connection {
    ferrite_sqlite::register_defaults_linked().expect("register the VFSes");
    let uri = format!("file:{}?vfs=ferrite-pmem", path.display());
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_URI;
    Connection::open_with_flags(uri, flags).expect("open on ferrite-pmem")
}

fn fill(db: &Connection) {
    db.execute_batch("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);")
        .expect("create");
    let tx = db.unchecked_transaction().expect("begin");
    for i in 0..ROWS {
        tx.execute("INSERT INTO t VALUES (?1, ?2)", (i, format!("value {i}")))
            .expect("insert");
    }
    tx.commit().expect("commit");
}

/// The rows and SQLite's own verdict on the file.
fn contents(db: &Connection) -> (i64, String, String) {
    let count = db
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .expect("count");
    let last = db
        .query_row("SELECT v FROM t WHERE id = ?1", [ROWS - 1], |r| r.get(0))
        .expect("last row");
    let check = db
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity");
    (count, last, check)
}

fn expected() -> (i64, String, String) {
    (ROWS, format!("value {}", ROWS - 1), "ok".to_string())
}

#[test]
fn export_then_import_round_trips_through_stock_sqlite() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let pm = dir.path().join("app.db");
    fill(&open_pmem(&pm));
    let stock = Connection::open(&pm).expect("open");
    assert!(
        stock
            .query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
            .is_err(),
        "stock SQLite cannot read a PM device file: the reason the command exists"
    );
    drop(stock);

    let plain = dir.path().join("plain.db");
    let out = ferrite(&[
        "sqlite",
        "export",
        pm.to_str().unwrap(),
        plain.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        contents(&Connection::open(&plain).expect("open plain")),
        expected()
    );

    let again = ferrite(&[
        "sqlite",
        "export",
        pm.to_str().unwrap(),
        plain.to_str().unwrap(),
    ]);
    assert!(
        !again.status.success(),
        "an existing file is never overwritten"
    );

    let back = dir.path().join("back.db");
    let out = ferrite(&[
        "sqlite",
        "import",
        plain.to_str().unwrap(),
        back.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(contents(&open_pmem(&back)), expected());
}

#[test]
fn vacuum_into_the_unix_vfs_writes_a_plain_file() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let pm = dir.path().join("app.db");
    let db = open_pmem(&pm);
    fill(&db);
    let plain = dir.path().join("vacuumed.db");
    db.execute(
        "VACUUM INTO ?1",
        [format!("file:{}?vfs=unix", plain.display())],
    )
    .expect("vacuum into");
    drop(db);
    assert_eq!(
        contents(&Connection::open(&plain).expect("open plain")),
        expected()
    );
}

#[test]
fn export_refuses_a_database_with_a_hot_journal() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let pm = dir.path().join("app.db");
    fill(&open_pmem(&pm));
    // A transaction larger than a one-page cache spills: the journal is
    // synced with its magic and pages reach the database. Leaking the
    // connection leaves them as a crash would.
    let db = open_pmem(&pm);
    db.execute_batch("PRAGMA cache_size=1; BEGIN; UPDATE t SET v = v || printf('%.300c', 'x');")
        .expect("spilling transaction");
    std::mem::forget(db);
    let plain = dir.path().join("plain.db");
    let out = ferrite(&[
        "sqlite",
        "export",
        pm.to_str().unwrap(),
        plain.to_str().unwrap(),
    ]);
    assert!(
        !out.status.success(),
        "exported a database with a hot journal"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("hot rollback journal"), "{stderr}");
    assert!(!plain.exists());
}
