//! [`WriteBuffer`]: the device, its write and read paths.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::Instant;

use ferrite_io::{Device, DeviceInfo, DeviceKind, Error, Result, SyncScope};
use ferrite_pmem::{FlushStats, MapOptions, PmemMedium, PmemRegion};

use crate::config::WbufConfig;
use crate::layout::{Geometry, SlotHeader};
use crate::state::{Replaced, State, StreamPolicy};
use crate::stats::{bump, Counters, WbufStats};

/// The shared core of a buffer, used by callers and the destage thread.
#[derive(Debug)]
pub(crate) struct Inner<M: PmemMedium> {
    pub pm: M,
    pub pm_path: PathBuf,
    pub geometry: Geometry,
    pub backing: Arc<dyn Device>,
    pub config: WbufConfig,
    pub state: Mutex<State>,
    /// Signalled when a slot frees, a block unlocks, a write publishes or
    /// a round ends.
    pub changed: Condvar,
    /// Wakes the destage thread.
    pub wake: Condvar,
    /// Serialises rounds and direct writes to the file.
    pub destage_lock: Mutex<()>,
    /// Threads waiting for the destage lock other than the destage thread
    /// (a flush, a write-through): back-to-back rounds end for them.
    pub destage_wanted: AtomicUsize,
    /// Writers share it; operations that must see no writer (a large
    /// write-through, `set_len`) take it alone.
    pub gate: RwLock<()>,
    pub len: AtomicU64,
    /// The destage mark as persisted.
    pub mark: AtomicU64,
    pub cleaner: AtomicBool,
    /// `O_DIRECT` destage writes, when opened on a file that takes them.
    pub direct: Option<crate::direct::DirectWriter>,
    pub poison: Mutex<Option<String>>,
    pub poisoned: AtomicBool,
    pub counters: Counters,
}

/// A durable file on the SSD behind a persistent-memory write buffer; see
/// the crate docs.
#[derive(Debug)]
pub struct WriteBuffer<M: PmemMedium + 'static> {
    pub(crate) inner: Arc<Inner<M>>,
    destager: Option<JoinHandle<()>>,
    prefaulter: Option<JoinHandle<()>>,
    closed: bool,
    /// Set by [`WriteBuffer::discard`]: closing leaves the blocks in PM
    /// and the file as they are.
    discarded: AtomicBool,
}

/// A write buffer on a mapped PM file.
pub type PmemWriteBuffer = WriteBuffer<PmemRegion>;

impl WriteBuffer<PmemRegion> {
    /// Opens (creating if needed) the buffer in the PM file `pm_path` in
    /// front of the file `backing_path`, recovering it if needed.
    pub fn open(
        pm_path: impl AsRef<Path>,
        backing_path: impl AsRef<Path>,
        config: WbufConfig,
    ) -> Result<PmemWriteBuffer> {
        let backing_path = backing_path.as_ref();
        let backing: Arc<dyn Device> = Arc::new(ferrite_io::FileDevice::open(backing_path)?);
        let pm_path = pm_path.as_ref();
        let mut options = MapOptions::new(config.capacity_bytes);
        options.max_len = config.capacity_bytes.max(options.len);
        let region = PmemRegion::map_with(pm_path, options)?;
        let in_place = crate::direct::in_place(config.destage_source, region.mode());
        let direct = config
            .direct_destage
            .then(|| {
                crate::direct::DirectWriter::open(backing_path, config.destage_io_bytes, in_place)
            })
            .flatten();
        WriteBuffer::build(region, pm_path.to_path_buf(), backing, config, direct)
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<M: PmemMedium + 'static> WriteBuffer<M> {
    /// A buffer on `pm` (holding a buffer, or zeros: then one is created)
    /// in front of `backing`, recovered before it returns. `pm_path` names
    /// the PM in messages.
    pub fn with_medium(
        pm: M,
        pm_path: impl Into<PathBuf>,
        backing: Arc<dyn Device>,
        config: WbufConfig,
    ) -> Result<WriteBuffer<M>> {
        WriteBuffer::build(pm, pm_path.into(), backing, config, None)
    }

    fn build(
        pm: M,
        pm_path: PathBuf,
        backing: Arc<dyn Device>,
        config: WbufConfig,
        direct: Option<crate::direct::DirectWriter>,
    ) -> Result<WriteBuffer<M>> {
        config.validate().map_err(|reason| Error::Corrupt {
            path: pm_path.clone(),
            offset: 0,
            reason: format!("bad write-buffer settings: {reason}"),
        })?;
        let opened = crate::recovery::open(&pm, &pm_path, backing.as_ref(), &config)?;
        let streams = StreamPolicy {
            min_blocks: config.stream_writeback_bytes.map_or(u64::MAX, |bytes| {
                (bytes as u64).div_ceil(u64::from(opened.geometry.block))
            }),
            batch: (config.destage_depth * config.destage_io_bytes)
                .div_ceil(opened.geometry.block as usize),
        };
        let state = State::new(opened.geometry.slots as u32, opened.mark, streams);
        let inner = Arc::new(Inner {
            len: AtomicU64::new(backing.len()),
            mark: AtomicU64::new(opened.mark),
            cleaner: AtomicBool::new(config.cleaner),
            direct,
            pm,
            pm_path,
            geometry: opened.geometry,
            backing,
            config,
            state: Mutex::new(state),
            changed: Condvar::new(),
            wake: Condvar::new(),
            destage_lock: Mutex::new(()),
            destage_wanted: AtomicUsize::new(0),
            gate: RwLock::new(()),
            poison: Mutex::new(None),
            poisoned: AtomicBool::new(false),
            counters: Counters::default(),
        });
        bump(&inner.counters.ssd_bytes, opened.replayed_bytes);
        bump(&inner.counters.file_syncs, opened.syncs);
        let destager = if inner.config.background {
            let worker = Arc::clone(&inner);
            let handle = std::thread::Builder::new()
                .name("wbuf-destage".into())
                .spawn(move || crate::destage::run(&worker))
                .map_err(|e| Error::io("spawn destage thread", &inner.pm_path, e))?;
            Some(handle)
        } else {
            None
        };
        // A buffer without a destage thread is a short-lived one (a
        // journal's): it writes little, so faulting pages in ahead would
        // cost more than it saves.
        let prefaulter = if inner.config.background {
            crate::prefault::start(&inner)
        } else {
            None
        };
        Ok(WriteBuffer {
            inner,
            destager,
            prefaulter,
            closed: false,
            discarded: AtomicBool::new(false),
        })
    }

    /// The counters and slot occupancy now.
    pub fn stats(&self) -> WbufStats {
        self.inner.stats()
    }

    /// Whether destaging writes runs to the file straight from PM (else
    /// through a DRAM copy or the page cache): [`crate::DestageSource`].
    pub fn destages_in_place(&self) -> bool {
        self.inner.direct.as_ref().is_some_and(|d| d.in_place())
    }

    /// The buffer's shape.
    pub fn geometry(&self) -> Geometry {
        self.inner.geometry
    }

    /// The PM underneath (crash tests take images of it).
    pub fn medium(&self) -> &M {
        &self.inner.pm
    }

    /// The file behind the buffer.
    pub fn backing(&self) -> &Arc<dyn Device> {
        &self.inner.backing
    }

    /// Returns once every write that returned before the call is in the
    /// synced file (and the destage mark says so).
    pub fn flush(&self) -> Result<()> {
        bump(&self.inner.counters.flushes, 1);
        self.inner.check_poison()?;
        let _round = self.inner.lock_destage();
        self.inner.round()
    }

    /// Cleaner mode: destage every dirty block as soon as possible.
    pub fn set_cleaner(&self, on: bool) {
        self.inner.cleaner.store(on, Ordering::Release);
        self.inner.wake.notify_all();
    }

    /// Destages everything, stops the destage thread and marks the buffer
    /// clean, so the next open needs no recovery. Dropping the buffer does
    /// the same, logging instead of returning an error.
    pub fn close(mut self) -> Result<()> {
        self.shut_down()
    }

    /// Marks the buffer as serving a file that is being deleted: closing
    /// it (or dropping it) then stops the destage thread but neither
    /// destages nor marks the buffer clean, since nothing will read the
    /// file again. The caller deletes the file first and the PM file after,
    /// so a crash in between leaves a buffer without its file, which the
    /// owner recognises as stale.
    pub fn discard(&self) {
        self.discarded.store(true, Ordering::Release);
    }

    fn shut_down(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        lock(&self.inner.state).shutdown = true;
        self.inner.wake.notify_all();
        if let Some(handle) = self.destager.take() {
            if handle.join().is_err() {
                tracing::error!("the write buffer's destage thread panicked");
            }
        }
        if let Some(handle) = self.prefaulter.take() {
            if handle.join().is_err() {
                tracing::error!("the write buffer's prefault thread panicked");
            }
        }
        if self.discarded.load(Ordering::Acquire) {
            return Ok(());
        }
        self.inner.check_poison()?;
        let _round = self.inner.lock_destage();
        self.inner.round()?;
        crate::destage::persist_mark(&self.inner, true)
    }
}

impl<M: PmemMedium + 'static> Drop for WriteBuffer<M> {
    fn drop(&mut self) {
        if let Err(e) = self.shut_down() {
            tracing::warn!(
                "write buffer {} not closed clean: {e}",
                self.inner.pm_path.display()
            );
        }
    }
}

/// The block-sized pieces of a byte range: (block number, offset in the
/// block, bytes).
fn pieces(offset: u64, len: u64, block: u64) -> impl Iterator<Item = (u64, usize, usize)> {
    let end = offset + len;
    let mut at = offset;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let lbn = at / block;
        let within = (at % block) as usize;
        let n = ((block - within as u64).min(end - at)) as usize;
        at += n as u64;
        Some((lbn, within, n))
    })
}

impl<M: PmemMedium> Inner<M> {
    pub fn block(&self) -> u64 {
        u64::from(self.geometry.block)
    }

    /// Takes the destage lock from outside the destage thread, telling a
    /// run of back-to-back rounds to end so this caller need not wait for
    /// the buffer to drain below the low watermark.
    pub fn lock_destage(&self) -> MutexGuard<'_, ()> {
        self.destage_wanted.fetch_add(1, Ordering::AcqRel);
        let guard = lock(&self.destage_lock);
        self.destage_wanted.fetch_sub(1, Ordering::AcqRel);
        guard
    }

    pub fn check_poison(&self) -> Result<()> {
        if !self.poisoned.load(Ordering::Acquire) {
            return Ok(());
        }
        Err(Error::Poisoned {
            path: self.backing.path().to_path_buf(),
            cause: lock(&self.poison).clone().unwrap_or_default(),
        })
    }

    /// Records the first durability failure and returns `error`.
    pub fn poison(&self, error: Error) -> Error {
        let mut cause = lock(&self.poison);
        if cause.is_none() {
            tracing::error!("write buffer poisoned: {error}");
            *cause = Some(error.to_string());
        }
        self.poisoned.store(true, Ordering::Release);
        drop(cause);
        self.changed.notify_all();
        error
    }

    fn stats(&self) -> WbufStats {
        let state = lock(&self.state);
        let mut stats = WbufStats {
            blocks: self.geometry.slots,
            free: state.free_count() as u64,
            dirty: state.dirty as u64,
            under_writeback: state.writeback as u64,
            clean: state.clean_count() as u64,
            ..WbufStats::default()
        };
        drop(state);
        self.counters.fill(&mut stats);
        stats
    }

    fn too_large(&self, offset: u64, len: usize) -> Error {
        Error::TooLarge {
            path: self.backing.path().to_path_buf(),
            offset,
            len: len as u64,
        }
    }

    /// Stages `data` at `offset`, block by block.
    fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.check_poison()?;
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or_else(|| self.too_large(offset, data.len()))?;
        let blocks = end.div_ceil(self.block()) - offset / self.block();
        if blocks > self.geometry.slots / 2 {
            return self.write_through_large(offset, data);
        }
        let _shared = self.gate.read().unwrap_or_else(PoisonError::into_inner);
        let mut done = 0usize;
        for (lbn, within, n) in pieces(offset, data.len() as u64, self.block()) {
            self.write_block(lbn, within, &data[done..done + n])?;
            done += n;
        }
        bump(&self.counters.user_bytes, data.len() as u64);
        Ok(())
    }

    /// Waits for and takes block `lbn`'s write lock.
    fn lock_block(&self, lbn: u64) -> MutexGuard<'_, State> {
        let mut state = lock(&self.state);
        while state.is_locked(lbn) {
            state = self.wait_changed(state);
        }
        state.lock_block(lbn);
        state
    }

    /// Waits on `changed`, counted in `changed_waiters` (under the state
    /// lock, so a signaller that looks at the count under the lock after
    /// changing the state cannot miss this waiter).
    pub fn wait_changed<'a>(&self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        state.changed_waiters += 1;
        let mut state = self
            .changed
            .wait(state)
            .unwrap_or_else(PoisonError::into_inner);
        state.changed_waiters -= 1;
        state
    }

    /// Releases the state lock and signals `changed` if anyone waits on it.
    fn signal_changed(&self, state: MutexGuard<'_, State>) {
        let waiting = state.changed_waiters > 0;
        drop(state);
        if waiting {
            self.changed.notify_all();
        }
    }

    fn unlock_block(&self, lbn: u64) {
        let mut state = lock(&self.state);
        state.unlock_block(lbn);
        self.signal_changed(state);
    }

    /// One block's write, under its write lock. A whole block with a free
    /// slot at hand takes its lock, its slot and its sequence number in one
    /// critical section, and publishes and unlocks in one more: two trips
    /// through the state mutex a write, the least the DRAM index allows.
    fn write_block(&self, lbn: u64, within: usize, data: &[u8]) -> Result<()> {
        let mut state = self.lock_block(lbn);
        if within == 0 && data.len() == self.block() as usize {
            if let Some(slot) = state.take_slot() {
                let seq = state.begin_write(slot, lbn, data.len() as u32);
                drop(state);
                return self.persist_slot(lbn, slot, seq, data);
            }
        }
        let current = state.lookup(lbn);
        drop(state);
        self.stage_block(lbn, within, data, current)
    }

    /// The block's new image: `data` over its current contents (`data`
    /// itself for a whole block).
    fn image<'d>(
        &self,
        lbn: u64,
        within: usize,
        data: &'d [u8],
        current: Option<(u32, u32)>,
    ) -> Result<Cow<'d, [u8]>> {
        let block = self.block() as usize;
        if within == 0 && data.len() == block {
            return Ok(Cow::Borrowed(data));
        }
        let mut image = vec![0u8; block];
        // The block's write lock keeps its slot from being reused.
        let valid = match current {
            Some((slot, len)) => {
                self.pm
                    .read(self.geometry.data_at(slot), &mut image[..len as usize])?;
                len as usize
            }
            None => self.backing.read_at(lbn * self.block(), &mut image)?,
        };
        image[within..within + data.len()].copy_from_slice(data);
        image.truncate(valid.max(within + data.len()));
        Ok(Cow::Owned(image))
    }

    /// The slow path of a block's write (a partial block, or no free slot
    /// at hand), holding its write lock, which it releases.
    fn stage_block(
        &self,
        lbn: u64,
        within: usize,
        data: &[u8],
        current: Option<(u32, u32)>,
    ) -> Result<()> {
        let staged = self.image(lbn, within, data, current).and_then(|image| {
            let slot = self.take_slot()?;
            Ok((image, slot))
        });
        let (image, slot) = match staged {
            Ok((image, Some(slot))) => (image, slot),
            Ok((_, None)) => {
                let result = self.write_through_block(lbn, within, data);
                self.unlock_block(lbn);
                return result;
            }
            Err(e) => {
                self.unlock_block(lbn);
                return Err(e);
            }
        };
        let seq = lock(&self.state).begin_write(slot, lbn, image.len() as u32);
        self.persist_slot(lbn, slot, seq, &image)
    }

    /// Copies `image` and its header into `slot`, persists both with one
    /// drain, then publishes the slot and releases the block's write lock.
    fn persist_slot(&self, lbn: u64, slot: u32, seq: u64, image: &[u8]) -> Result<()> {
        let len = image.len() as u32;
        let header = SlotHeader {
            offset: lbn * self.block(),
            seq,
            len,
        };
        let copied = self
            .pm
            .copy_nodrain(self.geometry.data_at(slot), image)
            .and_then(|()| {
                self.pm
                    .copy_nodrain(self.geometry.header_at(slot), &header.encode(image))
            });
        if let Err(e) = copied {
            let mut state = lock(&self.state);
            state.abort_write(slot, seq);
            state.unlock_block(lbn);
            drop(state);
            self.changed.notify_all();
            return Err(e.into());
        }
        // The write's one drain: data and header persisted together.
        self.pm.drain();
        let mut state = lock(&self.state);
        let replaced = state.publish(slot, seq, Instant::now());
        state.unlock_block(lbn);
        let wake = self.should_wake(&state) && state.destage_idle;
        self.signal_changed(state);
        if wake {
            self.wake.notify_all();
        }
        self.len
            .fetch_max(lbn * self.block() + u64::from(len), Ordering::AcqRel);
        match replaced {
            Replaced::Nothing => bump(&self.counters.write_misses, 1),
            Replaced::Uncommitted { absorbed_bytes } => {
                bump(&self.counters.write_hits_uncommitted, 1);
                bump(&self.counters.absorbed_bytes, u64::from(absorbed_bytes));
            }
            Replaced::Committed => bump(&self.counters.write_hits_committed, 1),
        }
        Ok(())
    }

    /// Whether the dirty share calls for a destage round now.
    pub fn should_wake(&self, state: &State) -> bool {
        let dirty = (state.dirty + state.writeback) as f64;
        let cleaner = self.cleaner.load(Ordering::Acquire);
        state.dirty > 0
            && (cleaner
                || state.space_waiters > 0
                || state.stream_due()
                || dirty >= self.config.high_watermark * self.geometry.slots as f64)
    }

    /// A free slot, waiting up to `full_wait` for one; `None` if the
    /// buffer stayed full (then the caller writes through).
    fn take_slot(&self) -> Result<Option<u32>> {
        let mut state = lock(&self.state);
        if let Some(slot) = state.take_slot() {
            return Ok(Some(slot));
        }
        bump(&self.counters.waits, 1);
        let mut deadline = Instant::now() + self.config.full_wait;
        state.space_waiters += 1;
        let slot = loop {
            if self.poisoned.load(Ordering::Acquire) {
                break None;
            }
            if let Some(slot) = state.take_slot() {
                break Some(slot);
            }
            let now = Instant::now();
            if state.writeback > 0 {
                // A round is draining the buffer: wait for it rather than
                // write through (the wait limit is for a buffer that
                // stays full with nothing draining it).
                deadline = deadline.max(now + self.config.full_wait);
            }
            if now >= deadline {
                break None;
            }
            if !self.config.background && state.dirty > 0 {
                // No destage thread: make room in this thread.
                drop(state);
                let round = self.round_now();
                state = lock(&self.state);
                if let Err(e) = round {
                    state.space_waiters -= 1;
                    return Err(e);
                }
                continue;
            }
            self.wake.notify_all();
            state.changed_waiters += 1;
            state = self
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            state.changed_waiters -= 1;
        };
        state.space_waiters -= 1;
        drop(state);
        self.check_poison()?;
        Ok(slot)
    }

    /// Runs one destage round now, behind any running one.
    fn round_now(&self) -> Result<()> {
        let _round = self.lock_destage();
        self.round()
    }

    /// A block the buffer has no room for goes to the file: after a round
    /// (so the file holds a prefix), under the destage lock.
    fn write_through_block(&self, lbn: u64, within: usize, data: &[u8]) -> Result<()> {
        let _round = self.lock_destage();
        self.round()?;
        self.direct_write(lbn * self.block() + within as u64, data)?;
        lock(&self.state).drop_clean(lbn);
        bump(&self.counters.bypassed, 1);
        Ok(())
    }

    /// A write larger than half the buffer: alone, after a round.
    fn write_through_large(&self, offset: u64, data: &[u8]) -> Result<()> {
        let _alone = self.gate.write().unwrap_or_else(PoisonError::into_inner);
        let _round = self.lock_destage();
        self.round()?;
        self.direct_write(offset, data)?;
        let mut state = lock(&self.state);
        let end = offset + data.len() as u64;
        for lbn in offset / self.block()..end.div_ceil(self.block()) {
            state.drop_clean(lbn);
        }
        drop(state);
        self.changed.notify_all();
        bump(
            &self.counters.bypassed,
            data.len().div_ceil(self.block() as usize) as u64,
        );
        bump(&self.counters.user_bytes, data.len() as u64);
        Ok(())
    }

    /// `pwrite` + `fdatasync` to the file; a failed sync poisons.
    fn direct_write(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.backing.write_at(offset, data)?;
        bump(&self.counters.ssd_bytes, data.len() as u64);
        self.sync_backing()?;
        self.len
            .fetch_max(offset + data.len() as u64, Ordering::AcqRel);
        Ok(())
    }

    /// `fdatasync`s the file; a failure poisons the buffer.
    pub fn sync_backing(&self) -> Result<()> {
        bump(&self.counters.file_syncs, 1);
        self.backing.sync().map_err(|e| self.poison(e))
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let len = self.len.load(Ordering::Acquire);
        if offset >= len {
            return Ok(0);
        }
        let n = ((len - offset).min(buf.len() as u64)) as usize;
        let mut done = 0usize;
        for (lbn, within, count) in pieces(offset, n as u64, self.block()) {
            let out = &mut buf[done..done + count];
            out.fill(0);
            let state = lock(&self.state);
            if let Some((slot, valid)) = state.lookup(lbn) {
                // Copied under the lock: the slot cannot be reused meanwhile.
                let valid = (valid as usize).saturating_sub(within).min(count);
                self.pm
                    .read(self.geometry.data_at(slot) + within, &mut out[..valid])?;
                drop(state);
                bump(&self.counters.read_hits, 1);
            } else {
                drop(state);
                self.backing
                    .read_at(lbn * self.block() + within as u64, out)?;
                bump(&self.counters.read_misses, 1);
            }
            done += count;
        }
        Ok(n)
    }

    /// Truncates or extends the file, alone. A truncation runs after a
    /// round, so no buffered block can later bring back bytes past the new
    /// end. An extension needs no round (every buffered block lies below
    /// the old end, and the new bytes are zeros no block covers), only the
    /// file's own extension and sync: a log that preallocates its file
    /// this way does not destage the whole buffer on the writer's thread.
    fn set_len(&self, len: u64) -> Result<()> {
        self.check_poison()?;
        let _alone = self.gate.write().unwrap_or_else(PoisonError::into_inner);
        let _round = self.lock_destage();
        if len >= self.len.load(Ordering::Acquire) {
            self.backing.set_len(len)?;
            self.sync_backing()?;
            self.len.store(len, Ordering::Release);
            return Ok(());
        }
        self.round()?;
        self.backing.set_len(len)?;
        self.sync_backing()?;
        let mut state = lock(&self.state);
        let first = len / self.block();
        let doomed: Vec<u64> = state
            .index
            .keys()
            .copied()
            .filter(|&l| l >= first)
            .collect();
        for lbn in doomed {
            state.drop_clean(lbn);
        }
        drop(state);
        self.changed.notify_all();
        self.len.store(len, Ordering::Release);
        Ok(())
    }
}

impl<M: PmemMedium + 'static> Device for WriteBuffer<M> {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.inner.read(offset, buf)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.inner.write(offset, data)
    }

    fn append(&self, data: &[u8]) -> Result<u64> {
        self.inner.check_poison()?;
        let offset = self
            .inner
            .len
            .fetch_add(data.len() as u64, Ordering::AcqRel);
        self.inner.write(offset, data)?;
        Ok(offset)
    }

    fn sync(&self) -> Result<()> {
        // Every write is durable in PM when it returns; nothing to order.
        self.inner.check_poison()
    }

    fn len(&self) -> u64 {
        self.inner.len.load(Ordering::Acquire)
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.inner.set_len(len)
    }

    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            kind: DeviceKind::Wbuf,
            pmem_mode: Some(self.inner.pm.mode()),
            durable_on_write: true,
            sync_scope: SyncScope::AllThreads,
        }
    }

    fn path(&self) -> &Path {
        self.inner.backing.path()
    }

    fn flush_stats(&self) -> Option<FlushStats> {
        Some(self.inner.pm.stats())
    }

    fn poisoned(&self) -> Option<String> {
        if !self.inner.poisoned.load(Ordering::Acquire) {
            return None;
        }
        lock(&self.inner.poison).clone()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.stats().named()
    }
}
