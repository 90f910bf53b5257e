//! Accounting: what the log did and what it cost its users.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use ferrite_pmem::FlushStats;

/// Counters updated on the hot path with relaxed atomics.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) records: AtomicU64,
    pub(crate) payload_bytes: AtomicU64,
    pub(crate) device_bytes: AtomicU64,
    pub(crate) commits: AtomicU64,
    pub(crate) syncs: AtomicU64,
    pub(crate) writes: AtomicU64,
    pub(crate) self_persisted: AtomicU64,
    pub(crate) batches: AtomicU64,
    pub(crate) batch_records: AtomicU64,
    pub(crate) batch_max: AtomicU64,
    pub(crate) wait_ns: AtomicU64,
    pub(crate) backpressure_waits: AtomicU64,
    pub(crate) delayed_syncs: AtomicU64,
    pub(crate) postponed_writes: AtomicU64,
}

impl Counters {
    /// One batch of `records` made durable (by a sync, or by the completion
    /// of a contiguous run of self-persisted records on PM).
    pub(crate) fn batch(&self, records: u64) {
        if records == 0 {
            return;
        }
        self.batches.fetch_add(1, Relaxed);
        self.batch_records.fetch_add(records, Relaxed);
        self.batch_max.fetch_max(records, Relaxed);
    }

    pub(crate) fn waited(&self, time: Duration) {
        self.wait_ns
            .fetch_add(u64::try_from(time.as_nanos()).unwrap_or(u64::MAX), Relaxed);
    }
}

/// A snapshot of a log's accounting since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WalStats {
    /// Records appended.
    pub records: u64,
    /// Payload bytes appended.
    pub payload_bytes: u64,
    /// Bytes written to the device (headers and padding included).
    pub device_bytes: u64,
    /// Commits that waited for durability (or returned at once).
    pub commits: u64,
    /// Device syncs (`fdatasync` on a file).
    pub syncs: u64,
    /// Device writes of batches (file path).
    pub writes: u64,
    /// Records each persisted by their own appender (PM path: one drain each).
    pub self_persisted: u64,
    /// Batches made durable: per sync on a file; on PM, per advance of the
    /// durable LSN (a run of records completed together).
    pub batches: u64,
    /// Mean records per batch.
    pub batch_mean: f64,
    /// Most records in one batch.
    pub batch_max: u64,
    /// Total time commits spent waiting for durability, all threads.
    pub wait: Duration,
    /// Appends that waited because `max_in_flight_bytes` were in flight.
    pub backpressure_waits: u64,
    /// Periodic mode: commits that waited behind a sync running longer than
    /// the postponement limit (Redis `aof_delayed_fsync`).
    pub delayed_syncs: u64,
    /// Periodic mode: writes postponed because a sync was running.
    pub postponed_writes: u64,
    /// Flush accounting of a PM device since the log was opened.
    pub flush: Option<FlushStats>,
}

impl WalStats {
    pub(crate) fn from_counters(c: &Counters, flush: Option<FlushStats>) -> WalStats {
        let batches = c.batches.load(Relaxed);
        let batch_records = c.batch_records.load(Relaxed);
        WalStats {
            records: c.records.load(Relaxed),
            payload_bytes: c.payload_bytes.load(Relaxed),
            device_bytes: c.device_bytes.load(Relaxed),
            commits: c.commits.load(Relaxed),
            syncs: c.syncs.load(Relaxed),
            writes: c.writes.load(Relaxed),
            self_persisted: c.self_persisted.load(Relaxed),
            batches,
            batch_mean: if batches == 0 {
                0.0
            } else {
                batch_records as f64 / batches as f64
            },
            batch_max: c.batch_max.load(Relaxed),
            wait: Duration::from_nanos(c.wait_ns.load(Relaxed)),
            backpressure_waits: c.backpressure_waits.load(Relaxed),
            delayed_syncs: c.delayed_syncs.load(Relaxed),
            postponed_writes: c.postponed_writes.load(Relaxed),
            flush,
        }
    }

    /// Cache lines flushed per record (PM), if the device counts flushes.
    pub fn flushes_per_record(&self) -> Option<f64> {
        self.flush.map(|f| f.flushes_per_op(self.records))
    }

    /// Fences per record (PM), if the device counts them.
    pub fn fences_per_record(&self) -> Option<f64> {
        self.flush.map(|f| f.fences_per_op(self.records))
    }
}
