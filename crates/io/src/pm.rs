//! [`PmDevice`]: a durable file on (real, emulated or simulated) persistent
//! memory, for the `Mmap` and `Pmem` backends.
//!
//! A PM device file starts with a 4 KiB header holding the logical length,
//! so the length survives a crash without any file-system metadata update;
//! the data follows, page aligned. The layout and its crash argument are in
//! `docs/format.md` ("PM device").

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use ferrite_pmem::{FlushStats, MapOptions, PmemMedium, PmemRegion};

use crate::device::{Device, DeviceInfo, DeviceKind, SyncScope};
use crate::error::{Error, Result};
use crate::poison::Poison;

/// Bytes before the data: one page.
pub const PM_HEADER_LEN: usize = 4096;
/// First bytes of a PM device file.
pub const PM_MAGIC: [u8; 8] = *b"FRTPMDV1";
/// Current header version.
pub const PM_VERSION: u32 = 1;
/// Offset of the 8-byte, failure-atomic logical length.
const LEN_OFFSET: usize = 16;
/// Offset of the CRC32C of bytes `0..16` (magic, version, header length).
const CRC_OFFSET: usize = 24;
/// Capacity of a new device file, header included.
pub const PM_INITIAL_CAPACITY: usize = 2 << 20;
/// Growth step cap: a device doubles while small, then grows by at most
/// this. Growing allocates the new space in the file (`fallocate`), and
/// on tmpfs (emulated PM) that clears every page at once, under the
/// device's extend lock: a log grown by doubling up to 1 GiB steps
/// cleared 671 MB for 384 MB of records, and a writer extending the log
/// meanwhile waited for the whole step. A mapping grown in adjacent steps
/// of the same file stays one kernel mapping, so small steps cost one
/// `fallocate` and one `mmap` each and nothing per access.
pub const PM_GROWTH_STEP_MAX: usize = 32 << 20;

const _: () = assert!(LEN_OFFSET.is_multiple_of(8) && CRC_OFFSET + 4 <= PM_HEADER_LEN);

/// How writes reach the persistence domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PmPolicy {
    /// The paper's SQLite/MM: cached `memcpy`, flush of the touched lines,
    /// and a fence, on every write. Durable on return.
    FlushEveryWrite,
    /// `copy_nodrain` (non-temporal stores for large writes) and a drain on
    /// every write. Durable on return, from any thread.
    DrainEveryWrite,
    /// The paper's SQLite/PMM: `copy_nodrain` on write, one drain at
    /// `sync`. A fence orders only its own thread's stores, so `sync` covers
    /// the calling thread's writes only ([`SyncScope::CallingThread`]).
    DrainOnSync,
}

impl PmPolicy {
    fn kind(self) -> DeviceKind {
        match self {
            PmPolicy::FlushEveryWrite => DeviceKind::Mmap,
            PmPolicy::DrainEveryWrite | PmPolicy::DrainOnSync => DeviceKind::Pmem,
        }
    }
}

/// A durable file on persistent memory; see the module docs.
#[derive(Debug)]
pub struct PmDevice<M: PmemMedium> {
    medium: M,
    path: PathBuf,
    policy: PmPolicy,
    /// Logical length as readers see it.
    len: AtomicU64,
    /// Serialises length changes and keeps the header monotonic with them.
    extend: Mutex<()>,
    /// Device offset from which every byte of the medium is known to be
    /// zero, in memory and in what a crash would leave: nothing was stored
    /// there since the device was opened, and it lay past the medium's end
    /// at open (space the medium grew by reads as zeros). Growth zeroes only
    /// the part of its range below it, so a log preallocating fresh space
    /// does not write every line twice. Raised before any store past it.
    clean_from: AtomicU64,
    poison: Poison,
}

/// A PM device on a mapped file.
pub type PmemDevice = PmDevice<PmemRegion>;

impl PmDevice<PmemRegion> {
    /// Opens (creating if needed) a PM device file at `path`.
    pub fn open(path: impl AsRef<Path>, policy: PmPolicy) -> Result<PmemDevice> {
        PmDevice::open_with(path, policy, MapOptions::new(PM_INITIAL_CAPACITY))
    }

    /// [`PmDevice::open`] with explicit mapping options.
    pub fn open_with(
        path: impl AsRef<Path>,
        policy: PmPolicy,
        options: MapOptions,
    ) -> Result<PmemDevice> {
        let path = path.as_ref();
        let existed = path.exists();
        let region = PmemRegion::map_with(path, options)?;
        if !existed {
            crate::file::sync_parent_dir(path)?;
        }
        let device = PmDevice::new(region, path, policy)?;
        if !existed {
            // A file created just now holds zeros only (the header aside,
            // which lies before device offset 0).
            device.clean_from.store(0, Ordering::Release);
        }
        Ok(device)
    }
}

impl<M: PmemMedium> PmDevice<M> {
    /// A device on `medium`, which holds a PM device image or zeros (then a
    /// fresh header is written). `path` names it in messages.
    pub fn new(medium: M, path: impl Into<PathBuf>, policy: PmPolicy) -> Result<PmDevice<M>> {
        let path = path.into();
        if medium.len() < PM_HEADER_LEN {
            medium.grow(PM_INITIAL_CAPACITY)?;
        }
        let len = read_header(&medium, &path)?;
        // Bytes inside the medium at open may be stale (an earlier, longer
        // life of the file, or stores past a length that never landed).
        let clean_from = (medium.len() - PM_HEADER_LEN) as u64;
        Ok(PmDevice {
            medium,
            path,
            policy,
            len: AtomicU64::new(len),
            extend: Mutex::new(()),
            clean_from: AtomicU64::new(clean_from),
            poison: Poison::default(),
        })
    }

    /// The memory underneath, for crash tests and reports.
    pub fn medium(&self) -> &M {
        &self.medium
    }

    /// The write policy.
    pub fn policy(&self) -> PmPolicy {
        self.policy
    }

    fn lock_extend(&self) -> MutexGuard<'_, ()> {
        self.extend.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Medium offset of device offset `offset`, checked for overflow.
    fn at(&self, offset: u64, len: usize) -> Result<(usize, u64)> {
        let too_large = || Error::TooLarge {
            path: self.path.clone(),
            offset,
            len: len as u64,
        };
        let end = offset.checked_add(len as u64).ok_or_else(too_large)?;
        let start = usize::try_from(offset)
            .ok()
            .and_then(|o| o.checked_add(PM_HEADER_LEN))
            .ok_or_else(too_large)?;
        usize::try_from(end)
            .ok()
            .and_then(|e| e.checked_add(PM_HEADER_LEN))
            .ok_or_else(too_large)?;
        Ok((start, end))
    }

    /// Grows the medium so device bytes `[0, end)` are mapped.
    fn reserve(&self, end: u64) -> Result<()> {
        let needed = PM_HEADER_LEN + end as usize;
        let current = self.medium.len();
        if needed <= current {
            return Ok(());
        }
        let step = current.clamp(PM_INITIAL_CAPACITY, PM_GROWTH_STEP_MAX);
        let target = needed.max(current + step);
        self.medium.grow(target).map_err(Error::from)
    }

    /// Copies `data` to medium offset `at` by the policy; durable on return
    /// unless the policy is `DrainOnSync`.
    fn store(&self, at: usize, data: &[u8]) -> Result<()> {
        // The clean range shrinks before the bytes land, so a growth that
        // reads it never skips zeroing bytes that are being stored.
        let end = (at.saturating_sub(PM_HEADER_LEN) + data.len()) as u64;
        if end > self.clean_from.load(Ordering::Acquire) {
            self.clean_from.fetch_max(end, Ordering::AcqRel);
        }
        match self.policy {
            PmPolicy::FlushEveryWrite => {
                self.medium.write(at, data)?;
                self.medium.persist(at, data.len())?;
            }
            PmPolicy::DrainEveryWrite => self.medium.copy_persist(at, data)?,
            PmPolicy::DrainOnSync => self.medium.copy_nodrain(at, data)?,
        }
        Ok(())
    }

    /// Zeroes device bytes `[from, to)` (stale bytes of an earlier, longer
    /// life of the file), persisted by the next drain. Bytes at and past
    /// `clean_from` are zero already and are left alone. Called with the
    /// extend lock held.
    fn zero(&self, from: u64, to: u64) -> Result<()> {
        let to = to.min(self.clean_from.load(Ordering::Acquire));
        if to > from {
            let (at, _) = self.at(from, (to - from) as usize)?;
            self.medium.memset_nodrain(at, 0, (to - from) as usize)?;
        }
        Ok(())
    }

    /// Writes the logical length into the header and persists it. Called
    /// with the extend lock held, after the data it covers is persisted.
    fn persist_len(&self, len: u64) -> Result<()> {
        self.medium.store_u64(LEN_OFFSET, len)?;
        self.medium.persist(LEN_OFFSET, 8)?;
        Ok(())
    }

    /// A write that ends past the current length: under the extend lock.
    fn extending_write(&self, offset: u64, data: &[u8]) -> Result<()> {
        let _guard = self.lock_extend();
        let (at, end) = self.at(offset, data.len())?;
        self.reserve(end)?;
        let current = self.len.load(Ordering::Acquire);
        self.zero(current, offset)?;
        self.store(at, data)?;
        if end > current {
            self.publish_len(end)?;
        }
        Ok(())
    }

    /// Makes `end` the length: at once for readers; in the header now,
    /// after the data, unless the policy defers durability to `sync`.
    /// Called with the extend lock held.
    fn publish_len(&self, end: u64) -> Result<()> {
        if self.policy != PmPolicy::DrainOnSync {
            // Data (and zeroed gap) first, then the length that exposes it.
            self.medium.drain();
            self.persist_len(end)?;
        }
        self.len.store(end, Ordering::Release);
        Ok(())
    }
}

/// The persisted logical length of the PM device file at `path`, read with
/// `pread` from its header, without mapping the file: `Ok(None)` if the
/// file is not a PM device file (its first bytes are neither zero nor
/// [`PM_MAGIC`]); `Some(0)` for an empty or never-initialised one.
///
/// This is what a process opening the file after a crash would see, so it
/// answers "does this file hold data?" cheaply (SQLite's `xAccess` asks it
/// of the rollback journal before every transaction). A process that has
/// the device open should ask [`Device::len`] instead: with
/// [`PmPolicy::DrainOnSync`] the header lags the length until `sync`.
pub fn stored_len(path: impl AsRef<Path>) -> Result<Option<u64>> {
    use std::os::unix::fs::FileExt;
    let path = path.as_ref();
    let file = std::fs::File::open(path).map_err(|e| Error::io("open", path, e))?;
    let mut header = [0u8; CRC_OFFSET + 4];
    let mut filled = 0;
    while filled < header.len() {
        match file.read_at(&mut header[filled..], filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io("pread", path, e)),
        }
    }
    if header.iter().all(|&b| b == 0) {
        return Ok(Some(0));
    }
    if header[..8] != PM_MAGIC {
        return Ok(None);
    }
    let stored_crc = u32::from_le_bytes([header[24], header[25], header[26], header[27]]);
    if filled < header.len() || crc32c::crc32c(&header[..16]) != stored_crc {
        return Err(Error::Corrupt {
            path: path.to_path_buf(),
            offset: 0,
            reason: "header checksum mismatch".into(),
        });
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&header[LEN_OFFSET..LEN_OFFSET + 8]);
    Ok(Some(u64::from_le_bytes(len)))
}

/// Reads and checks the header, writing a fresh one on an all-zero medium.
fn read_header<M: PmemMedium>(medium: &M, path: &Path) -> Result<u64> {
    let mut header = [0u8; CRC_OFFSET + 4];
    medium.read(0, &mut header)?;
    let corrupt = |offset: u64, reason: String| Error::Corrupt {
        path: path.to_path_buf(),
        offset,
        reason,
    };
    if header.iter().all(|&b| b == 0) {
        let mut fresh = [0u8; CRC_OFFSET + 4];
        fresh[..8].copy_from_slice(&PM_MAGIC);
        fresh[8..12].copy_from_slice(&PM_VERSION.to_le_bytes());
        fresh[12..16].copy_from_slice(&(PM_HEADER_LEN as u32).to_le_bytes());
        let crc = crc32c::crc32c(&fresh[..16]);
        fresh[CRC_OFFSET..].copy_from_slice(&crc.to_le_bytes());
        // The length word stays zero. A crash before the drain leaves a
        // torn header only if bytes were half written; an all-zero one is
        // simply initialised again.
        medium.copy_persist(0, &fresh)?;
        return Ok(0);
    }
    if header[..8] != PM_MAGIC {
        return Err(corrupt(0, "not a Ferrite PM device (bad magic)".into()));
    }
    let stored_crc = u32::from_le_bytes([header[24], header[25], header[26], header[27]]);
    if crc32c::crc32c(&header[..16]) != stored_crc {
        return Err(corrupt(0, "header checksum mismatch".into()));
    }
    let version = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
    if version != PM_VERSION {
        return Err(corrupt(8, format!("unsupported version {version}")));
    }
    let header_len = u32::from_le_bytes([header[12], header[13], header[14], header[15]]);
    if header_len as usize != PM_HEADER_LEN {
        return Err(corrupt(
            12,
            format!("unsupported header length {header_len}"),
        ));
    }
    let len = medium.load_u64(LEN_OFFSET)?;
    let capacity = (medium.len() - PM_HEADER_LEN) as u64;
    if len > capacity {
        return Err(corrupt(
            LEN_OFFSET as u64,
            format!("length {len} exceeds the {capacity} bytes of the file"),
        ));
    }
    Ok(len)
}

impl<M: PmemMedium> Device for PmDevice<M> {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let len = self.len.load(Ordering::Acquire);
        if offset >= len {
            return Ok(0);
        }
        let n = ((len - offset) as usize).min(buf.len());
        let (at, _) = self.at(offset, n)?;
        self.medium.read(at, &mut buf[..n])?;
        Ok(n)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.poison.check(&self.path)?;
        let (at, end) = self.at(offset, data.len())?;
        if end > self.len.load(Ordering::Acquire) {
            return self.extending_write(offset, data);
        }
        self.store(at, data)
    }

    fn append(&self, data: &[u8]) -> Result<u64> {
        self.poison.check(&self.path)?;
        let _guard = self.lock_extend();
        let offset = self.len.load(Ordering::Acquire);
        let (at, end) = self.at(offset, data.len())?;
        self.reserve(end)?;
        self.store(at, data)?;
        self.publish_len(end)?;
        Ok(offset)
    }

    fn sync(&self) -> Result<()> {
        self.poison.check(&self.path)?;
        let _guard = self.lock_extend();
        self.medium.drain();
        let len = self.len.load(Ordering::Acquire);
        if self.medium.load_u64(LEN_OFFSET)? != len {
            self.persist_len(len)?;
        }
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len.load(Ordering::Acquire)
    }

    fn read_ptr(&self, offset: u64, len: usize) -> Option<*const u8> {
        let (at, end) = self.at(offset, len).ok()?;
        if end > self.len.load(Ordering::Acquire) {
            return None;
        }
        self.medium.read_ptr(at, len)
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.poison.check(&self.path)?;
        let _guard = self.lock_extend();
        let current = self.len.load(Ordering::Acquire);
        if len > current {
            self.reserve(len)?;
            self.zero(current, len)?;
        }
        self.medium.drain();
        self.persist_len(len)?;
        self.len.store(len, Ordering::Release);
        Ok(())
    }

    /// Grows the medium to cover `end` and populates the pages between the
    /// length and `end`, all under the extend lock: every store past the
    /// length takes that lock, so none lands in the range while it is
    /// populated. The length, the header and every byte stay as they were,
    /// so a crash during or after it finds the device as before.
    fn prepare(&self, end: u64) -> Result<()> {
        self.poison.check(&self.path)?;
        if !self.medium.populates() {
            return Ok(());
        }
        let _guard = self.lock_extend();
        let current = self.len.load(Ordering::Acquire);
        if end <= current {
            return Ok(());
        }
        let (at, end) = self.at(current, (end - current) as usize)?;
        self.reserve(end)?;
        self.medium.populate(at, (end - current) as usize)?;
        Ok(())
    }

    fn prepares(&self) -> bool {
        self.medium.populates()
    }

    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            kind: self.policy.kind(),
            pmem_mode: Some(self.medium.mode()),
            durable_on_write: self.policy != PmPolicy::DrainOnSync,
            sync_scope: match self.policy {
                PmPolicy::DrainOnSync => SyncScope::CallingThread,
                _ => SyncScope::AllThreads,
            },
        }
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn flush_stats(&self) -> Option<FlushStats> {
        Some(self.medium.stats())
    }

    fn poisoned(&self) -> Option<String> {
        self.poison.cause()
    }
}
