//! Flush accounting (paper 001): what the persist primitives cost the media.
//!
//! Every region owns a `StatsSink`: a cache line of counters per thread
//! slot. A thread claims a slot once (a thread-local index with no
//! destructor, so finding it is one TLS load) and updates its counters with
//! plain loads and stores, no locked instructions, so accounting costs a
//! couple of nanoseconds per operation and can stay on (`ferrite-bench pmem`
//! measures it). A snapshot sums the slots; it may miss an operation in
//! flight, never double-counts one.
//!
//! The media-line estimate models the DIMM's write-combining buffer: between
//! two fences of a thread, the 256-byte media lines that flushes and
//! non-temporal stores touched are counted once each (exactly for sequential
//! writes and rewrites of one spot; see `Slot::touch` for the approximation).

use std::cell::Cell;
use std::fmt;
use std::ops::{Add, Sub};
use std::sync::atomic::{
    AtomicBool, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// Size of a media write unit on Optane-class PM: the DIMM combines 64-byte
/// requests into 256-byte internal writes.
pub const MEDIA_LINE: usize = 256;

/// Counters of what the persist primitives did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlushStats {
    /// Cache lines written back by clwb, clflushopt or clflush.
    pub lines_flushed: u64,
    /// Store fences (drains).
    pub fences: u64,
    /// Bytes written with non-temporal stores.
    pub bytes_nt: u64,
    /// Bytes written with cached stores (flushed or not).
    pub bytes_cached: u64,
    /// Estimated 256-byte media-line writes: distinct media lines touched by
    /// flushes and non-temporal stores between two fences.
    pub media_lines: u64,
    /// `msync` calls (the portable fallback).
    pub msyncs: u64,
}

impl FlushStats {
    /// Bytes the media wrote, by the media-line estimate.
    pub fn media_bytes(&self) -> u64 {
        self.media_lines * MEDIA_LINE as u64
    }

    /// Bytes stored by the program, through either path.
    pub fn bytes_stored(&self) -> u64 {
        self.bytes_nt + self.bytes_cached
    }

    /// Cache-line flushes per operation, for `ops` operations.
    pub fn flushes_per_op(&self, ops: u64) -> f64 {
        ratio(self.lines_flushed, ops)
    }

    /// Fences per operation, for `ops` operations.
    pub fn fences_per_op(&self, ops: u64) -> f64 {
        ratio(self.fences, ops)
    }

    /// Write amplification: media bytes per byte the user asked to persist.
    pub fn media_bytes_per_user_byte(&self, user_bytes: u64) -> f64 {
        ratio(self.media_bytes(), user_bytes)
    }

    fn from_array(values: [u64; COUNTERS]) -> FlushStats {
        FlushStats {
            lines_flushed: values[LINES_FLUSHED],
            fences: values[FENCES],
            bytes_nt: values[BYTES_NT],
            bytes_cached: values[BYTES_CACHED],
            media_lines: values[MEDIA_LINES],
            msyncs: values[MSYNCS],
        }
    }
}

fn ratio(numerator: u64, denominator: u64) -> f64 {
    if denominator == 0 {
        0.0
    } else {
        numerator as f64 / denominator as f64
    }
}

impl Add for FlushStats {
    type Output = FlushStats;

    fn add(self, o: FlushStats) -> FlushStats {
        FlushStats {
            lines_flushed: self.lines_flushed + o.lines_flushed,
            fences: self.fences + o.fences,
            bytes_nt: self.bytes_nt + o.bytes_nt,
            bytes_cached: self.bytes_cached + o.bytes_cached,
            media_lines: self.media_lines + o.media_lines,
            msyncs: self.msyncs + o.msyncs,
        }
    }
}

impl Sub for FlushStats {
    type Output = FlushStats;

    /// The difference between a later and an earlier snapshot.
    fn sub(self, o: FlushStats) -> FlushStats {
        FlushStats {
            lines_flushed: self.lines_flushed.saturating_sub(o.lines_flushed),
            fences: self.fences.saturating_sub(o.fences),
            bytes_nt: self.bytes_nt.saturating_sub(o.bytes_nt),
            bytes_cached: self.bytes_cached.saturating_sub(o.bytes_cached),
            media_lines: self.media_lines.saturating_sub(o.media_lines),
            msyncs: self.msyncs.saturating_sub(o.msyncs),
        }
    }
}

impl fmt::Display for FlushStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "lines_flushed={} fences={} bytes_nt={} bytes_cached={} media_lines={} msyncs={}",
            self.lines_flushed,
            self.fences,
            self.bytes_nt,
            self.bytes_cached,
            self.media_lines,
            self.msyncs
        )
    }
}

const LINES_FLUSHED: usize = 0;
const FENCES: usize = 1;
const BYTES_NT: usize = 2;
const BYTES_CACHED: usize = 3;
const MEDIA_LINES: usize = 4;
const MSYNCS: usize = 5;
const COUNTERS: usize = 6;
/// First media line of the interval touched since the slot's last fence.
const PENDING_FIRST: usize = 6;
/// One past its last media line (equal to `PENDING_FIRST` when empty).
const PENDING_END: usize = 7;

/// Accounting is on unless switched off (to measure its own cost).
static ENABLED: AtomicBool = AtomicBool::new(true);

/// Switches flush accounting on or off process-wide. Off, the primitives skip
/// every counter update; snapshots then stop moving.
pub fn set_enabled(enabled: bool) {
    ENABLED.store(enabled, Relaxed);
}

/// Whether flush accounting is on.
#[inline]
pub fn is_enabled() -> bool {
    ENABLED.load(Relaxed)
}

/// What one copy, set or flush did, for the flush accounting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StoreCounts {
    /// Cache lines written back by a flush instruction.
    pub lines_flushed: u64,
    /// Bytes written with non-temporal stores.
    pub bytes_nt: u64,
    /// Bytes written with ordinary cached stores.
    pub bytes_cached: u64,
}

impl std::ops::AddAssign for StoreCounts {
    fn add_assign(&mut self, other: StoreCounts) {
        self.lines_flushed += other.lines_flushed;
        self.bytes_nt += other.bytes_nt;
        self.bytes_cached += other.bytes_cached;
    }
}

impl StoreCounts {
    /// `bytes` stored through the cache, then `lines` flushed.
    pub(crate) fn cached(lines: u64, bytes: u64) -> StoreCounts {
        StoreCounts {
            lines_flushed: lines,
            bytes_nt: 0,
            bytes_cached: bytes,
        }
    }
}

/// Counter slots per sink. Slot 0 is shared (updated with atomic adds) by
/// threads that found no free slot; every other slot belongs to one live
/// thread at a time, which updates it with plain loads and stores.
const SLOTS: usize = 128;
const SHARED_SLOT: usize = 0;
const UNASSIGNED: usize = usize::MAX;

/// Which slots live threads own.
static SLOT_TAKEN: [AtomicBool; SLOTS] = [const { AtomicBool::new(false) }; SLOTS];

thread_local! {
    /// This thread's slot. No destructor, so reading it is one TLS load.
    static SLOT: Cell<usize> = const { Cell::new(UNASSIGNED) };
    /// Frees the slot when the thread exits.
    static SLOT_RELEASE: SlotRelease = const { SlotRelease };
}

struct SlotRelease;

impl Drop for SlotRelease {
    fn drop(&mut self) {
        let slot = SLOT.with(|cell| cell.replace(SHARED_SLOT));
        if slot != SHARED_SLOT && slot != UNASSIGNED {
            // Release: the next owner sees every count this thread stored.
            SLOT_TAKEN[slot].store(false, Release);
        }
    }
}

#[inline]
fn my_slot() -> usize {
    let slot = SLOT.with(Cell::get);
    if slot != UNASSIGNED {
        return slot;
    }
    claim_slot()
}

#[cold]
fn claim_slot() -> usize {
    let claimed = (1..SLOTS)
        .find(|&i| {
            SLOT_TAKEN[i]
                .compare_exchange(false, true, Acquire, Relaxed)
                .is_ok()
        })
        .unwrap_or(SHARED_SLOT);
    // Registering the release needs thread-local storage that is still
    // alive; a thread in its teardown keeps to the shared slot.
    if claimed != SHARED_SLOT && SLOT_RELEASE.try_with(|_| ()).is_err() {
        SLOT_TAKEN[claimed].store(false, Release);
        SLOT.with(|cell| cell.set(SHARED_SLOT));
        return SHARED_SLOT;
    }
    SLOT.with(|cell| cell.set(claimed));
    claimed
}

/// One thread's counters for one sink, a cache line of them.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Slot {
    words: [AtomicU64; 8],
}

const _: () = assert!(std::mem::size_of::<Slot>() == 64);

impl Slot {
    #[inline]
    fn add(&self, shared: bool, index: usize, n: u64) {
        let word = &self.words[index];
        if shared {
            word.fetch_add(n, Relaxed);
        } else {
            // Single writer: a plain load and store, no locked instruction.
            word.store(word.load(Relaxed).wrapping_add(n), Relaxed);
        }
    }

    #[inline]
    fn get(&self, index: usize) -> u64 {
        self.words[index].load(Relaxed)
    }

    #[inline]
    fn set(&self, index: usize, value: u64) {
        self.words[index].store(value, Relaxed);
    }

    /// Counts a copy, set or flush at region offset `offset` and notes its
    /// media lines as touched in this fence epoch.
    #[inline]
    fn record_stores(&self, shared: bool, offset: usize, len: usize, counts: StoreCounts) {
        self.add(shared, LINES_FLUSHED, counts.lines_flushed);
        self.add(shared, BYTES_NT, counts.bytes_nt);
        self.add(shared, BYTES_CACHED, counts.bytes_cached);
        if len > 0 && (counts.lines_flushed > 0 || counts.bytes_nt > 0) {
            let first = (offset / MEDIA_LINE) as u64;
            let end = (offset + len).div_ceil(MEDIA_LINE) as u64;
            self.touch(shared, first, end);
        }
    }

    /// Notes media lines `[first, end)` as touched in this fence epoch.
    /// Overlapping or adjacent ranges merge, so sequential writes and
    /// rewrites of one spot count each media line once; a jump elsewhere
    /// settles the previous range first (which can count a line twice if an
    /// epoch comes back to it later: the estimate errs high).
    #[inline]
    fn touch(&self, shared: bool, first: u64, end: u64) {
        if shared {
            self.add(true, MEDIA_LINES, end - first);
            return;
        }
        let (p_first, p_end) = (self.get(PENDING_FIRST), self.get(PENDING_END));
        if p_first == p_end {
            self.set(PENDING_FIRST, first);
            self.set(PENDING_END, end);
        } else if first <= p_end && end >= p_first {
            self.set(PENDING_FIRST, p_first.min(first));
            self.set(PENDING_END, p_end.max(end));
        } else {
            self.add(false, MEDIA_LINES, p_end - p_first);
            self.set(PENDING_FIRST, first);
            self.set(PENDING_END, end);
        }
    }

    /// A fence: the epoch's media lines become writes.
    #[inline]
    fn settle(&self, shared: bool) {
        self.add(shared, FENCES, 1);
        if shared {
            return;
        }
        let (p_first, p_end) = (self.get(PENDING_FIRST), self.get(PENDING_END));
        if p_first != p_end {
            self.add(false, MEDIA_LINES, p_end - p_first);
            self.set(PENDING_END, p_first);
        }
    }
}

/// The counters of one region (or simulated region).
#[derive(Debug)]
pub(crate) struct StatsSink {
    slots: Box<[Slot]>,
}

/// Every live sink, for the process-wide total, plus what dropped sinks left.
struct Registry {
    live: Vec<Weak<StatsSink>>,
    retired: FlushStats,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    live: Vec::new(),
    retired: FlushStats {
        lines_flushed: 0,
        fences: 0,
        bytes_nt: 0,
        bytes_cached: 0,
        media_lines: 0,
        msyncs: 0,
    },
});

impl StatsSink {
    pub(crate) fn new() -> Arc<StatsSink> {
        let sink = Arc::new(StatsSink {
            slots: (0..SLOTS).map(|_| Slot::default()).collect(),
        });
        let mut registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
        registry.live.retain(|weak| weak.strong_count() > 0);
        registry.live.push(Arc::downgrade(&sink));
        sink
    }

    /// Sum of every thread's counters.
    pub(crate) fn snapshot(&self) -> FlushStats {
        let mut total = [0u64; COUNTERS];
        for slot in self.slots.iter() {
            for (index, sum) in total.iter_mut().enumerate() {
                *sum += slot.get(index);
            }
        }
        FlushStats::from_array(total)
    }

    #[inline]
    fn slot(&self) -> (&Slot, bool) {
        let index = my_slot();
        (&self.slots[index], index == SHARED_SLOT)
    }

    /// Records a copy, set or flush at region offset `offset`: counters,
    /// plus its media lines as touched in this thread's fence epoch.
    #[inline]
    pub(crate) fn record_stores(&self, offset: usize, len: usize, counts: StoreCounts) {
        if !is_enabled() {
            return;
        }
        let (slot, shared) = self.slot();
        slot.record_stores(shared, offset, len, counts);
    }

    /// Records a copy or flush at region offset `offset` and the fence that
    /// follows it, with one look-up of this thread's slot. Called just
    /// before the fence: counter stores issued after an `sfence` wait for
    /// the copy's non-temporal stores to drain (measured slower).
    #[inline]
    pub(crate) fn record_persist(&self, offset: usize, len: usize, counts: StoreCounts) {
        if !is_enabled() {
            return;
        }
        let (slot, shared) = self.slot();
        slot.record_stores(shared, offset, len, counts);
        slot.settle(shared);
    }

    /// Records cached stores that were not flushed (plain writes).
    #[inline]
    pub(crate) fn record_cached(&self, bytes: u64) {
        if !is_enabled() {
            return;
        }
        let (slot, shared) = self.slot();
        slot.add(shared, BYTES_CACHED, bytes);
    }

    /// Records an msync that wrote back `lines` cache lines.
    pub(crate) fn record_msync(&self, lines: u64) {
        if !is_enabled() {
            return;
        }
        let (slot, shared) = self.slot();
        slot.add(shared, MSYNCS, 1);
        slot.add(shared, LINES_FLUSHED, lines);
        slot.add(
            shared,
            MEDIA_LINES,
            lines.div_ceil((MEDIA_LINE / 64) as u64),
        );
    }

    /// Records a fence: this thread's touched media lines become writes.
    #[inline]
    pub(crate) fn record_fence(&self) {
        if !is_enabled() {
            return;
        }
        let (slot, shared) = self.slot();
        slot.settle(shared);
    }
}

impl Drop for StatsSink {
    fn drop(&mut self) {
        let total = self.snapshot();
        let mut registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
        registry.retired = registry.retired + total;
    }
}

/// Process-wide totals: every region that exists or existed.
pub fn global() -> FlushStats {
    let registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
    let live: Vec<Arc<StatsSink>> = registry.live.iter().filter_map(Weak::upgrade).collect();
    let retired = registry.retired;
    drop(registry);
    live.iter().fold(retired, |sum, sink| sum + sink.snapshot())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sink_counts_media_lines_between_fences() {
        let sink = StatsSink::new();
        // Two flushes inside one 256-byte media line, then the next line.
        sink.record_stores(0, 64, StoreCounts::cached(1, 64));
        sink.record_stores(128, 64, StoreCounts::cached(1, 64));
        sink.record_stores(256, 8, StoreCounts::cached(1, 8));
        sink.record_fence();
        // After the fence the same line counts again.
        sink.record_stores(0, 64, StoreCounts::cached(1, 64));
        sink.record_fence();
        // A jump away and back within one epoch counts the line twice.
        sink.record_stores(0, 64, StoreCounts::cached(1, 64));
        sink.record_stores(4096, 64, StoreCounts::cached(1, 64));
        sink.record_fence();
        let stats = sink.snapshot();
        assert_eq!(stats.media_lines, 5);
        assert_eq!(stats.fences, 3);
        assert_eq!(stats.lines_flushed, 6);
        assert_eq!(stats.bytes_cached, 328);
    }

    #[test]
    fn slots_from_several_threads_add_up() {
        let sink = StatsSink::new();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..1000 {
                        sink.record_stores(0, 64, StoreCounts::cached(1, 64));
                        sink.record_fence();
                    }
                });
            }
        });
        let stats = sink.snapshot();
        assert_eq!(stats.fences, 4000);
        assert_eq!(stats.lines_flushed, 4000);
        assert_eq!(stats.media_lines, 4000);
        let before = global();
        drop(sink);
        // Dropping moves the counts to the retired total, not away.
        assert!(global().fences >= before.fences);
    }

    #[test]
    fn exited_threads_free_their_slots() {
        let sink = StatsSink::new();
        // More threads over time than there are slots: each must find one,
        // because exited threads give theirs back.
        for _ in 0..(SLOTS * 2) {
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    sink.record_fence();
                    assert_ne!(SLOT.with(Cell::get), SHARED_SLOT);
                });
            });
        }
        assert_eq!(sink.snapshot().fences, (SLOTS * 2) as u64);
    }
}
