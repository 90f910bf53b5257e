//! [`Wal`]: opening a log, appending, committing, switching files, closing.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use ferrite_io::{Device, DeviceKind, SyncScope};

use crate::durability::{Durability, WalConfig, PERIODIC_POSTPONE_MAX};
use crate::error::{Error, Result};
use crate::group::{Segment, Shared, State};

/// Preallocation steps a PM log's device is readied for at a time, ahead
/// of its appends (`Wal::prepare_ahead`).
const PREPARE_STEPS: u64 = 4;
use crate::reader::payload_len_max;
use crate::record::{
    encode_record, framed_len, LogHeader, Lsn, LOG_HEADER_LEN, LOG_MAGIC, PM_RECORD_ALIGN,
    RECORD_ALIGN,
};
use crate::recovery::{recover_visiting, Recovery, Visit};
use crate::stats::{Counters, WalStats};

/// PM path: checks of the durable LSN, yielding the CPU between them, before
/// a committer blocks. The record it waits for is being copied by another
/// thread right now (a fraction of a microsecond), and a sleep and wake-up on
/// the condition variable costs more than that. Yielding rather than
/// spinning lets that thread run when there are more threads than cores.
/// The file path never spins: a sync takes tens of microseconds.
const YIELD_CHECKS: u32 = 8;

thread_local! {
    /// Each appender frames its PM records here, outside the lock.
    static FRAME: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A write-ahead log over a [`Device`], shared by many threads (`&Wal` is
/// enough to append and commit).
///
/// See the crate documentation for an example and `docs/wal.md` for the
/// design.
#[derive(Debug)]
pub struct Wal {
    pub(crate) shared: Arc<Shared>,
    syncer: Option<JoinHandle<()>>,
    recovery: Recovery,
}

impl Wal {
    /// Opens the log on `device`: initialises an empty (or all-zero) device
    /// with a header, else recovers it (dropping a torn tail; a damaged
    /// record in the middle is [`Error::Corrupt`]).
    pub fn open(device: Arc<dyn Device>, config: WalConfig) -> Result<Wal> {
        Wal::open_visiting(device, config, &mut |_| true)
    }

    /// [`Wal::open`], handing each record recovery keeps to `visit` as
    /// [`crate::check_visiting`] does: a caller replaying the log reads it
    /// once, not once for recovery and again for itself.
    pub fn open_visiting(
        device: Arc<dyn Device>,
        config: WalConfig,
        visit: &mut dyn FnMut(Visit<'_>) -> bool,
    ) -> Result<Wal> {
        config.validate()?;
        let recovery = if is_blank(device.as_ref())? {
            let header = LogHeader::new(config.base_lsn, config.max_in_flight_bytes as u64);
            write_header(device.as_ref(), &header)?;
            Recovery {
                header,
                records: 0,
                next_lsn: header.base_lsn,
                end_offset: LOG_HEADER_LEN as u64,
                torn_tail: None,
            }
        } else {
            recover_visiting(device.as_ref(), visit)?
        };
        let segment = Arc::new(Segment::new(device, recovery.header));
        let state = State::new(segment, recovery.next_lsn, recovery.end_offset);
        let shared = Arc::new(Shared {
            durable: AtomicU64::new(state.durable_lsn),
            self_persist: AtomicBool::new(state.segment.self_persist),
            release_cache: AtomicBool::new(config.release_synced_cache),
            periodic_sync_bytes: AtomicU64::new(config.periodic_sync_bytes),
            state: Mutex::new(state),
            changed: Condvar::new(),
            syncer_wake: Condvar::new(),
            config,
            counters: Counters::default(),
        });
        let syncer = match config.durability {
            Durability::Periodic(interval) => Some(
                crate::syncer::spawn(Arc::clone(&shared), interval).map_err(|e| Error::Config {
                    reason: format!("cannot start the periodic sync thread: {e}"),
                })?,
            ),
            _ => None,
        };
        Ok(Wal {
            shared,
            syncer,
            recovery,
        })
    }

    /// What recovery found when the log was opened.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// The device of the current log file.
    pub fn device(&self) -> Arc<dyn Device> {
        Arc::clone(&self.shared.lock().segment.device)
    }

    /// Every record up to this LSN is durable.
    pub fn durable_lsn(&self) -> Lsn {
        self.shared.durable.load(Ordering::Acquire)
    }

    /// Every record up to this LSN is in the operating system's hands
    /// (written to the file, or persisted on persistent memory) or durable:
    /// what survives a crash of the process. Less than a record's LSN after
    /// a [`Wal::commit`] that postponed its write behind a running sync
    /// ([`Durability::Periodic`]).
    pub fn written_lsn(&self) -> Lsn {
        let state = self.shared.lock();
        if state.segment.self_persist {
            state.next_lsn.saturating_sub(1)
        } else {
            state.written_lsn.max(self.durable_lsn())
        }
    }

    /// The LSN the next appended record will get.
    pub fn next_lsn(&self) -> Lsn {
        self.shared.lock().next_lsn
    }

    /// Why appends and commits are refused, if they are: an earlier write
    /// or sync failed ([`Error::Poisoned`]) or the log was closed. Lets a
    /// user that is not committing right now notice a failure of a
    /// background sync (`Durability::Periodic`).
    pub fn refusal(&self) -> Option<Error> {
        let state = self.shared.lock();
        self.shared.refusal(&state)
    }

    /// Whether durable stretches of the log file leave the page cache from
    /// now on (the open-time value is [`WalConfig::release_synced_cache`]).
    pub fn set_release_cache(&self, release: bool) {
        self.shared.release_cache.store(release, Ordering::Relaxed);
    }

    /// [`Durability::Periodic`]: the unsynced bytes that make the syncer
    /// sync before its interval is up, 0 for none (the open-time value is
    /// [`WalConfig::periodic_sync_bytes`]).
    pub fn set_periodic_sync_bytes(&self, bytes: u64) {
        self.shared
            .periodic_sync_bytes
            .store(bytes, Ordering::Relaxed);
    }

    /// The configuration the log was opened with.
    pub fn config(&self) -> &WalConfig {
        &self.shared.config
    }

    /// Accounting since the log was opened (flush accounting: since the
    /// current file was opened).
    pub fn stats(&self) -> WalStats {
        let segment = Arc::clone(&self.shared.lock().segment);
        let flush = match (segment.device.flush_stats(), segment.flush_base) {
            (Some(now), Some(base)) => Some(now - base),
            (now, _) => now,
        };
        WalStats::from_counters(&self.shared.counters, flush)
    }

    /// Appends a record and returns its LSN. The record is durable once
    /// [`Wal::commit`] of this LSN returns (at [`Durability::EveryCommit`]).
    /// Waits while `max_in_flight_bytes` are in flight.
    pub fn append(&self, payload: &[u8]) -> Result<Lsn> {
        let state = self.shared.lock();
        let max = self
            .shared
            .config
            .record_bytes_max
            .min(payload_len_max(&state.segment.header));
        if payload.len() > max {
            return Err(Error::RecordTooLarge {
                len: payload.len(),
                max,
            });
        }
        let size = framed_len(payload.len(), state.segment.align) as u64;
        let mut state = self.admit(state, size)?;
        let counters = &self.shared.counters;
        counters.records.fetch_add(1, Ordering::Relaxed);
        counters
            .payload_bytes
            .fetch_add(payload.len() as u64, Ordering::Relaxed);
        counters.device_bytes.fetch_add(size, Ordering::Relaxed);
        if state.segment.self_persist {
            return self.append_self_persisted(state, size, payload);
        }
        let lsn = state.next_lsn;
        let (salt, hint) = (state.segment.header.salt, state.durable_lsn);
        encode_record(&mut state.buffer, salt, lsn, hint, payload, RECORD_ALIGN);
        state.next_lsn += 1;
        state.next_offset += size;
        Ok(lsn)
    }

    /// Appends and commits one record.
    pub fn append_commit(&self, payload: &[u8]) -> Result<Lsn> {
        let lsn = self.append(payload)?;
        self.commit(lsn)?;
        Ok(lsn)
    }

    /// Waits until the log is open for an append of `size` bytes: no switch
    /// in progress, and room in the in-flight window (syncing to make room
    /// if this thread can).
    pub(crate) fn admit<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        size: u64,
    ) -> Result<MutexGuard<'a, State>> {
        let mut counted = false;
        loop {
            if let Some(e) = self.shared.refusal(&state) {
                return Err(e);
            }
            if state.switching {
                state = self.shared.wait(state);
                continue;
            }
            let window = state.segment.header.window_bytes;
            if state.next_offset + size - state.durable_offset <= window {
                return Ok(state);
            }
            if !counted {
                counted = true;
                self.shared
                    .counters
                    .backpressure_waits
                    .fetch_add(1, Ordering::Relaxed);
            }
            if !state.segment.self_persist && !state.io_active {
                let (next, result) = self.shared.leader_round(state, true);
                result?;
                state = next;
            } else {
                state = self.shared.wait(state);
            }
        }
    }

    /// PM path: once the log passes half of what the device was readied
    /// for, asks it to ready the next [`PREPARE_STEPS`] preallocation steps
    /// on a thread of its own, so the extensions the appends make later
    /// find the space mapped and its pages present (growing a mapped file
    /// and faulting its pages in cost the appending thread 7.8% of its
    /// cycles under pipelined appends). A thread per request: requests
    /// come once per several MiB of log, and a failed one only leaves the
    /// work to the extension, which reports any error itself.
    fn prepare_ahead(&self, state: &mut State, end: u64) {
        let step = self.shared.config.preallocate_bytes.max(1) * PREPARE_STEPS;
        let ahead = state.prepared.max(state.allocated);
        if end + step / 2 < ahead || !state.segment.device.prepares() {
            return;
        }
        let target = ahead.max(end) + step;
        state.prepared = target;
        let segment = Arc::clone(&state.segment);
        let spawned = std::thread::Builder::new()
            .name("wal-prepare".into())
            .spawn(move || segment.device.prepare(target));
        if spawned.is_err() {
            state.prepared = ahead;
        }
    }

    /// PM path: makes the preallocated file reach `end` before a range up
    /// to it is reserved. Extending zero-fills and persists the new length;
    /// appends then write inside the file, concurrently, without the
    /// device's extend lock. Nothing was reserved yet, so a full medium
    /// here is an error for this append only.
    pub(crate) fn make_room(&self, state: &mut State, end: u64) -> Result<()> {
        if end > state.allocated {
            let target = end.max(state.allocated + self.shared.config.preallocate_bytes);
            state.segment.device.set_len(target)?;
            state.allocated = target;
        }
        self.prepare_ahead(state, end);
        Ok(())
    }

    /// PM path: reserve, copy and persist outside the lock, complete.
    fn append_self_persisted(
        &self,
        mut state: MutexGuard<'_, State>,
        size: u64,
        payload: &[u8],
    ) -> Result<Lsn> {
        let offset = state.next_offset;
        self.make_room(&mut state, offset + size)?;
        let lsn = state.next_lsn;
        let hint = state.durable_lsn;
        state.next_lsn += 1;
        state.next_offset += size;
        state.pending.push_back((offset + size, false));
        let segment = Arc::clone(&state.segment);
        drop(state);
        let result = FRAME.with(|frame| {
            let mut frame = frame.borrow_mut();
            frame.clear();
            encode_record(
                &mut frame,
                segment.header.salt,
                lsn,
                hint,
                payload,
                PM_RECORD_ALIGN,
            );
            segment.device.write_at(offset, &frame)?;
            if segment.sync_after_write {
                segment.device.sync()?;
            }
            Ok(())
        });
        self.shared
            .counters
            .self_persisted
            .fetch_add(1, Ordering::Relaxed);
        self.shared.complete(lsn, result)?;
        Ok(lsn)
    }

    /// Waits until record `lsn` is as durable as the configured
    /// [`Durability`] asks. With group commit, one sync covers every record
    /// appended before it started. Errors if the log is poisoned before
    /// `lsn` is durable: nothing is reported durable that is not.
    pub fn commit(&self, lsn: Lsn) -> Result<()> {
        self.commit_as(lsn, true)
    }

    /// Like [`Wal::commit`], but never postpones the write: at
    /// [`Durability::Periodic`] it waits behind a running sync instead, so
    /// that on return record `lsn` survives a crash of the process. For a
    /// caller that acknowledges what it commits (and does not wait on a
    /// thread that must not block).
    pub fn commit_written(&self, lsn: Lsn) -> Result<()> {
        self.commit_as(lsn, false)
    }

    /// [`Wal::commit`], whose write [`Durability::Periodic`] may postpone
    /// behind a running sync only if `postpone`.
    fn commit_as(&self, lsn: Lsn, postpone: bool) -> Result<()> {
        self.shared.counters.commits.fetch_add(1, Ordering::Relaxed);
        if self.durable_lsn() >= lsn {
            return Ok(());
        }
        let start = Instant::now();
        let result = match self.shared.config.durability {
            Durability::EveryCommit => self.wait_durable(lsn),
            Durability::None => self.wait_written(lsn, false),
            Durability::Periodic(_) => self.wait_written(lsn, postpone),
        };
        self.shared.counters.waited(start.elapsed());
        result
    }

    /// Makes every record appended so far durable, whatever the durability
    /// level; returns the durable LSN.
    pub fn sync(&self) -> Result<Lsn> {
        let target = self.shared.lock().next_lsn - 1;
        self.wait_durable(target)?;
        Ok(target)
    }

    /// Asks the background syncer of [`Durability::Periodic`] to sync now
    /// rather than at the end of its interval, and returns at once: appends
    /// and writes go on meanwhile, as during any periodic sync. A caller
    /// that will soon need everything durable (a [`Wal::switch`]) calls
    /// this ahead, so that its own sync finds little left to do. At other
    /// durability levels there is no syncer and this does nothing.
    pub fn sync_soon(&self) {
        if self.syncer.is_none() {
            return;
        }
        let mut state = self.shared.lock();
        state.sync_soon = true;
        self.shared.syncer_wake.notify_all();
    }

    fn check_appended(&self, state: &State, lsn: Lsn) -> Result<()> {
        if lsn >= state.next_lsn {
            return Err(Error::Config {
                reason: format!(
                    "commit of LSN {lsn}, which was never appended (next is {})",
                    state.next_lsn
                ),
            });
        }
        Ok(())
    }

    /// Until `durable_lsn >= lsn`, leading a sync when no one else is.
    fn wait_durable(&self, lsn: Lsn) -> Result<()> {
        if self.shared.self_persist.load(Ordering::Relaxed) {
            for _ in 0..YIELD_CHECKS {
                if self.durable_lsn() >= lsn {
                    return Ok(());
                }
                std::thread::yield_now();
            }
        }
        let mut state = self.shared.lock();
        self.check_appended(&state, lsn)?;
        loop {
            if state.durable_lsn >= lsn {
                return Ok(());
            }
            if let Some(e) = self.shared.refusal(&state) {
                return Err(e);
            }
            if state.segment.self_persist {
                state = self.shared.wait(state);
            } else if !state.io_active {
                let (next, result) = self.shared.leader_round(state, true);
                result?;
                state = next;
            } else {
                match self.park_until_durable(state, lsn) {
                    Some(next) => state = next,
                    None => return Ok(()),
                }
            }
        }
    }

    /// File path, a leader is syncing: parks until a leader unparks this
    /// thread. Returns `None` once `lsn` is durable (without taking the lock
    /// again), else the lock: this thread is to lead the next batch, or the
    /// log is poisoned.
    fn park_until_durable<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        lsn: Lsn,
    ) -> Option<MutexGuard<'a, State>> {
        let me = std::thread::current();
        state.parked.push((lsn, me.clone()));
        drop(state);
        loop {
            // An unpark before this park is kept as a token, never lost.
            std::thread::park();
            if self.durable_lsn() >= lsn {
                return None;
            }
            let state = self.shared.lock();
            if !state.parked.iter().any(|(_, t)| t.id() == me.id()) {
                return Some(state);
            }
            // A spurious wake-up: still registered, park again.
        }
    }

    /// Until record `lsn` is handed to the OS (file path); on PM the append
    /// already persisted it. `periodic` postpones the write behind a running
    /// sync (see [`Durability::Periodic`]).
    fn wait_written(&self, lsn: Lsn, periodic: bool) -> Result<()> {
        let mut state = self.shared.lock();
        self.check_appended(&state, lsn)?;
        let mut delayed = false;
        loop {
            if let Some(e) = self.shared.refusal(&state) {
                return Err(e);
            }
            if state.segment.self_persist || state.written_lsn >= lsn {
                return Ok(());
            }
            if periodic && state.sync_running && !delayed {
                let since = *state.postponed_since.get_or_insert_with(Instant::now);
                if since.elapsed() < PERIODIC_POSTPONE_MAX {
                    self.shared
                        .counters
                        .postponed_writes
                        .fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                delayed = true;
                self.shared
                    .counters
                    .delayed_syncs
                    .fetch_add(1, Ordering::Relaxed);
            }
            if !state.io_active {
                let (next, result) = self.shared.leader_round(state, false);
                result?;
                state = next;
                continue;
            }
            state = self.shared.wait(state);
        }
    }

    /// Log switch: makes everything appended so far durable in the current
    /// file, then starts a new file on `device` (which must be empty or all
    /// zero) whose first record continues the LSN sequence, and returns the
    /// old file's device, which no longer receives writes. Appends wait
    /// during the switch.
    pub fn switch(&self, device: Arc<dyn Device>) -> Result<Arc<dyn Device>> {
        let mut state = self.shared.lock();
        while state.switching {
            state = self.shared.wait(state);
        }
        state.switching = true;
        let (mut state, result) = self.switch_locked(state, device);
        state.switching = false;
        self.shared.changed.notify_all();
        result
    }

    fn switch_locked<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        device: Arc<dyn Device>,
    ) -> (MutexGuard<'a, State>, Result<Arc<dyn Device>>) {
        loop {
            if let Some(e) = self.shared.refusal(&state) {
                return (state, Err(e));
            }
            if state.durable_lsn + 1 == state.next_lsn && !state.io_active {
                break;
            }
            if !state.segment.self_persist && !state.io_active {
                let (next, result) = self.shared.leader_round(state, true);
                state = next;
                if let Err(e) = result {
                    return (state, Err(e));
                }
            } else {
                state = self.shared.wait(state);
            }
        }
        let header = LogHeader::new(state.next_lsn, state.segment.header.window_bytes);
        let prepared = match is_blank(device.as_ref()) {
            Ok(true) => write_header(device.as_ref(), &header),
            Ok(false) => Err(Error::Config {
                reason: format!(
                    "cannot switch the log to {}: the file is not empty",
                    device.path().display()
                ),
            }),
            Err(e) => Err(e),
        };
        if let Err(e) = prepared {
            return (state, Err(e));
        }
        let old = Arc::clone(&state.segment.device);
        let next_lsn = state.next_lsn;
        let segment = Arc::new(Segment::new(device, header));
        self.shared
            .self_persist
            .store(segment.self_persist, Ordering::Relaxed);
        // Threads blocked on `changed` or parked stay counted and
        // registered across the new file's state: a count reset under a
        // waiting thread (its decrement then wrapped, and a later wait
        // counted 0) skipped the wake-ups that thread needed, and the event
        // loop hung in `wait_written`. The parked ones' records are durable
        // now: they go and look.
        let waiters = state.waiters;
        let parked = std::mem::take(&mut state.parked);
        *state = State::new(segment, next_lsn, LOG_HEADER_LEN as u64);
        state.waiters = waiters;
        for (_, thread) in parked {
            thread.unpark();
        }
        tracing::info!(from = %old.path().display(), lsn = next_lsn, "log switched");
        (state, Ok(old))
    }

    /// Makes everything durable, stops the background syncer, and closes.
    pub fn close(mut self) -> Result<()> {
        let result = self.sync().map(|_| ());
        self.shutdown();
        result
    }

    fn shutdown(&mut self) {
        {
            let mut state = self.shared.lock();
            state.closed = true;
            self.shared.syncer_wake.notify_all();
            self.shared.changed.notify_all();
        }
        if let Some(syncer) = self.syncer.take() {
            if syncer.join().is_err() {
                tracing::error!("the periodic log syncer panicked");
            }
        }
    }
}

impl Drop for Wal {
    /// Hands buffered records to the OS (as a process exit would leave
    /// them), without syncing; use [`Wal::close`] to make them durable.
    fn drop(&mut self) {
        if self.syncer.is_none() && self.shared.lock().closed {
            return;
        }
        {
            let mut state = self.shared.lock();
            while state.io_active {
                state = self.shared.wait(state);
            }
            let pending = !state.buffer.is_empty() && !state.segment.self_persist;
            if pending && state.poison.is_none() && !state.closed {
                let (_state, result) = self.shared.leader_round(state, false);
                if let Err(e) = result {
                    tracing::error!("writing buffered log records at close: {e}");
                }
            }
        }
        self.shutdown();
    }
}

impl Segment {
    /// Chooses the path from the device. Mapped PM (`Pmem`, `Mmap`) takes
    /// the PM path: a write there is a byte-granular copy and a fence that
    /// only the writing thread can issue, so each appender persists its own
    /// record. A write buffer (`Wbuf`) is durable on write too, but each
    /// write costs a whole slot (a block image, a header and a drain) and
    /// any thread's write is durable for all: there the file path's leader
    /// gathers a round's records into one write, whose return makes them
    /// all durable, and its sync orders nothing more (it only checks the
    /// device's poison).
    pub(crate) fn new(device: Arc<dyn Device>, header: LogHeader) -> Segment {
        let info = device.info();
        let self_persist = info.sync_scope == SyncScope::CallingThread
            || (info.durable_on_write && info.kind != DeviceKind::Wbuf);
        Segment {
            self_persist,
            align: if self_persist {
                PM_RECORD_ALIGN
            } else {
                RECORD_ALIGN
            },
            sync_after_write: !info.durable_on_write,
            flush_base: device.flush_stats(),
            device,
            header,
        }
    }
}

impl State {
    /// The state of a log file whose intact records end at `end_offset`.
    pub(crate) fn new(segment: Arc<Segment>, next_lsn: Lsn, end_offset: u64) -> State {
        let allocated = segment.device.len().max(end_offset);
        State {
            segment,
            next_lsn,
            next_offset: end_offset,
            buffer: Vec::new(),
            spare: Vec::new(),
            written_lsn: next_lsn - 1,
            written_offset: end_offset,
            io_active: false,
            sync_running: false,
            sync_soon: false,
            postponed_since: None,
            durable_lsn: next_lsn - 1,
            durable_offset: end_offset,
            released_offset: 0,
            pending: VecDeque::new(),
            allocated,
            prepared: allocated,
            poison: None,
            closed: false,
            switching: false,
            waiters: 0,
            parked: Vec::new(),
        }
    }
}

/// Writes a new header and syncs it.
fn write_header(device: &dyn Device, header: &LogHeader) -> Result<()> {
    device.write_at(0, &header.encode())?;
    device.sync()?;
    Ok(())
}

/// Whether `device` holds no log yet: empty, all zero, or only a header
/// that a crash tore while the file was being created (nothing follows it).
fn is_blank(device: &dyn Device) -> Result<bool> {
    let len = device.len();
    if len == 0 {
        return Ok(true);
    }
    let mut header = [0u8; LOG_HEADER_LEN];
    let read = device.read_at(0, &mut header)?;
    let header_valid = read == LOG_HEADER_LEN && LogHeader::decode(&header).is_ok();
    if header_valid {
        return Ok(false);
    }
    // A torn header starts with the magic or with zeros; anything else is a
    // file that is not ours, which `recover` reports.
    let starts_like_ours = header[..8] == LOG_MAGIC || header[..8] == [0u8; 8];
    if !starts_like_ours {
        return Ok(false);
    }
    let mut offset = LOG_HEADER_LEN as u64;
    let mut chunk = vec![0u8; 64 << 10];
    while offset < len {
        let n = device.read_at(offset, &mut chunk)?;
        if n == 0 {
            break;
        }
        if chunk[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        offset += n as u64;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_io::SimFile;

    /// A thread blocked on `changed` while the log switches files is still
    /// counted afterwards, so the wake-ups it needs are not skipped.
    #[test]
    fn a_switch_keeps_the_threads_waiting_on_the_log_counted() {
        let wal = Wal::open(Arc::new(SimFile::new("a.log")), WalConfig::default()).expect("open");
        wal.append_commit(b"before the switch").expect("commit");
        let shared = Arc::clone(&wal.shared);
        let waiter = std::thread::spawn(move || {
            let state = shared.lock();
            let state = shared.wait(state);
            state.waiters
        });
        let deadline = Instant::now() + std::time::Duration::from_secs(30);
        while wal.shared.lock().waiters == 0 {
            assert!(Instant::now() < deadline, "the thread never waited");
            std::thread::yield_now();
        }
        wal.switch(Arc::new(SimFile::new("b.log"))).expect("switch");
        // The switch wakes it; it leaves the count as it found it.
        let after_its_wait = waiter.join().expect("the waiting thread panicked");
        assert_eq!(after_its_wait, 0);
        assert_eq!(wal.shared.lock().waiters, 0);
        let lsn = wal.append_commit(b"after the switch").expect("commit");
        assert_eq!(wal.durable_lsn(), lsn);
    }
}
