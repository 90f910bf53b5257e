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

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use ferrite_io::{Device, FileDevice, PmemDevice};

use crate::error::{Error, Result};
use crate::lock::{Kind, LockFile, PROCESS_OWNER_BYTE};
use crate::mode::Mode;

/// A device shared by every connection of this process that has the file
/// open.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) device: Box<dyn Device>,
    /// For PM files: the lock that keeps other processes out.
    _owner: Option<LockFile>,
}

impl Shared {
    pub(crate) fn new(device: Box<dyn Device>) -> Shared {
        Shared {
            device,
            _owner: None,
        }
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

/// Files on the file system.
#[derive(Debug)]
pub(crate) struct RealMedia {
    mode: Mode,
}

impl RealMedia {
    pub(crate) fn new(mode: Mode) -> RealMedia {
        RealMedia { mode }
    }

    /// Opens the device of a file not open yet in this process.
    fn open_device(&self, path: &Path) -> Result<Shared> {
        let Some(policy) = self.mode.policy() else {
            return Ok(Shared::new(Box::new(FileDevice::open_existing(path)?)));
        };
        refuse_foreign(path)?;
        let owner = LockFile::open(path, false)?;
        if !owner.try_lock(Kind::Write, PROCESS_OWNER_BYTE, 1)? {
            return Err(Error::InUseByAnotherProcess {
                path: path.to_path_buf(),
                mode: self.mode.name(),
            });
        }
        Ok(Shared {
            device: Box::new(PmemDevice::open(path, policy)?),
            _owner: Some(owner),
        })
    }
}

impl Media for RealMedia {
    fn open(&self, path: &str, create: bool) -> Result<Opened> {
        let path = Path::new(path);
        let existed = path.exists();
        if !existed && !create {
            return Err(Error::NotFound { path: path.into() });
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        if !existed {
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
        Ok(Opened {
            shared,
            lock_path: path.to_path_buf(),
            size_file: (!self.mode.is_pm()).then_some(file),
        })
    }

    fn delete(&self, path: &str, sync_dir: bool) -> Result<()> {
        let path = Path::new(path);
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
        Ok(())
    }

    fn exists(&self, path: &str) -> Result<bool> {
        match std::fs::metadata(path) {
            Ok(meta) => Ok(!meta.is_file() || meta.len() > 0),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io("stat", path, e)),
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
