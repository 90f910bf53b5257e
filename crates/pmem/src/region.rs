//! [`PmemRegion`]: a file mapped as persistent memory.
//!
//! The region reserves a range of address space once (`PROT_NONE`, no
//! backing) and maps the file into its start, so growing maps more of the
//! file right after the existing part: the base address never moves and
//! concurrent accesses to the mapped part stay valid while another thread
//! grows it. File space is allocated with `fallocate` before it is mapped, so
//! a full file system is an error at grow time instead of a `SIGBUS` at the
//! first store.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::arch;
use crate::cpu::{Dispatch, FlushInstruction};
use crate::error::{Error, Result};
use crate::medium::{MapMode, PmemMedium};
use crate::model::{self, ModelChoice};
use crate::split;
use crate::stats::{FlushStats, StatsSink};

/// Address space reserved by default, so regions can grow without moving.
pub const RESERVE_DEFAULT: usize = 16 << 30;

/// How to map a region.
#[derive(Clone, Copy, Debug)]
pub struct MapOptions {
    /// Bytes to map now; the file is grown (and allocated) to at least this.
    /// A larger existing file is mapped whole.
    pub len: usize,
    /// Address space to reserve for growth (at least `len`).
    pub max_len: usize,
    /// Flush and copy choices; `None` takes [`Dispatch::for_mode`] of the
    /// kind of memory the file turns out to be on.
    pub dispatch: Option<Dispatch>,
    /// Fault every page in at map time (`MAP_POPULATE`), so first stores do
    /// not pay for page faults.
    pub populate: bool,
}

impl MapOptions {
    /// Options that map `len` bytes with the default reservation.
    pub fn new(len: usize) -> MapOptions {
        MapOptions {
            len,
            max_len: RESERVE_DEFAULT.max(len),
            dispatch: None,
            populate: false,
        }
    }
}

/// A file mapped as persistent memory: real PM on DAX with `MAP_SYNC`,
/// otherwise emulated (see [`MapMode`]).
#[derive(Debug)]
pub struct PmemRegion {
    base: *mut u8,
    reserved: usize,
    mapped: AtomicUsize,
    file: File,
    path: PathBuf,
    mode: MapMode,
    dispatch: Dispatch,
    populate: bool,
    sink: Arc<StatsSink>,
    grow_lock: Mutex<()>,
}

// SAFETY: `base` points at a shared mapping owned by the region for its whole
// life; every access goes through bounds-checked methods, and concurrent
// access to the same bytes has file (pread/pwrite) semantics documented on
// `PmemMedium`.
unsafe impl Send for PmemRegion {}
// SAFETY: as above; the growth path is serialised by `grow_lock` and only
// publishes the new length after the new pages are mapped.
unsafe impl Sync for PmemRegion {}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096).max(4096)
}

fn round_up(value: usize, to: usize) -> usize {
    value.div_ceil(to) * to
}

impl PmemRegion {
    /// Maps `path` (creating it if needed) with at least `len` bytes.
    pub fn map(path: impl AsRef<Path>, len: usize) -> Result<PmemRegion> {
        PmemRegion::map_with(path, MapOptions::new(len))
    }

    /// Maps `path` as described by `options`.
    pub fn map_with(path: impl AsRef<Path>, options: MapOptions) -> Result<PmemRegion> {
        PmemRegion::map_inner(path.as_ref(), options, None)
    }

    /// Maps `path` as described by `options`, under media model `model`
    /// whatever the process-wide choice ([`crate::model::select`],
    /// `FERRITE_PMEM_MODEL`): for experiments that compare the two.
    pub fn map_with_model(
        path: impl AsRef<Path>,
        options: MapOptions,
        model: ModelChoice,
    ) -> Result<PmemRegion> {
        PmemRegion::map_inner(path.as_ref(), options, Some(model))
    }

    fn map_inner(
        path: &Path,
        options: MapOptions,
        model_choice: Option<ModelChoice>,
    ) -> Result<PmemRegion> {
        let path = path.to_path_buf();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io("open", &path, e))?;
        let existing = file
            .metadata()
            .map_err(|e| Error::io("stat", &path, e))?
            .len();
        let page = page_size();
        let existing = usize::try_from(existing).map_err(|_| Error::ReservationExceeded {
            path: path.clone(),
            requested: usize::MAX,
            reserved: options.max_len,
        })?;
        let len = round_up(options.len.max(existing).max(1), page);
        let reserved = round_up(options.max_len.max(len), page);
        allocate(&file, &path, 0, len)?;
        let base = reserve(reserved, &path)?;
        let mode = if probe_map_sync(&file) {
            MapMode::RealPm
        } else {
            MapMode::Emulated
        };
        if mode == MapMode::RealPm && len > existing {
            // As in `grow`: the space allocated here must outlast a power
            // failure before anything exposes it.
            file.sync_data()
                .map_err(|e| Error::io("fdatasync", &path, e))?;
        }
        let dispatch = options.dispatch.unwrap_or_else(|| Dispatch::for_mode(mode));
        check_flush_for_mode(&dispatch, mode)?;
        let model = model::for_region(model_choice.unwrap_or_else(model::selected), mode)?;
        let region = PmemRegion {
            base,
            reserved,
            mapped: AtomicUsize::new(0),
            file,
            path,
            mode,
            dispatch,
            populate: options.populate,
            sink: StatsSink::with_model(model, dispatch.flush),
            grow_lock: Mutex::new(()),
        };
        region.map_range(0, len)?;
        region.mapped.store(len, Ordering::Release);
        log_mapping(&region.path, len, mode);
        Ok(region)
    }

    /// Maps file bytes `[start, end)` at the same offset of the reservation.
    fn map_range(&self, start: usize, end: usize) -> Result<()> {
        let mut flags = libc::MAP_SHARED | libc::MAP_FIXED;
        if self.mode == MapMode::RealPm {
            flags = libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC | libc::MAP_FIXED;
        }
        if self.populate {
            flags |= libc::MAP_POPULATE;
        }
        let offset = libc::off_t::try_from(start).map_err(|_| Error::OutOfBounds {
            offset: start,
            len: end - start,
            mapped: self.len(),
        })?;
        // SAFETY: `[base + start, base + end)` lies inside our own
        // reservation (checked by callers against `reserved`), which no
        // Rust reference points into, so replacing it is sound.
        let addr = unsafe {
            libc::mmap(
                self.base.add(start).cast(),
                end - start,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                self.file.as_raw_fd(),
                offset,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(Error::io(
                "mmap",
                &self.path,
                std::io::Error::last_os_error(),
            ));
        }
        Ok(())
    }

    /// The backing file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The flush and copy choices of this region.
    pub fn dispatch(&self) -> Dispatch {
        self.dispatch
    }

    /// Bytes of address space reserved for growth.
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    /// Address of the first mapped byte, for handing to other PM libraries
    /// (the libpmem comparison). Dereferencing it is the caller's affair.
    pub fn base_ptr(&self) -> *mut u8 {
        self.base
    }

    /// Charges the media model for a read of `[offset, offset + len)` made
    /// in place (through an address from `read_ptr`), as `read` charges
    /// its copy: for holders of such addresses that want honest figures.
    pub(crate) fn charge_read(&self, offset: usize, len: usize) {
        self.sink.record_read(offset, len);
    }

    /// Bounds-checks `[offset, offset + len)` and returns its address.
    #[inline]
    pub(crate) fn at(&self, offset: usize, len: usize) -> Result<*mut u8> {
        let mapped = self.mapped.load(Ordering::Acquire);
        match offset.checked_add(len) {
            Some(end) if end <= mapped => {
                // SAFETY: `offset <= mapped <= reserved`, inside the mapping.
                Ok(unsafe { self.base.add(offset) })
            }
            _ => Err(Error::OutOfBounds {
                offset,
                len,
                mapped,
            }),
        }
    }

    /// `msync(MS_SYNC)` of the pages covering the range.
    fn msync(&self, offset: usize, len: usize) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let page = page_size();
        let start = offset / page * page;
        let end = round_up(offset + len, page).min(self.len());
        // SAFETY: the page range is inside the mapping (offset was checked
        // by the caller, and `end` is clamped to the mapped length).
        let rc = unsafe { libc::msync(self.base.add(start).cast(), end - start, libc::MS_SYNC) };
        if rc != 0 {
            return Err(Error::io(
                "msync",
                &self.path,
                std::io::Error::last_os_error(),
            ));
        }
        self.sink.record_msync(start, end);
        Ok(())
    }

    /// `copy_persist` of a large copy, half of it on the helper thread.
    #[inline(never)]
    fn copy_persist_split(&self, offset: usize, data: &[u8]) -> Result<()> {
        let ptr = self.at(offset, data.len())?;
        // SAFETY: as for `write`.
        let split = unsafe { split::copy_nodrain(&self.dispatch, ptr, data.as_ptr(), data.len()) };
        self.sink.record_persist(offset, data.len(), split.counts);
        if split.helper_fenced {
            self.sink.record_fence();
        }
        arch::fence();
        Ok(())
    }

    #[inline]
    fn after_stores(&self, offset: usize, len: usize, counts: arch::StoreCounts) -> Result<()> {
        self.sink.record_stores(offset, len, counts);
        if self.dispatch.flush == FlushInstruction::Msync {
            self.msync(offset, len)?;
        }
        Ok(())
    }
}

impl PmemMedium for PmemRegion {
    #[inline]
    fn len(&self) -> usize {
        self.mapped.load(Ordering::Acquire)
    }

    fn grow(&self, new_len: usize) -> Result<()> {
        let _guard = self
            .grow_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mapped = self.len();
        if new_len <= mapped {
            return Ok(());
        }
        let new_len = round_up(new_len, page_size());
        if new_len > self.reserved {
            return Err(Error::ReservationExceeded {
                path: self.path.clone(),
                requested: new_len,
                reserved: self.reserved,
            });
        }
        allocate(&self.file, &self.path, mapped, new_len)?;
        if self.mode == MapMode::RealPm {
            // On real PM a crash may be a power failure: the extension must
            // be durable before a length word covering it is, since the
            // grown space may be exposed as zeros without ever being stored
            // to (and a store's MAP_SYNC fault would be what persisted it).
            self.file
                .sync_data()
                .map_err(|e| Error::io("fdatasync", &self.path, e))?;
        }
        self.map_range(mapped, new_len)?;
        self.mapped.store(new_len, Ordering::Release);
        Ok(())
    }

    fn populate(&self, offset: usize, len: usize) -> Result<bool> {
        if len == 0 {
            return Ok(true);
        }
        let page = page_size();
        let start = offset / page * page;
        let end = round_up(offset + len, page).min(self.len());
        if end <= start {
            return Ok(true);
        }
        let base = self.at(start, end - start)?;
        // SAFETY: the page range is inside the mapping (`at` checked it);
        // madvise only faults the pages in, it changes no byte.
        let rc = unsafe { libc::madvise(base.cast(), end - start, libc::MADV_POPULATE_WRITE) };
        if rc != 0 {
            // A kernel before 5.14 (EINVAL) or a mapping it refuses: touch
            // one byte a page instead, rewriting the value it holds, which
            // faults the page in writable without changing it. The caller
            // guarantees no store to the range meanwhile, so the read and
            // the write see and leave the same byte.
            for at in (0..end - start).step_by(page) {
                // SAFETY: `at` lies inside the checked range.
                unsafe {
                    let byte = base.add(at);
                    byte.write_volatile(byte.read_volatile());
                }
            }
        }
        Ok(true)
    }

    fn populates(&self) -> bool {
        true
    }

    fn prefault(&self, offset: usize, len: usize) -> Result<bool> {
        let page = page_size();
        let start = offset / page * page;
        let end = round_up(offset.saturating_add(len), page).min(self.len());
        if end <= start {
            return Ok(true);
        }
        let base = self.at(start, end - start)?;
        // SAFETY: the page range is inside the mapping (`at` checked it);
        // MADV_POPULATE_WRITE only faults the pages in and changes no byte,
        // so concurrent stores to the range are unaffected.
        let rc = unsafe { libc::madvise(base.cast(), end - start, libc::MADV_POPULATE_WRITE) };
        Ok(rc == 0)
    }

    fn write_ranges_to(
        &self,
        file: &File,
        file_offset: u64,
        ranges: &[(usize, usize)],
    ) -> std::io::Result<bool> {
        crate::vectored::write_ranges(self, file, file_offset, ranges)?;
        for &(offset, len) in ranges {
            self.sink.record_read(offset, len);
        }
        Ok(true)
    }

    #[inline]
    fn read(&self, offset: usize, buf: &mut [u8]) -> Result<()> {
        let ptr = self.at(offset, buf.len())?;
        // SAFETY: the range is mapped and `buf` is a distinct Rust buffer.
        unsafe { std::ptr::copy_nonoverlapping(ptr, buf.as_mut_ptr(), buf.len()) };
        self.sink.record_read(offset, buf.len());
        Ok(())
    }

    #[inline]
    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        let ptr = self.at(offset, data.len())?;
        // SAFETY: the range is mapped and writable; `data` is a distinct
        // Rust buffer (no slice into the mapping is ever handed out).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr, data.len()) };
        self.sink.record_cached(data.len() as u64);
        Ok(())
    }

    #[inline]
    fn copy_nodrain(&self, offset: usize, data: &[u8]) -> Result<()> {
        let ptr = self.at(offset, data.len())?;
        // SAFETY: as for `write`.
        let counts = unsafe { arch::copy_nodrain(&self.dispatch, ptr, data.as_ptr(), data.len()) };
        self.after_stores(offset, data.len(), counts)
    }

    /// As the default (copy, then drain), with the accounting done in one
    /// step, just before the fence.
    #[inline]
    fn copy_persist(&self, offset: usize, data: &[u8]) -> Result<()> {
        if self.dispatch.flush == FlushInstruction::Msync {
            self.copy_nodrain(offset, data)?;
            self.drain();
            return Ok(());
        }
        if data.len() >= self.dispatch.split_min {
            return self.copy_persist_split(offset, data);
        }
        let ptr = self.at(offset, data.len())?;
        // SAFETY: as for `write`.
        let counts = unsafe { arch::copy_nodrain(&self.dispatch, ptr, data.as_ptr(), data.len()) };
        self.sink.record_persist(offset, data.len(), counts);
        arch::fence();
        Ok(())
    }

    #[inline]
    fn memset_nodrain(&self, offset: usize, byte: u8, len: usize) -> Result<()> {
        let ptr = self.at(offset, len)?;
        // SAFETY: the range is mapped and writable.
        let counts = unsafe { arch::memset_nodrain(&self.dispatch, ptr, byte, len) };
        self.after_stores(offset, len, counts)
    }

    #[inline]
    fn flush(&self, offset: usize, len: usize) -> Result<()> {
        let ptr = self.at(offset, len)?;
        // SAFETY: the range is mapped.
        let lines = unsafe { arch::flush_lines(self.dispatch.flush, ptr, len) };
        self.after_stores(
            offset,
            len,
            arch::StoreCounts {
                lines_flushed: lines,
                ..Default::default()
            },
        )
    }

    #[inline]
    fn drain(&self) {
        // clflush is ordered by itself, but non-temporal stores still need
        // the fence, so it is always issued (it is cheap when idle).
        arch::fence();
        self.sink.record_fence();
    }

    #[inline]
    fn store_u64(&self, offset: usize, value: u64) -> Result<()> {
        if !offset.is_multiple_of(8) {
            return Err(Error::Unaligned { offset });
        }
        let ptr = self.at(offset, 8)?;
        // SAFETY: the word is mapped and 8-byte aligned (the base is
        // page-aligned); an aligned 8-byte volatile store is one `mov`, which
        // x86 and the PM media perform atomically.
        unsafe { std::ptr::write_volatile(ptr.cast::<u64>(), value.to_le()) };
        self.sink.record_cached(8);
        Ok(())
    }

    #[inline]
    fn load_u64(&self, offset: usize) -> Result<u64> {
        if !offset.is_multiple_of(8) {
            return Err(Error::Unaligned { offset });
        }
        let ptr = self.at(offset, 8)?;
        // SAFETY: the word is mapped and aligned.
        let value = u64::from_le(unsafe { std::ptr::read_volatile(ptr.cast::<u64>()) });
        self.sink.record_read(offset, 8);
        Ok(value)
    }

    /// The mapping never moves (growth maps more of the reservation in
    /// place) and is unmapped only when the region is dropped.
    #[inline]
    fn read_ptr(&self, offset: usize, len: usize) -> Option<*const u8> {
        self.at(offset, len).ok().map(|ptr| ptr.cast_const())
    }

    fn mode(&self) -> MapMode {
        self.mode
    }

    fn stats(&self) -> FlushStats {
        self.sink.snapshot()
    }
}

impl Drop for PmemRegion {
    fn drop(&mut self) {
        // SAFETY: the reservation is ours and nothing borrows into it once
        // the region is dropped.
        unsafe { libc::munmap(self.base.cast(), self.reserved) };
    }
}

/// Says what kind of memory a mapping is: loudly (a warning) the first time
/// a process maps emulated PM, then at debug level, so a program that maps
/// many files (SQLite's journals) does not repeat it on every open.
fn log_mapping(path: &Path, len: usize, mode: MapMode) {
    static WARNED_EMULATED: std::sync::atomic::AtomicBool =
        std::sync::atomic::AtomicBool::new(false);
    let path = path.display();
    match mode {
        MapMode::RealPm => tracing::info!(%path, len, "mapped {}", mode.durability()),
        _ if !WARNED_EMULATED.swap(true, Ordering::Relaxed) => {
            tracing::warn!(%path, len, "mapped {}", mode.durability());
        }
        _ => tracing::debug!(%path, len, "mapped {}", mode.durability()),
    }
}

/// Reserves `len` bytes of address space with no access and no backing.
fn reserve(len: usize, path: &Path) -> Result<*mut u8> {
    // SAFETY: an anonymous PROT_NONE mapping at an address of the kernel's
    // choosing touches no existing memory.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(Error::io(
            "reserve address space",
            path,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(addr.cast())
}

/// Refuses a flush choice that cannot make stores durable on `mode`:
/// `none` skips the write-back of cache lines, which on real PM means a
/// power failure loses what the region reported as persisted. On emulated
/// PM (page cache behind the mapping) it only measures what flushing costs.
fn check_flush_for_mode(dispatch: &Dispatch, mode: MapMode) -> Result<()> {
    if mode == MapMode::RealPm && dispatch.flush == FlushInstruction::None {
        return Err(Error::Config {
            reason: format!(
                "{}=none is refused on real persistent memory: stores would not be durable",
                crate::cpu::ENV_FLUSH
            ),
        });
    }
    Ok(())
}

/// Whether the file can be mapped with `MAP_SYNC` (it is on a DAX file
/// system), tried on one page at an address of the kernel's choosing.
fn probe_map_sync(file: &File) -> bool {
    let page = page_size();
    // SAFETY: a fresh mapping at an address of the kernel's choosing; it is
    // unmapped right away and never dereferenced.
    unsafe {
        let addr = libc::mmap(
            std::ptr::null_mut(),
            page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC,
            file.as_raw_fd(),
            0,
        );
        if addr == libc::MAP_FAILED {
            return false;
        }
        libc::munmap(addr, page);
    }
    true
}

/// Makes sure file bytes `[start, end)` exist and have storage behind them.
fn allocate(file: &File, path: &Path, start: usize, end: usize) -> Result<()> {
    let current = file
        .metadata()
        .map_err(|e| Error::io("stat", path, e))?
        .len();
    if current >= end as u64 {
        return Ok(());
    }
    let (Ok(offset), Ok(len)) = (
        libc::off_t::try_from(start),
        libc::off_t::try_from(end - start),
    ) else {
        return Err(Error::NoSpace {
            path: path.to_path_buf(),
            len: end as u64,
        });
    };
    // SAFETY: fallocate on an open descriptor has no memory-safety
    // preconditions.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, offset, len) };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ENOSPC) => Err(Error::NoSpace {
            path: path.to_path_buf(),
            len: end as u64,
        }),
        Some(libc::EOPNOTSUPP) => {
            // A file system without fallocate: extend the file and accept
            // that running out of space will surface as SIGBUS on a store.
            tracing::warn!(path = %path.display(), "fallocate unsupported; a full file system may crash the process");
            file.set_len(end as u64)
                .map_err(|e| Error::io("ftruncate", path, e))
        }
        _ => Err(Error::io("fallocate", path, err)),
    }
}

#[cfg(test)]
mod flush_choice_tests {
    use super::*;

    /// `none` is a measuring aid on emulated PM and a durability bug on
    /// real PM: only the latter is refused.
    #[test]
    fn no_flush_is_refused_on_real_pm_only() {
        let mut dispatch = Dispatch::detect();
        dispatch.flush = FlushInstruction::None;
        assert!(check_flush_for_mode(&dispatch, MapMode::Emulated).is_ok());
        let refused = check_flush_for_mode(&dispatch, MapMode::RealPm);
        assert!(matches!(refused, Err(Error::Config { .. })), "{refused:?}");
        let detected = Dispatch::detect();
        assert!(check_flush_for_mode(&detected, MapMode::RealPm).is_ok());
    }
}
