//! The group-commit queue: the state every appender and committer shares,
//! and the two ways records become durable.
//!
//! - **File path** (leader/follower): appenders frame their records into one
//!   in-memory buffer, in LSN order, under the lock. A committer whose record
//!   is not yet durable either waits, if a leader is doing I/O, or becomes
//!   the leader: it takes the *whole* buffer, writes it with one call and
//!   syncs once, without the lock. Records appended meanwhile queue up for
//!   the next leader. So a batch holds whatever arrived during the previous
//!   sync: it grows when the device is slow and shrinks when it is fast,
//!   with no timer (paper 004's producer/consumer queue).
//! - **PM path** (self-persisting): a fence only orders its own thread's
//!   stores, so no leader can persist another thread's copy. Each appender
//!   reserves a range, copies its record there and persists it itself
//!   (the device drains on every write); the durable LSN then advances over
//!   the contiguous prefix of completed records.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::Thread;
use std::time::Instant;

use ferrite_io::Device;
use ferrite_pmem::FlushStats;

use crate::durability::{Durability, WalConfig};
use crate::error::{Error, Result};
use crate::record::{LogHeader, Lsn, LOG_HEADER_LEN};
use crate::stats::Counters;

/// One log file and how records reach its medium.
#[derive(Debug)]
pub(crate) struct Segment {
    pub(crate) device: Arc<dyn Device>,
    pub(crate) header: LogHeader,
    /// Appenders persist their own records (mapped PM); else a leader
    /// writes each round's records with one write (and syncs, where the
    /// device is not durable on write).
    pub(crate) self_persist: bool,
    /// On the PM path, whether a write needs the appender's own `sync` to be
    /// durable (PM drained at sync, which covers the calling thread only).
    pub(crate) sync_after_write: bool,
    /// Records are padded to multiples of this: a cache line on the PM path.
    pub(crate) align: usize,
    /// The device's flush accounting when this file was opened.
    pub(crate) flush_base: Option<FlushStats>,
}

/// Why the log refuses writes.
#[derive(Clone, Debug)]
pub(crate) struct PoisonCause {
    pub(crate) cause: String,
    pub(crate) no_space: bool,
}

/// Everything guarded by the log's mutex.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) segment: Arc<Segment>,
    /// LSN the next appended record gets.
    pub(crate) next_lsn: Lsn,
    /// Device offset the next appended record goes to.
    pub(crate) next_offset: u64,
    /// File path: framed records not yet handed to the device, starting at
    /// device offset `written_offset`.
    pub(crate) buffer: Vec<u8>,
    /// An empty buffer kept to swap in, so no batch allocates.
    pub(crate) spare: Vec<u8>,
    /// Last LSN handed to the device.
    pub(crate) written_lsn: Lsn,
    pub(crate) written_offset: u64,
    /// A leader is writing or syncing (without the lock).
    pub(crate) io_active: bool,
    /// That leader is the periodic syncer.
    pub(crate) sync_running: bool,
    /// Periodic mode: the syncer is to sync now, not at the end of its
    /// interval (`Wal::sync_soon`).
    pub(crate) sync_soon: bool,
    /// Periodic mode: since when writes have been postponed behind a sync.
    pub(crate) postponed_since: Option<Instant>,
    /// Every record up to this LSN is durable.
    pub(crate) durable_lsn: Lsn,
    /// And every byte before this offset.
    pub(crate) durable_offset: u64,
    /// File path: bytes before this offset were released from the page
    /// cache (`Shared::release_cache`).
    pub(crate) released_offset: u64,
    /// PM path: end offset and completion of LSNs `durable_lsn + 1 ..`.
    pub(crate) pending: VecDeque<(u64, bool)>,
    /// PM path: bytes of the device already extended (zeroed) for records.
    pub(crate) allocated: u64,
    /// PM path: the end up to which the device was asked to ready itself
    /// ahead of the log (`Device::prepare`, on a thread of its own).
    pub(crate) prepared: u64,
    pub(crate) poison: Option<PoisonCause>,
    pub(crate) closed: bool,
    /// A log switch is draining the log: appends wait.
    pub(crate) switching: bool,
    /// Threads blocked on `changed`, so completions skip the wake-up call
    /// when nobody waits.
    pub(crate) waiters: usize,
    /// File path: committers parked until their LSN is durable. A leader
    /// unparks exactly those its sync covered (and one more to lead the
    /// next batch), so they return without touching the lock again: with
    /// dozens of committers, waking all of them through the condition
    /// variable would make each fight for the mutex on every batch.
    pub(crate) parked: Vec<(Lsn, Thread)>,
}

/// What the log's threads share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) state: Mutex<State>,
    /// Signalled when durability advances, space frees up, the log is
    /// poisoned, closed or switched.
    pub(crate) changed: Condvar,
    /// Wakes the periodic syncer early (at close).
    pub(crate) syncer_wake: Condvar,
    /// `State::durable_lsn`, readable without the lock.
    pub(crate) durable: AtomicU64,
    /// Whether the current segment is on the PM path (self-persisting).
    pub(crate) self_persist: AtomicBool,
    /// File path: whether durable bytes leave the page cache after a sync.
    pub(crate) release_cache: AtomicBool,
    /// `WalConfig::periodic_sync_bytes`, changeable while open.
    pub(crate) periodic_sync_bytes: AtomicU64,
    pub(crate) config: WalConfig,
    pub(crate) counters: Counters,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Blocks until `changed` is signalled.
    pub(crate) fn wait<'a>(&self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        state.waiters += 1;
        let mut state = self
            .changed
            .wait(state)
            .unwrap_or_else(PoisonError::into_inner);
        state.waiters -= 1;
        state
    }

    pub(crate) fn notify(&self, state: &State) {
        if state.waiters > 0 {
            self.changed.notify_all();
        }
    }

    /// The error every operation gets once the log is poisoned or closed.
    pub(crate) fn refusal(&self, state: &State) -> Option<Error> {
        let path = || state.segment.device.path().to_path_buf();
        if let Some(p) = &state.poison {
            return Some(Error::Poisoned {
                path: path(),
                cause: p.cause.clone(),
                no_space: p.no_space,
            });
        }
        state.closed.then(|| Error::Closed { path: path() })
    }

    /// Records the first failure; every waiter wakes up to the error.
    pub(crate) fn poison(&self, state: &mut State, error: &Error) {
        for (_, thread) in state.parked.drain(..) {
            thread.unpark();
        }
        if state.poison.is_none() {
            tracing::error!(
                path = %state.segment.device.path().display(),
                "write-ahead log poisoned: {error}"
            );
            state.poison = Some(PoisonCause {
                cause: error.to_string(),
                no_space: error.is_no_space(),
            });
        }
        self.changed.notify_all();
    }

    /// File path: hands the whole buffer to the device in one write and, if
    /// `sync`, syncs once. Called with the lock, which it releases during the
    /// I/O; only one leader runs at a time (`io_active`).
    pub(crate) fn leader_round<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        sync: bool,
    ) -> (MutexGuard<'a, State>, Result<()>) {
        debug_assert!(!state.io_active && !state.segment.self_persist);
        state.io_active = true;
        let spare = std::mem::take(&mut state.spare);
        let batch = std::mem::replace(&mut state.buffer, spare);
        let offset = state.written_offset;
        let last_lsn = state.next_lsn - 1;
        let end = state.next_offset;
        debug_assert_eq!(offset + batch.len() as u64, end);
        let device = Arc::clone(&state.segment.device);
        drop(state);

        let result = write_and_sync(device.as_ref(), offset, &batch, sync);

        let mut state = self.lock();
        state.io_active = false;
        state.spare = recycle(batch);
        let mut release = None;
        match &result {
            Ok(wrote) => {
                if *wrote {
                    self.counters.writes.fetch_add(1, Ordering::Relaxed);
                }
                state.written_lsn = last_lsn;
                state.written_offset = end;
                state.postponed_since = None;
                if sync {
                    self.counters.syncs.fetch_add(1, Ordering::Relaxed);
                    release = self.synced(&mut state, last_lsn, end);
                } else {
                    self.sync_early_if_due(&mut state);
                }
                self.notify(&state);
            }
            Err(e) => self.poison(&mut state, e),
        }
        let state = self.end_round(state, device.as_ref(), release);
        (state, result.map(|_| ()))
    }

    /// A sync made everything up to `lsn` (ending at `offset`) durable:
    /// counts the batch, advances, and returns what to release.
    fn synced(&self, state: &mut State, lsn: Lsn, offset: u64) -> Option<(u64, u64)> {
        self.counters.batch(lsn - state.durable_lsn);
        self.advance_durable(state, lsn, offset);
        self.take_release(state)
    }

    /// The end of a round: wakes the parked committers it served (and the
    /// next leader) and releases `release` from `device`'s cache, both
    /// without the lock.
    fn end_round<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        device: &dyn Device,
        release: Option<(u64, u64)>,
    ) -> MutexGuard<'a, State> {
        let wake = take_wakeable(&mut state);
        if wake.is_empty() && release.is_none() {
            return state;
        }
        drop(state);
        wake.iter().for_each(Thread::unpark);
        if let Some((from, to)) = release {
            device.release_cache(from, to - from);
        }
        self.lock()
    }

    /// [`Durability::Periodic`]: wakes the syncer before its interval is up
    /// once `periodic_sync_bytes` are written but not durable.
    fn sync_early_if_due(&self, state: &mut State) {
        let bytes = self.periodic_sync_bytes.load(Ordering::Relaxed);
        let periodic = matches!(self.config.durability, Durability::Periodic(_));
        if periodic
            && bytes > 0
            && !state.sync_running
            && !state.sync_soon
            && state.written_offset - state.durable_offset >= bytes
        {
            state.sync_soon = true;
            self.syncer_wake.notify_all();
        }
    }

    /// The periodic syncer's sync of what leaders have handed to the OS. It
    /// does not hold `io_active`: leaders go on writing while the device
    /// syncs (a write does not wait for a concurrent `fdatasync` of its
    /// file), and the sync makes durable every write that returned before
    /// it began, which is all it claims. Meanwhile `sync_running` tells
    /// [`Durability::Periodic`](crate::Durability::Periodic) commits to
    /// leave their writes to another thread, so that the event loop never
    /// writes during a sync, on a file system where that would wait.
    pub(crate) fn sync_written<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
    ) -> (MutexGuard<'a, State>, Result<()>) {
        let segment = Arc::clone(&state.segment);
        let (lsn, offset) = (state.written_lsn, state.written_offset);
        state.sync_running = true;
        drop(state);
        let result = segment.device.sync().map_err(Error::from);
        let mut state = self.lock();
        // A log switch meanwhile made the old file durable itself and
        // replaced the state: nothing here is about the new file.
        let same_file = Arc::ptr_eq(&state.segment, &segment);
        let mut release = None;
        if same_file {
            state.sync_running = false;
        }
        match &result {
            Ok(()) => {
                self.counters.syncs.fetch_add(1, Ordering::Relaxed);
                if same_file && lsn > state.durable_lsn {
                    release = self.synced(&mut state, lsn, offset);
                }
                self.notify(&state);
            }
            Err(e) => self.poison(&mut state, e),
        }
        let state = self.end_round(state, segment.device.as_ref(), release);
        (state, result)
    }

    /// After a sync: the durable stretch of the file to release from the
    /// page cache, if releasing is on and it has grown by
    /// [`RELEASE_STEP_BYTES`] since the last release (a sync per commit
    /// would otherwise advise the kernel on every commit). The header is
    /// kept. Log pages are never read again while the log is open (replay
    /// reads them once, at start-up), and a page freed by a release is the
    /// next one a write gets: appends then reuse memory the machine
    /// already holds instead of taking fresh pages, each of which costs a
    /// fault of its own, and more where the memory was handed back to a
    /// hypervisor (free page reporting; docs/wal.md).
    fn take_release(&self, state: &mut State) -> Option<(u64, u64)> {
        if !self.release_cache.load(Ordering::Relaxed) {
            return None;
        }
        // Whole pages: the one holding the durable end is still written.
        let from = state.released_offset.max(LOG_HEADER_LEN as u64);
        let to = state.durable_offset / RELEASE_PAGE_BYTES * RELEASE_PAGE_BYTES;
        if to < from + RELEASE_STEP_BYTES {
            return None;
        }
        state.released_offset = to;
        Some((from, to))
    }

    /// Marks everything up to `lsn` (ending at `offset`) durable.
    fn advance_durable(&self, state: &mut State, lsn: Lsn, offset: u64) {
        debug_assert!(lsn >= state.durable_lsn && offset >= state.durable_offset);
        state.durable_lsn = lsn;
        state.durable_offset = offset;
        self.durable.store(lsn, Ordering::Release);
    }

    /// PM path: record `lsn` is persisted (or failed). Advances the durable
    /// LSN over the completed prefix.
    pub(crate) fn complete(&self, lsn: Lsn, result: Result<()>) -> Result<()> {
        self.complete_range(lsn, lsn, result)
    }

    /// [`Shared::complete`] for the records `first..=last`, persisted
    /// together by one write (`Wal::append_batch`): one lock round for all.
    pub(crate) fn complete_range(&self, first: Lsn, last: Lsn, result: Result<()>) -> Result<()> {
        let mut state = self.lock();
        if let Err(e) = result {
            self.poison(&mut state, &e);
            return Err(e);
        }
        // A log switch waits for every pending record, so the records are
        // still in the queue of this segment.
        let from = (first - state.durable_lsn - 1) as usize;
        let to = (last - state.durable_lsn) as usize;
        for slot in state.pending.iter_mut().take(to).skip(from) {
            slot.1 = true;
        }
        let mut advanced = 0;
        let (mut durable_lsn, mut durable_offset) = (state.durable_lsn, state.durable_offset);
        while let Some(&(end, true)) = state.pending.front() {
            state.pending.pop_front();
            durable_lsn += 1;
            durable_offset = end;
            advanced += 1;
        }
        if advanced > 0 {
            self.self_persisted_batch(&mut state, advanced, durable_lsn, durable_offset);
        }
        Ok(())
    }

    fn self_persisted_batch(&self, state: &mut State, records: u64, lsn: Lsn, offset: u64) {
        self.counters.batch(records);
        self.advance_durable(state, lsn, offset);
        self.notify(state);
    }
}

/// Capacity a written batch's buffer always keeps for the next one.
const BUFFER_KEEP_BYTES: usize = 1 << 20;
/// Durable bytes gathered before they are released from the page cache.
const RELEASE_STEP_BYTES: u64 = 1 << 20;
/// Releases end on a multiple of this (the page size).
const RELEASE_PAGE_BYTES: u64 = 4096;

/// Empties a written batch's buffer for reuse as the spare, giving back
/// what a burst grew it to ([`ferrite_io::buf::give_back`]). Batches last
/// until the next write or sync, so a client that pipelines a million
/// SETs while a sync is in flight grows both buffers to many megabytes
/// (11 and 5.7 MB at 1M x 100 B loaded by `redis-cli --pipe`): 5% of the
/// server's memory at that size.
fn recycle(mut batch: Vec<u8>) -> Vec<u8> {
    let written = batch.len();
    batch.clear();
    ferrite_io::buf::give_back(&mut batch, written, BUFFER_KEEP_BYTES);
    batch
}

/// The parked committers to wake after a round: every one whose LSN is now
/// durable, and the first of the others, to lead the next batch.
fn take_wakeable(state: &mut State) -> Vec<Thread> {
    if state.parked.is_empty() {
        return Vec::new();
    }
    let durable = state.durable_lsn;
    let mut wake = Vec::new();
    let mut next_leader: Option<usize> = None;
    let mut kept = Vec::with_capacity(state.parked.len());
    for (lsn, thread) in state.parked.drain(..) {
        if lsn <= durable {
            wake.push(thread);
        } else {
            if next_leader.is_none_or(|i: usize| kept_lsn(&kept, i) > lsn) {
                next_leader = Some(kept.len());
            }
            kept.push((lsn, thread));
        }
    }
    if let Some(i) = next_leader {
        // Woken first, so the next sync starts while the others are still
        // being woken: the device should never wait for the CPU.
        let (_, thread) = kept.swap_remove(i);
        wake.insert(0, thread);
    }
    state.parked = kept;
    wake
}

fn kept_lsn(kept: &[(Lsn, Thread)], i: usize) -> Lsn {
    kept.get(i).map_or(Lsn::MAX, |(lsn, _)| *lsn)
}

/// Writes `batch` at `offset` (if any) and syncs (if asked); returns whether
/// it wrote.
fn write_and_sync(device: &dyn Device, offset: u64, batch: &[u8], sync: bool) -> Result<bool> {
    let wrote = !batch.is_empty();
    if wrote {
        device.write_at(offset, batch)?;
    }
    if sync {
        device.sync()?;
    }
    Ok(wrote)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_buffer_gives_back_what_a_burst_grew_it_to() {
        let burst = vec![7u8; 16 << 20];
        assert_eq!(recycle(burst).capacity(), 16 << 20, "a full batch is kept");

        let mut grown = Vec::with_capacity(16 << 20);
        grown.extend_from_slice(b"one small batch");
        let spare = recycle(grown);
        assert!(spare.is_empty());
        assert_eq!(spare.capacity(), BUFFER_KEEP_BYTES);

        let mut steady = Vec::with_capacity(4 << 20);
        steady.resize(3 << 20, 1u8);
        let cap = steady.capacity();
        let spare = recycle(steady);
        assert!(spare.is_empty());
        assert_eq!(spare.capacity(), cap, "a buffer its batches fill is kept");

        let mut small = Vec::with_capacity(64 << 10);
        small.push(1u8);
        assert_eq!(recycle(small).capacity(), 64 << 10);

        let mut after_burst = Vec::with_capacity(32 << 20);
        after_burst.resize(3 << 20, 1u8);
        assert_eq!(recycle(after_burst).capacity(), 6 << 20);
    }
}
