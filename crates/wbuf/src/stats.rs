//! Counters, in the spirit of dm-writecache's status line.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of a buffer's counters (see [`crate::WriteBuffer::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WbufStats {
    /// Slots in the buffer.
    pub blocks: u64,
    /// Slots holding nothing.
    pub free: u64,
    /// Slots holding a version not yet in the file.
    pub dirty: u64,
    /// Slots being written to the file by a destage round.
    pub under_writeback: u64,
    /// Slots holding a version already in the file (read cache, reclaimable).
    pub clean: u64,
    /// Block reads served from PM.
    pub read_hits: u64,
    /// Block reads served from the file.
    pub read_misses: u64,
    /// Block writes over a buffered version not yet destaged (absorbed).
    pub write_hits_uncommitted: u64,
    /// Block writes over a buffered version already destaged.
    pub write_hits_committed: u64,
    /// Block writes to a block not in the buffer.
    pub write_misses: u64,
    /// Block writes that went straight to the file (too large, or full).
    pub bypassed: u64,
    /// Writes that waited for a free slot.
    pub waits: u64,
    /// `flush` calls.
    pub flushes: u64,
    /// Destage rounds completed.
    pub rounds: u64,
    /// Rounds whose writes overlapped the previous round's sync.
    pub overlapped_rounds: u64,
    /// `fdatasync`s of the file.
    pub file_syncs: u64,
    /// Bytes the callers wrote.
    pub user_bytes: u64,
    /// Bytes written to the file (destage, write-through, recovery).
    pub ssd_bytes: u64,
    /// Bytes never written to the file because a newer version replaced
    /// them in PM first.
    pub absorbed_bytes: u64,
}

impl WbufStats {
    /// Bytes sent to the SSD per byte written by callers.
    pub fn ssd_bytes_per_user_byte(&self) -> f64 {
        self.ssd_bytes as f64 / (self.user_bytes.max(1)) as f64
    }

    /// Every counter with its name (dm-writecache's names where it has
    /// them), in a fixed order: what INFO prints as `wbuf_<name>`.
    pub fn named(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("blocks", self.blocks),
            ("free", self.free),
            ("dirty", self.dirty),
            ("under_writeback", self.under_writeback),
            ("clean", self.clean),
            ("read_hits", self.read_hits),
            ("read_misses", self.read_misses),
            ("write_hits_uncommitted", self.write_hits_uncommitted),
            ("write_hits_committed", self.write_hits_committed),
            ("write_misses", self.write_misses),
            ("bypassed", self.bypassed),
            ("waits", self.waits),
            ("flushes", self.flushes),
            ("rounds", self.rounds),
            ("file_syncs", self.file_syncs),
            ("user_bytes", self.user_bytes),
            ("ssd_bytes", self.ssd_bytes),
            ("absorbed_bytes", self.absorbed_bytes),
            ("overlapped_rounds", self.overlapped_rounds),
        ]
    }
}

/// The counters that are not derived from slot states.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub overlapped_rounds: AtomicU64,
    pub read_hits: AtomicU64,
    pub read_misses: AtomicU64,
    pub write_hits_uncommitted: AtomicU64,
    pub write_hits_committed: AtomicU64,
    pub write_misses: AtomicU64,
    pub bypassed: AtomicU64,
    pub waits: AtomicU64,
    pub flushes: AtomicU64,
    pub rounds: AtomicU64,
    pub file_syncs: AtomicU64,
    pub user_bytes: AtomicU64,
    pub ssd_bytes: AtomicU64,
    pub absorbed_bytes: AtomicU64,
}

/// Adds `n` to a counter.
pub(crate) fn bump(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl Counters {
    pub(crate) fn fill(&self, stats: &mut WbufStats) {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        stats.read_hits = get(&self.read_hits);
        stats.read_misses = get(&self.read_misses);
        stats.write_hits_uncommitted = get(&self.write_hits_uncommitted);
        stats.write_hits_committed = get(&self.write_hits_committed);
        stats.write_misses = get(&self.write_misses);
        stats.bypassed = get(&self.bypassed);
        stats.waits = get(&self.waits);
        stats.flushes = get(&self.flushes);
        stats.rounds = get(&self.rounds);
        stats.overlapped_rounds = get(&self.overlapped_rounds);
        stats.file_syncs = get(&self.file_syncs);
        stats.user_bytes = get(&self.user_bytes);
        stats.ssd_bytes = get(&self.ssd_bytes);
        stats.absorbed_bytes = get(&self.absorbed_bytes);
    }
}
