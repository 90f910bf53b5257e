//! Flush accounting (paper 001): what the persist primitives cost the media.
//!
//! Every region owns a [`StatsSink`]. Each thread that touches the region
//! gets its own shard of counters, written by that thread only with plain
//! (non-locked) loads and stores, so accounting costs a few nanoseconds and
//! can stay on. A snapshot sums the shards; it may miss an operation that is
//! in flight, never double-counts one.
//!
//! The media-line estimate models the DIMM's write-combining buffer: between
//! two fences of a thread, every distinct 256-byte media line that a flush or
//! a non-temporal store touched is counted once.

use std::cell::RefCell;
use std::fmt;
use std::ops::{Add, Sub};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
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

/// One thread's counters for one sink. Only the owning thread writes.
#[derive(Debug, Default)]
struct Shard {
    counters: [AtomicU64; COUNTERS],
}

impl Shard {
    #[inline]
    fn add(&self, index: usize, n: u64) {
        // Single writer: a plain load and store, no locked read-modify-write.
        let counter = &self.counters[index];
        counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
    }

    fn read(&self) -> [u64; COUNTERS] {
        std::array::from_fn(|i| self.counters[i].load(Relaxed))
    }
}

/// The counters of one region (or simulated region).
#[derive(Debug)]
pub(crate) struct StatsSink {
    id: u64,
    shards: Mutex<Vec<Arc<Shard>>>,
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

static NEXT_SINK_ID: AtomicU64 = AtomicU64::new(1);

/// Per-thread state: shard handles by sink, and the media lines touched
/// since this thread's last fence, as `(sink, first line, end line)`.
struct Local {
    shards: Vec<(u64, Arc<Shard>)>,
    pending: Vec<(u64, usize, usize)>,
}

thread_local! {
    static LOCAL: RefCell<Local> = const {
        RefCell::new(Local { shards: Vec::new(), pending: Vec::new() })
    };
}

/// Pending intervals kept before they are merged in place.
const PENDING_COMPACT_AT: usize = 1024;

impl StatsSink {
    pub(crate) fn new() -> Arc<StatsSink> {
        let sink = Arc::new(StatsSink {
            id: NEXT_SINK_ID.fetch_add(1, Relaxed),
            shards: Mutex::new(Vec::new()),
        });
        let mut registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
        registry.live.retain(|weak| weak.strong_count() > 0);
        registry.live.push(Arc::downgrade(&sink));
        sink
    }

    /// Sum of every thread's counters.
    pub(crate) fn snapshot(&self) -> FlushStats {
        let shards = self.shards.lock().unwrap_or_else(PoisonError::into_inner);
        let mut total = [0u64; COUNTERS];
        for shard in shards.iter() {
            for (sum, value) in total.iter_mut().zip(shard.read()) {
                *sum += value;
            }
        }
        FlushStats::from_array(total)
    }

    /// Records a copy, set or flush: counters, plus the media lines of
    /// `[addr, addr + len)` as pending until this thread's next fence.
    #[inline]
    pub(crate) fn record_stores(
        &self,
        addr: usize,
        len: usize,
        lines_flushed: u64,
        bytes_nt: u64,
        bytes_cached: u64,
    ) {
        if !is_enabled() {
            return;
        }
        self.with_local(|local| {
            let shard = local.front();
            shard.add(LINES_FLUSHED, lines_flushed);
            shard.add(BYTES_NT, bytes_nt);
            shard.add(BYTES_CACHED, bytes_cached);
            if len > 0 && (lines_flushed > 0 || bytes_nt > 0) {
                local.push_pending(self.id, addr, len);
            }
        });
    }

    /// Records cached stores that were not flushed (plain writes).
    #[inline]
    pub(crate) fn record_cached(&self, bytes: u64) {
        if !is_enabled() {
            return;
        }
        self.with_local(|local| local.front().add(BYTES_CACHED, bytes));
    }

    /// Records an msync of `pages` pages.
    pub(crate) fn record_msync(&self, lines: u64) {
        if !is_enabled() {
            return;
        }
        self.with_local(|local| {
            let shard = local.front();
            shard.add(MSYNCS, 1);
            shard.add(LINES_FLUSHED, lines);
            shard.add(MEDIA_LINES, lines.div_ceil((MEDIA_LINE / 64) as u64));
        });
    }

    /// Records a fence: this thread's pending media lines become writes,
    /// each sink charged for its own.
    #[inline]
    pub(crate) fn record_fence(&self) {
        if !is_enabled() {
            return;
        }
        self.with_local(|local| {
            local.front().add(FENCES, 1);
            local.settle_pending();
        });
    }

    /// Runs `f` with this thread's state, whose first shard is this sink's.
    #[inline]
    fn with_local(&self, f: impl FnOnce(&mut Local)) {
        // A thread being torn down has no thread-local left; its accounting
        // is lost, which is better than a panic.
        let _ = LOCAL.try_with(|cell| {
            let Ok(mut local) = cell.try_borrow_mut() else {
                return;
            };
            local.move_to_front(self);
            f(&mut local);
        });
    }
}

impl Drop for StatsSink {
    fn drop(&mut self) {
        let total = self.snapshot();
        let mut registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
        registry.retired = registry.retired + total;
    }
}

impl Local {
    /// The shard `move_to_front` put first.
    #[inline]
    fn front(&self) -> &Shard {
        &self.shards[0].1
    }

    /// Puts `sink`'s shard for this thread first, creating it if needed.
    #[inline]
    fn move_to_front(&mut self, sink: &StatsSink) {
        if self.shards.first().is_some_and(|(id, _)| *id == sink.id) {
            return;
        }
        if let Some(pos) = self.shards.iter().position(|(id, _)| *id == sink.id) {
            // Most-recently-used first, so the common case is one compare.
            self.shards.swap(0, pos);
            return;
        }
        // Shards whose sink is gone are held only here.
        self.shards
            .retain(|(_, shard)| Arc::strong_count(shard) > 1);
        let shard = Arc::new(Shard::default());
        sink.shards
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::clone(&shard));
        self.shards.insert(0, (sink.id, shard));
    }

    #[inline]
    fn push_pending(&mut self, sink: u64, addr: usize, len: usize) {
        let first = addr / MEDIA_LINE;
        let end = (addr + len).div_ceil(MEDIA_LINE);
        if let Some(last) = self.pending.last_mut() {
            // Sequential writes extend the last interval.
            if last.0 == sink && first <= last.2 && end >= last.1 {
                last.1 = last.1.min(first);
                last.2 = last.2.max(end);
                return;
            }
        }
        self.pending.push((sink, first, end));
        if self.pending.len() >= PENDING_COMPACT_AT {
            merge_intervals(&mut self.pending);
        }
    }

    fn settle_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        merge_intervals(&mut self.pending);
        let pending = std::mem::take(&mut self.pending);
        for (sink, first, end) in &pending {
            if let Some((_, shard)) = self.shards.iter().find(|(id, _)| id == sink) {
                shard.add(MEDIA_LINES, (end - first) as u64);
            }
        }
        self.pending = pending;
        self.pending.clear();
    }
}

/// Sorts and merges overlapping intervals of the same sink in place.
fn merge_intervals(intervals: &mut Vec<(u64, usize, usize)>) {
    if intervals.len() < 2 {
        return;
    }
    intervals.sort_unstable();
    let mut write = 0;
    for read in 1..intervals.len() {
        let current = intervals[read];
        let kept = &mut intervals[write];
        if current.0 == kept.0 && current.1 <= kept.2 {
            kept.2 = kept.2.max(current.2);
        } else {
            write += 1;
            intervals[write] = current;
        }
    }
    intervals.truncate(write + 1);
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
    fn merging_counts_each_media_line_once() {
        let mut v = vec![(1, 0, 2), (1, 1, 3), (2, 0, 1), (1, 5, 6), (1, 3, 4)];
        merge_intervals(&mut v);
        assert_eq!(v, vec![(1, 0, 4), (1, 5, 6), (2, 0, 1)]);
    }

    #[test]
    fn sink_counts_media_lines_between_fences() {
        let sink = StatsSink::new();
        // Two flushes of the same 256-byte line, then one of the next line.
        sink.record_stores(0, 64, 1, 0, 64);
        sink.record_stores(128, 64, 1, 0, 64);
        sink.record_stores(256, 8, 1, 0, 8);
        sink.record_fence();
        // After the fence the same line counts again.
        sink.record_stores(0, 64, 1, 0, 64);
        sink.record_fence();
        let stats = sink.snapshot();
        assert_eq!(stats.media_lines, 3);
        assert_eq!(stats.fences, 2);
        assert_eq!(stats.lines_flushed, 4);
        assert_eq!(stats.bytes_cached, 200);
    }

    #[test]
    fn shards_from_several_threads_add_up() {
        let sink = StatsSink::new();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..1000 {
                        sink.record_stores(0, 64, 1, 0, 64);
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
}
