//! The data directory's bookkeeping of logs on write buffers
//! (`log-device wbuf`): a rewrite's new log gets its buffer before the
//! log exists, start-up keeps the buffers of the logs the manifest names
//! and removes the others, a replaced log's buffer goes with it (in the
//! data directory or in `log-wbuf-dir`), and a directory holding only an
//! empty legacy write-buffer log still counts as that log.

use std::path::Path;
use std::sync::Arc;

use ferrite_kv::rewrite::dir::{AofDir, Layout};
use ferrite_kv::rewrite::fs::RealFs;
use ferrite_kv::rewrite::manifest::{IncrEntry, IncrKind, Manifest};

const NAME: &str = "appendonly.aof";

fn first_manifest(aof: &AofDir) -> Manifest {
    let first = aof.create_incr(1, IncrKind::Wbuf).unwrap();
    let manifest = Manifest {
        generation: 1,
        bases: vec![],
        incrs: vec![IncrEntry {
            file: first,
            kind: IncrKind::Wbuf,
        }],
    };
    aof.write_manifest(&manifest).unwrap();
    manifest
}

fn exists(dir: &Path, file: &str) -> bool {
    dir.join(file).exists()
}

#[test]
fn buffers_follow_their_logs_in_the_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let aof = AofDir::new(Arc::new(RealFs), dir.path(), NAME);
    let first = first_manifest(&aof);
    assert!(exists(dir.path(), "appendonly.aof.1.incr.wbuf"));
    assert!(exists(dir.path(), "appendonly.aof.1.incr.wbuf.pm"));

    // An orphan buffer (a log no manifest names) goes at start-up; the
    // named log's buffer stays.
    std::fs::write(dir.path().join("appendonly.aof.7.incr.wbuf.pm"), b"").unwrap();
    let removed = aof.remove_orphans(Some(&first)).unwrap();
    assert_eq!(removed, vec!["appendonly.aof.7.incr.wbuf.pm".to_string()]);
    assert!(exists(dir.path(), "appendonly.aof.1.incr.wbuf.pm"));

    // A rewrite: the new log and its buffer, then the old ones go.
    let started = aof.start(&first, IncrKind::Wbuf).unwrap();
    assert!(exists(dir.path(), "appendonly.aof.2.incr.wbuf.pm"));
    let done = aof.finish(&started, vec![]).unwrap();
    let removed = aof.remove_replaced(&started, &done).unwrap();
    assert_eq!(removed, vec!["appendonly.aof.1.incr.wbuf".to_string()]);
    assert!(!exists(dir.path(), "appendonly.aof.1.incr.wbuf.pm"));
    assert!(exists(dir.path(), "appendonly.aof.2.incr.wbuf"));
    assert!(exists(dir.path(), "appendonly.aof.2.incr.wbuf.pm"));
    let Layout::Manifest(read) = aof.layout().unwrap() else {
        panic!("no manifest");
    };
    assert_eq!(read.incrs.last().map(|i| i.kind), Some(IncrKind::Wbuf));
}

#[test]
fn buffers_in_their_own_directory_are_created_and_removed_there() {
    let dir = tempfile::tempdir().unwrap();
    let buffers = tempfile::tempdir().unwrap();
    let aof = AofDir::new(Arc::new(RealFs), dir.path(), NAME).with_wbuf_dir(buffers.path().into());
    let first = first_manifest(&aof);
    assert!(exists(buffers.path(), "appendonly.aof.1.incr.wbuf.pm"));
    assert!(!exists(dir.path(), "appendonly.aof.1.incr.wbuf.pm"));
    let started = aof.start(&first, IncrKind::Wbuf).unwrap();
    let done = aof.finish(&started, vec![]).unwrap();
    aof.remove_replaced(&started, &done).unwrap();
    assert!(!exists(buffers.path(), "appendonly.aof.1.incr.wbuf.pm"));
    assert!(exists(buffers.path(), "appendonly.aof.2.incr.wbuf.pm"));
}

#[test]
fn an_empty_legacy_wbuf_log_is_still_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let aof = AofDir::new(Arc::new(RealFs), dir.path(), NAME);
    std::fs::write(dir.path().join("appendonly.aof.wbuf.pm"), b"").unwrap();
    std::fs::write(dir.path().join("appendonly.aof.wbuf"), b"").unwrap();
    let layout = aof.layout().unwrap();
    assert_eq!(
        layout,
        Layout::Legacy(IncrEntry {
            file: "appendonly.aof.wbuf".into(),
            kind: IncrKind::Wbuf,
        })
    );
    // Without a manifest, the legacy log and its buffer are kept.
    assert!(aof.remove_orphans(None).unwrap().is_empty());
    // A second kind of log beside it is refused, not guessed at.
    std::fs::write(dir.path().join("appendonly.aof"), b"data").unwrap();
    assert!(aof.layout().is_err());
}
