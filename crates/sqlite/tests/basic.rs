//! Each VFS mode with each journal mode: create, write, reopen, read.

use rusqlite::{Connection, OpenFlags};

use ferrite_sqlite::Mode;

fn open(path: &std::path::Path, mode: Mode) -> Connection {
    ferrite_sqlite::register_defaults_linked().expect("register");
    Connection::open_with_flags_and_vfs(path, OpenFlags::default(), mode.vfs_name()).expect("open")
}

#[test]
fn every_mode_and_journal_mode_round_trips() {
    let dir = tempfile::tempdir().expect("tempdir");
    for mode in Mode::ALL {
        for journal in ["DELETE", "TRUNCATE", "PERSIST", "WAL"] {
            let path = dir.path().join(format!("{mode}-{journal}.db"));
            {
                let db = open(&path, mode);
                let got: String = db
                    .query_row(&format!("PRAGMA journal_mode={journal}"), [], |r| r.get(0))
                    .expect("journal mode");
                assert_eq!(got.to_uppercase(), journal);
                db.execute_batch(
                    "PRAGMA synchronous=FULL; CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);",
                )
                .expect("schema");
                for i in 0..40 {
                    db.execute(
                        "INSERT INTO t VALUES (?1, ?2)",
                        (i, "x".repeat(i as usize * 10)),
                    )
                    .expect("insert");
                }
            }
            let db = open(&path, mode);
            let (n, total): (i64, i64) = db
                .query_row("SELECT count(*), sum(length(v)) FROM t", [], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .expect("count");
            assert_eq!((n, total), (40, 39 * 40 / 2 * 10), "{mode} {journal}");
            let check: String = db
                .query_row("PRAGMA integrity_check", [], |r| r.get(0))
                .expect("check");
            assert_eq!(check, "ok");
        }
    }
}

#[test]
fn connections_in_one_process_exclude_each_other() {
    let dir = tempfile::tempdir().expect("tempdir");
    for mode in Mode::ALL {
        for journal in ["DELETE", "WAL"] {
            let path = dir.path().join(format!("two-{mode}-{journal}.db"));
            let a = open(&path, mode);
            a.execute_batch(&format!(
                "PRAGMA journal_mode={journal}; CREATE TABLE t(x);"
            ))
            .expect("schema");
            let b = open(&path, mode);
            b.busy_timeout(std::time::Duration::ZERO)
                .expect("no busy wait");
            a.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (1);")
                .expect("write");
            let n: i64 = b
                .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                .expect("read");
            assert_eq!(n, 0, "{mode} {journal}: uncommitted row invisible");
            assert!(
                b.execute_batch("BEGIN IMMEDIATE").is_err(),
                "{mode} {journal}: one writer"
            );
            a.execute_batch("COMMIT").expect("commit");
            b.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (2); COMMIT;")
                .expect("second writer after the first");
            let n: i64 = a
                .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                .expect("read");
            assert_eq!(n, 2, "{mode} {journal}");
        }
    }
}

#[test]
fn pm_vfs_refuses_a_plain_database_without_touching_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("plain.db");
    {
        let db = Connection::open(&path).expect("open plain");
        db.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
            .expect("write");
    }
    let before = std::fs::read(&path).expect("read");
    let refused = open_result(&path, Mode::Pmem).and_then(|db| db.execute_batch("SELECT * FROM t"));
    assert!(refused.is_err());
    assert_eq!(
        std::fs::read(&path).expect("read"),
        before,
        "file unchanged"
    );
    // Converting makes it usable, and exporting gives the same bytes back.
    let pm = dir.path().join("pm.db");
    ferrite_sqlite::import(&path, &pm).expect("import");
    let n: i64 = open(&pm, Mode::Pmem)
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .expect("read converted");
    assert_eq!(n, 1);
    let back = dir.path().join("back.db");
    ferrite_sqlite::export(&pm, &back).expect("export");
    assert_eq!(std::fs::read(&back).expect("read"), before);
}

fn open_result(path: &std::path::Path, mode: Mode) -> rusqlite::Result<Connection> {
    ferrite_sqlite::register_defaults_linked().expect("register");
    Connection::open_with_flags_and_vfs(path, OpenFlags::default(), mode.vfs_name())
}

/// `PRAGMA mmap_size` makes SQLite read pages through `xFetch` (in place
/// on the PM modes): a second connection must see every commit, across
/// growth and truncation of the file, in every journal mode.
#[test]
fn memory_mapped_reads_see_every_commit() {
    let dir = tempfile::tempdir().expect("tempdir");
    for mode in Mode::ALL {
        for journal in ["DELETE", "TRUNCATE", "WAL"] {
            let path = dir.path().join(format!("mmap-{mode}-{journal}.db"));
            let writer = open(&path, mode);
            writer
                .execute_batch(&format!(
                    "PRAGMA journal_mode={journal}; PRAGMA mmap_size=67108864;
                     PRAGMA auto_vacuum=FULL;
                     CREATE TABLE t(k INTEGER PRIMARY KEY, pad BLOB, r INTEGER);"
                ))
                .expect("schema");
            let reader = open(&path, mode);
            let size: i64 = reader
                .query_row("PRAGMA mmap_size=67108864", [], |r| r.get(0))
                .expect("mmap_size");
            assert_eq!(size, 67_108_864);
            for round in 0..6i64 {
                let rows = if round % 2 == 0 { 300 } else { 20 };
                writer
                    .execute_batch("BEGIN; DELETE FROM t;")
                    .expect("delete");
                for k in 0..rows {
                    writer
                        .execute("INSERT INTO t VALUES (?1, zeroblob(900), ?2)", (k, round))
                        .expect("insert");
                }
                writer.execute_batch("COMMIT").expect("commit");
                let (n, sum): (i64, i64) = reader
                    .query_row("SELECT count(*), sum(r) FROM t", [], |r| {
                        Ok((r.get(0)?, r.get(1)?))
                    })
                    .expect("read");
                assert_eq!((n, sum), (rows, rows * round), "{mode} {journal} {round}");
            }
            let check: String = reader
                .query_row("PRAGMA integrity_check", [], |r| r.get(0))
                .expect("check");
            assert_eq!(check, "ok", "{mode} {journal}");
        }
    }
}
