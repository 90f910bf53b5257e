//! [`OpenFile`]: what a VFS file handle does, in safe Rust. The C callbacks
//! in [`crate::vfs`] only translate arguments and results.

use std::path::PathBuf;
use std::sync::Arc;

use libsqlite3_sys as ffi;

use ferrite_io::Device;

use crate::error::{Error, Result};
use crate::lock::DbLock;
use crate::media::{Opened, Shared};
use crate::mode::VfsOptions;
use crate::shm::{Shm, ShmLock};

/// One connection's handle on one file.
#[derive(Debug)]
pub(crate) struct OpenFile {
    shared: Arc<Shared>,
    size_file: Option<std::fs::File>,
    lock_path: PathBuf,
    lock: Option<DbLock>,
    shm: Option<Shm>,
    options: VfsOptions,
    /// Nameless temporary files neither lock nor share.
    temporary: bool,
    /// Name to delete at close (`SQLITE_OPEN_DELETEONCLOSE` with a name).
    pub(crate) delete_on_close: Option<String>,
    /// A rollback journal (`SQLITE_OPEN_MAIN_JOURNAL`): see
    /// [`OpenFile::write`].
    pub(crate) main_journal: bool,
    /// Bytes SQLite may read in place (`PRAGMA mmap_size`, passed down as
    /// `SQLITE_FCNTL_MMAP_SIZE`); 0 turns `xFetch` off.
    mmap_limit: u64,
}

/// Runs the body of a callback SQLite makes into this crate, turning a
/// panic into `fallback`: a panic must never unwind into SQLite's C frames
/// (Rust would abort the host program there). The panic is logged; SQLite
/// sees an I/O error and reports it to the application.
pub(crate) fn guard<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(value) => value,
        Err(panic) => {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!("a SQLite callback panicked ({why}); returning an error to SQLite");
            fallback
        }
    }
}

/// Logs `error` and picks the SQLite code for it: `SQLITE_FULL` for a full
/// medium, else `code`.
pub(crate) fn report(error: &Error, what: &str, code: i32) -> i32 {
    if error.is_no_space() {
        tracing::warn!("sqlite {what}: {error}");
        return ffi::SQLITE_FULL;
    }
    tracing::error!("sqlite {what}: {error}");
    code
}

impl OpenFile {
    pub(crate) fn new(opened: Opened, options: VfsOptions, temporary: bool) -> OpenFile {
        OpenFile {
            shared: opened.shared,
            size_file: opened.size_file,
            lock_path: opened.lock_path,
            lock: None,
            shm: None,
            options,
            temporary,
            delete_on_close: None,
            main_journal: false,
            mmap_limit: 0,
        }
    }

    fn device(&self) -> &dyn Device {
        self.shared.device.as_ref()
    }

    /// `xRead`: a short read is zero-filled and reported as such.
    pub(crate) fn read(&self, buf: &mut [u8], offset: u64) -> i32 {
        match self.device().read_at(offset, buf) {
            Ok(n) if n == buf.len() => ffi::SQLITE_OK,
            Ok(n) => {
                buf[n..].fill(0);
                ffi::SQLITE_IOERR_SHORT_READ
            }
            Err(e) => report(&e.into(), "read", ffi::SQLITE_IOERR_READ),
        }
    }

    /// `xWrite`.
    ///
    /// One write is special on PM: the one that invalidates a rollback
    /// journal's header by zeroing its first bytes, the magic (in
    /// `journal_mode=PERSIST` that write *is* the commit). SQLite assumes a
    /// write that a crash interrupts is *linear* (done from one end), and
    /// the header's fields are laid out so that either end zeroed first
    /// leaves no hot journal. PM gives no such order: the aligned 8-byte
    /// words of a write not yet drained persist in any combination, so a
    /// crash could keep the magic and lose the page count (`nRec`), and
    /// SQLite would then "roll back" zero pages and truncate the committed
    /// database to its old size. So the magic is cleared and persisted
    /// first, and the rest follows: one more drain per such write.
    pub(crate) fn write(&self, data: &[u8], offset: u64) -> i32 {
        let written = if self.invalidates_journal_header(data, offset) {
            self.write_magic_first(data)
        } else {
            self.device().write_at(offset, data)
        };
        match written {
            Ok(()) => ffi::SQLITE_OK,
            Err(e) => report(&e.into(), "write", ffi::SQLITE_IOERR_WRITE),
        }
    }

    /// Whether `data` at `offset` zeroes the first word of a rollback
    /// journal on PM that holds a (nonzero) journal magic now, along with
    /// later bytes.
    fn invalidates_journal_header(&self, data: &[u8], offset: u64) -> bool {
        const WORD: usize = 8;
        if !self.main_journal || !self.options.mode.is_pm() || offset != 0 || data.len() <= WORD {
            return false;
        }
        if data[..WORD].iter().any(|&b| b != 0) {
            return false;
        }
        let mut magic = [0u8; WORD];
        matches!(self.device().read_at(0, &mut magic), Ok(WORD)) && magic != [0; WORD]
    }

    /// Writes `data` at offset 0 so that its first 8-byte word (failure
    /// atomic) is persisted before any later byte is stored.
    fn write_magic_first(&self, data: &[u8]) -> ferrite_io::Result<()> {
        let (magic, rest) = data.split_at(8);
        self.device().write_at(0, magic)?;
        self.device().sync()?;
        self.device().write_at(magic.len() as u64, rest)
    }

    /// `xTruncate`.
    pub(crate) fn truncate(&self, size: u64) -> i32 {
        match self.device().set_len(size) {
            Ok(()) => ffi::SQLITE_OK,
            Err(e) => report(&e.into(), "truncate", ffi::SQLITE_IOERR_TRUNCATE),
        }
    }

    /// `xSync`: `fdatasync` on disk, a drain (and the length) on PM.
    pub(crate) fn sync(&self) -> i32 {
        match self.device().sync() {
            Ok(()) => ffi::SQLITE_OK,
            Err(e) => report(&e.into(), "sync", ffi::SQLITE_IOERR_FSYNC),
        }
    }

    /// `xFetch`: the address of `len` bytes at `offset` inside the PM
    /// mapping, for SQLite to read a page in place instead of copying it;
    /// `None` (SQLite then calls `xRead`) on disk files, past the limit
    /// `PRAGMA mmap_size` set, or past the end.
    ///
    /// SQLite never writes through the address (it is built without
    /// `SQLITE_MMAP_READWRITE`: changes still go through `xWrite`, so
    /// durability is unchanged), and the address stays valid until the
    /// device is dropped, which is after this handle is closed, so
    /// `xUnfetch` has nothing to do.
    pub(crate) fn fetch(&self, offset: u64, len: usize) -> Option<*const u8> {
        let end = offset.checked_add(len as u64)?;
        if self.temporary || end > self.mmap_limit || !self.options.in_place_reads {
            return None;
        }
        self.device().read_ptr(offset, len)
    }

    /// `SQLITE_FCNTL_MMAP_SIZE`: sets the in-place read limit if `limit`
    /// is not negative, and returns the previous one.
    pub(crate) fn set_mmap_limit(&mut self, limit: i64) -> i64 {
        let previous = i64::try_from(self.mmap_limit).unwrap_or(i64::MAX);
        if let Ok(limit) = u64::try_from(limit) {
            self.mmap_limit = limit;
        }
        previous
    }

    /// `xFileSize`. A plain file may have been resized by another process,
    /// so its size comes from `fstat`; PM files are single-process.
    pub(crate) fn size(&self) -> Result<u64> {
        match &self.size_file {
            Some(file) => file
                .metadata()
                .map(|m| m.len())
                .map_err(|e| Error::io("fstat", &self.lock_path, e)),
            None => Ok(self.device().len()),
        }
    }

    fn db_lock(&mut self) -> Result<&mut DbLock> {
        let lock = match self.lock.take() {
            Some(lock) => lock,
            None => DbLock::open(&self.lock_path)?,
        };
        Ok(self.lock.insert(lock))
    }

    /// `xLock`: `SQLITE_OK` or `SQLITE_BUSY`.
    pub(crate) fn lock(&mut self, level: i32) -> i32 {
        if self.temporary {
            return ffi::SQLITE_OK;
        }
        match self.db_lock().and_then(|l| l.lock(level)) {
            Ok(true) => ffi::SQLITE_OK,
            Ok(false) => ffi::SQLITE_BUSY,
            Err(e) => report(&e, "lock", ffi::SQLITE_IOERR_LOCK),
        }
    }

    /// `xUnlock`.
    pub(crate) fn unlock(&mut self, level: i32) -> i32 {
        if self.temporary || self.lock.is_none() {
            return ffi::SQLITE_OK;
        }
        match self.db_lock().and_then(|l| l.unlock(level)) {
            Ok(()) => ffi::SQLITE_OK,
            Err(e) => report(&e, "unlock", ffi::SQLITE_IOERR_UNLOCK),
        }
    }

    /// `xCheckReservedLock`.
    pub(crate) fn reserved(&mut self) -> Result<bool> {
        if self.temporary {
            return Ok(false);
        }
        self.db_lock()?.reserved()
    }

    /// `xDeviceCharacteristics`.
    pub(crate) fn characteristics(&self) -> i32 {
        self.options.device_characteristics()
    }

    /// `xSectorSize`.
    pub(crate) fn sector_size(&self) -> i32 {
        self.options.sector_size()
    }

    fn shm(&mut self) -> Result<&mut Shm> {
        let shm = match self.shm.take() {
            Some(shm) => shm,
            None => {
                let mut path = self.lock_path.clone().into_os_string();
                path.push("-shm");
                Shm::open(&PathBuf::from(path))?
            }
        };
        Ok(self.shm.insert(shm))
    }

    /// `xShmMap`.
    pub(crate) fn shm_map(
        &mut self,
        index: usize,
        size: usize,
        extend: bool,
    ) -> Result<Option<*mut u8>> {
        self.shm()?.map(index, size, extend)
    }

    /// `xShmLock`: `SQLITE_OK` or `SQLITE_BUSY`.
    pub(crate) fn shm_lock(&mut self, offset: u64, n: u64, what: ShmLock) -> i32 {
        match self.shm().and_then(|s| s.lock(offset, n, what)) {
            Ok(true) => ffi::SQLITE_OK,
            Ok(false) => ffi::SQLITE_BUSY,
            Err(e) => report(&e, "shm lock", ffi::SQLITE_IOERR_SHMLOCK),
        }
    }

    /// `xShmUnmap`.
    pub(crate) fn shm_unmap(&mut self, delete: bool) -> i32 {
        match self.shm.take().map(|s| s.close(delete)) {
            None | Some(Ok(())) => ffi::SQLITE_OK,
            Some(Err(e)) => report(&e, "shm unmap", ffi::SQLITE_IOERR_SHMMAP),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::guard;

    #[test]
    fn a_panicking_callback_returns_its_fallback_code() {
        let quiet = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let code = guard(libsqlite3_sys::SQLITE_IOERR_READ, || -> i32 {
            panic!("a bug in a read")
        });
        std::panic::set_hook(quiet);
        assert_eq!(code, libsqlite3_sys::SQLITE_IOERR_READ);
        assert_eq!(guard(libsqlite3_sys::SQLITE_IOERR, || 0), 0);
    }
}
