//! `ferrite-wbuf` after the buffer directory changed: a database whose
//! buffer, not closed clean, is in another directory than
//! `FERRITE_WBUF_DIR` is refused with an error naming that buffer, rather
//! than opened as a plain file that silently lacks the buffered writes;
//! pointed back at the buffer's directory, it opens with every commit.
//!
//! The buffer directory is read once, when the VFS is registered, so each
//! step runs in a child process with its own `FERRITE_WBUF_DIR`.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output};

use rusqlite::{Connection, OpenFlags};

const VFS: &str = "ferrite-wbuf";
const ROWS: i64 = 150;

fn open(path: &Path) -> rusqlite::Result<Connection> {
    ferrite_sqlite::register_defaults_linked().expect("register");
    Connection::open_with_flags_and_vfs(path, OpenFlags::default(), VFS)
}

/// The child: `commit` commits `ROWS` rows and exits without closing (no
/// destage, no clean mark), as a crash would; `count` prints the number of
/// rows or the error met.
#[test]
fn guard_child() {
    let (Ok(role), Ok(db)) = (
        std::env::var("WBUF_GUARD_ROLE"),
        std::env::var("WBUF_GUARD_DB"),
    ) else {
        return;
    };
    let path = Path::new(&db);
    if role == "commit" {
        let db = open(path).expect("open");
        db.execute_batch(
            "PRAGMA journal_mode=DELETE; CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);",
        )
        .expect("schema");
        for i in 0..ROWS {
            db.execute("INSERT INTO t VALUES (?1, ?2)", (i, "w".repeat(200)))
                .expect("insert");
        }
        std::process::exit(0);
    }
    let counted = open(path)
        .and_then(|db| db.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0)));
    let line = match counted {
        Ok(n) => format!("GUARD rows={n}\n"),
        Err(e) => format!("GUARD error={e}\n"),
    };
    std::io::stdout()
        .write_all(line.as_bytes())
        .expect("report to the parent");
}

fn child(role: &str, db: &Path, buffers: &Path) -> Output {
    let out = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "guard_child", "--nocapture"])
        .env("WBUF_GUARD_ROLE", role)
        .env("WBUF_GUARD_DB", db)
        .env("FERRITE_WBUF_DIR", buffers)
        .env("FERRITE_WBUF_BYTES", (4u64 << 20).to_string())
        .output()
        .expect("run child");
    assert!(out.status.success(), "child {role} failed: {out:?}");
    out
}

fn guard_line(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("GUARD ").map(str::to_owned))
        .unwrap_or_else(|| panic!("no result from the child: {out:?}"))
}

#[test]
fn a_buffer_left_in_another_directory_is_not_silently_skipped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, second) = (dir.path().join("pm-a"), dir.path().join("pm-b"));
    let db = dir.path().join("moved.db");
    child("commit", &db, &first);
    // The commits are in the first directory's buffer, not closed clean.
    // Refused at open (SQLite reports the VFS's refusal as a file it
    // cannot open), not opened as a file without the table.
    let refused = guard_line(&child("count", &db, &second));
    assert!(refused.contains("unable to open"), "{refused}");
    assert!(
        std::fs::read_dir(&second).map_or(true, |d| d.count() == 0),
        "no buffer may be created for the refused file"
    );
    // Back in the right directory: recovered, every commit there.
    assert_eq!(
        guard_line(&child("count", &db, &first)),
        format!("rows={ROWS}")
    );
    // That open closed the buffer clean, so the file is whole: the second
    // directory may now take over.
    assert_eq!(
        guard_line(&child("count", &db, &second)),
        format!("rows={ROWS}")
    );
}
