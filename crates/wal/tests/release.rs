//! The log releases durable stretches of its file from the page cache, and
//! never anything that is not durable.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::test_config;
use ferrite_io::{Device, DeviceInfo, SimFile};
use ferrite_wal::{Durability, Wal};

/// A simulated file that records what it is asked to release, with how
/// much of the file was durable (synced) at that moment.
#[derive(Debug)]
struct Recording {
    inner: SimFile,
    synced_len: Mutex<u64>,
    releases: Mutex<Vec<(u64, u64, u64)>>,
}

impl Recording {
    fn new() -> Recording {
        Recording {
            inner: SimFile::new("release.log"),
            synced_len: Mutex::new(0),
            releases: Mutex::new(Vec::new()),
        }
    }

    fn releases(&self) -> Vec<(u64, u64, u64)> {
        self.releases.lock().unwrap().clone()
    }
}

impl Device for Recording {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> ferrite_io::Result<usize> {
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> ferrite_io::Result<()> {
        self.inner.write_at(offset, data)
    }
    fn append(&self, data: &[u8]) -> ferrite_io::Result<u64> {
        self.inner.append(data)
    }
    fn sync(&self) -> ferrite_io::Result<()> {
        // What the sync covers: every write that returned before it began.
        let len = self.inner.len();
        self.inner.sync()?;
        let mut synced = self.synced_len.lock().unwrap();
        *synced = (*synced).max(len);
        Ok(())
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> ferrite_io::Result<()> {
        self.inner.set_len(len)
    }
    fn info(&self) -> DeviceInfo {
        self.inner.info()
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn release_cache(&self, offset: u64, len: u64) {
        let synced = *self.synced_len.lock().unwrap();
        self.releases.lock().unwrap().push((offset, len, synced));
    }
    fn poisoned(&self) -> Option<String> {
        self.inner.poisoned()
    }
}

const RECORD: [u8; 1000] = [7; 1000];

/// Appends `bytes` of records, committing every 64 of them (a sync each
/// at `EveryCommit`).
fn fill(wal: &Wal, bytes: usize) {
    for _ in 0..bytes / RECORD.len() / 64 {
        let mut lsn = 0;
        for _ in 0..64 {
            lsn = wal.append(&RECORD).expect("append");
        }
        wal.commit(lsn).expect("commit");
    }
}

/// Releases are in order, contiguous, whole pages past the header, at
/// least a MiB each, and within what the device had synced when asked.
fn check(releases: &[(u64, u64, u64)]) {
    let mut next = None;
    for &(offset, len, synced) in releases {
        assert!(len >= 1 << 20, "a release of {len} bytes");
        assert_eq!((offset + len) % 4096, 0, "ends inside a page");
        assert!(
            offset + len <= synced,
            "released {offset}+{len}, synced {synced}"
        );
        if let Some(next) = next {
            assert_eq!(offset, next, "releases skip or overlap");
        }
        next = Some(offset + len);
    }
}

#[test]
fn commits_that_sync_release_what_they_made_durable() {
    let device = Arc::new(Recording::new());
    let mut config = test_config(Durability::EveryCommit);
    config.max_in_flight_bytes = 1 << 20;
    let wal = Wal::open(device.clone(), config).expect("open");
    fill(&wal, 5 << 20);
    let releases = device.releases();
    assert!(releases.len() >= 3, "{releases:?}");
    assert!(releases[0].0 > 0, "the header is kept");
    check(&releases);
    // Off: nothing more is released.
    wal.set_release_cache(false);
    fill(&wal, 3 << 20);
    assert_eq!(device.releases(), releases);
    wal.set_release_cache(true);
    fill(&wal, 2 << 20);
    assert!(device.releases().len() > releases.len());
    check(&device.releases());
}

#[test]
fn the_periodic_syncer_releases_what_it_made_durable() {
    let device = Arc::new(Recording::new());
    let mut config = test_config(Durability::Periodic(Duration::from_secs(3600)));
    // No back-pressure: only the syncs below make anything durable.
    config.max_in_flight_bytes = 8 << 20;
    let wal = Wal::open(device.clone(), config).expect("open");
    for round in 1..=3 {
        fill(&wal, 2 << 20);
        wal.sync().expect("sync");
        assert_eq!(device.releases().len(), round);
    }
    check(&device.releases());
    // Sync through the background syncer, which releases after its sync.
    fill(&wal, 2 << 20);
    let before = device.releases().len();
    let durable = wal.durable_lsn();
    wal.sync_soon();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while device.releases().len() == before {
        assert!(
            std::time::Instant::now() < deadline,
            "the syncer released nothing"
        );
        std::thread::yield_now();
    }
    assert!(wal.durable_lsn() > durable);
    check(&device.releases());
}

#[test]
fn a_log_opened_with_release_off_releases_nothing() {
    let device = Arc::new(Recording::new());
    let mut config = test_config(Durability::EveryCommit);
    config.max_in_flight_bytes = 1 << 20;
    config.release_synced_cache = false;
    let wal = Wal::open(device.clone(), config).expect("open");
    fill(&wal, 4 << 20);
    assert!(device.releases().is_empty());
}
