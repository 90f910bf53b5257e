//! How the server learns its memory use: a [`Probe`] its host program
//! installs once, before serving (docs/memory.md).
//!
//! The library does not know which allocator its host uses (its own tests
//! run servers under the system allocator; Ferrite's binaries use jemalloc
//! behind a counter, crate `ferrite-alloc`), so the host tells it:
//! - `allocated`: the bytes allocated now. It is read before every command
//!   that may grow memory, as Redis reads its own counter, so it must cost
//!   O(1) (an atomic load).
//! - the allocator's name, size classes and statistics, for INFO memory
//!   and MEMORY.
//!
//! Without a probe, `used_memory` is the process's resident set size,
//! read by the timer (ten times a second): a rough figure that does not
//! fall when keys are freed, which is why the binaries install one.

use std::sync::OnceLock;

use crate::keyspace::map::ENTRY_BYTES_ESTIMATE;
use crate::state::State;

/// The allocator's own figures, in bytes (jemalloc's `stats.*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocatorStats {
    /// Bytes in blocks the program holds.
    pub allocated: u64,
    /// Bytes in the pages holding those blocks.
    pub active: u64,
    /// Bytes of resident pages the allocator maps.
    pub resident: u64,
}

/// What the host program tells the server about its allocator.
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    /// INFO's `mem_allocator`, e.g. `jemalloc-5.3.0`.
    pub name: &'static str,
    /// Bytes allocated now, in the allocator's usable sizes; O(1).
    pub allocated: fn() -> u64,
    /// The usable size of a block requested with this many bytes (the
    /// allocator's size class), for MEMORY USAGE.
    pub usable_size: fn(usize) -> usize,
    /// The allocator's statistics (may take microseconds).
    pub stats: Option<fn() -> AllocatorStats>,
    /// The allocator's full report, for MEMORY MALLOC-STATS.
    pub report: Option<fn() -> String>,
    /// Returns freed pages to the system (MEMORY PURGE).
    pub purge: Option<fn() -> bool>,
}

impl Probe {
    /// A probe that only counts: `allocated` from a counter the host keeps
    /// (the kv tests wrap the system allocator in `ferrite_alloc::Counting`),
    /// the system allocator's sizes, no statistics.
    pub fn counting(allocated: fn() -> u64) -> Probe {
        Probe {
            name: "libc",
            allocated,
            usable_size: libc_usable_size,
            stats: None,
            report: None,
            purge: None,
        }
    }
}

/// The probe of jemalloc behind `ferrite_alloc::Counting`: the counter
/// for `used_memory`, jemalloc's size classes and statistics. Only for a
/// program whose global allocator is `ferrite_alloc::jemalloc()`.
#[cfg(feature = "jemalloc")]
pub fn jemalloc_probe() -> Probe {
    fn stats() -> AllocatorStats {
        let s = ferrite_alloc::stats().unwrap_or_default();
        AllocatorStats {
            allocated: s.allocated as u64,
            active: s.active as u64,
            resident: s.resident as u64,
        }
    }
    static NAME: OnceLock<String> = OnceLock::new();
    Probe {
        name: NAME.get_or_init(ferrite_alloc::name),
        allocated: || ferrite_alloc::allocated() as u64,
        usable_size: ferrite_alloc::size_class,
        stats: Some(stats),
        report: Some(ferrite_alloc::malloc_stats),
        purge: Some(ferrite_alloc::purge),
    }
}

static PROBE: OnceLock<Probe> = OnceLock::new();

/// Installs the process's probe; the first one installed stays (the
/// allocator is the process's, whatever servers run in it). Returns
/// whether this one was installed.
pub fn install(probe: Probe) -> bool {
    PROBE.set(probe).is_ok()
}

/// The installed probe, if any.
pub fn probe() -> Option<&'static Probe> {
    PROBE.get()
}

/// The allocator's name for INFO: the probe's, else `libc`.
pub fn allocator_name() -> &'static str {
    probe().map_or("libc", |p| p.name)
}

/// The bytes a block of `size` requested bytes occupies.
pub fn usable_size(size: usize) -> usize {
    match probe() {
        Some(p) => (p.usable_size)(size),
        None => libc_usable_size(size),
    }
}

/// glibc's usable size: chunks are 16-byte multiples with an 8-byte
/// header, at least 32 bytes.
fn libc_usable_size(size: usize) -> usize {
    (size + 8).next_multiple_of(16).max(32) - 8
}

/// Resident set size of this process in bytes, where `/proc` has it.
pub fn resident_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// `part / whole`, 0 when `whole` is 0.
pub fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// One database's table overheads (MEMORY STATS `db.N`).
#[derive(Clone, Copy, Debug)]
pub struct DbOverhead {
    /// The database's number.
    pub index: usize,
    /// Bytes of the key table's slots.
    pub main: u64,
    /// Bytes of the expiry index's entries.
    pub expires: u64,
}

/// The figures INFO memory and MEMORY STATS report, gathered at once.
/// As in Redis, the overhead is what the server holds besides the data
/// (startup memory, client buffers, the key tables' slots), and the
/// dataset the rest of `used_memory`.
#[derive(Clone, Debug)]
pub struct Figures {
    /// `used_memory`.
    pub used: u64,
    /// `used_memory_peak`.
    pub peak: u64,
    /// `used_memory_startup`.
    pub startup: u64,
    /// `used_memory_rss`.
    pub rss: u64,
    /// The allocator's own figures (without them, Redis's fallbacks).
    pub allocator: AllocatorStats,
    /// Memory of the clients but the replicas (`mem_clients_normal`).
    pub clients_normal: u64,
    /// Reply buffers of the replicas (`mem_clients_slaves`), which are
    /// also `mem_not_counted_for_evict`.
    pub clients_slaves: u64,
    /// The replication backlog's allocation (`mem_replication_backlog`):
    /// counted against `maxmemory`, as Redis counts the backlog up to
    /// its size, while the replicas' buffers are not.
    pub repl_backlog: u64,
    /// Tables of the non-empty databases.
    pub dbs: Vec<DbOverhead>,
    /// `used_memory_overhead`.
    pub overhead: u64,
    /// Keys in all databases.
    pub keys: u64,
}

/// Bytes an entry of the expiry index costs (key handle and deadline).
const EXPIRE_ENTRY_BYTES: u64 = 32;

impl Figures {
    /// Reads everything from `state` and the probe (the allocator's
    /// statistics cost microseconds: for INFO and MEMORY, not per command).
    pub fn of(state: &State) -> Figures {
        let used = state.used_memory();
        let peak = state.used_memory_peak_bytes.max(used);
        let rss = resident_bytes().unwrap_or(0);
        let stats = probe().and_then(|p| p.stats).map(|read| read());
        // Without allocator statistics Redis reports the resident set and
        // its own counter in their place.
        let allocator = stats.unwrap_or(AllocatorStats {
            allocated: used,
            active: rss,
            resident: rss,
        });
        // Kept current by the event loop (`client_memory.rs`), as Redis
        // keeps it incrementally rather than walking every client.
        let clients_normal = state.client_memory.normal_total();
        let ks = &state.keyspace;
        let dbs: Vec<DbOverhead> = (0..ks.databases())
            .filter(|&db| !ks.db(db).is_empty())
            .map(|db| DbOverhead {
                index: db,
                main: ks.db(db).len() as u64 * ENTRY_BYTES_ESTIMATE as u64,
                expires: ks.db(db).expires_len() as u64 * EXPIRE_ENTRY_BYTES,
            })
            .collect();
        let keys = (0..ks.databases()).map(|db| ks.db(db).len() as u64).sum();
        let startup = state.startup_memory_bytes;
        let repl_backlog = state.repl.backlog.as_ref().map_or(0, |b| b.allocated()) as u64;
        let tables: u64 = dbs.iter().map(|d| d.main + d.expires).sum();
        Figures {
            used,
            peak,
            startup,
            rss,
            allocator,
            clients_normal,
            clients_slaves: state.replica_output_bytes,
            repl_backlog,
            dbs,
            overhead: startup + clients_normal + state.replica_output_bytes + repl_backlog + tables,
            keys,
        }
    }

    /// `used_memory_dataset`: what is not overhead.
    pub fn dataset(&self) -> u64 {
        self.used.saturating_sub(self.overhead)
    }

    /// `used_memory_dataset_perc`: the dataset's share of the memory used
    /// since startup.
    pub fn dataset_perc(&self) -> f64 {
        ratio(self.dataset(), self.used.saturating_sub(self.startup)) * 100.0
    }

    /// `used_memory_peak_perc`.
    pub fn peak_perc(&self) -> f64 {
        ratio(self.used, self.peak) * 100.0
    }

    /// MEMORY STATS `keys.bytes-per-key`: memory used since startup per key.
    pub fn bytes_per_key(&self) -> u64 {
        self.used
            .saturating_sub(self.startup)
            .checked_div(self.keys)
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libc_sizes() {
        assert_eq!(libc_usable_size(1), 24);
        assert_eq!(libc_usable_size(24), 24);
        assert_eq!(libc_usable_size(25), 40);
    }
}
