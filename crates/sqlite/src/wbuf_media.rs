//! The files of `ferrite-wbuf`: plain SQLite files on disk, each with its
//! own PM write buffer (`crates/wbuf`) that stages its writes.
//!
//! One buffer per file, in the buffer directory (`FERRITE_WBUF_DIR`): the
//! file's name, a hash of its absolute path (two databases of one name in
//! different directories get different buffers) and `.wbuf`. A file's
//! buffer exists whenever the file does:
//!
//! - **Create:** the buffer file is created empty and made durable (its
//!   directory synced) *before* the file on disk is created. A buffer left
//!   from an earlier file of that name is removed first, so its blocks are
//!   never replayed into the new file.
//! - **Delete:** the file on disk is unlinked first (for a rollback journal
//!   that is the commit point, as on the unix VFS), then the buffer is
//!   discarded without destaging (nothing will read the file again) and its
//!   PM file is unlinked.
//!
//! A crash between the two steps of either leaves a buffer whose file does
//! not exist: that buffer is *stale*, and checking for the file or creating
//! it removes the buffer. A file that exists without a buffer is a plain
//! SQLite file (made by another VFS, or whose buffer was lost with the
//! PM): it gets a new, empty buffer, unless its buffer is elsewhere.
//!
//! - **Buffer directories recorded:** before a file gets its first buffer
//!   in a buffer directory, that directory's absolute path is appended,
//!   durably, to `.ferrite-wbuf-dirs` in the file's own directory. A file
//!   found without a buffer here whose buffer in another recorded
//!   directory was not closed clean is refused (its newest writes are
//!   there, not in the file), naming that buffer, instead of being opened
//!   as a plain file that silently lacks them.
//!
//! `docs/sqlite.md` ("ferrite-wbuf") has the whole argument.

use std::collections::HashSet;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use ferrite_io::{Device, DeviceInfo, Result as IoResult};
use ferrite_pmem::FlushStats;
use ferrite_wbuf::{BufferState, PmemWriteBuffer, WbufConfig, WriteBuffer};

use crate::error::{Error, Result};

/// Where the buffers go when `FERRITE_WBUF_DIR` is not set: tmpfs, which
/// is emulated PM (it survives a crash of the process, not of the machine).
pub(crate) const WBUF_DIR_DEFAULT: &str = "/dev/shm/ferrite-wbuf";

/// PM bytes of a database's (or WAL's) buffer when `FERRITE_WBUF_BYTES` is
/// not set.
pub(crate) const WBUF_BYTES_DEFAULT: usize = 64 << 20;

/// PM bytes of a rollback journal's buffer when `FERRITE_WBUF_JOURNAL_BYTES`
/// is not set. A journal gets a new buffer for each transaction, and
/// creating a buffer allocates all of it, so this one is small: a larger
/// journal still works (the buffer destages, or writes through).
pub(crate) const WBUF_JOURNAL_BYTES_DEFAULT: usize = 2 << 20;

/// The file, in a buffered file's directory, that lists every buffer
/// directory that has held buffers of files there, one absolute path a
/// line.
pub(crate) const DIRS_RECORD: &str = ".ferrite-wbuf-dirs";

/// Bytes per buffer block: SQLite's default page size, so a page write is
/// one block and needs no read of the block's old image.
pub(crate) const WBUF_BLOCK_BYTES: u32 = 4096;

/// Where the buffers of one VFS live and how large each one is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WbufSettings {
    pub(crate) dir: PathBuf,
    pub(crate) capacity_bytes: usize,
    pub(crate) journal_capacity_bytes: usize,
}

impl WbufSettings {
    /// `FERRITE_WBUF_DIR` and `FERRITE_WBUF_BYTES`, or the defaults.
    pub(crate) fn from_env() -> WbufSettings {
        let dir = std::env::var_os("FERRITE_WBUF_DIR")
            .filter(|d| !d.is_empty())
            .map_or_else(|| PathBuf::from(WBUF_DIR_DEFAULT), PathBuf::from);
        let bytes = |name: &str, default: usize| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(default)
        };
        WbufSettings {
            dir,
            capacity_bytes: bytes("FERRITE_WBUF_BYTES", WBUF_BYTES_DEFAULT),
            journal_capacity_bytes: bytes("FERRITE_WBUF_JOURNAL_BYTES", WBUF_JOURNAL_BYTES_DEFAULT),
        }
    }

    /// The buffer settings for the file `path`. A rollback journal's
    /// buffer is smaller and has no destage thread: it lives for one
    /// transaction and is deleted without destaging, so a thread would
    /// only cost a start and a join per transaction (a join waits for the
    /// thread to be scheduled, which on a busy machine takes milliseconds).
    /// A journal larger than its buffer is destaged by its writer, when
    /// the buffer is full.
    fn config(&self, path: &Path) -> WbufConfig {
        let journal = path.to_str().is_some_and(|p| p.ends_with("-journal"));
        if journal {
            return WbufConfig {
                block_bytes: WBUF_BLOCK_BYTES,
                capacity_bytes: self.journal_capacity_bytes,
                background: false,
                max_age: None,
                direct_destage: false,
                ..WbufConfig::default()
            };
        }
        WbufConfig {
            block_bytes: WBUF_BLOCK_BYTES,
            capacity_bytes: self.capacity_bytes,
            ..WbufConfig::default()
        }
    }

    /// The buffer file of the file `path` (absolute).
    pub(crate) fn buffer_path(&self, path: &Path) -> PathBuf {
        buffer_path_in(&self.dir, path)
    }

    /// The buffer directory as an absolute path, as it is recorded.
    fn absolute_dir(&self) -> Result<PathBuf> {
        std::path::absolute(&self.dir).map_err(|e| Error::io("resolve", &self.dir, e))
    }

    /// Before the file `path` gets a buffer: makes sure the record of its
    /// directory lists this buffer directory, durably (once a process for
    /// each pair).
    fn record_dir(&self, path: &Path) -> Result<()> {
        let Some(parent) = path.parent() else {
            return Ok(());
        };
        let record = parent.join(DIRS_RECORD);
        let dir = self.absolute_dir()?;
        let key = (record.clone(), dir.clone());
        static KNOWN: OnceLock<Mutex<HashSet<(PathBuf, PathBuf)>>> = OnceLock::new();
        let known = KNOWN.get_or_init(Mutex::default);
        if known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&key)
        {
            return Ok(());
        }
        if !recorded_dirs(&record)?.contains(&dir) {
            let existed = record.exists();
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&record)
                .map_err(|e| Error::io("open", &record, e))?;
            let mut line = dir.as_os_str().as_bytes().to_vec();
            line.push(b'\n');
            file.write_all(&line)
                .map_err(|e| Error::io("append", &record, e))?;
            file.sync_all()
                .map_err(|e| Error::io("fsync", &record, e))?;
            if !existed {
                ferrite_io::sync_parent_dir(&record)?;
            }
        }
        known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key);
        Ok(())
    }

    /// The file `path` exists but has no buffer here: refuses it if another
    /// buffer directory recorded for its directory holds a buffer of it
    /// that was not closed clean, since the file may lack its newest
    /// writes.
    pub(crate) fn check_elsewhere(&self, path: &Path) -> Result<()> {
        let Some(parent) = path.parent() else {
            return Ok(());
        };
        let here = self.absolute_dir()?;
        for dir in recorded_dirs(&parent.join(DIRS_RECORD))? {
            if dir == here {
                continue;
            }
            let buffer = buffer_path_in(&dir, path);
            let state =
                ferrite_wbuf::inspect(&buffer).map_err(|e| Error::io("read", &buffer, e))?;
            if state == BufferState::Unclean {
                return Err(Error::BufferElsewhere {
                    path: path.to_path_buf(),
                    buffer,
                    dir: here,
                });
            }
        }
        Ok(())
    }

    /// Before the file `path` is created: removes a stale buffer of that
    /// name and creates the empty buffer file, durably.
    pub(crate) fn create_buffer(&self, path: &Path) -> Result<()> {
        self.record_dir(path)?;
        let buffer = self.buffer_path(path);
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| Error::io("create buffer directory", &self.dir, e))?;
        remove_if_present(&buffer)?;
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&buffer)
            .map_err(|e| Error::io("create", &buffer, e))?;
        file.sync_all()
            .map_err(|e| Error::io("fsync", &buffer, e))?;
        ferrite_io::sync_parent_dir(&buffer)?;
        Ok(())
    }

    /// Removes the buffer of `path` if `path` does not exist (a crash
    /// interrupted its creation or deletion); the caller knows it does not.
    pub(crate) fn remove_stale(&self, path: &Path) -> Result<()> {
        remove_if_present(&self.buffer_path(path))
    }

    /// Opens the existing file `path` behind its buffer (a new one if it
    /// has none), recovering the buffer: when this returns, the file holds
    /// every write the buffer acknowledged.
    pub(crate) fn open(&self, path: &Path) -> Result<BufferedFile> {
        let pm_path = self.buffer_path(path);
        if !pm_path.exists() {
            self.check_elsewhere(path)?;
            self.create_buffer(path)?;
        }
        let buffer = WriteBuffer::open(&pm_path, path, self.config(path))?;
        Ok(BufferedFile {
            buffer: Arc::new(buffer),
        })
    }
}

/// The buffer file of the file `path` (absolute) in the directory `dir`.
fn buffer_path_in(dir: &Path, path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    dir.join(format!(
        "{name}-{:016x}.wbuf",
        fnv1a(path.as_os_str().as_bytes())
    ))
}

/// The buffer directories a record lists (none if it does not exist).
fn recorded_dirs(record: &Path) -> Result<Vec<PathBuf>> {
    match std::fs::read(record) {
        Ok(bytes) => Ok(bytes
            .split(|&b| b == b'\n')
            .filter(|line| !line.is_empty())
            .map(|line| PathBuf::from(std::ffi::OsStr::from_bytes(line)))
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Error::io("read", record, e)),
    }
}

/// FNV-1a, 64-bit: a hash that stays the same across builds, since a
/// buffer's name must still be found after an upgrade.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn remove_if_present(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => ferrite_io::sync_parent_dir(path).map_err(Error::from),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("unlink", path, e)),
    }
}

/// A file behind its write buffer, as the VFS's [`Device`].
#[derive(Clone, Debug)]
pub(crate) struct BufferedFile {
    buffer: Arc<PmemWriteBuffer>,
}

impl BufferedFile {
    /// The file is being deleted: when the last handle closes, the
    /// buffer's blocks are left undestaged (the caller then unlinks the
    /// file, and after it the buffer's PM file).
    pub(crate) fn skip_destage(&self) {
        self.buffer.discard();
    }
}

impl Device for BufferedFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> IoResult<usize> {
        self.buffer.read_at(offset, buf)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> IoResult<()> {
        self.buffer.write_at(offset, data)
    }

    fn append(&self, data: &[u8]) -> IoResult<u64> {
        self.buffer.append(data)
    }

    fn sync(&self) -> IoResult<()> {
        self.buffer.sync()
    }

    fn len(&self) -> u64 {
        self.buffer.len()
    }

    fn set_len(&self, len: u64) -> IoResult<()> {
        self.buffer.set_len(len)
    }

    fn info(&self) -> DeviceInfo {
        self.buffer.info()
    }

    fn path(&self) -> &Path {
        self.buffer.path()
    }

    fn flush_stats(&self) -> Option<FlushStats> {
        self.buffer.flush_stats()
    }

    fn poisoned(&self) -> Option<String> {
        self.buffer.poisoned()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.buffer.counters()
    }
}
