//! One measured run: a fresh copy of the loaded database on the
//! configuration's VFS and medium, `terminals` threads each with its own
//! connection running the mix for a fixed time, then the consistency
//! checks.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rusqlite::{Connection, ErrorCode, OpenFlags};

use super::random::{Constants, Rand};
use super::txn::{self, Kind, Outcome, Terminal};

/// Where a configuration keeps its files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Medium {
    /// The disk (`report::disk_scratch_dir`).
    Disk,
    /// tmpfs (`/dev/shm`): no durability cost, and Ferrite's emulated PM.
    Tmpfs,
}

/// A system under test.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Key in the JSON (`pmem`, `vanilla_delete_disk`...).
    pub key: &'static str,
    /// SQLite VFS; `unix` is vanilla SQLite.
    pub vfs: &'static str,
    /// `PRAGMA journal_mode`.
    pub journal: &'static str,
    pub medium: Medium,
    /// `PRAGMA mmap_size` (memory-mapped page reads); 0, SQLite's default,
    /// reads every page with `xRead`.
    pub mmap_size: u64,
}

impl Config {
    fn is_pm(&self) -> bool {
        matches!(
            self.vfs,
            "ferrite-mmap" | "ferrite-pmem" | super::PMEM_SAFE_APPEND
        )
    }
}

/// What one run measured.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RunResult {
    pub tpmc: f64,
    pub tps: f64,
    pub transactions: u64,
    pub new_orders: u64,
    pub rolled_back: u64,
    pub busy_retries: u64,
    /// Cache lines flushed per transaction (PM configurations only).
    pub flushes_per_txn: Option<f64>,
    /// Fences per transaction (PM configurations only).
    pub fences_per_txn: Option<f64>,
    /// 256-byte media lines written per transaction (PM configurations
    /// only; the media accounting's figure, what the model charges for).
    pub media_lines_per_txn: Option<f64>,
    /// CPU time the terminals spent per transaction, in microseconds
    /// (from `/proc/thread-self/schedstat`; `None` where the kernel does
    /// not report it). Unlike tpmC it does not count time other processes
    /// took the CPU away, so A/B comparisons on a shared machine are far
    /// less noisy with it.
    pub cpu_us_per_txn: Option<f64>,
    /// Share of the run's wall-clock time the terminals were on a CPU
    /// (their CPU time over terminals x seconds): below 1, they waited for
    /// a CPU other processes held, or blocked in the kernel.
    pub on_cpu_share: Option<f64>,
    /// Reads through the PM API the media model charged as misses to the
    /// media, per transaction (PM configurations under the model only).
    pub read_misses_per_txn: Option<f64>,
    /// Persists split with the `pmem-split` helper thread during the run
    /// (`FERRITE_PMEM_SPLIT_MIN`); 0 when no copy reached the split size.
    pub split_persists: u64,
    pub seconds: f64,
}

/// Parameters of a run.
#[derive(Clone, Copy, Debug)]
pub struct RunSpec {
    pub warehouses: u64,
    pub terminals: u64,
    pub duration: Duration,
    pub seed: u64,
    pub constants: Constants,
}

/// Prepared statements kept per connection: more than TPC-C uses.
const STATEMENT_CACHE_CAPACITY: usize = 64;

fn open(path: &Path, config: &Config) -> Result<Connection> {
    let db = Connection::open_with_flags_and_vfs(path, OpenFlags::default(), config.vfs)
        .with_context(|| format!("opening {} on {}", path.display(), config.vfs))?;
    db.busy_timeout(Duration::from_secs(30))?;
    // The five transactions use about 40 distinct statements (Stock-Level's
    // per-district column included); rusqlite's default cache of 16 evicts
    // them in turn, and re-parsing them cost ~9% of a transaction's CPU in
    // every configuration, diluting what the I/O layers differ in.
    db.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
    db.execute_batch(&format!(
        "PRAGMA journal_mode={}; PRAGMA synchronous=FULL; PRAGMA mmap_size={};",
        config.journal, config.mmap_size
    ))?;
    Ok(db)
}

/// Copies the template into `dir` in the configuration's file format.
fn install(template: &Path, dir: &Path, config: &Config) -> Result<PathBuf> {
    let path = dir.join("tpcc.db");
    if config.is_pm() {
        ferrite_sqlite::import(template, &path)?;
    } else {
        std::fs::copy(template, &path).with_context(|| format!("copying to {}", path.display()))?;
    }
    Ok(path)
}

#[derive(Default)]
struct Counts {
    transactions: u64,
    new_orders: u64,
    rolled_back: u64,
    busy_retries: u64,
    cpu_ns: Option<u64>,
}

/// Nanoseconds the calling thread has run on a CPU.
fn thread_cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

fn is_busy(error: &anyhow::Error) -> bool {
    error.chain().any(|e| {
        e.downcast_ref::<rusqlite::Error>()
            .and_then(rusqlite::Error::sqlite_error_code)
            .is_some_and(|c| matches!(c, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
    })
}

fn terminal(db: &Connection, t: Terminal, mut rand: Rand, stop: &AtomicBool) -> Result<Counts> {
    let mut counts = Counts::default();
    let cpu_start = thread_cpu_ns();
    while !stop.load(Ordering::Relaxed) {
        let kind = Kind::pick(&mut rand);
        match txn::run(db, kind, t, &mut rand) {
            Ok(outcome) => {
                counts.transactions += 1;
                if kind == Kind::NewOrder {
                    counts.new_orders += u64::from(outcome == Outcome::Committed);
                }
                counts.rolled_back += u64::from(outcome == Outcome::RolledBack);
            }
            Err(e) if is_busy(&e) => counts.busy_retries += 1,
            Err(e) => return Err(e),
        }
    }
    counts.cpu_ns = cpu_start
        .zip(thread_cpu_ns())
        .map(|(start, end)| end.saturating_sub(start));
    Ok(counts)
}

/// Runs `config` once on a fresh copy of `template` under `scratch`.
pub fn run(config: &Config, template: &Path, scratch: &Path, spec: RunSpec) -> Result<RunResult> {
    let dir = tempfile::tempdir_in(scratch)?;
    let path = install(template, dir.path(), config)?;
    let connections = (0..spec.terminals)
        .map(|_| open(&path, config))
        .collect::<Result<Vec<_>>>()?;
    let stop = AtomicBool::new(false);
    let before = ferrite_pmem::stats::global();
    let model = ferrite_pmem::model::active();
    let misses_before = model.as_ref().map_or(0, |m| m.read_misses());
    let splits_before = ferrite_pmem::split_persists();
    let started = Instant::now();
    let finished = std::thread::scope(|s| {
        let handles: Vec<_> = connections
            .into_iter()
            .enumerate()
            .map(|(i, db)| {
                let t = Terminal {
                    w_id: i as u64 % spec.warehouses + 1,
                    warehouses: spec.warehouses,
                };
                let rand = Rand::new(spec.seed ^ ((i as u64 + 1) * 0x9E37), spec.constants);
                let stop = &stop;
                s.spawn(move || terminal(&db, t, rand, stop).map(|c| (c, db)))
            })
            .collect();
        std::thread::sleep(spec.duration);
        stop.store(true, Ordering::Relaxed);
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow::anyhow!("terminal panicked"))?)
            .collect::<Result<Vec<_>>>()
    })?;
    let seconds = started.elapsed().as_secs_f64();
    let flushed = ferrite_pmem::stats::global() - before;
    let misses = model.as_ref().map(|m| m.read_misses() - misses_before);
    let split_persists = ferrite_pmem::split_persists() - splits_before;
    let mut result = RunResult {
        seconds,
        split_persists,
        ..RunResult::default()
    };
    let (counts, connections): (Vec<Counts>, Vec<Connection>) = finished.into_iter().unzip();
    let cpu_ns: Option<u64> = counts.iter().map(|c| c.cpu_ns).sum();
    for c in &counts {
        result.transactions += c.transactions;
        result.new_orders += c.new_orders;
        result.rolled_back += c.rolled_back;
        result.busy_retries += c.busy_retries;
    }
    result.tpmc = result.new_orders as f64 * 60.0 / seconds;
    result.tps = result.transactions as f64 / seconds;
    result.cpu_us_per_txn = cpu_ns.map(|ns| ns as f64 / 1e3 / result.transactions.max(1) as f64);
    result.on_cpu_share = cpu_ns.map(|ns| ns as f64 / 1e9 / (seconds * counts.len().max(1) as f64));
    if config.is_pm() {
        result.flushes_per_txn = Some(flushed.flushes_per_op(result.transactions));
        result.fences_per_txn = Some(flushed.fences_per_op(result.transactions));
        result.media_lines_per_txn =
            Some(flushed.media_lines as f64 / result.transactions.max(1) as f64);
        result.read_misses_per_txn = misses.map(|m| m as f64 / result.transactions.max(1) as f64);
    }
    super::check::consistency(&connections[0])
        .with_context(|| format!("after the {} run", config.key))?;
    Ok(result)
}
