//! The SQLite file contract, per mode, on the handle the C callbacks
//! forward to: short reads are zero-filled, truncate and sync work, and the
//! lock levels move as SQLite expects between two connections.

use libsqlite3_sys as ffi;

use crate::file::OpenFile;
use crate::lock::{LOCK_EXCLUSIVE, LOCK_NONE, LOCK_RESERVED, LOCK_SHARED};
use crate::media::{Media, RealMedia};
use crate::mode::{Mode, VfsOptions};

fn open(media: &RealMedia, path: &str, mode: Mode) -> OpenFile {
    let opened = media.open(path, true).expect("open");
    OpenFile::new(opened, VfsOptions::new(mode), false)
}

#[test]
fn file_contract_on_every_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    for mode in Mode::ALL {
        let media = RealMedia::new(mode);
        let path = dir.path().join(format!("{mode}.db"));
        let path = path.to_str().expect("utf-8");
        let file = open(&media, path, mode);
        assert_eq!(file.size().expect("size"), 0);
        assert_eq!(file.write(&[7u8; 100], 4096), ffi::SQLITE_OK);
        assert_eq!(file.size().expect("size"), 4196);
        let mut buf = [0xAAu8; 200];
        assert_eq!(file.read(&mut buf, 4096), ffi::SQLITE_IOERR_SHORT_READ);
        assert!(buf[..100].iter().all(|&b| b == 7));
        assert!(
            buf[100..].iter().all(|&b| b == 0),
            "{mode}: short read not zero-filled"
        );
        let mut gap = [0xAAu8; 16];
        assert_eq!(file.read(&mut gap, 100), ffi::SQLITE_OK);
        assert_eq!(gap, [0u8; 16], "{mode}: unwritten bytes read as zero");
        assert_eq!(file.sync(), ffi::SQLITE_OK);
        assert_eq!(file.truncate(4100), ffi::SQLITE_OK);
        assert_eq!(file.size().expect("size"), 4100);
        assert_eq!(file.read(&mut buf[..8], 4096), ffi::SQLITE_IOERR_SHORT_READ);
        assert_eq!(&buf[..8], &[7, 7, 7, 7, 0, 0, 0, 0]);
        assert_eq!(file.sync(), ffi::SQLITE_OK);
        drop(file);
        let file = open(&media, path, mode);
        assert_eq!(
            file.size().expect("size"),
            4100,
            "{mode}: length survives reopen"
        );
        assert!(media.exists(path).expect("exists"));
        drop(file);
        media.delete(path, true).expect("delete");
        assert!(!media.exists(path).expect("exists"));
    }
}

#[test]
fn lock_transitions_between_two_connections() {
    let dir = tempfile::tempdir().expect("tempdir");
    for mode in Mode::ALL {
        let media = RealMedia::new(mode);
        let path = dir.path().join(format!("{mode}-lock.db"));
        let path = path.to_str().expect("utf-8");
        let mut a = open(&media, path, mode);
        let mut b = open(&media, path, mode);
        assert_eq!(a.lock(LOCK_SHARED), ffi::SQLITE_OK);
        assert_eq!(b.lock(LOCK_SHARED), ffi::SQLITE_OK);
        assert!(!b.reserved().expect("check"));
        assert_eq!(a.lock(LOCK_RESERVED), ffi::SQLITE_OK);
        assert!(b.reserved().expect("check"));
        assert_eq!(
            b.lock(LOCK_RESERVED),
            ffi::SQLITE_BUSY,
            "{mode}: one writer"
        );
        assert_eq!(
            a.lock(LOCK_EXCLUSIVE),
            ffi::SQLITE_BUSY,
            "{mode}: reader in the way"
        );
        assert_eq!(b.unlock(LOCK_NONE), ffi::SQLITE_OK);
        assert_eq!(
            b.lock(LOCK_SHARED),
            ffi::SQLITE_BUSY,
            "{mode}: PENDING keeps readers out"
        );
        assert_eq!(a.lock(LOCK_EXCLUSIVE), ffi::SQLITE_OK);
        assert_eq!(a.unlock(LOCK_SHARED), ffi::SQLITE_OK);
        assert_eq!(b.lock(LOCK_SHARED), ffi::SQLITE_OK);
        assert_eq!(a.unlock(LOCK_NONE), ffi::SQLITE_OK);
        assert_eq!(b.lock(LOCK_EXCLUSIVE), ffi::SQLITE_OK);
        assert_eq!(b.unlock(LOCK_NONE), ffi::SQLITE_OK);
    }
}

/// In-place reads are offered on the mapped modes once SQLite sets a mmap
/// limit, and never when the options turn them off (a host SQLite built
/// with `SQLITE_MMAP_READWRITE` would write through them).
#[test]
fn fetch_is_refused_when_in_place_reads_are_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    for mode in [Mode::Mmap, Mode::Pmem] {
        let media = RealMedia::new(mode);
        let path = dir.path().join(format!("{mode}-fetch.db"));
        let path = path.to_str().expect("utf-8");
        for in_place_reads in [true, false] {
            let opened = media.open(path, true).expect("open");
            let options = VfsOptions {
                in_place_reads,
                ..VfsOptions::new(mode)
            };
            let mut file = OpenFile::new(opened, options, false);
            assert_eq!(file.write(&[9u8; 4096], 0), ffi::SQLITE_OK);
            file.set_mmap_limit(1 << 20);
            assert_eq!(
                file.fetch(0, 4096).is_some(),
                in_place_reads,
                "{mode}: in_place_reads={in_place_reads}"
            );
        }
    }
}
