//! The [`Device`] trait: a durable file, the only way the layers above
//! reach storage.

use std::fmt;
use std::path::Path;

use ferrite_pmem::{FlushStats, MapMode};

use crate::error::Result;

/// Which backend a device is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// A regular file: `pwrite` + `fdatasync`.
    File,
    /// A file mapped into memory; every write is copied with cached stores,
    /// flushed and fenced before it returns (the paper's SQLite/MM).
    Mmap,
    /// Persistent memory through the libpmem-style primitives
    /// (`copy_nodrain` + `drain`).
    Pmem,
    /// The simulated disk file of crash tests.
    SimFile,
    /// A file on disk behind a persistent-memory write buffer
    /// (`ferrite-wbuf`): durable once staged in PM, destaged later.
    Wbuf,
}

impl DeviceKind {
    /// Lower-case name for configuration and reports.
    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::File => "file",
            DeviceKind::Mmap => "mmap",
            DeviceKind::Pmem => "pmem",
            DeviceKind::SimFile => "simfile",
            DeviceKind::Wbuf => "wbuf",
        }
    }
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// When a [`Device::sync`] makes writes durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyncScope {
    /// `sync` makes durable every write that returned before `sync` was
    /// called, from any thread.
    AllThreads,
    /// `sync` makes durable the writes of the *calling thread* only
    /// (persistent memory drained at sync time: a fence orders only its own
    /// thread's stores). Use only where each thread syncs what it wrote, as
    /// SQLite does within a transaction.
    CallingThread,
}

/// What a device is and what its durability promises are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The backend.
    pub kind: DeviceKind,
    /// For PM-backed devices, whether the memory is real, emulated or
    /// simulated; `None` for disk files.
    pub pmem_mode: Option<MapMode>,
    /// Every write is durable when it returns (no `sync` needed for data;
    /// `sync` may still be needed for the length).
    pub durable_on_write: bool,
    /// What `sync` covers.
    pub sync_scope: SyncScope,
}

/// A durable file.
///
/// The contract every backend keeps, checked by the conformance suite in
/// `tests/conformance.rs`:
///
/// - Reads see every write that returned before them (on any thread).
/// - Bytes never written read as zero, including a gap left by writing or
///   `set_len` past the end.
/// - After [`Device::sync`] returns `Ok`, every write, append and `set_len`
///   that returned before `sync` was called is durable: it survives a crash
///   of the process and, except on emulated PM, of the machine (see
///   [`DeviceInfo::sync_scope`] for the one backend where "before" means "on
///   this thread"). Writes not yet synced may, after a crash, be there in
///   whole, in part (torn at 8 bytes on PM, at a sector on disk), or not at
///   all.
/// - A failed `sync` **poisons** the device: the OS may have dropped the
///   data, so no later write or sync is accepted ([`crate::Error::Poisoned`]);
///   reads go on. A sync is never retried.
/// - A full medium is [`crate::Error::NoSpace`], never a panic.
pub trait Device: Send + Sync + fmt::Debug {
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read
    /// (fewer only at the end of the device, 0 at or past it).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize>;

    /// Writes all of `data` at `offset`, extending the device if needed.
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()>;

    /// Writes `data` at the current end and returns the offset it went to.
    /// Concurrent appends get disjoint ranges.
    fn append(&self, data: &[u8]) -> Result<u64>;

    /// Makes earlier writes durable (see the trait documentation).
    fn sync(&self) -> Result<()>;

    /// Current length in bytes.
    fn len(&self) -> u64;

    /// Whether the device holds no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Truncates or extends (with zeros) to `len` bytes.
    fn set_len(&self, len: u64) -> Result<()>;

    /// What this device is.
    fn info(&self) -> DeviceInfo;

    /// The file behind the device, for messages.
    fn path(&self) -> &Path;

    /// The address of device bytes `[offset, offset + len)` for reading
    /// them in place (SQLite's memory-mapped reads), if the device is
    /// mapped memory and the range lies within its current length; `None`
    /// otherwise. The address stays valid, and keeps reading the device's
    /// current bytes, for as long as the device lives, even if it is
    /// truncated (then the bytes are unspecified) or grows. Dereferencing
    /// it is the caller's affair (and `unsafe`).
    fn read_ptr(&self, offset: u64, len: usize) -> Option<*const u8> {
        let _ = (offset, len);
        None
    }

    /// Advice that bytes `[offset, offset + len)`, already made durable by
    /// [`Device::sync`], will not be read again soon: a device with a cache
    /// (the OS page cache of a file) may drop them, and freed memory is
    /// reused at once by later writes. Never changes what reads return or
    /// what is durable; a failure is ignored. Does nothing by default.
    fn release_cache(&self, offset: u64, len: u64) {
        let _ = (offset, len);
    }

    /// Readies device bytes up to `end`, past the current length, so that a
    /// later extension there ([`Device::set_len`], an append) is cheap: a
    /// mapped device grows its mapping and faults its pages in. Changes
    /// neither the length nor any byte a read or a recovery can see. For a
    /// thread off the writing path, ahead of need; does nothing by default.
    fn prepare(&self, end: u64) -> Result<()> {
        let _ = end;
        Ok(())
    }

    /// Whether [`Device::prepare`] does anything on this device.
    fn prepares(&self) -> bool {
        false
    }

    /// Flush accounting of PM-backed devices; `None` for disk files.
    fn flush_stats(&self) -> Option<FlushStats> {
        None
    }

    /// Why the device refuses writes, if it does.
    fn poisoned(&self) -> Option<String>;

    /// The device's own counters, by name, for reports such as INFO (a
    /// write buffer's slot occupancy and hits); none by default.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// Reads exactly `buf.len()` bytes at `offset`, or fails with
/// [`crate::Error::Corrupt`] if the device ends first.
pub fn read_exact_at(device: &dyn Device, offset: u64, buf: &mut [u8]) -> Result<()> {
    let read = device.read_at(offset, buf)?;
    if read < buf.len() {
        return Err(crate::Error::Corrupt {
            path: device.path().to_path_buf(),
            offset: offset + read as u64,
            reason: format!("expected {} bytes, the device ends after {read}", buf.len()),
        });
    }
    Ok(())
}
