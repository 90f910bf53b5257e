//! SQLite on persistent memory (paper 000, SQLite/PMM): a VFS over
//! Ferrite [`Device`](ferrite_io::Device)s, usable from Rust and as a
//! loadable extension.
//!
//! | VFS | [`Mode`] | `xWrite` | `xSync` |
//! |---|---|---|---|
//! | `ferrite-file` | [`Mode::File`] | `pwrite` | `fdatasync` |
//! | `ferrite-mmap` | [`Mode::Mmap`] (SQLite/MM) | memcpy + flush + fence | length only |
//! | `ferrite-pmem` | [`Mode::Pmem`] (SQLite/PMM) | `copy_nodrain` | drain |
//! | `ferrite-wbuf` | [`Mode::Wbuf`] | staged in a PM write buffer | nothing to order |
//!
//! SQLite's own rollback journal or WAL still provides atomicity; only the
//! I/O underneath changes. Both journal kinds work, with locking between
//! connections and (for `ferrite-file`) between processes. Files of the PM
//! modes are Ferrite PM device files (a 4 KiB header, then the SQLite
//! bytes; see [`export`] and [`import`]) and are single-process.
//!
//! From Rust, register the VFSes once and name one when opening:
//!
//! ```
//! use rusqlite::{Connection, OpenFlags};
//!
//! ferrite_sqlite::register_defaults_linked()?;
//! let dir = tempfile::tempdir()?;
//! let db = Connection::open_with_flags_and_vfs(
//!     dir.path().join("app.db"),
//!     OpenFlags::default(),
//!     "ferrite-pmem",
//! )?;
//! db.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (42);")?;
//! let x: i64 = db.query_row("SELECT x FROM t", [], |r| r.get(0))?;
//! assert_eq!(x, 42);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! From the `sqlite3` CLI or Python, load the `cdylib` this crate builds
//! (`libferrite_sqlite.so`) and open `file:app.db?vfs=ferrite-pmem`; see
//! `docs/sqlite.md`. Crash tests run the same VFS over simulated media
//! with [`SimVfs`].
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

#[cfg(test)]
mod contract_tests;
mod error;
mod ext;
mod file;
mod io_methods;
mod lock;
mod media;
mod mode;
mod portable;
mod shm;
pub mod sim;
mod vfs;
mod wbuf_media;

use std::sync::{Mutex, PoisonError};

pub use error::{Error, Result};
pub use mode::{Mode, VfsOptions};
pub use portable::{export, import};
pub use sim::{CrashPoint, Operation, SeededPrng, SimImages, SimVfs, WBUF_IMAGE_SUFFIX};

use crate::media::RealMedia;
use crate::vfs::Host;

/// Serialises registration, so two threads cannot register a name twice.
static REGISTER: Mutex<()> = Mutex::new(());

/// Registers a VFS named `name` with `host` unless one of that name exists.
fn register_once(host: Host, name: &str, options: VfsOptions) -> Result<()> {
    let _guard = REGISTER.lock().unwrap_or_else(PoisonError::into_inner);
    let c_name = std::ffi::CString::new(name).map_err(|_| Error::BadName {
        name: name.into(),
        reason: "it contains a NUL byte",
    })?;
    if host.has(&c_name) {
        return Ok(());
    }
    let mut options = options;
    options.in_place_reads &= !host.mmap_readwrite;
    let media = Box::new(RealMedia::new(options.mode));
    // Registered for the life of the process.
    vfs::register(host, name, options, media).map(drop)
}

/// Registers `ferrite-file`, `ferrite-mmap`, `ferrite-pmem` and
/// `ferrite-wbuf` with `host`.
fn register_defaults(host: Host) -> Result<()> {
    for mode in Mode::EVERY {
        register_once(host, mode.vfs_name(), VfsOptions::new(mode))?;
    }
    Ok(())
}

/// Registers `ferrite-file`, `ferrite-mmap`, `ferrite-pmem` and
/// `ferrite-wbuf` with the SQLite this program links (the one `rusqlite` uses). Idempotent.
pub fn register_defaults_linked() -> Result<()> {
    register_defaults(Host::linked())
}

/// Registers a VFS of `options` under `name` with the SQLite this program
/// links, for variants (say, without `SAFE_APPEND`); nothing happens if a
/// VFS of that name exists.
pub fn register_linked(name: &str, options: VfsOptions) -> Result<()> {
    register_once(Host::linked(), name, options)
}
