//! Byte-range locks with Linux open-file-description (OFD) locks, and
//! SQLite's database lock protocol on top of them.
//!
//! OFD locks belong to an open file description, not to a process, so two
//! connections in one process that each open their own descriptor conflict
//! exactly like two processes do, and closing some other descriptor of the
//! file drops nothing. That spares the per-inode bookkeeping the unix VFS
//! needs for POSIX locks. OFD and POSIX locks on the same bytes conflict with
//! each other, so a process using the stock unix VFS on a `ferrite-file`
//! database is excluded correctly too.
//!
//! The byte offsets are SQLite's (`os.h`): a lock byte at 1 GiB and a range
//! of 510 shared bytes after it, which no database page ever uses for data.

#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// SQLite's `PENDING_BYTE`.
pub(crate) const PENDING_BYTE: u64 = 0x4000_0000;
/// SQLite's `RESERVED_BYTE`.
pub(crate) const RESERVED_BYTE: u64 = PENDING_BYTE + 1;
/// First of the shared-lock bytes.
pub(crate) const SHARED_FIRST: u64 = PENDING_BYTE + 2;
/// Number of shared-lock bytes.
pub(crate) const SHARED_SIZE: u64 = 510;
/// A byte past SQLite's lock range that a process holds write-locked while
/// it has a PM database open, to keep other processes out (see
/// [`Error::InUseByAnotherProcess`]).
pub(crate) const PROCESS_OWNER_BYTE: u64 = PENDING_BYTE + 4096;

/// SQLite's lock levels (`SQLITE_LOCK_*`).
pub(crate) const LOCK_NONE: i32 = 0;
pub(crate) const LOCK_SHARED: i32 = 1;
pub(crate) const LOCK_RESERVED: i32 = 2;
pub(crate) const LOCK_PENDING: i32 = 3;
pub(crate) const LOCK_EXCLUSIVE: i32 = 4;

/// The kind of a byte-range lock request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Read,
    Write,
    Unlock,
}

impl Kind {
    fn l_type(self) -> libc::c_short {
        let t = match self {
            Kind::Read => libc::F_RDLCK,
            Kind::Write => libc::F_WRLCK,
            Kind::Unlock => libc::F_UNLCK,
        };
        t as libc::c_short
    }
}

/// A descriptor of its own on a file, for OFD locks.
#[derive(Debug)]
pub(crate) struct LockFile {
    file: File,
    path: PathBuf,
}

impl LockFile {
    /// Opens `path` read-write (creating it if `create`) for locking.
    pub(crate) fn open(path: &Path, create: bool) -> Result<LockFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        Ok(LockFile {
            file,
            path: path.to_path_buf(),
        })
    }

    /// The descriptor's file, for `fstat` and `ftruncate`.
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    fn flock(kind: Kind, start: u64, len: u64) -> libc::flock {
        // SAFETY: `flock` is plain old data; all-zero is a valid value and
        // `l_pid` must be zero for OFD locks.
        let mut lock: libc::flock = unsafe { std::mem::zeroed() };
        lock.l_type = kind.l_type();
        lock.l_whence = libc::SEEK_SET as libc::c_short;
        lock.l_start = start as libc::off_t;
        lock.l_len = len as libc::off_t;
        lock
    }

    fn fcntl(&self, cmd: libc::c_int, lock: &mut libc::flock) -> io::Result<()> {
        loop {
            // SAFETY: the descriptor is open for the life of `self.file`, and
            // `lock` is a valid, exclusively borrowed `flock` for the call.
            let rc = unsafe { libc::fcntl(self.file.as_raw_fd(), cmd, lock as *mut libc::flock) };
            if rc != -1 {
                return Ok(());
            }
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::Interrupted {
                return Err(error);
            }
        }
    }

    /// Sets a lock on `[start, start + len)` without waiting; `Ok(false)`
    /// if another descriptor holds a conflicting lock.
    pub(crate) fn try_lock(&self, kind: Kind, start: u64, len: u64) -> Result<bool> {
        let mut lock = LockFile::flock(kind, start, len);
        match self.fcntl(libc::F_OFD_SETLK, &mut lock) {
            Ok(()) => Ok(true),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) => Ok(false),
            Err(e) => Err(Error::io("fcntl(F_OFD_SETLK)", &self.path, e)),
        }
    }

    /// Sets a lock, waiting for conflicting ones to go.
    pub(crate) fn wait_lock(&self, kind: Kind, start: u64, len: u64) -> Result<()> {
        let mut lock = LockFile::flock(kind, start, len);
        self.fcntl(libc::F_OFD_SETLKW, &mut lock)
            .map_err(|e| Error::io("fcntl(F_OFD_SETLKW)", &self.path, e))
    }

    /// Whether another descriptor holds a lock that conflicts with a write
    /// lock on `[start, start + len)`.
    pub(crate) fn held_elsewhere(&self, start: u64, len: u64) -> Result<bool> {
        let mut lock = LockFile::flock(Kind::Write, start, len);
        self.fcntl(libc::F_OFD_GETLK, &mut lock)
            .map_err(|e| Error::io("fcntl(F_OFD_GETLK)", &self.path, e))?;
        Ok(lock.l_type != libc::F_UNLCK as libc::c_short)
    }
}

/// One connection's lock on a database file: SQLite's five-level protocol
/// (`NONE < SHARED < RESERVED < PENDING < EXCLUSIVE`) over OFD locks.
#[derive(Debug)]
pub(crate) struct DbLock {
    file: LockFile,
    level: i32,
}

impl DbLock {
    /// A connection's lock on `path`, at `NONE`.
    pub(crate) fn open(path: &Path) -> Result<DbLock> {
        Ok(DbLock {
            file: LockFile::open(path, false)?,
            level: LOCK_NONE,
        })
    }

    /// The level held now.
    #[cfg(test)]
    pub(crate) fn level(&self) -> i32 {
        self.level
    }

    /// Raises the lock to `want`; `Ok(false)` (SQLITE_BUSY) if another
    /// connection is in the way. A failed EXCLUSIVE may leave PENDING held,
    /// which keeps new readers out while the writer waits, as SQLite expects.
    pub(crate) fn lock(&mut self, want: i32) -> Result<bool> {
        if self.level >= want {
            return Ok(true);
        }
        let f = &self.file;
        match want {
            LOCK_SHARED => {
                // A writer holding PENDING blocks new readers.
                if !f.try_lock(Kind::Read, PENDING_BYTE, 1)? {
                    return Ok(false);
                }
                let got = f.try_lock(Kind::Read, SHARED_FIRST, SHARED_SIZE);
                f.try_lock(Kind::Unlock, PENDING_BYTE, 1)?;
                if !got? {
                    return Ok(false);
                }
            }
            LOCK_RESERVED => {
                if !f.try_lock(Kind::Write, RESERVED_BYTE, 1)? {
                    return Ok(false);
                }
            }
            _ => {
                if self.level < LOCK_PENDING {
                    if !f.try_lock(Kind::Write, PENDING_BYTE, 1)? {
                        return Ok(false);
                    }
                    self.level = LOCK_PENDING;
                }
                if !f.try_lock(Kind::Write, SHARED_FIRST, SHARED_SIZE)? {
                    return Ok(false);
                }
                self.level = LOCK_EXCLUSIVE;
                return Ok(true);
            }
        }
        self.level = want;
        Ok(true)
    }

    /// Lowers the lock to `want` (`SHARED` or `NONE`).
    pub(crate) fn unlock(&mut self, want: i32) -> Result<()> {
        if self.level <= want {
            return Ok(());
        }
        let f = &self.file;
        if self.level > LOCK_SHARED {
            if want == LOCK_SHARED {
                // Converting our own write lock to a read lock cannot fail.
                f.try_lock(Kind::Read, SHARED_FIRST, SHARED_SIZE)?;
            }
            f.try_lock(Kind::Unlock, PENDING_BYTE, 2)?;
            self.level = LOCK_SHARED;
        }
        if want == LOCK_NONE {
            f.try_lock(Kind::Unlock, PENDING_BYTE, 2 + SHARED_SIZE)?;
            self.level = LOCK_NONE;
        }
        Ok(())
    }

    /// Whether any connection holds RESERVED or more.
    pub(crate) fn reserved(&self) -> Result<bool> {
        if self.level >= LOCK_RESERVED {
            return Ok(true);
        }
        self.file.held_elsewhere(RESERVED_BYTE, 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_descriptors_in_one_process_conflict() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db");
        std::fs::write(&path, b"x").expect("create");
        let mut a = DbLock::open(&path).expect("open");
        let mut b = DbLock::open(&path).expect("open");
        assert!(a.lock(LOCK_SHARED).expect("lock"));
        assert!(b.lock(LOCK_SHARED).expect("lock"));
        assert!(a.lock(LOCK_RESERVED).expect("lock"));
        assert!(
            !b.lock(LOCK_RESERVED).expect("lock"),
            "one writer at a time"
        );
        assert!(b.reserved().expect("check"));
        // A holds PENDING after failing EXCLUSIVE while B reads.
        assert!(!a.lock(LOCK_EXCLUSIVE).expect("lock"));
        assert_eq!(a.level(), LOCK_PENDING);
        let mut c = DbLock::open(&path).expect("open");
        assert!(
            !c.lock(LOCK_SHARED).expect("lock"),
            "PENDING keeps new readers out"
        );
        b.unlock(LOCK_NONE).expect("unlock");
        assert!(a.lock(LOCK_EXCLUSIVE).expect("lock"));
        a.unlock(LOCK_SHARED).expect("unlock");
        assert!(c.lock(LOCK_SHARED).expect("lock"));
        a.unlock(LOCK_NONE).expect("unlock");
        assert!(!c.reserved().expect("check"));
    }
}
