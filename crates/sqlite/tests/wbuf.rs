//! `ferrite-wbuf` on real files: every journal mode round-trips through a
//! clean close, a deleted journal leaves nothing behind in the buffer
//! directory, and a process that dies without closing (its buffers never
//! destaged) leaves a database that reopens with every committed row.

use std::path::Path;
use std::process::Command;

use rusqlite::{Connection, OpenFlags};

const VFS: &str = "ferrite-wbuf";

/// Every test of this binary uses one buffer directory, set before the VFS
/// is registered (the settings are read once, at registration). The child
/// of the kill test uses its parent's, which it gets from the environment.
fn buffers() -> &'static Path {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        if std::env::var_os("WBUF_CHILD_DB").is_some() {
            return std::env::var_os("FERRITE_WBUF_DIR")
                .expect("the parent sets the buffer directory")
                .into();
        }
        // Under cargo's scratch directory for tests (`cargo clean` takes
        // it), not /tmp: a static is never dropped, so nothing removes it.
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("wbuf-vfs-buffers-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("buffer dir");
        std::env::set_var("FERRITE_WBUF_DIR", &dir);
        std::env::set_var("FERRITE_WBUF_BYTES", (4u64 << 20).to_string());
        dir
    })
}

fn open(path: &Path) -> Connection {
    buffers();
    ferrite_sqlite::register_defaults_linked().expect("register");
    Connection::open_with_flags_and_vfs(path, OpenFlags::default(), VFS).expect("open")
}

fn count(db: &Connection) -> (i64, i64) {
    db.query_row(
        "SELECT count(*), coalesce(sum(length(v)), 0) FROM t",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .expect("count")
}

fn buffer_files_named(prefix: &str) -> Vec<String> {
    std::fs::read_dir(buffers())
        .expect("read buffer dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

#[test]
fn every_journal_mode_round_trips_through_a_clean_close() {
    let dir = tempfile::tempdir().expect("tempdir");
    for journal in ["DELETE", "TRUNCATE", "PERSIST", "WAL"] {
        let path = dir.path().join(format!("rt-{journal}.db"));
        {
            let db = open(&path);
            let got: String = db
                .query_row(&format!("PRAGMA journal_mode={journal}"), [], |r| r.get(0))
                .expect("journal mode");
            assert_eq!(got.to_uppercase(), journal);
            db.execute_batch(
                "PRAGMA synchronous=FULL; CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);",
            )
            .expect("schema");
            for i in 0..60 {
                db.execute(
                    "INSERT INTO t VALUES (?1, ?2)",
                    (i, "x".repeat(i as usize * 50)),
                )
                .expect("insert");
            }
        }
        // Closed clean: the file on disk holds everything, read by the
        // stock VFS without any buffer.
        let plain = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open with the unix VFS");
        assert_eq!(count(&plain), (60, 59 * 60 / 2 * 50), "{journal}: on disk");
        drop(plain);
        let db = open(&path);
        assert_eq!(count(&db), (60, 59 * 60 / 2 * 50), "{journal}: reopened");
        let check: String = db
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .expect("check");
        assert_eq!(check, "ok", "{journal}");
    }
}

#[test]
fn a_deleted_journal_leaves_no_buffer_and_does_not_exist() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gone.db");
    let db = open(&path);
    db.execute_batch("PRAGMA journal_mode=DELETE; CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB);")
        .expect("schema");
    for i in 0..20 {
        db.execute("INSERT INTO t VALUES (?1, zeroblob(3000))", [i])
            .expect("insert");
        assert!(
            !dir.path().join("gone.db-journal").exists(),
            "journal file deleted"
        );
        assert!(
            buffer_files_named("gone.db-journal").is_empty(),
            "the journal's buffer went with it"
        );
    }
    assert_eq!(
        buffer_files_named("gone.db-").len(),
        1,
        "the database's buffer stays"
    );
    // A second connection sees every commit and no hot journal.
    let other = open(&path);
    assert_eq!(count(&other), (20, 20 * 3000));
}

#[test]
fn a_stale_buffer_is_not_replayed_into_a_new_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("stale.db");
    {
        let db = open(&path);
        db.execute_batch(
            "CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'old');",
        )
        .expect("first life");
    }
    // The file goes away behind the VFS's back, as a crash between the
    // unlink and the buffer's removal would leave it.
    let buffer = buffer_files_named("stale.db-");
    assert_eq!(buffer.len(), 1, "{buffer:?}");
    std::fs::remove_file(&path).expect("unlink");
    let db = open(&path);
    db.execute_batch("CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);")
        .expect("a new database, not the old one's pages");
    assert_eq!(count(&db), (0, 0));
}

/// The child half of the kill test: commits `rows` transactions, prints
/// how many, and exits without closing anything (no destage, no clean
/// mark), as a crash would.
#[test]
fn child_commits_then_dies() {
    let Ok(path) = std::env::var("WBUF_CHILD_DB") else {
        return;
    };
    let db = open(Path::new(&path));
    db.execute_batch("PRAGMA journal_mode=DELETE; CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);")
        .expect("schema");
    for i in 0..200 {
        db.execute("INSERT INTO t VALUES (?1, ?2)", (i, "y".repeat(100)))
            .expect("insert");
    }
    // Half a transaction more, in the journal and the buffer only.
    db.execute_batch("BEGIN; UPDATE t SET v = 'z'; DELETE FROM t WHERE k < 100;")
        .expect("uncommitted");
    std::process::exit(0);
}

#[test]
fn a_process_that_dies_leaves_exactly_its_commits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("died.db");
    let status = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "child_commits_then_dies", "--nocapture"])
        .env("WBUF_CHILD_DB", &path)
        .env("FERRITE_WBUF_DIR", buffers())
        .env("FERRITE_WBUF_BYTES", (4u64 << 20).to_string())
        .status()
        .expect("run child");
    assert!(status.success(), "child failed: {status}");
    let db = open(&path);
    assert_eq!(
        count(&db),
        (200, 200 * 100),
        "rolled back the open transaction"
    );
    let z: i64 = db
        .query_row("SELECT count(*) FROM t WHERE v = 'z'", [], |r| r.get(0))
        .expect("z");
    assert_eq!(z, 0);
    let check: String = db
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("check");
    assert_eq!(check, "ok");
}
