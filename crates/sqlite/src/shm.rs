//! The WAL index ("shared memory"): a `-shm` file beside the database,
//! mapped by every connection, with SQLite's shm locks as OFD locks on it.
//!
//! This follows the unix VFS's protocol, so it works between connections
//! of one process and between processes:
//!
//! - Lock slot `i` is byte `120 + i` of the `-shm` file.
//! - The "dead man switch" byte 128: every connection holds it read-locked
//!   while it has the file mapped. The first one to arrive (it can take a
//!   write lock) truncates the file, since whatever is left in it came from
//!   a crashed process; SQLite then rebuilds the index from the WAL.
//!
//! The index is a cache of the WAL, never a source of durability, so it
//! lives in an ordinary shared mapping and is never flushed, in every mode.

use std::path::{Path, PathBuf};

use ferrite_pmem::{MapOptions, PmemMedium, PmemRegion};

use crate::error::{Error, Result};
use crate::lock::{Kind, LockFile};

/// Byte of the first shm lock slot.
const SHM_LOCK_BASE: u64 = 120;
/// The dead-man-switch byte.
const SHM_DMS: u64 = 128;
/// Address space reserved for one index: 8 Ki regions of 32 KiB, enough for
/// a WAL of 32 Mi frames (SQLite grows the index 32 KiB per 4096 frames).
const SHM_RESERVE: usize = 256 << 20;

/// One connection's view of a WAL index.
#[derive(Debug)]
pub(crate) struct Shm {
    lock: LockFile,
    path: PathBuf,
    region: Option<PmemRegion>,
}

/// What a shm lock request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShmLock {
    Shared,
    Exclusive,
    Unlock,
}

impl Shm {
    /// Opens (creating) the index at `path` and joins its users.
    pub(crate) fn open(path: &Path) -> Result<Shm> {
        let lock = LockFile::open(path, true)?;
        if lock.try_lock(Kind::Write, SHM_DMS, 1)? {
            // Nobody else has the index: what is in it is stale.
            lock.file()
                .set_len(0)
                .map_err(|e| Error::io("ftruncate", path, e))?;
            lock.try_lock(Kind::Read, SHM_DMS, 1)?;
        } else {
            // Another connection holds it; wait out a first opener that is
            // truncating (it holds the write lock only for that).
            lock.wait_lock(Kind::Read, SHM_DMS, 1)?;
        }
        Ok(Shm {
            lock,
            path: path.to_path_buf(),
            region: None,
        })
    }

    /// The address of region `index` of `size` bytes; `None` if it does not
    /// exist and `extend` is false.
    pub(crate) fn map(
        &mut self,
        index: usize,
        size: usize,
        extend: bool,
    ) -> Result<Option<*mut u8>> {
        let needed = (index + 1)
            .checked_mul(size)
            .filter(|&n| n <= SHM_RESERVE)
            .ok_or_else(|| {
                Error::io(
                    "mmap",
                    &self.path,
                    std::io::Error::other("WAL index too large"),
                )
            })?;
        let current = self
            .lock
            .file()
            .metadata()
            .map_err(|e| Error::io("fstat", &self.path, e))?
            .len() as usize;
        if current < needed {
            if !extend {
                return Ok(None);
            }
            self.lock
                .file()
                .set_len(needed as u64)
                .map_err(|e| Error::io("ftruncate", &self.path, e))?;
        }
        let mapped = current.max(needed);
        match &self.region {
            Some(region) if region.len() >= needed => {}
            Some(region) => region.grow(mapped)?,
            None => {
                let options = MapOptions {
                    len: mapped,
                    max_len: SHM_RESERVE,
                    dispatch: None,
                    populate: false,
                };
                self.region = Some(PmemRegion::map_with(&self.path, options)?);
            }
        }
        let base = self.region.as_ref().map(PmemRegion::base_ptr);
        // The region never moves, so the address stays valid until unmap.
        Ok(base.map(|b| b.wrapping_add(index * size)))
    }

    /// Takes or releases shm lock slots `[offset, offset + n)`; `Ok(false)`
    /// (SQLITE_BUSY) on conflict.
    pub(crate) fn lock(&self, offset: u64, n: u64, what: ShmLock) -> Result<bool> {
        let kind = match what {
            ShmLock::Shared => Kind::Read,
            ShmLock::Exclusive => Kind::Write,
            ShmLock::Unlock => Kind::Unlock,
        };
        self.lock.try_lock(kind, SHM_LOCK_BASE + offset, n)
    }

    /// Unmaps; deletes the file too if asked and no one else uses it.
    pub(crate) fn close(self, delete: bool) -> Result<()> {
        drop(self.region);
        if delete && self.lock.try_lock(Kind::Write, SHM_DMS, 1)? {
            match std::fs::remove_file(&self.path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("unlink", &self.path, e)),
            }
        }
        Ok(())
    }
}
