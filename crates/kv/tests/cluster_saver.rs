//! The `nodes.conf` saver thread (`cluster/saver.rs`): while a save is
//! stuck in the file system, the table stays lockable and a save request
//! (what the bus thread makes) returns at once; a waiting save returns
//! only once its change is in the file; a failed save is reported to its
//! waiter, leaves the table dirty, and the next save writes it.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use ferrite_kv::cluster::{saver, Settings, Shared};
use ferrite_kv::rewrite::fs::{FsWriter, RewriteFs, SimFs};

/// A file system whose saves wait at their first step (creating the
/// temporary file) while the gate is closed, and fail there while `fail`
/// is set.
#[derive(Debug, Default)]
struct GateFs {
    inner: SimFs,
    closed: Mutex<bool>,
    opened: Condvar,
    fail: Mutex<bool>,
}

impl GateFs {
    fn set_closed(&self, closed: bool) {
        *self.closed.lock().unwrap() = closed;
        self.opened.notify_all();
    }
}

impl RewriteFs for GateFs {
    fn create(&self, path: &Path) -> std::io::Result<Box<dyn FsWriter>> {
        let mut closed = self.closed.lock().unwrap();
        while *closed {
            closed = self.opened.wait(closed).unwrap();
        }
        drop(closed);
        if *self.fail.lock().unwrap() {
            return Err(std::io::Error::other("injected failure"));
        }
        self.inner.create(path)
    }
    fn append(&self, path: &Path) -> std::io::Result<Box<dyn FsWriter>> {
        self.inner.append(path)
    }
    fn open(&self, path: &Path) -> std::io::Result<Box<dyn std::io::Read + Send>> {
        self.inner.open(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> std::io::Result<()> {
        self.inner.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn len(&self, path: &Path) -> std::io::Result<Option<u64>> {
        self.inner.len(path)
    }
}

fn open(fs: Arc<GateFs>) -> Arc<Shared> {
    let settings = Settings {
        enabled: true,
        config_file: "nodes.conf".into(),
        node_timeout_ms: 15000,
        ..Settings::default()
    };
    let shared = Shared::open(Path::new(""), &settings, 7000, fs).expect("open");
    saver::spawn(Arc::clone(&shared)).expect("saver");
    shared
}

fn file(fs: &GateFs) -> String {
    String::from_utf8(fs.inner.read_all(Path::new("nodes.conf")).expect("read")).expect("utf-8")
}

/// Gives slot `slot` to this node and marks the table changed.
fn claim(shared: &Shared, slot: usize) {
    let mut table = shared.lock();
    let me = table.myself;
    table.slots[slot] = Some(me);
    table.dirty = true;
}

#[test]
fn a_stuck_save_blocks_neither_the_table_nor_a_request() {
    let fs = Arc::new(GateFs::default());
    let shared = open(Arc::clone(&fs));
    fs.set_closed(true);
    claim(&shared, 100);
    let waiter = {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || shared.save_if_dirty())
    };
    // The saver is inside the stuck save once it took the text.
    let start = Instant::now();
    while shared.lock().dirty {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the saver never started"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    claim(&shared, 200);
    let asked = Instant::now();
    let generation = shared.request_save_if_dirty().expect("the table is dirty");
    assert!(
        asked.elapsed() < Duration::from_millis(500),
        "a request waited"
    );
    assert!(shared.saves.status(generation).is_none(), "not saved yet");
    assert!(!waiter.is_finished(), "the waiter returned before its save");
    assert!(!file(&fs).contains(" 100\n"), "{}", file(&fs));

    fs.set_closed(false);
    waiter.join().expect("waiter").expect("save");
    assert!(file(&fs).contains(" 100"), "{}", file(&fs));
    shared.saves.wait(generation).expect("second save");
    assert!(file(&fs).contains(" 100 200"), "{}", file(&fs));
    shared.stop.store(true, Ordering::SeqCst);
}

#[test]
fn a_failed_save_is_reported_and_retried() {
    let fs = Arc::new(GateFs::default());
    let shared = open(Arc::clone(&fs));
    *fs.fail.lock().unwrap() = true;
    claim(&shared, 7);
    let error = shared.save_if_dirty().expect_err("the save fails");
    assert!(error.contains("injected failure"), "{error}");
    assert!(shared.lock().dirty, "the change still waits for a save");
    assert!(!file(&fs).contains(" 7\n"));
    *fs.fail.lock().unwrap() = false;
    shared.save_if_dirty().expect("save");
    assert!(file(&fs).contains(" 7\n"), "{}", file(&fs));
    shared.stop.store(true, Ordering::SeqCst);
}
