//! [`FileDevice`]: a regular file, `pwrite` + `fdatasync`.

use std::fs::{File, OpenOptions};
use std::num::NonZeroU64;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::Advice;

use crate::device::{Device, DeviceInfo, DeviceKind, SyncScope};
use crate::error::{Error, Result};
use crate::poison::Poison;

/// The page size `release_cache` rounds to (the OS may use larger pages;
/// advice on part of one is harmless).
const PAGE_BYTES: u64 = 4096;

/// A regular file on a disk file system.
///
/// `sync` is `fdatasync`, which also makes a changed length durable. A file
/// that `open` creates is made durable in its directory (the directory is
/// fsynced) before `open` returns.
#[derive(Debug)]
pub struct FileDevice {
    file: File,
    path: PathBuf,
    len: AtomicU64,
    poison: Poison,
}

impl FileDevice {
    /// Opens `path`, creating it (durably) if it does not exist.
    pub fn open(path: impl AsRef<Path>) -> Result<FileDevice> {
        let path = path.as_ref().to_path_buf();
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io("open", &path, e))?;
        if !existed {
            sync_parent_dir(&path)?;
        }
        FileDevice::from_file(file, path)
    }

    /// Opens an existing file; a missing file is an error.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<FileDevice> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io("open", &path, e))?;
        FileDevice::from_file(file, path)
    }

    fn from_file(file: File, path: PathBuf) -> Result<FileDevice> {
        let len = file
            .metadata()
            .map_err(|e| Error::io("stat", &path, e))?
            .len();
        Ok(FileDevice {
            file,
            path,
            len: AtomicU64::new(len),
            poison: Poison::default(),
        })
    }

    fn end_of(&self, offset: u64, len: usize) -> Result<u64> {
        offset.checked_add(len as u64).ok_or(Error::TooLarge {
            path: self.path.clone(),
            offset,
            len: len as u64,
        })
    }
}

/// fsyncs the directory holding `path`, so a new name in it is durable.
pub fn sync_parent_dir(path: &Path) -> Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = File::open(parent).map_err(|e| Error::io("open directory", parent, e))?;
    dir.sync_all()
        .map_err(|e| Error::io("fsync directory", parent, e))
}

impl Device for FileDevice {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io("pread", &self.path, e)),
            }
        }
        Ok(done)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.poison.check(&self.path)?;
        let end = self.end_of(offset, data.len())?;
        self.file
            .write_all_at(data, offset)
            .map_err(|e| Error::io("pwrite", &self.path, e))?;
        self.len.fetch_max(end, Ordering::AcqRel);
        Ok(())
    }

    fn append(&self, data: &[u8]) -> Result<u64> {
        self.poison.check(&self.path)?;
        let offset = self.len.fetch_add(data.len() as u64, Ordering::AcqRel);
        self.end_of(offset, data.len())?;
        if let Err(e) = self.file.write_all_at(data, offset) {
            // The reserved range may now be a hole of zeros or a partial
            // write; either reads like an unsynced write lost in a crash.
            return Err(Error::io("pwrite", &self.path, e));
        }
        Ok(offset)
    }

    fn sync(&self) -> Result<()> {
        self.poison.check(&self.path)?;
        self.file
            .sync_data()
            .map_err(|e| self.poison.poison(Error::io("fdatasync", &self.path, e)))
    }

    fn len(&self) -> u64 {
        self.len.load(Ordering::Acquire)
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.poison.check(&self.path)?;
        self.file
            .set_len(len)
            .map_err(|e| Error::io("ftruncate", &self.path, e))?;
        self.len.store(len, Ordering::Release);
        Ok(())
    }

    fn release_cache(&self, offset: u64, len: u64) {
        // Whole pages only: a partial page at either end may still be
        // written (the log appends into its last page).
        let start = offset.div_ceil(PAGE_BYTES) * PAGE_BYTES;
        let end = offset.saturating_add(len) / PAGE_BYTES * PAGE_BYTES;
        let Some(len) = end.checked_sub(start).and_then(NonZeroU64::new) else {
            return;
        };
        // Clean pages are dropped; a dirty one would only be queued for
        // writeback. Advice: nothing depends on it succeeding.
        if let Err(e) = rustix::fs::fadvise(&self.file, start, Some(len), Advice::DontNeed) {
            tracing::debug!(path = %self.path.display(), "posix_fadvise(DONTNEED): {e}");
        }
    }

    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            kind: DeviceKind::File,
            pmem_mode: None,
            durable_on_write: false,
            sync_scope: SyncScope::AllThreads,
        }
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn poisoned(&self) -> Option<String> {
        self.poison.cause()
    }
}
