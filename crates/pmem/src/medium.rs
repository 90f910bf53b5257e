//! The interface shared by real and simulated persistent memory.

use std::fmt;

use crate::error::Result;
use crate::stats::FlushStats;

/// What kind of memory backs a region: say it wherever durability matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MapMode {
    /// A file on a DAX file system mapped with `MAP_SYNC`: persistent memory.
    /// Flushed and fenced stores survive a power failure.
    RealPm,
    /// Any other shared file mapping (tmpfs, a disk file system). Flushed
    /// stores survive a crash of the process, **not** a power failure or a
    /// kernel crash.
    Emulated,
    /// The in-process simulator used by crash tests.
    Simulated,
}

impl MapMode {
    /// A short name for reports: `real`, `emulated` or `simulated`.
    pub fn name(self) -> &'static str {
        match self {
            MapMode::RealPm => "real",
            MapMode::Emulated => "emulated",
            MapMode::Simulated => "simulated",
        }
    }

    /// What this mode protects against, in words for logs and INFO.
    pub fn durability(self) -> &'static str {
        match self {
            MapMode::RealPm => "persistent memory (DAX, MAP_SYNC): survives power failure",
            MapMode::Emulated => {
                "emulated persistent memory: survives a process crash, NOT a power failure"
            }
            MapMode::Simulated => "simulated persistent memory (tests only)",
        }
    }
}

impl fmt::Display for MapMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Byte-addressable persistent memory, real or simulated: the libpmem
/// contract.
///
/// A store is *persisted* once it has been flushed (or written with a
/// non-temporal store) **and** a later [`drain`](PmemMedium::drain) on the
/// same thread has returned. Fences are per thread: one thread's drain does
/// not persist another thread's flushed stores.
///
/// Offsets are bytes from the start of the region. Like `pwrite`/`pread` on
/// a shared file, operations on overlapping ranges from different threads
/// must be ordered by the caller; otherwise the bytes read are unspecified.
pub trait PmemMedium: Send + Sync + fmt::Debug {
    /// Bytes currently mapped.
    fn len(&self) -> usize;

    /// Whether no byte is mapped.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Grows the mapping to at least `new_len` bytes (new bytes read as
    /// zero). Existing bytes do not move, so concurrent accesses stay valid.
    fn grow(&self, new_len: usize) -> Result<()>;

    /// Copies bytes at `offset` into `buf`.
    fn read(&self, offset: usize, buf: &mut [u8]) -> Result<()>;

    /// Plain cached stores, neither flushed nor fenced: persisted only by a
    /// later [`flush`](PmemMedium::flush) + drain (or by chance, at eviction).
    fn write(&self, offset: usize, data: &[u8]) -> Result<()>;

    /// Copies `data` to `offset` so that the next drain on this thread
    /// persists it (libpmem's `pmem_memcpy_nodrain`).
    fn copy_nodrain(&self, offset: usize, data: &[u8]) -> Result<()>;

    /// Sets `len` bytes at `offset` to `byte`, persisted by the next drain.
    fn memset_nodrain(&self, offset: usize, byte: u8, len: usize) -> Result<()>;

    /// Writes back the cache lines of `[offset, offset + len)`.
    fn flush(&self, offset: usize, len: usize) -> Result<()>;

    /// Waits until this thread's flushes and non-temporal stores are
    /// persisted (`sfence`).
    fn drain(&self);

    /// [`flush`](PmemMedium::flush) then [`drain`](PmemMedium::drain).
    fn persist(&self, offset: usize, len: usize) -> Result<()> {
        self.flush(offset, len)?;
        self.drain();
        Ok(())
    }

    /// [`copy_nodrain`](PmemMedium::copy_nodrain) then
    /// [`drain`](PmemMedium::drain) (libpmem's `pmem_memcpy_persist`).
    fn copy_persist(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.copy_nodrain(offset, data)?;
        self.drain();
        Ok(())
    }

    /// A single failure-atomic 8-byte store at an 8-aligned `offset`, cached
    /// (flush and drain to persist it). After a crash the word holds either
    /// its old or its new value, never a mix.
    fn store_u64(&self, offset: usize, value: u64) -> Result<()>;

    /// An 8-byte load at an 8-aligned `offset`.
    fn load_u64(&self, offset: usize) -> Result<u64>;

    /// The address of bytes `[offset, offset + len)` for reading them in
    /// place, if the medium is a mapping whose addresses stay valid (never
    /// moved or unmapped) for the medium's whole life; `None` otherwise,
    /// or if the range is not mapped. The bytes may change under the
    /// reader with later writes, as with [`read`](PmemMedium::read).
    /// Dereferencing the address is the caller's affair (and `unsafe`).
    fn read_ptr(&self, offset: usize, len: usize) -> Option<*const u8> {
        let _ = (offset, len);
        None
    }

    /// Makes the pages of `[offset, offset + len)` present in this
    /// process's page tables and writable, so the first stores there take
    /// no page fault: ahead of need, on a thread off the writing path. Never
    /// changes a byte. The caller ensures nothing stores to the range
    /// meanwhile (it lies past what a writer may touch). Returns whether
    /// the medium has pages to populate; a simulated medium has none, and
    /// does nothing (the default).
    fn populate(&self, offset: usize, len: usize) -> Result<bool> {
        let _ = (offset, len);
        Ok(false)
    }

    /// Whether [`populate`](PmemMedium::populate) does anything here.
    fn populates(&self) -> bool {
        false
    }

    /// Makes the pages of `[offset, offset + len)` present and writable,
    /// like [`populate`](PmemMedium::populate), but only by the kernel's
    /// populate-write advice (Linux 5.14 and later), which faults pages in
    /// without touching a byte: so other threads may store to the range
    /// meanwhile. Returns `Ok(false)` where that advice is not available
    /// (an older kernel, a simulated medium: the default).
    fn prefault(&self, offset: usize, len: usize) -> Result<bool> {
        let _ = (offset, len);
        Ok(false)
    }

    /// Writes the byte ranges `ranges` (offset, length) of the medium, back
    /// to back, to `file` at `file_offset`, straight from the medium: one
    /// vectored `pwrite` per call (more only for a short write). With an
    /// `O_DIRECT` descriptor the device reads the medium itself, so the
    /// bytes are never copied through DRAM; the kernel checks the usual
    /// alignment. Returns `Ok(false)`, writing nothing, where the medium is
    /// no mapping the kernel can read (the default, and the simulator's
    /// case): the caller copies the bytes out and writes them itself. The
    /// caller keeps the ranges unchanged until the call returns.
    fn write_ranges_to(
        &self,
        file: &std::fs::File,
        file_offset: u64,
        ranges: &[(usize, usize)],
    ) -> std::io::Result<bool> {
        let _ = (file, file_offset, ranges);
        Ok(false)
    }

    /// What backs this region.
    fn mode(&self) -> MapMode;

    /// This region's flush accounting so far.
    fn stats(&self) -> FlushStats;
}
