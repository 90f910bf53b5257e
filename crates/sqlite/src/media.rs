//! Where a VFS's files live: [`Media`] opens, deletes and finds them.
//!
//! [`RealMedia`] puts them on the file system, as [`ferrite_io::FileDevice`]
//! or [`ferrite_io::PmemDevice`] files; the simulated media of crash tests
//! are in [`crate::sim`].
//!
//! Every connection of a process that opens the same file shares one
//! [`Device`] (keyed by device and inode number): a PM device caches the
//! file's length and owns its mapping, so two instances of it would
//! disagree about both.
//!
//! SQLite closes its rollback journal at the end of every transaction and
//! opens it again for the next one. For a PM database the journal's device
//! is kept (open and mapped) by the database's device until the database's
//! last connection closes or the journal is deleted, so reopening it costs
//! one `stat` instead of an open, a map and an unmap.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};

use ferrite_io::{Device, FileDevice, PmemDevice};

use crate::error::{Error, Result};
use crate::lock::{Kind, LockFile, PROCESS_OWNER_BYTE};
use crate::mode::Mode;
use crate::wbuf_media::{BufferedFile, WbufSettings};

/// A device shared by every connection of this process that has the file
/// open.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) device: Box<dyn Device>,
    /// For PM files: the lock that keeps other processes out.
    _owner: Option<LockFile>,
    /// For a PM database: its rollback journal, kept open between
    /// transactions (see the module docs).
    journal: Mutex<Option<Arc<Shared>>>,
    /// For `ferrite-wbuf`: the file behind its buffer (also `device`), to
    /// discard when the file is deleted.
    wbuf: Option<BufferedFile>,
}

impl Shared {
    pub(crate) fn new(device: Box<dyn Device>) -> Shared {
        Shared {
            device,
            _owner: None,
            journal: Mutex::new(None),
            wbuf: None,
        }
    }

    fn journal(&self) -> MutexGuard<'_, Option<Arc<Shared>>> {
        self.journal.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An open file as a [`Media`] hands it to the VFS.
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) shared: Arc<Shared>,
    /// The file that carries this file's SQLite locks, and whose name plus
    /// `-shm` is the WAL index.
    pub(crate) lock_path: PathBuf,
    /// For plain files: a descriptor to `fstat` for the size, since another
    /// process may have changed it.
    pub(crate) size_file: Option<File>,
}

/// Opens, deletes and finds the files of one VFS.
pub(crate) trait Media: Send + Sync + std::fmt::Debug {
    /// Opens `path`, creating it if `create`.
    fn open(&self, path: &str, create: bool) -> Result<Opened>;
    /// Deletes `path`; `sync_dir` makes the deletion durable.
    fn delete(&self, path: &str, sync_dir: bool) -> Result<()>;
    /// Whether `path` exists (and, like the unix VFS, is not empty).
    fn exists(&self, path: &str) -> Result<bool>;
    /// The absolute name of `path`.
    fn full_path(&self, path: &str) -> Result<String>;
}

type Registry = Mutex<HashMap<(u64, u64), Weak<Shared>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The device this process has open for the file `meta` describes.
fn open_device_of(meta: &std::fs::Metadata) -> Option<Arc<Shared>> {
    let map = registry().lock().unwrap_or_else(PoisonError::into_inner);
    map.get(&(meta.dev(), meta.ino())).and_then(Weak::upgrade)
}

/// `stat`, with a missing file as `None`.
fn stat(path: &Path) -> Result<Option<std::fs::Metadata>> {
    match std::fs::metadata(path) {
        Ok(meta) => Ok(Some(meta)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("stat", path, e)),
    }
}

/// The database whose rollback journal `path` is (SQLite names it
/// `<database>-journal`), if this process has it open.
fn database_of_journal(path: &Path) -> Result<Option<Arc<Shared>>> {
    let Some(database) = path
        .to_str()
        .and_then(|p| p.strip_suffix("-journal"))
        .map(Path::new)
    else {
        return Ok(None);
    };
    Ok(stat(database)?.and_then(|meta| open_device_of(&meta)))
}

/// Files on the file system.
#[derive(Debug)]
pub(crate) struct RealMedia {
    mode: Mode,
    /// For `ferrite-wbuf`: where the buffers are and their size.
    wbuf: Option<WbufSettings>,
}

impl RealMedia {
    pub(crate) fn new(mode: Mode) -> RealMedia {
        let wbuf = (mode == Mode::Wbuf).then(WbufSettings::from_env);
        RealMedia { mode, wbuf }
    }

    /// Opens the device of a file not open yet in this process.
    fn open_device(&self, path: &Path) -> Result<Shared> {
        let policy = self.mode.policy();
        if policy.is_none() && self.wbuf.is_none() {
            return Ok(Shared::new(Box::new(FileDevice::open_existing(path)?)));
        }
        if policy.is_some() {
            refuse_foreign(path)?;
        }
        let owner = LockFile::open(path, false)?;
        if !owner.try_lock(Kind::Write, PROCESS_OWNER_BYTE, 1)? {
            return Err(Error::InUseByAnotherProcess {
                path: path.to_path_buf(),
                mode: self.mode.name(),
            });
        }
        let (device, wbuf): (Box<dyn Device>, _) = match (&self.wbuf, policy) {
            (Some(settings), _) => {
                let file = settings.open(path)?;
                (Box::new(file.clone()), Some(file))
            }
            (None, Some(policy)) => (Box::new(PmemDevice::open(path, policy)?), None),
            (None, None) => (Box::new(FileDevice::open_existing(path)?), None),
        };
        Ok(Shared {
            device,
            _owner: Some(owner),
            journal: Mutex::new(None),
            wbuf,
        })
    }

    /// A PM or buffered file this process has open already: one `stat`,
    /// no descriptor (such files need none per connection).
    fn open_in_process(&self, path: &Path) -> Result<Option<Opened>> {
        if !self.mode.owns_device() {
            return Ok(None);
        }
        Ok(stat(path)?
            .and_then(|meta| open_device_of(&meta))
            .map(|shared| Opened {
                shared,
                lock_path: path.to_path_buf(),
                size_file: None,
            }))
    }
}

impl Media for RealMedia {
    fn open(&self, path: &str, create: bool) -> Result<Opened> {
        let path = Path::new(path);
        if let Some(opened) = self.open_in_process(path)? {
            return Ok(opened);
        }
        let existed = path.exists();
        if !existed && !create {
            return Err(Error::NotFound { path: path.into() });
        }
        if let (false, Some(settings)) = (existed, &self.wbuf) {
            // The buffer exists before its file does (module docs of
            // `wbuf_media`).
            settings.create_buffer(path)?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        if !existed && self.wbuf.is_none() {
            ferrite_io::sync_parent_dir(path)?;
        }
        let meta = file.metadata().map_err(|e| Error::io("fstat", path, e))?;
        let key = (meta.dev(), meta.ino());
        let shared = {
            let mut map = registry().lock().unwrap_or_else(PoisonError::into_inner);
            map.retain(|_, shared| shared.strong_count() > 0);
            match map.get(&key).and_then(Weak::upgrade) {
                Some(shared) => shared,
                None => {
                    let shared = Arc::new(self.open_device(path)?);
                    map.insert(key, Arc::downgrade(&shared));
                    shared
                }
            }
        };
        if !existed && self.wbuf.is_some() && needs_dir_sync(shared.device.as_ref()) {
            ferrite_io::sync_parent_dir(path)?;
        }
        if self.mode.owns_device() {
            if let Some(database) = database_of_journal(path)? {
                *database.journal() = Some(shared.clone());
            }
        }
        Ok(Opened {
            shared,
            lock_path: path.to_path_buf(),
            size_file: (!self.mode.owns_device()).then_some(file),
        })
    }

    fn delete(&self, path: &str, sync_dir: bool) -> Result<()> {
        let path = Path::new(path);
        // A buffered file's blocks are not destaged when its device closes:
        // the file is about to go. Should the unlink fail, the blocks stay
        // in PM and the next open recovers them.
        let open = stat(path)?.and_then(|meta| open_device_of(&meta));
        if let Some(file) = open.as_ref().and_then(|shared| shared.wbuf.as_ref()) {
            file.skip_destage();
        }
        if self.mode.owns_device() {
            // Unmap a kept journal now rather than when its database closes.
            if let Some(database) = database_of_journal(path)? {
                database.journal().take();
            }
        }
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NotFound { path: path.into() })
            }
            Err(e) => return Err(Error::io("unlink", path, e)),
        }
        if sync_dir {
            ferrite_io::sync_parent_dir(path)?;
        }
        if let Some(settings) = &self.wbuf {
            // Only now that the file is gone: its buffer is stale.
            settings.remove_stale(path)?;
        }
        drop(open);
        Ok(())
    }

    /// Like the unix VFS: the file exists and is not empty. A PM file is
    /// preallocated, so "empty" is its logical length: the open device's,
    /// or else the one persisted in its header. SQLite asks this of the
    /// rollback journal before every transaction (a hot journal must be
    /// non-empty); a truncated journal is empty, exactly as on disk.
    fn exists(&self, path: &str) -> Result<bool> {
        let Some(meta) = stat(Path::new(path))? else {
            return Ok(false);
        };
        if !meta.is_file() {
            return Ok(true);
        }
        if !self.mode.owns_device() {
            return Ok(meta.len() > 0);
        }
        if let Some(shared) = open_device_of(&meta) {
            return Ok(!shared.device.is_empty());
        }
        if let Some(settings) = &self.wbuf {
            // Blocks in the buffer may lie past the file's end: recover the
            // buffer into the file (its close then marks it clean, so the
            // next open is instant) and ask the file.
            if settings.buffer_path(Path::new(path)).exists() {
                let opened = self.open(path, false)?;
                return Ok(!opened.shared.device.is_empty());
            }
            // No buffer here: a hot journal whose buffer is in another
            // buffer directory must not be played back without it.
            settings.check_elsewhere(Path::new(path))?;
            return Ok(meta.len() > 0);
        }
        match ferrite_io::stored_len(path) {
            Ok(Some(len)) => Ok(len > 0),
            // Not a PM device file: opening it will say so.
            Ok(None) => Ok(meta.len() > 0),
            // A damaged header: opening it will report the damage.
            Err(ferrite_io::Error::Corrupt { .. }) => Ok(true),
            Err(e) => Err(e.into()),
        }
    }

    fn full_path(&self, path: &str) -> Result<String> {
        let absolute = std::path::absolute(path).map_err(|e| Error::io("getcwd", path, e))?;
        absolute
            .into_os_string()
            .into_string()
            .map_err(|_| Error::NotFound { path: path.into() })
    }
}

/// Whether a new file behind a write buffer needs its directory synced.
/// Only on real PM: there a staged write survives a power failure, and the
/// file's name must too, or recovery would find a buffer without its
/// file and drop it as stale. On emulated PM nothing outlives a power
/// failure anyway, and a crash of the process keeps the name without a
/// sync; a rollback journal is created per transaction, and the sync of
/// the disk's directory was the one disk wait left in it.
fn needs_dir_sync(device: &dyn Device) -> bool {
    device.info().pmem_mode == Some(ferrite_pmem::MapMode::RealPm)
}

/// Fails, before anything maps (and so grows) the file, if `path` holds
/// bytes that are not a Ferrite PM device: most likely a plain SQLite
/// database opened with a PM VFS by mistake.
fn refuse_foreign(path: &Path) -> Result<()> {
    use std::io::Read;
    let mut head = Vec::with_capacity(8);
    File::open(path)
        .and_then(|f| f.take(8).read_to_end(&mut head))
        .map_err(|e| Error::io("read", path, e))?;
    if head.is_empty()
        || head.iter().all(|&b| b == 0)
        || head[..] == ferrite_io::PM_MAGIC[..head.len()]
    {
        return Ok(());
    }
    Err(Error::NotPmDevice { path: path.into() })
}

/// A temporary file (SQLite's nameless files: statement journals, sorter
/// runs, temp databases): a plain file, unlinked at once so it goes away
/// with its last descriptor. It is never synced for durability, whatever
/// the mode, as SQLite expects of temporary files.
pub(crate) fn open_temp() -> Result<Opened> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        "ferrite-sqlite-{}-{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let path = std::env::temp_dir().join(name);
    let size_file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| Error::io("open", &path, e))?;
    let device = FileDevice::open_existing(&path);
    let unlinked = std::fs::remove_file(&path).map_err(|e| Error::io("unlink", &path, e));
    let device = device?;
    unlinked?;
    Ok(Opened {
        shared: Arc::new(Shared::new(Box::new(device))),
        lock_path: path,
        size_file: Some(size_file),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pm_journal_is_kept_while_its_database_is_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db_path = dir.path().join("app.db");
        let journal_path = dir.path().join("app.db-journal");
        let (db_name, journal_name) = (
            db_path.to_str().expect("utf-8"),
            journal_path.to_str().expect("utf-8"),
        );
        let media = RealMedia::new(Mode::Pmem);
        let db = media.open(db_name, true).expect("open database");
        let journal = media.open(journal_name, true).expect("open journal");
        // A preallocated PM file with nothing in it does not exist for
        // SQLite, like an empty file on disk.
        assert!(!media.exists(journal_name).expect("exists"));
        journal
            .shared
            .device
            .write_at(0, b"records")
            .expect("write");
        assert!(media.exists(journal_name).expect("exists"));
        let first = Arc::as_ptr(&journal.shared);
        drop(journal);
        let again = media.open(journal_name, false).expect("reopen");
        assert_eq!(Arc::as_ptr(&again.shared), first, "the device was kept");
        again.shared.device.set_len(0).expect("truncate");
        assert!(!media.exists(journal_name).expect("exists"));
        drop(again);

        media.delete(journal_name, false).expect("delete");
        assert!(db.shared.journal().is_none(), "delete unmaps the journal");
        assert!(!media.exists(journal_name).expect("exists"));
        let journal = media.open(journal_name, true).expect("create again");
        assert!(db.shared.journal().is_some());
        drop(journal);
        let kept = Arc::downgrade(db.shared.journal().as_ref().expect("kept"));
        drop(db);
        assert!(kept.upgrade().is_none(), "closing the database frees it");
    }

    #[test]
    fn a_closed_pm_file_exists_by_its_persisted_length() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("data.db");
        let name = path.to_str().expect("utf-8");
        let media = RealMedia::new(Mode::Mmap);
        let opened = media.open(name, true).expect("open");
        opened.shared.device.write_at(0, b"page").expect("write");
        opened.shared.device.sync().expect("sync");
        drop(opened);
        assert!(media.exists(name).expect("exists"));
        std::fs::write(&path, b"SQLite format 3\0").expect("foreign bytes");
        assert!(media.exists(name).expect("foreign file exists"));
        std::fs::write(&path, []).expect("empty");
        assert!(!media.exists(name).expect("empty file"));
    }

    #[test]
    #[allow(unsafe_code)]
    fn fetch_reads_pm_pages_in_place_within_the_limit() {
        use crate::file::OpenFile;
        use crate::mode::VfsOptions;
        let dir = tempfile::tempdir().expect("tempdir");
        for mode in Mode::ALL {
            let path = dir.path().join(format!("{mode}.db"));
            let name = path.to_str().expect("utf-8");
            let media = RealMedia::new(mode);
            let mut file = OpenFile::new(
                media.open(name, true).expect("open"),
                VfsOptions::new(mode),
                false,
            );
            let page = [7u8; 4096];
            assert_eq!(file.write(&page, 4096), libsqlite3_sys::SQLITE_OK);
            assert!(file.fetch(4096, 4096).is_none(), "off until mmap_size");
            assert_eq!(file.set_mmap_limit(1 << 20), 0);
            assert_eq!(file.set_mmap_limit(-1), 1 << 20, "negative only asks");
            let Some(ptr) = file.fetch(4096, 4096) else {
                assert_eq!(mode, Mode::File, "PM files are mapped");
                continue;
            };
            // SAFETY: fetch returned an address of 4096 mapped bytes that
            // stay mapped while `file` is open.
            let read = |p: *const u8| unsafe { std::slice::from_raw_parts(p, 4096).to_vec() };
            assert_eq!(read(ptr), page);
            assert_eq!(file.write(&[9u8; 4096], 4096), libsqlite3_sys::SQLITE_OK);
            assert_eq!(read(ptr), [9u8; 4096], "in place: later writes show");
            assert!(file.fetch(8192, 4096).is_none(), "past the end");
            assert!(
                file.fetch((1 << 20) - 2048, 4096).is_none(),
                "past the limit"
            );
        }
    }
}
