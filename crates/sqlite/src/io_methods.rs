//! The `sqlite3_io_methods` of every file this crate opens: C callbacks that
//! forward to [`OpenFile`].

#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};

use libsqlite3_sys as ffi;

use crate::file::{report, OpenFile};
use crate::shm::ShmLock;

/// What SQLite allocates per open file (`szOsFile`): the base struct SQLite
/// reads, then our handle.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct FileHandle {
    pub(crate) base: ffi::sqlite3_file,
    pub(crate) open: *mut OpenFile,
    pub(crate) vfs: *mut ffi::sqlite3_vfs,
}

/// Version 3: the WAL index methods and memory-mapped page reads
/// (`xFetch`, used when `PRAGMA mmap_size` is set and the file is on PM).
pub(crate) static IO_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(x_close),
    xRead: Some(x_read),
    xWrite: Some(x_write),
    xTruncate: Some(x_truncate),
    xSync: Some(x_sync),
    xFileSize: Some(x_file_size),
    xLock: Some(x_lock),
    xUnlock: Some(x_unlock),
    xCheckReservedLock: Some(x_check_reserved_lock),
    xFileControl: Some(x_file_control),
    xSectorSize: Some(x_sector_size),
    xDeviceCharacteristics: Some(x_device_characteristics),
    xShmMap: Some(x_shm_map),
    xShmLock: Some(x_shm_lock),
    xShmBarrier: Some(x_shm_barrier),
    xShmUnmap: Some(x_shm_unmap),
    xFetch: Some(x_fetch),
    xUnfetch: Some(x_unfetch),
};

/// The handle behind `file`.
///
/// # Safety
/// `file` must be a file `x_open` initialised and not yet closed. SQLite
/// calls the methods of one file from one connection at a time, so the
/// exclusive borrow is not aliased.
unsafe fn open<'a>(file: *mut ffi::sqlite3_file) -> &'a mut OpenFile {
    // SAFETY: per the contract, `file` holds a FileHandle whose `open` came
    // from Box::into_raw in x_open and is freed only by x_close.
    unsafe { &mut *(*file.cast::<FileHandle>()).open }
}

/// A byte buffer SQLite passes, as a slice.
///
/// # Safety
/// `ptr` must be valid for `len` bytes for the call.
unsafe fn bytes<'a>(ptr: *const c_void, len: c_int) -> &'a [u8] {
    let len = usize::try_from(len).unwrap_or(0);
    if len == 0 {
        return &[];
    }
    // SAFETY: per the contract.
    unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }
}

unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    crate::file::guard(ffi::SQLITE_IOERR_CLOSE, || {
        // SAFETY: SQLite closes a file we opened exactly once; afterwards it
        // never touches the handle, so taking the Box back is sound.
        let (open, vfs) = unsafe {
            let handle = &mut *file.cast::<FileHandle>();
            let open = Box::from_raw(handle.open);
            handle.open = std::ptr::null_mut();
            (open, handle.vfs)
        };
        let delete = open.delete_on_close.clone();
        drop(open);
        match delete {
            // SAFETY: the VFS outlives its files.
            Some(name) => match unsafe { crate::vfs::delete(vfs, &name, false) } {
                ffi::SQLITE_IOERR_DELETE_NOENT => ffi::SQLITE_OK,
                code => code,
            },
            None => ffi::SQLITE_OK,
        }
    })
}

unsafe extern "C" fn x_read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    crate::file::guard(ffi::SQLITE_IOERR_READ, || {
        let len = usize::try_from(amount).unwrap_or(0);
        // SAFETY: SQLite passes an open file and a buffer of `amount` bytes.
        let (open, buf) = unsafe {
            (
                open(file),
                std::slice::from_raw_parts_mut(buf.cast::<u8>(), len),
            )
        };
        open.read(buf, offset as u64)
    })
}

unsafe extern "C" fn x_write(
    file: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    crate::file::guard(ffi::SQLITE_IOERR_WRITE, || {
        // SAFETY: SQLite passes an open file and `amount` readable bytes.
        let (open, data) = unsafe { (open(file), bytes(buf, amount)) };
        open.write(data, offset as u64)
    })
}

unsafe extern "C" fn x_truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    crate::file::guard(ffi::SQLITE_IOERR_TRUNCATE, || {
        // SAFETY: SQLite passes an open file.
        unsafe { open(file) }.truncate(size as u64)
    })
}

unsafe extern "C" fn x_sync(file: *mut ffi::sqlite3_file, _flags: c_int) -> c_int {
    crate::file::guard(ffi::SQLITE_IOERR_FSYNC, || {
        // SAFETY: SQLite passes an open file.
        unsafe { open(file) }.sync()
    })
}

unsafe extern "C" fn x_file_size(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    crate::file::guard(ffi::SQLITE_IOERR_FSTAT, || {
        // SAFETY: SQLite passes an open file.
        match unsafe { open(file) }.size() {
            Ok(n) => {
                // SAFETY: SQLite passes a valid i64 to write to.
                unsafe { *size = n as i64 };
                ffi::SQLITE_OK
            }
            Err(e) => report(&e, "file size", ffi::SQLITE_IOERR_FSTAT),
        }
    })
}

unsafe extern "C" fn x_lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    crate::file::guard(ffi::SQLITE_IOERR_LOCK, || {
        // SAFETY: SQLite passes an open file.
        unsafe { open(file) }.lock(level)
    })
}

unsafe extern "C" fn x_unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    crate::file::guard(ffi::SQLITE_IOERR_UNLOCK, || {
        // SAFETY: SQLite passes an open file.
        unsafe { open(file) }.unlock(level)
    })
}

unsafe extern "C" fn x_check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    crate::file::guard(ffi::SQLITE_IOERR_CHECKRESERVEDLOCK, || {
        // SAFETY: SQLite passes an open file.
        match unsafe { open(file) }.reserved() {
            Ok(reserved) => {
                // SAFETY: SQLite passes a valid int to write to.
                unsafe { *out = c_int::from(reserved) };
                ffi::SQLITE_OK
            }
            Err(e) => report(
                &e,
                "check reserved lock",
                ffi::SQLITE_IOERR_CHECKRESERVEDLOCK,
            ),
        }
    })
}

unsafe extern "C" fn x_file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    crate::file::guard(ffi::SQLITE_IOERR, || {
        if op == ffi::SQLITE_FCNTL_MMAP_SIZE && !arg.is_null() {
            // SAFETY: SQLite passes an open file and, for this op, a pointer to
            // an i64 it reads back (the previous limit).
            unsafe {
                let limit = arg.cast::<i64>();
                *limit = open(file).set_mmap_limit(*limit);
            }
            return ffi::SQLITE_OK;
        }
        // No other file control is implemented: SQLite uses its defaults.
        ffi::SQLITE_NOTFOUND
    })
}

unsafe extern "C" fn x_sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    crate::file::guard(4096, || {
        // SAFETY: SQLite passes an open file.
        unsafe { open(file) }.sector_size()
    })
}

unsafe extern "C" fn x_device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    crate::file::guard(0, || {
        // SAFETY: SQLite passes an open file.
        unsafe { open(file) }.characteristics()
    })
}

unsafe extern "C" fn x_shm_map(
    file: *mut ffi::sqlite3_file,
    region: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    crate::file::guard(ffi::SQLITE_IOERR_SHMMAP, || {
        let (Ok(region), Ok(size)) = (usize::try_from(region), usize::try_from(size)) else {
            return ffi::SQLITE_IOERR_SHMMAP;
        };
        // SAFETY: SQLite passes an open file.
        let mapped = unsafe { open(file) }.shm_map(region, size, extend != 0);
        let (code, ptr) = match mapped {
            Ok(Some(ptr)) => (ffi::SQLITE_OK, ptr.cast::<c_void>()),
            Ok(None) => (ffi::SQLITE_OK, std::ptr::null_mut()),
            Err(e) => (
                report(&e, "shm map", ffi::SQLITE_IOERR_SHMMAP),
                std::ptr::null_mut(),
            ),
        };
        // SAFETY: SQLite passes a valid pointer to write the address to.
        unsafe { *out = ptr };
        code
    })
}

unsafe extern "C" fn x_shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    crate::file::guard(ffi::SQLITE_IOERR_SHMLOCK, || {
        let what = if flags & ffi::SQLITE_SHM_UNLOCK != 0 {
            ShmLock::Unlock
        } else if flags & ffi::SQLITE_SHM_EXCLUSIVE != 0 {
            ShmLock::Exclusive
        } else {
            ShmLock::Shared
        };
        // SAFETY: SQLite passes an open file.
        unsafe { open(file) }.shm_lock(offset as u64, n as u64, what)
    })
}

unsafe extern "C" fn x_shm_barrier(_file: *mut ffi::sqlite3_file) {
    // Orders this thread's index accesses before and after, for other
    // connections reading the same shared pages.
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

unsafe extern "C" fn x_shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    // SAFETY: SQLite passes an open file.
    unsafe { open(file) }.shm_unmap(delete != 0)
}

unsafe extern "C" fn x_fetch(
    file: *mut ffi::sqlite3_file,
    offset: i64,
    amount: c_int,
    out: *mut *mut c_void,
) -> c_int {
    crate::file::guard(ffi::SQLITE_IOERR, || {
        let (Ok(offset), Ok(len)) = (u64::try_from(offset), usize::try_from(amount)) else {
            // SAFETY: SQLite passes a valid pointer for the address.
            unsafe { *out = std::ptr::null_mut() };
            return ffi::SQLITE_OK;
        };
        // SAFETY: SQLite passes an open file.
        let ptr = unsafe { open(file) }.fetch(offset, len);
        // SAFETY: SQLite passes a valid pointer for the address. A null one
        // tells it to read the page with xRead instead. SQLite only reads
        // through the address, which stays mapped until the device is dropped
        // (after this file is closed).
        unsafe { *out = ptr.map_or(std::ptr::null_mut(), |p| p.cast_mut().cast::<c_void>()) };
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_unfetch(
    _file: *mut ffi::sqlite3_file,
    _offset: i64,
    _page: *mut c_void,
) -> c_int {
    // The mapping outlives every fetch (see OpenFile::fetch): nothing to
    // release, and nothing to unmap when SQLite asks for all of it.
    ffi::SQLITE_OK
}
