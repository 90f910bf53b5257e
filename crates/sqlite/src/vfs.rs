//! The `sqlite3_vfs` object and its C callbacks: the FFI boundary.
//!
//! Each callback turns C arguments into Rust values, calls safe code in
//! [`crate::media`] or [`crate::file`], and turns the result into an SQLite
//! code. Methods that have nothing to do with storage (randomness, sleep,
//! time, loading extensions) are forwarded to the host's default VFS.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr;

use libsqlite3_sys as ffi;

use crate::error::{Error, Result};
use crate::file::{report, OpenFile};
use crate::io_methods::{FileHandle, IO_METHODS};
use crate::media::{self, Media};
use crate::mode::VfsOptions;

/// Longest path the VFS hands to SQLite, as the unix VFS.
const MAX_PATHNAME: c_int = 512;

/// The three registration functions of the SQLite library in use: the one
/// this crate links (Rust) or the host's (a loaded extension).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Host {
    pub(crate) find: unsafe extern "C" fn(*const c_char) -> *mut ffi::sqlite3_vfs,
    pub(crate) register: unsafe extern "C" fn(*mut ffi::sqlite3_vfs, c_int) -> c_int,
    pub(crate) unregister: unsafe extern "C" fn(*mut ffi::sqlite3_vfs) -> c_int,
    /// The host SQLite was compiled with `SQLITE_MMAP_READWRITE`: it writes
    /// through pages fetched with `xFetch`, so the VFS must not offer them.
    pub(crate) mmap_readwrite: bool,
}

impl Host {
    /// The SQLite this crate links (through `libsqlite3-sys`/`rusqlite`).
    pub(crate) fn linked() -> Host {
        Host {
            find: ffi::sqlite3_vfs_find,
            register: ffi::sqlite3_vfs_register,
            unregister: ffi::sqlite3_vfs_unregister,
            // SAFETY: the name is NUL-terminated; SQLite only reads it.
            mmap_readwrite: unsafe { ffi::sqlite3_compileoption_used(c"MMAP_READWRITE".as_ptr()) }
                != 0,
        }
    }

    /// Whether a VFS of this name is registered.
    pub(crate) fn has(&self, name: &CStr) -> bool {
        // SAFETY: `name` is NUL-terminated; `find` only reads it.
        !unsafe { (self.find)(name.as_ptr()) }.is_null()
    }
}

/// What a registered VFS points at through `pAppData`.
#[derive(Debug)]
struct VfsState {
    media: Box<dyn Media>,
    options: VfsOptions,
    default_vfs: *mut ffi::sqlite3_vfs,
    name: CString,
}

/// A VFS registered with a host SQLite. Dropping it leaves it registered;
/// [`Registration::unregister`] removes it.
#[derive(Debug)]
pub(crate) struct Registration {
    vfs: *mut ffi::sqlite3_vfs,
    host: Host,
}

// SAFETY: the registration only holds pointers to heap objects it owns
// (the vfs struct and its state), which SQLite reads from any thread.
unsafe impl Send for Registration {}
// SAFETY: as above; no method mutates through `&self`.
unsafe impl Sync for Registration {}

/// Seeds the PRNG of the SQLite this crate links
/// (`SQLITE_TESTCTRL_PRNG_SEED`) and restarts it, so the next random bytes
/// SQLite draws (rollback-journal nonces, WAL salts) are a function of
/// `seed` alone; `0` restores the default, seeding from the default VFS's
/// `xRandomness` (`/dev/urandom` on unix).
pub(crate) fn seed_linked_prng(seed: c_int) {
    // SAFETY: PRNG_SEED takes an int and a database pointer, which may be
    // null (then the int is the seed); it only sets a global and resets the
    // PRNG under SQLite's PRNG mutex. The bundled SQLite is built without
    // SQLITE_UNTESTABLE, so the test control exists.
    unsafe {
        ffi::sqlite3_test_control(
            ffi::SQLITE_TESTCTRL_PRNG_SEED,
            seed,
            ptr::null_mut::<ffi::sqlite3>(),
        );
    }
}

fn c_name(name: &str) -> Result<CString> {
    CString::new(name).map_err(|_| Error::BadName {
        name: name.into(),
        reason: "it contains a NUL byte",
    })
}

/// Registers a VFS named `name` over `media` with `host`.
pub(crate) fn register(
    host: Host,
    name: &str,
    options: VfsOptions,
    media: Box<dyn Media>,
) -> Result<Registration> {
    let name = c_name(name)?;
    // SAFETY: a null name asks for the default VFS; `find` has no other
    // precondition.
    let default_vfs = unsafe { (host.find)(ptr::null()) };
    if default_vfs.is_null() {
        return Err(Error::Register {
            name: name.to_string_lossy().into_owned(),
            code: ffi::SQLITE_ERROR,
        });
    }
    let state = Box::into_raw(Box::new(VfsState {
        media,
        options,
        default_vfs,
        name,
    }));
    // SAFETY: `state` was just made from a Box and is valid.
    let z_name = unsafe { (*state).name.as_ptr() };
    let vfs = Box::into_raw(Box::new(vfs_struct(z_name, state.cast())));
    // SAFETY: `vfs` is a fully initialised sqlite3_vfs that stays valid until
    // `unregister` frees it.
    let code = unsafe { (host.register)(vfs, 0) };
    if code != ffi::SQLITE_OK {
        // SAFETY: SQLite refused the VFS, so nothing else points at these.
        let state = unsafe {
            drop(Box::from_raw(vfs));
            Box::from_raw(state)
        };
        return Err(Error::Register {
            name: state.name.to_string_lossy().into_owned(),
            code,
        });
    }
    Ok(Registration { vfs, host })
}

impl Registration {
    /// Unregisters the VFS, so no new connection can use it. The vfs struct
    /// and its state are left allocated on purpose (a few hundred bytes):
    /// connections still open keep calling through them, and nothing tells
    /// us when the last one closes.
    pub(crate) fn unregister(self) {
        // SAFETY: the VFS was registered by `register` and stays valid.
        unsafe { (self.host.unregister)(self.vfs) };
    }
}

fn vfs_struct(z_name: *const c_char, app_data: *mut c_void) -> ffi::sqlite3_vfs {
    ffi::sqlite3_vfs {
        iVersion: 2,
        szOsFile: std::mem::size_of::<FileHandle>() as c_int,
        mxPathname: MAX_PATHNAME,
        pNext: ptr::null_mut(),
        zName: z_name,
        pAppData: app_data,
        xOpen: Some(x_open),
        xDelete: Some(x_delete),
        xAccess: Some(x_access),
        xFullPathname: Some(x_full_pathname),
        xDlOpen: Some(x_dl_open),
        xDlError: Some(x_dl_error),
        xDlSym: Some(x_dl_sym),
        xDlClose: Some(x_dl_close),
        xRandomness: Some(x_randomness),
        xSleep: Some(x_sleep),
        xCurrentTime: Some(x_current_time),
        xGetLastError: Some(x_get_last_error),
        xCurrentTimeInt64: Some(x_current_time_int64),
        xSetSystemCall: None,
        xGetSystemCall: None,
        xNextSystemCall: None,
    }
}

/// The state behind `vfs`.
///
/// # Safety
/// `vfs` must be a VFS made by [`register`] and not yet unregistered.
unsafe fn state<'a>(vfs: *mut ffi::sqlite3_vfs) -> &'a VfsState {
    // SAFETY: per the contract, pAppData is the VfsState made by `register`,
    // alive until `unregister`.
    unsafe { &*(*vfs).pAppData.cast::<VfsState>() }
}

/// A C string argument as UTF-8, or `None` for null or non-UTF-8.
///
/// # Safety
/// `name` is null or a NUL-terminated string valid for the call.
unsafe fn text<'a>(name: *const c_char) -> Option<&'a str> {
    if name.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated per the contract.
    unsafe { CStr::from_ptr(name) }.to_str().ok()
}

unsafe extern "C" fn x_open(
    vfs: *mut ffi::sqlite3_vfs,
    z_name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    crate::file::guard(ffi::SQLITE_CANTOPEN, || {
        // SAFETY: SQLite passes our VFS and szOsFile bytes at `file`; clearing
        // pMethods first means SQLite will not call xClose if the open fails.
        let (state, name) = unsafe {
            (*file).pMethods = ptr::null();
            (state(vfs), text(z_name))
        };
        let opened = match (z_name.is_null(), name) {
            (true, _) => media::open_temp(),
            (false, Some(name)) => state.media.open(name, flags & ffi::SQLITE_OPEN_CREATE != 0),
            (false, None) => return ffi::SQLITE_CANTOPEN,
        };
        let opened = match opened {
            Ok(opened) => opened,
            Err(Error::NotFound { .. }) => return ffi::SQLITE_CANTOPEN,
            Err(e) => return report(&e, "open", ffi::SQLITE_CANTOPEN),
        };
        let mut open = OpenFile::new(opened, state.options, z_name.is_null());
        if flags & ffi::SQLITE_OPEN_DELETEONCLOSE != 0 {
            open.delete_on_close = name.map(str::to_owned);
        }
        open.main_journal = flags & ffi::SQLITE_OPEN_MAIN_JOURNAL != 0;
        let handle = FileHandle {
            base: ffi::sqlite3_file {
                pMethods: &IO_METHODS,
            },
            open: Box::into_raw(Box::new(open)),
            vfs,
        };
        // SAFETY: `file` points at szOsFile = size_of::<FileHandle>() writable
        // bytes, suitably aligned by SQLite's allocator; `out_flags` may be null.
        unsafe {
            ptr::write(file.cast::<FileHandle>(), handle);
            if !out_flags.is_null() {
                *out_flags = flags;
            }
        }
        ffi::SQLITE_OK
    })
}

/// Deletes `name` through the VFS behind `vfs` (also used by xClose for
/// delete-on-close files).
///
/// # Safety
/// As [`state`].
pub(crate) unsafe fn delete(vfs: *mut ffi::sqlite3_vfs, name: &str, sync_dir: bool) -> c_int {
    // SAFETY: forwarded contract.
    let state = unsafe { state(vfs) };
    match state.media.delete(name, sync_dir) {
        Ok(()) => ffi::SQLITE_OK,
        Err(Error::NotFound { .. }) => ffi::SQLITE_IOERR_DELETE_NOENT,
        Err(e) => report(&e, "delete", ffi::SQLITE_IOERR_DELETE),
    }
}

unsafe extern "C" fn x_delete(
    vfs: *mut ffi::sqlite3_vfs,
    z_name: *const c_char,
    sync_dir: c_int,
) -> c_int {
    crate::file::guard(ffi::SQLITE_IOERR_DELETE, || {
        // SAFETY: SQLite passes our VFS and a NUL-terminated name.
        match unsafe { text(z_name) } {
            // SAFETY: `vfs` is ours.
            Some(name) => unsafe { delete(vfs, name, sync_dir != 0) },
            None => ffi::SQLITE_IOERR_DELETE,
        }
    })
}

unsafe extern "C" fn x_access(
    vfs: *mut ffi::sqlite3_vfs,
    z_name: *const c_char,
    _flags: c_int,
    res_out: *mut c_int,
) -> c_int {
    crate::file::guard(ffi::SQLITE_IOERR_ACCESS, || {
        // SAFETY: SQLite passes our VFS and a NUL-terminated name.
        let (state, name) = unsafe { (state(vfs), text(z_name)) };
        let exists = match name.map(|n| state.media.exists(n)) {
            Some(Ok(exists)) => exists,
            Some(Err(e)) => return report(&e, "access", ffi::SQLITE_IOERR_ACCESS),
            None => false,
        };
        // SAFETY: SQLite passes a valid int to write the answer to. Existing
        // files are readable and writable for this VFS (it opens read-write).
        unsafe { *res_out = c_int::from(exists) };
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_full_pathname(
    vfs: *mut ffi::sqlite3_vfs,
    z_name: *const c_char,
    n_out: c_int,
    z_out: *mut c_char,
) -> c_int {
    crate::file::guard(ffi::SQLITE_CANTOPEN, || {
        // SAFETY: SQLite passes our VFS and a NUL-terminated name.
        let (state, name) = unsafe { (state(vfs), text(z_name)) };
        let Some(full) = name.and_then(|n| state.media.full_path(n).ok()) else {
            return ffi::SQLITE_CANTOPEN;
        };
        let bytes = full.as_bytes();
        if bytes.len() + 1 > usize::try_from(n_out).unwrap_or(0) || bytes.contains(&0) {
            return ffi::SQLITE_CANTOPEN;
        }
        // SAFETY: `z_out` has `n_out` writable bytes, checked to fit the name
        // and its NUL.
        unsafe {
            ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), z_out, bytes.len());
            *z_out.add(bytes.len()) = 0;
        }
        ffi::SQLITE_OK
    })
}

/// The host's default VFS, for the methods forwarded to it.
///
/// # Safety
/// As [`state`].
unsafe fn default_vfs(vfs: *mut ffi::sqlite3_vfs) -> *mut ffi::sqlite3_vfs {
    // SAFETY: forwarded contract.
    unsafe { state(vfs) }.default_vfs
}

unsafe extern "C" fn x_dl_open(vfs: *mut ffi::sqlite3_vfs, z: *const c_char) -> *mut c_void {
    // SAFETY: the default VFS is valid for the process's life; its method
    // gets its own VFS pointer and our arguments unchanged.
    unsafe {
        let d = default_vfs(vfs);
        (*d).xDlOpen.map_or(ptr::null_mut(), |f| f(d, z))
    }
}

unsafe extern "C" fn x_dl_error(vfs: *mut ffi::sqlite3_vfs, n: c_int, z: *mut c_char) {
    // SAFETY: as x_dl_open.
    unsafe {
        let d = default_vfs(vfs);
        if let Some(f) = (*d).xDlError {
            f(d, n, z);
        }
    }
}

/// What `xDlSym` returns, as `libsqlite3-sys` spells C's `void (*)(void)`.
type DlSymbol = Option<unsafe extern "C" fn(*mut ffi::sqlite3_vfs, *mut c_void, *const c_char)>;

unsafe extern "C" fn x_dl_sym(
    vfs: *mut ffi::sqlite3_vfs,
    handle: *mut c_void,
    z: *const c_char,
) -> DlSymbol {
    // SAFETY: as x_dl_open.
    unsafe {
        let d = default_vfs(vfs);
        (*d).xDlSym.and_then(|f| f(d, handle, z))
    }
}

unsafe extern "C" fn x_dl_close(vfs: *mut ffi::sqlite3_vfs, handle: *mut c_void) {
    // SAFETY: as x_dl_open.
    unsafe {
        let d = default_vfs(vfs);
        if let Some(f) = (*d).xDlClose {
            f(d, handle);
        }
    }
}

unsafe extern "C" fn x_randomness(vfs: *mut ffi::sqlite3_vfs, n: c_int, out: *mut c_char) -> c_int {
    // SAFETY: as x_dl_open.
    unsafe {
        let d = default_vfs(vfs);
        (*d).xRandomness.map_or(0, |f| f(d, n, out))
    }
}

unsafe extern "C" fn x_sleep(vfs: *mut ffi::sqlite3_vfs, micros: c_int) -> c_int {
    // SAFETY: as x_dl_open.
    unsafe {
        let d = default_vfs(vfs);
        (*d).xSleep.map_or(0, |f| f(d, micros))
    }
}

unsafe extern "C" fn x_current_time(vfs: *mut ffi::sqlite3_vfs, out: *mut f64) -> c_int {
    // SAFETY: as x_dl_open.
    unsafe {
        let d = default_vfs(vfs);
        (*d).xCurrentTime.map_or(ffi::SQLITE_ERROR, |f| f(d, out))
    }
}

unsafe extern "C" fn x_get_last_error(
    vfs: *mut ffi::sqlite3_vfs,
    n: c_int,
    z: *mut c_char,
) -> c_int {
    // SAFETY: as x_dl_open.
    unsafe {
        let d = default_vfs(vfs);
        (*d).xGetLastError.map_or(0, |f| f(d, n, z))
    }
}

unsafe extern "C" fn x_current_time_int64(
    vfs: *mut ffi::sqlite3_vfs,
    out: *mut ffi::sqlite3_int64,
) -> c_int {
    // SAFETY: as x_dl_open; xCurrentTimeInt64 exists from VFS version 2.
    unsafe {
        let d = default_vfs(vfs);
        if (*d).iVersion >= 2 {
            if let Some(f) = (*d).xCurrentTimeInt64 {
                return f(d, out);
            }
        }
        ffi::SQLITE_ERROR
    }
}
