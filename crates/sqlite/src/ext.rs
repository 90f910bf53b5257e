//! The loadable-extension entry point, for hosts that load this library
//! with `.load` (the `sqlite3` CLI) or `load_extension` (Python).
//!
//! A loaded extension must call the host's SQLite through the
//! `sqlite3_api_routines` table the host passes in, not through symbols
//! (the host may have its own, older SQLite: Debian 12 ships 3.40). Only
//! three entries are needed, so this module declares the table's layout up
//! to them (and to `compileoption_used`) instead of binding all of it. The table only ever grows at its
//! end, so the offsets hold for every SQLite since 3.7.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void};

use libsqlite3_sys as ffi;

use crate::vfs::Host;

/// Entries of `sqlite3_api_routines` before `vfs_find` (see sqlite3ext.h).
const ENTRIES_BEFORE_VFS_FIND: usize = 141;

/// The start of `sqlite3_api_routines`, through `compileoption_used`.
#[repr(C)]
struct ApiPrefix {
    _before: [*const c_void; ENTRIES_BEFORE_VFS_FIND],
    vfs_find: Option<unsafe extern "C" fn(*const c_char) -> *mut ffi::sqlite3_vfs>,
    vfs_register: Option<unsafe extern "C" fn(*mut ffi::sqlite3_vfs, c_int) -> c_int>,
    vfs_unregister: Option<unsafe extern "C" fn(*mut ffi::sqlite3_vfs) -> c_int>,
    _between: [*const c_void; ENTRIES_BETWEEN],
    compileoption_used: Option<unsafe extern "C" fn(*const c_char) -> c_int>,
}

/// Entries of `sqlite3_api_routines` after `vfs_unregister` and before
/// `compileoption_used` (from `xthreadsafe` to `compileoption_get`; both
/// exist since SQLite 3.6.23).
const ENTRIES_BETWEEN: usize = 17;

const _: () = assert!(
    std::mem::offset_of!(ApiPrefix, vfs_register)
        == (ENTRIES_BEFORE_VFS_FIND + 1) * std::mem::size_of::<*const c_void>()
);
const _: () = assert!(
    std::mem::offset_of!(ApiPrefix, compileoption_used)
        == (ENTRIES_BEFORE_VFS_FIND + 3 + ENTRIES_BETWEEN) * std::mem::size_of::<*const c_void>()
);

/// Registers `ferrite-file`, `ferrite-mmap`, `ferrite-pmem` and `ferrite-wbuf` with the
/// host that loads this library.
///
/// # Safety
/// Called by SQLite only, with the host's API table.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_extension_init(
    _db: *mut c_void,
    _error: *mut *mut c_char,
    api: *const c_void,
) -> c_int {
    if api.is_null() {
        return ffi::SQLITE_ERROR;
    }
    // SAFETY: a host SQLite passes its sqlite3_api_routines, which is at
    // least as long as this prefix in every version that has VFSes.
    let table = unsafe { &*api.cast::<ApiPrefix>() };
    let (Some(find), Some(register), Some(unregister)) =
        (table.vfs_find, table.vfs_register, table.vfs_unregister)
    else {
        return ffi::SQLITE_ERROR;
    };
    // SAFETY: the option name is NUL-terminated and only read.
    let mmap_readwrite = table
        .compileoption_used
        .is_some_and(|used| unsafe { used(c"MMAP_READWRITE".as_ptr()) } != 0);
    let host = Host {
        find,
        register,
        unregister,
        mmap_readwrite,
    };
    match crate::register_defaults(host) {
        // The VFSes must outlive the connection that loaded them.
        Ok(()) => ffi::SQLITE_OK_LOAD_PERMANENTLY,
        Err(e) => {
            tracing::error!("ferrite-sqlite extension: {e}");
            ffi::SQLITE_ERROR
        }
    }
}

/// The entry point SQLite looks for when the library file is named
/// `libferrite_sqlite.so` and no entry point is given.
///
/// # Safety
/// As [`sqlite3_extension_init`].
#[no_mangle]
pub unsafe extern "C" fn sqlite3_ferritesqlite_init(
    db: *mut c_void,
    error: *mut *mut c_char,
    api: *const c_void,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { sqlite3_extension_init(db, error, api) }
}
