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
//! Media accounting models the path a write takes to Optane-class media
//! (paper 001, Tonic): every cache line a flush or a non-temporal store
//! sends is a 64-byte *request* to the DIMM; the DIMM's write-combining
//! buffer gathers requests into 256-byte media lines. Each thread (per
//! region) holds one open media line: a request inside it is *absorbed*
//! (combined), a request to another line closes it and opens that one. An
//! opened line is one 256-byte media write; a line closed before all four of
//! its cache lines arrived must be read from the media and merged first (a
//! *read-modify-write*). Drains do not close the line: once the memory
//! controller has accepted a request it is in the power-fail domain, and the
//! buffer keeps merging rewrites of the same spot, which is what Tonic
//! measured (a thread rewriting less than 256 bytes per flush reaches the
//! media only rarely; larger footprints do not combine). One open line per
//! thread is a simplification of the real buffer (about 16 KiB shared by
//! every thread on a DIMM): it errs high for a thread interleaving two
//! streams, and reproduces the single-thread footprint behaviour exactly.

use std::cell::Cell;
use std::fmt;
use std::ops::{Add, Sub};
use std::sync::atomic::{
    AtomicBool, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::combine::{Combine, LINES_PER_MEDIA};
use crate::cpu::FlushInstruction;
use crate::model::MediaModel;

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
    /// 256-byte media-line writes: media lines opened in the write-combining
    /// buffer by flushes and non-temporal stores (see the module comment).
    pub media_lines: u64,
    /// `msync` calls (the portable fallback).
    pub msyncs: u64,
    /// 64-byte write requests that reached the DIMM: cache lines flushed or
    /// written with non-temporal stores.
    pub requests: u64,
    /// Media lines written before all four of their cache lines arrived:
    /// the DIMM reads the line from the media and merges it.
    pub read_modify_writes: u64,
    /// Requests combined into an already open media line (no media write of
    /// their own).
    pub absorbed: u64,
    /// Media lines opened right after the one before them (sequential).
    pub sequential_lines: u64,
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

    /// Bytes the requests carried to the DIMM (64 per request).
    pub fn request_bytes(&self) -> u64 {
        self.requests * 64
    }

    /// Media bytes per byte that reached the DIMM: below 1 when the
    /// combining buffer absorbs rewrites, above 1 with partial lines.
    pub fn media_bytes_per_request_byte(&self) -> f64 {
        ratio(self.media_bytes(), self.request_bytes())
    }

    fn from_array(values: [u64; COUNTERS]) -> FlushStats {
        FlushStats {
            lines_flushed: values[LINES_FLUSHED],
            fences: values[FENCES],
            bytes_nt: values[BYTES_NT],
            bytes_cached: values[BYTES_CACHED],
            media_lines: values[MEDIA_LINES],
            msyncs: values[MSYNCS],
            requests: values[REQUESTS],
            read_modify_writes: values[RMW],
            absorbed: values[ABSORBED],
            sequential_lines: values[SEQ_LINES],
        }
    }

    fn to_array(self) -> [u64; COUNTERS] {
        let mut values = [0; COUNTERS];
        values[LINES_FLUSHED] = self.lines_flushed;
        values[FENCES] = self.fences;
        values[BYTES_NT] = self.bytes_nt;
        values[BYTES_CACHED] = self.bytes_cached;
        values[MEDIA_LINES] = self.media_lines;
        values[MSYNCS] = self.msyncs;
        values[REQUESTS] = self.requests;
        values[RMW] = self.read_modify_writes;
        values[ABSORBED] = self.absorbed;
        values[SEQ_LINES] = self.sequential_lines;
        values
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
        let (a, b) = (self.to_array(), o.to_array());
        FlushStats::from_array(std::array::from_fn(|i| a[i].wrapping_add(b[i])))
    }
}

impl Sub for FlushStats {
    type Output = FlushStats;

    /// The difference between a later and an earlier snapshot.
    fn sub(self, o: FlushStats) -> FlushStats {
        let (a, b) = (self.to_array(), o.to_array());
        FlushStats::from_array(std::array::from_fn(|i| a[i].saturating_sub(b[i])))
    }
}

impl fmt::Display for FlushStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "lines_flushed={} fences={} bytes_nt={} bytes_cached={} media_lines={} msyncs={} \
             requests={} read_modify_writes={} absorbed={} sequential_lines={}",
            self.lines_flushed,
            self.fences,
            self.bytes_nt,
            self.bytes_cached,
            self.media_lines,
            self.msyncs,
            self.requests,
            self.read_modify_writes,
            self.absorbed,
            self.sequential_lines
        )
    }
}

const LINES_FLUSHED: usize = 0;
const FENCES: usize = 1;
const BYTES_NT: usize = 2;
const BYTES_CACHED: usize = 3;
const MEDIA_LINES: usize = 4;
const MSYNCS: usize = 5;
const REQUESTS: usize = 6;
const RMW: usize = 7;
const ABSORBED: usize = 8;
const SEQ_LINES: usize = 9;
const COUNTERS: usize = 10;
/// The open media line of the combining buffer: `(line + 1) << 4 | mask`,
/// the mask having a bit per cache line that arrived; 0 when none is open.
const OPEN: usize = 10;
/// `MEDIA_LINES`, `SEQ_LINES` and `RMW` at this thread's last drain, for
/// the media model's charge.
const DRAIN_MEDIA: usize = 11;
const DRAIN_SEQ: usize = 12;
const DRAIN_RMW: usize = 13;
/// The last media line read through the API, plus one (the media model's
/// read buffer); 0 for none.
const LAST_READ: usize = 14;
/// When this thread issued its first request since its last drain, plus
/// one (ns since the media model's epoch); 0 for none.
const FIRST_ISSUE: usize = 15;
/// The cache lines `[CACHED_FROM, CACHED_TO)` this thread last wrote back
/// with a cache-keeping `clwb` and has not since invalidated: reads inside
/// them hit the cache, which the media model does not charge.
const CACHED_FROM: usize = 16;
const CACHED_TO: usize = 17;

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

/// One thread's counters for one sink, three cache lines of them.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Slot {
    words: [AtomicU64; 24],
}

const _: () = assert!(std::mem::size_of::<Slot>() == 192);

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

    /// Counts a copy, set or flush at region offset `offset`; the cache
    /// lines it flushed or streamed are requests to the DIMM.
    #[inline]
    fn record_stores(&self, shared: bool, offset: usize, len: usize, counts: StoreCounts) {
        self.add(shared, LINES_FLUSHED, counts.lines_flushed);
        self.add(shared, BYTES_NT, counts.bytes_nt);
        self.add(shared, BYTES_CACHED, counts.bytes_cached);
        if len > 0 && (counts.lines_flushed > 0 || counts.bytes_nt > 0) {
            let first_cl = (offset / 64) as u64;
            let end_cl = (offset + len).div_ceil(64) as u64;
            self.requests(shared, first_cl, end_cl);
        }
    }

    /// Requests for cache lines `[first_cl, end_cl)` through the combining
    /// buffer (module comment).
    #[inline]
    fn requests(&self, shared: bool, first_cl: u64, end_cl: u64) {
        let n = end_cl - first_cl;
        self.add(shared, REQUESTS, n);
        if shared {
            // The shared slot has no single owner to hold an open line:
            // each call's media lines count once, partial ends as merges.
            let media = end_cl.div_ceil(LINES_PER_MEDIA) - first_cl / LINES_PER_MEDIA;
            self.add(true, MEDIA_LINES, media);
            self.add(true, ABSORBED, n.saturating_sub(media));
            return;
        }
        let mut combine = Combine {
            open: self.get(OPEN),
            ..Combine::default()
        };
        combine.range(first_cl, end_cl);
        self.set(OPEN, combine.open);
        self.add(false, MEDIA_LINES, combine.opened);
        self.add(false, SEQ_LINES, combine.sequential);
        self.add(false, RMW, combine.rmw);
        self.add(false, ABSORBED, n - combine.opened);
    }

    /// A fence. The open media line stays open: the buffer keeps merging.
    #[inline]
    fn settle(&self, shared: bool) {
        self.add(shared, FENCES, 1);
    }

    /// The media lines written, sequential lines and read-modify-writes
    /// since the media model last charged this thread; marks them charged.
    fn take_since_drain(&self) -> MediaWork {
        let (media, seq, rmw) = (self.get(MEDIA_LINES), self.get(SEQ_LINES), self.get(RMW));
        let work = MediaWork {
            lines: media.wrapping_sub(self.get(DRAIN_MEDIA)),
            sequential: seq.wrapping_sub(self.get(DRAIN_SEQ)),
            read_modify_writes: rmw.wrapping_sub(self.get(DRAIN_RMW)),
            last_line: (self.get(OPEN) >> 4).saturating_sub(1),
        };
        self.set(DRAIN_MEDIA, media);
        self.set(DRAIN_SEQ, seq);
        self.set(DRAIN_RMW, rmw);
        work
    }

    /// Notes that cache lines `[first_cl, end_cl)` were just stored and
    /// written back: they stay cached if `kept`, otherwise they are out of
    /// the cache (invalidated, or streamed past it), and so is any part of
    /// the range remembered before that they overlap.
    fn note_written_back(&self, first_cl: u64, end_cl: u64, kept: bool) {
        if kept {
            self.set(CACHED_FROM, first_cl);
            self.set(CACHED_TO, end_cl);
        } else if first_cl < self.get(CACHED_TO) && self.get(CACHED_FROM) < end_cl {
            self.set(CACHED_TO, 0);
            self.set(CACHED_FROM, 0);
        }
    }

    /// Whether cache lines `[first_cl, end_cl)` are all in the range this
    /// thread last wrote back and kept cached.
    fn is_cached(&self, first_cl: u64, end_cl: u64) -> bool {
        self.get(CACHED_FROM) <= first_cl && end_cl <= self.get(CACHED_TO)
    }

    /// A read of cache lines `[first_cl, end_cl)` through the API: which
    /// media lines the media model charges (the one read last is in the
    /// DIMM's read buffer and free).
    fn take_read(&self, first_cl: u64, end_cl: u64) -> MediaRead {
        let first = first_cl / LINES_PER_MEDIA;
        let last = (end_cl - 1) / LINES_PER_MEDIA;
        let previous = self.get(LAST_READ);
        self.set(LAST_READ, last + 1);
        let (random, sequential) = if previous == first + 1 {
            (0, last - first)
        } else if previous == first {
            (0, last - first + 1)
        } else {
            (1, last - first)
        };
        MediaRead { random, sequential }
    }
}

/// Media work a drain pays for under the media model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MediaWork {
    /// 256-byte media lines written.
    pub lines: u64,
    /// Of which opened right after the line before them.
    pub sequential: u64,
    /// Read-modify-writes of partial lines.
    pub read_modify_writes: u64,
    /// The media line last written (for the DIMM it belongs to).
    pub last_line: u64,
}

/// Media lines a read pays for under the media model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MediaRead {
    /// Lines away from the previous read.
    pub random: u64,
    /// Lines following the previous one.
    pub sequential: u64,
}
/// The counters of one region (or simulated region).
#[derive(Debug)]
pub(crate) struct StatsSink {
    slots: Box<[Slot]>,
    /// The media model charging this region's drains and reads, if on.
    model: Option<Arc<MediaModel>>,
    /// The region's flush instruction, for the model's charge.
    flush: FlushInstruction,
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
        requests: 0,
        read_modify_writes: 0,
        absorbed: 0,
        sequential_lines: 0,
    },
});

impl StatsSink {
    pub(crate) fn new() -> Arc<StatsSink> {
        StatsSink::with_model(None, FlushInstruction::Clwb)
    }

    /// A sink whose drains and reads `model` charges (none: accounting
    /// only), for a region that writes lines back with `flush`.
    pub(crate) fn with_model(
        model: Option<Arc<MediaModel>>,
        flush: FlushInstruction,
    ) -> Arc<StatsSink> {
        let sink = Arc::new(StatsSink {
            slots: (0..SLOTS).map(|_| Slot::default()).collect(),
            model,
            flush,
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
        if !self.counting() {
            return;
        }
        let (slot, shared) = self.slot();
        slot.record_stores(shared, offset, len, counts);
        if let Some(model) = &self.model {
            if shared {
                return;
            }
            self.note_cached(slot, offset, len, counts, model);
            let flushed = counts.lines_flushed;
            if self.flush == FlushInstruction::Clflush && flushed > 0 {
                // Each `clflush`ed line is written back before the next
                // one is: the thread waits for them at once.
                let (end, read) = model.reserve(slot.take_since_drain(), None, flushed, self.flush);
                model.wait_for(end, true, read);
            } else if slot.get(FIRST_ISSUE) == 0 && (flushed > 0 || counts.bytes_nt > 0) {
                // The module starts on the lines as they are issued; the
                // drain reserves them from here, reading the clock once per
                // drain rather than once per write (a read costs tens of
                // ns in a virtual machine, which would pass for media time).
                slot.set(FIRST_ISSUE, model.issue_time(flushed, self.flush) + 1);
            }
        }
    }

    /// Records a copy or flush at region offset `offset` and the fence that
    /// follows it, with one look-up of this thread's slot. Called just
    /// before the fence: counter stores issued after an `sfence` wait for
    /// the copy's non-temporal stores to drain (measured slower).
    #[inline]
    pub(crate) fn record_persist(&self, offset: usize, len: usize, counts: StoreCounts) {
        if !self.counting() {
            return;
        }
        let (slot, shared) = self.slot();
        slot.record_stores(shared, offset, len, counts);
        slot.settle(shared);
        if let Some(model) = &self.model {
            if !shared {
                self.note_cached(slot, offset, len, counts, model);
            }
        }
        self.charge_drain(slot, shared, counts.lines_flushed);
    }

    /// Under the media model, notes whether the lines a copy or flush just
    /// wrote back stay cached for later reads: only if they were all
    /// written back with a cache-keeping `clwb` (non-temporal stores bypass
    /// the cache).
    #[inline]
    fn note_cached(
        &self,
        slot: &Slot,
        offset: usize,
        len: usize,
        counts: StoreCounts,
        model: &MediaModel,
    ) {
        if len == 0 || (counts.lines_flushed == 0 && counts.bytes_nt == 0) {
            return;
        }
        let kept = counts.bytes_nt == 0 && model.keeps_lines(self.flush);
        let first_cl = (offset / 64) as u64;
        let end_cl = (offset + len).div_ceil(64) as u64;
        slot.note_written_back(first_cl, end_cl, kept);
    }

    /// Whether to count: accounting is on, or a media model needs the
    /// counts to charge for.
    #[inline]
    fn counting(&self) -> bool {
        is_enabled() || self.model.is_some()
    }

    /// Under the media model, spins for the media work since this thread's
    /// last drain, `flushed` lines of which were just written back.
    #[inline]
    fn charge_drain(&self, slot: &Slot, shared: bool, flushed: u64) {
        if let Some(model) = &self.model {
            if !shared {
                let start = slot.get(FIRST_ISSUE).checked_sub(1);
                slot.set(FIRST_ISSUE, 0);
                let work = slot.take_since_drain();
                let (end, read) = model.reserve(work, start, flushed, self.flush);
                model.wait_for(end, self.flush == FlushInstruction::Clflush, read);
            }
        }
    }

    /// Under the media model, spins for a read of `[offset, offset + len)`
    /// made through the API. Without the model this is one branch.
    #[inline]
    pub(crate) fn record_read(&self, offset: usize, len: usize) {
        if let Some(model) = &self.model {
            if len == 0 {
                return;
            }
            let (slot, shared) = self.slot();
            if !shared {
                let first_cl = (offset / 64) as u64;
                let end_cl = (offset + len).div_ceil(64) as u64;
                if slot.is_cached(first_cl, end_cl) {
                    // A cache hit: the media is not touched.
                    return;
                }
                model.charge_read(slot.take_read(first_cl, end_cl));
            }
        }
    }

    /// Records cached stores that were not flushed (plain writes).
    #[inline]
    pub(crate) fn record_cached(&self, bytes: u64) {
        if !self.counting() {
            return;
        }
        let (slot, shared) = self.slot();
        slot.add(shared, BYTES_CACHED, bytes);
    }

    /// Records an msync of the pages `[start, end)` (byte offsets, page
    /// aligned): the kernel writes back every cache line of them, and waits
    /// for them as a drain does.
    pub(crate) fn record_msync(&self, start: usize, end: usize) {
        if !self.counting() || end <= start {
            return;
        }
        let (slot, shared) = self.slot();
        let (first_cl, end_cl) = ((start / 64) as u64, end.div_ceil(64) as u64);
        slot.add(shared, MSYNCS, 1);
        slot.add(shared, LINES_FLUSHED, end_cl - first_cl);
        slot.requests(shared, first_cl, end_cl);
        self.charge_drain(slot, shared, 0);
    }

    /// Records a fence: this thread's touched media lines become writes.
    #[inline]
    pub(crate) fn record_fence(&self) {
        if !self.counting() {
            return;
        }
        let (slot, shared) = self.slot();
        slot.settle(shared);
        self.charge_drain(slot, shared, 0);
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
#[path = "stats_tests.rs"]
mod tests;
