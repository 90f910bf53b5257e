//! TPC-C on SQLite (paper 000, figure 3): tpmC of ferrite-pmem (SQLite/PMM)
//! against ferrite-mmap (SQLite/MM) and vanilla SQLite with a rollback
//! journal and with WAL, on the disk and on tmpfs, all in the same run;
//! and `ferrite-wbuf` (the files on the disk behind PM write buffers,
//! paper 003) against vanilla SQLite's rollback journal on the disk.
//!
//! The database is loaded once per warehouse count (a plain SQLite file),
//! then every run starts from a fresh copy of it (imported into a PM device
//! file for the PM configurations). Every configuration uses
//! `synchronous=FULL` and SQLite's default 2 MB page cache, as the paper.
//!
//! `--setup paper` is the paper's configuration: 10 warehouses (about
//! 1 GB), so that the 2 MB cache holds a small part of the database and most
//! page reads and writes go through the VFS (cache misses, and spills of
//! dirty pages), where the systems differ. The default warehouse counts
//! (1, 2, 4) fit far more of the database in the cache.

mod check;
mod driver;
mod load;
mod random;
mod schema;
mod txn;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use ferrite_sqlite::{Mode, VfsOptions};
use rusqlite::Connection;

use crate::report::{self, median, Panel, Report, Series};
use crate::Common;
use driver::{Config, Medium, RunResult, RunSpec};
use random::{Constants, Rand};

/// A ferrite-pmem VFS that does not advertise `SAFE_APPEND`, to measure
/// what advertising it is worth.
pub const PMEM_SAFE_APPEND: &str = "ferrite-pmem-safe-append";

/// A named setup of the experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Setup {
    /// Paper 000's: 10 warehouses, SQLite's default page cache, the
    /// paper's three systems (ferrite-pmem, ferrite-mmap, vanilla SQLite
    /// with a rollback journal on the disk), 30 s runs; `--warehouses`,
    /// `--configs` and `--duration` still override.
    Paper,
}

/// Warehouses of paper 000's TPC-C runs.
const PAPER_WAREHOUSES: u64 = 10;
/// The paper's three systems.
const PAPER_CONFIGS: [&str; 3] = ["pmem", "mmap", "vanilla_delete_disk"];
/// Seconds per run in the paper's setup: long enough that the first
/// seconds, in which the page cache fills, weigh little.
const PAPER_DURATION: f64 = 30.0;

/// Arguments of the `tpcc` experiment.
#[derive(Clone, Debug, clap::Args)]
pub struct TpccArgs {
    #[command(flatten)]
    pub common: Common,
    /// Warehouse counts to run (default 1,2,4; 1 with --quick).
    #[arg(long, value_delimiter = ',')]
    pub warehouses: Vec<u64>,
    /// Terminals (threads, one connection each) per run.
    #[arg(long, default_value_t = 1)]
    pub terminals: u64,
    /// Seconds per run (default 10; 3 with --quick).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Run only these configurations (keys as in the JSON, e.g.
    /// `pmem,mmap,vanilla_delete_tmpfs`); all by default. For A/B
    /// measurements that need many interleaved runs of a few systems.
    #[arg(long, value_delimiter = ',')]
    pub configs: Vec<String>,
    /// A named setup (`paper`: paper 000's 10 warehouses with the default
    /// page cache); explicit arguments override its choices.
    #[arg(long, value_enum)]
    pub setup: Option<Setup>,
}

impl TpccArgs {
    /// Warehouse counts, configurations and seconds per run, from the
    /// arguments, the setup and `--quick`.
    fn plan(&self, quick: bool) -> (Vec<u64>, Vec<String>, f64) {
        let paper = self.setup == Some(Setup::Paper);
        let warehouses = match (self.warehouses.is_empty(), paper, quick) {
            (false, _, _) => self.warehouses.clone(),
            (true, true, _) => vec![PAPER_WAREHOUSES],
            (true, false, true) => vec![1],
            (true, false, false) => vec![1, 2, 4],
        };
        let configs = if self.configs.is_empty() && paper {
            PAPER_CONFIGS.iter().map(|c| c.to_string()).collect()
        } else {
            self.configs.clone()
        };
        let duration = self.duration.unwrap_or(match (paper, quick) {
            (true, _) => PAPER_DURATION,
            (false, true) => 3.0,
            (false, false) => 10.0,
        });
        (warehouses, configs, duration)
    }
}

/// `PRAGMA mmap_size` of the `*_fetch` / `*_mmap` configurations: more
/// than any database the experiment loads.
const MMAP_SIZE: u64 = 1 << 30;

/// Every configuration, the paper's three systems first. The paper's
/// systems read pages by copying them (`mmap_size` 0, SQLite's default);
/// the `*_fetch` and `*_mmap` ones let SQLite read pages in place (the
/// paper's future work on PM; SQLite's own mmap on tmpfs, for fairness).
const CONFIGS: [Config; 13] = [
    Config {
        key: "pmem",
        vfs: "ferrite-pmem",
        journal: "TRUNCATE",
        medium: Medium::Tmpfs,
        mmap_size: 0,
    },
    Config {
        key: "mmap",
        vfs: "ferrite-mmap",
        journal: "TRUNCATE",
        medium: Medium::Tmpfs,
        mmap_size: 0,
    },
    Config {
        key: "vanilla_delete_disk",
        vfs: "unix",
        journal: "DELETE",
        medium: Medium::Disk,
        mmap_size: 0,
    },
    Config {
        key: "vanilla_wal_disk",
        vfs: "unix",
        journal: "WAL",
        medium: Medium::Disk,
        mmap_size: 0,
    },
    Config {
        key: "vanilla_delete_tmpfs",
        vfs: "unix",
        journal: "DELETE",
        medium: Medium::Tmpfs,
        mmap_size: 0,
    },
    Config {
        key: "vanilla_wal_tmpfs",
        vfs: "unix",
        journal: "WAL",
        medium: Medium::Tmpfs,
        mmap_size: 0,
    },
    Config {
        key: "pmem_wal",
        vfs: "ferrite-pmem",
        journal: "WAL",
        medium: Medium::Tmpfs,
        mmap_size: 0,
    },
    Config {
        key: "pmem_safe_append",
        vfs: PMEM_SAFE_APPEND,
        journal: "TRUNCATE",
        medium: Medium::Tmpfs,
        mmap_size: 0,
    },
    Config {
        key: "pmem_fetch",
        vfs: "ferrite-pmem",
        journal: "TRUNCATE",
        medium: Medium::Tmpfs,
        mmap_size: MMAP_SIZE,
    },
    Config {
        key: "mmap_fetch",
        vfs: "ferrite-mmap",
        journal: "TRUNCATE",
        medium: Medium::Tmpfs,
        mmap_size: MMAP_SIZE,
    },
    Config {
        key: "vanilla_delete_tmpfs_mmap",
        vfs: "unix",
        journal: "DELETE",
        medium: Medium::Tmpfs,
        mmap_size: MMAP_SIZE,
    },
    Config {
        key: "file_delete_disk",
        vfs: "ferrite-file",
        journal: "DELETE",
        medium: Medium::Disk,
        mmap_size: 0,
    },
    // The database and its journal on the disk, their writes staged in
    // PM write buffers on tmpfs (emulated PM; issue #38).
    Config {
        key: "wbuf_delete_disk",
        vfs: "ferrite-wbuf",
        journal: "DELETE",
        medium: Medium::Disk,
        mmap_size: 0,
    },
];

/// Ratios reported: (key, numerator config, denominator config).
const RATIOS: [(&str, &str, &str); 12] = [
    ("pmem_vs_vanilla_delete_disk", "pmem", "vanilla_delete_disk"),
    ("pmem_vs_vanilla_wal_disk", "pmem", "vanilla_wal_disk"),
    ("pmem_vs_mmap", "pmem", "mmap"),
    (
        "pmem_vs_vanilla_delete_tmpfs",
        "pmem",
        "vanilla_delete_tmpfs",
    ),
    ("pmem_vs_vanilla_wal_tmpfs", "pmem", "vanilla_wal_tmpfs"),
    ("safe_append_gain", "pmem_safe_append", "pmem"),
    ("fetch_gain", "pmem_fetch", "pmem"),
    ("pmem_fetch_vs_mmap_fetch", "pmem_fetch", "mmap_fetch"),
    (
        "pmem_fetch_vs_vanilla_delete_tmpfs",
        "pmem_fetch",
        "vanilla_delete_tmpfs",
    ),
    (
        "pmem_fetch_vs_vanilla_delete_tmpfs_mmap",
        "pmem_fetch",
        "vanilla_delete_tmpfs_mmap",
    ),
    (
        "file_vs_vanilla_delete_disk",
        "file_delete_disk",
        "vanilla_delete_disk",
    ),
    (
        "wbuf_vs_vanilla_delete_disk",
        "wbuf_delete_disk",
        "vanilla_delete_disk",
    ),
];

/// Registers the VFSes; `ferrite-wbuf` keeps its buffers in `buffers`
/// (unless `FERRITE_WBUF_DIR` says otherwise), a directory on tmpfs that
/// the experiment removes when it ends.
fn register_vfses(buffers: &Path) -> Result<()> {
    if std::env::var_os("FERRITE_WBUF_DIR").is_none() {
        std::env::set_var("FERRITE_WBUF_DIR", buffers);
    }
    ferrite_sqlite::register_defaults_linked()?;
    // The experimental variant: SAFE_APPEND on, to measure what the
    // default (off, see docs/sqlite.md) costs.
    let options = VfsOptions {
        in_place_reads: true,
        safe_append: true,
        ..VfsOptions::new(Mode::Pmem)
    };
    ferrite_sqlite::register_linked(PMEM_SAFE_APPEND, options)?;
    Ok(())
}

/// Loads `warehouses` into a plain SQLite file under `dir`.
fn load_template(dir: &Path, warehouses: u64, constants: Constants) -> Result<PathBuf> {
    let path = dir.join(format!("tpcc-template-w{warehouses}.db"));
    let _ = std::fs::remove_file(&path);
    let started = std::time::Instant::now();
    let db = Connection::open(&path)?;
    let mut rand = Rand::new(0x7BCC + warehouses, constants);
    load::load(&db, warehouses, &mut rand).context("loading TPC-C")?;
    check::consistency(&db).context("after loading")?;
    tracing::info!(
        warehouses,
        seconds = started.elapsed().as_secs_f64(),
        "loaded {}",
        path.display()
    );
    Ok(path)
}

type Results = BTreeMap<u64, BTreeMap<&'static str, Vec<RunResult>>>;

/// Runs the experiment and writes `tpcc.json` and `tpcc.svg`.
pub fn run(args: &TpccArgs) -> Result<()> {
    let common = args.common.clone().resolved();
    let (warehouses, config_keys, seconds) = args.plan(common.quick);
    let duration = Duration::from_secs_f64(seconds);
    let configs = selected_configs(&config_keys)?;
    let disk = report::disk_scratch_dir()?;
    let tmpfs = report::pm_scratch_dir()?;
    let buffers = tempfile::tempdir_in(&tmpfs)?;
    register_vfses(buffers.path())?;
    let mut seeds = fastrand::Rng::with_seed(0x7CC0);
    let load_constants = Constants::for_load(&mut seeds);
    let run_constants = Constants::for_run(load_constants, &mut seeds);
    let mut results: Results = BTreeMap::new();
    let mut databases = BTreeMap::new();
    for &w in &warehouses {
        let template = load_template(&disk, w, load_constants)?;
        databases.insert(format!("w{w}"), database_shape(&template)?);
        for run in 0..common.runs() {
            // Rotate the order so drift (page cache, thermal) spreads evenly.
            for i in 0..configs.len() {
                let config = configs[(i + run) % configs.len()];
                let scratch = if config.medium == Medium::Disk {
                    &disk
                } else {
                    &tmpfs
                };
                let spec = RunSpec {
                    warehouses: w,
                    terminals: args.terminals.max(1),
                    duration,
                    seed: seeds.u64(..),
                    constants: run_constants,
                };
                let result = driver::run(config, &template, scratch, spec)?;
                if config.vfs == "ferrite-wbuf" {
                    // The run's database is gone; so must its buffer be,
                    // or every run would leave one on tmpfs.
                    clear_dir(buffers.path())?;
                }
                tracing::info!(
                    w,
                    run,
                    config = config.key,
                    tpmc = result.tpmc,
                    tps = result.tps,
                    "run done"
                );
                results
                    .entry(w)
                    .or_default()
                    .entry(config.key)
                    .or_default()
                    .push(result);
            }
        }
        std::fs::remove_file(&template).ok();
    }
    write_report(&common, args, &results, seconds, databases)
}

/// The loaded database's size and the page cache a connection gets, for
/// the report: how much of the database the cache can hold.
fn database_shape(template: &Path) -> Result<serde_json::Value> {
    let bytes = std::fs::metadata(template)?.len();
    let db = Connection::open(template)?;
    let page_size: i64 = db.query_row("PRAGMA page_size", [], |row| row.get(0))?;
    // Negative: KiB; positive: pages (SQLite's convention).
    let cache_size: i64 = db.query_row("PRAGMA cache_size", [], |row| row.get(0))?;
    let cache_bytes = if cache_size < 0 {
        cache_size.unsigned_abs() * 1024
    } else {
        cache_size.unsigned_abs() * page_size.unsigned_abs()
    };
    Ok(serde_json::json!({
        "database_bytes": bytes,
        "page_size": page_size,
        "cache_size_pragma": cache_size,
        "page_cache_bytes": cache_bytes,
        "cache_share_of_database": cache_bytes as f64 / bytes.max(1) as f64,
    }))
}

/// Removes the files in `dir`.
fn clear_dir(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    }
    Ok(())
}

/// The configurations named in `keys`, in table order; all if `keys` is
/// empty.
fn selected_configs(keys: &[String]) -> Result<Vec<&'static Config>> {
    if let Some(unknown) = keys.iter().find(|k| !CONFIGS.iter().any(|c| c.key == *k)) {
        let known: Vec<&str> = CONFIGS.iter().map(|c| c.key).collect();
        anyhow::bail!(
            "unknown configuration {unknown:?}; known: {}",
            known.join(", ")
        );
    }
    Ok(CONFIGS
        .iter()
        .filter(|c| keys.is_empty() || keys.iter().any(|k| k == c.key))
        .collect())
}

fn median_of(runs: &[RunResult], f: impl Fn(&RunResult) -> Option<f64>) -> Option<f64> {
    let values: Vec<f64> = runs.iter().filter_map(f).collect();
    (!values.is_empty()).then(|| median(&values))
}

fn write_report(
    common: &Common,
    args: &TpccArgs,
    results: &Results,
    seconds: f64,
    databases: BTreeMap<String, serde_json::Value>,
) -> Result<()> {
    let mut report = Report::new("tpcc", common.quick, common.runs());
    report.figure("terminals", args.terminals.max(1));
    report.figure("setup", args.setup.map(|s| format!("{s:?}").to_lowercase()));
    report.figure("seconds_per_run", seconds);
    report.figure("databases", databases);
    let mut table = BTreeMap::new();
    for (w, by_config) in results {
        let mut medians = BTreeMap::new();
        for (key, runs) in by_config {
            let config = CONFIGS.iter().find(|c| c.key == *key);
            medians.insert(
                *key,
                serde_json::json!({
                    "vfs": config.map(|c| c.vfs),
                    "journal_mode": config.map(|c| c.journal),
                    "mmap_size": config.map(|c| c.mmap_size),
                    "medium": config.map(|c| format!("{:?}", c.medium).to_lowercase()),
                    "tpmc": median_of(runs, |r| Some(r.tpmc)),
                    "tps": median_of(runs, |r| Some(r.tps)),
                    "flushes_per_txn": median_of(runs, |r| r.flushes_per_txn),
                    "fences_per_txn": median_of(runs, |r| r.fences_per_txn),
                    "media_lines_per_txn": median_of(runs, |r| r.media_lines_per_txn),
                    "cpu_us_per_txn": median_of(runs, |r| r.cpu_us_per_txn),
                    "on_cpu_share": median_of(runs, |r| r.on_cpu_share),
                    "read_misses_per_txn": median_of(runs, |r| r.read_misses_per_txn),
                    "runs": runs,
                }),
            );
        }
        for (key, num, den) in RATIOS {
            let tpmc = |k: &str| {
                by_config
                    .get(k)
                    .and_then(|r| median_of(r, |x| Some(x.tpmc)))
            };
            if let (Some(n), Some(d)) = (tpmc(num), tpmc(den)) {
                report.ratio(format!("{key}_w{w}"), n / d.max(1e-9));
            }
        }
        table.insert(format!("w{w}"), medians);
    }
    headline_ratios(&mut report, results);
    report.figure("by_warehouses", &table);
    report.note(
        "ratios are of median tpmC; the unsuffixed keys are the median over warehouse counts",
    );
    report
        .note("PM configurations run on emulated PM (tmpfs): durable against a process crash only");
    let json = report.write(&common.out)?;
    let svg = common.out.join("tpcc.svg");
    plot(results, &svg)?;
    print_table(results, &report);
    tracing::info!("wrote {} and {}", json.display(), svg.display());
    Ok(())
}

/// The unsuffixed ratios: the median over warehouse counts.
fn headline_ratios(report: &mut Report, results: &Results) {
    for (key, _, _) in RATIOS {
        let values: Vec<f64> = results
            .keys()
            .filter_map(|w| report.ratios().get(&format!("{key}_w{w}")).copied())
            .collect();
        if !values.is_empty() {
            report.ratio(key, median(&values));
        }
    }
}

fn plot(results: &Results, svg: &Path) -> Result<()> {
    let mut tpmc = Vec::new();
    for config in &CONFIGS {
        let points: Vec<(f64, f64)> = results
            .iter()
            .filter_map(|(w, by)| {
                let m = median_of(by.get(config.key)?, |r| Some(r.tpmc))?;
                Some((*w as f64, m))
            })
            .collect();
        tpmc.push(Series {
            label: format!("{} ({}, {})", config.key, config.vfs, config.journal),
            points,
        });
    }
    let panel = Panel {
        title: "TPC-C throughput (median)".into(),
        x_label: "warehouses".into(),
        y_label: "tpmC".into(),
        log_x: true,
        log_y: true,
        series: tpmc,
    };
    report::plot(svg, "SQLite on PM: TPC-C (paper 000, fig. 3)", &[panel])
}

#[allow(clippy::print_stdout)]
fn print_table(results: &Results, report: &Report) {
    println!(
        "\nTPC-C, medians: tpmC / total tx/s / flushes per tx / CPU us per tx / on-CPU share / model read misses per tx"
    );
    for (w, by) in results {
        println!("  {w} warehouse(s)");
        for config in &CONFIGS {
            let Some(runs) = by.get(config.key) else {
                continue;
            };
            let flushes = median_of(runs, |r| r.flushes_per_txn)
                .map_or("-".to_string(), |f| format!("{f:.1}"));
            let cpu = median_of(runs, |r| r.cpu_us_per_txn)
                .map_or("-".to_string(), |c| format!("{c:.1}"));
            let share =
                median_of(runs, |r| r.on_cpu_share).map_or("-".to_string(), |c| format!("{c:.2}"));
            let misses = median_of(runs, |r| r.read_misses_per_txn)
                .map_or("-".to_string(), |c| format!("{c:.1}"));
            println!(
                "    {:<22} {:>10.0} {:>9.1} {:>8} {:>8} {:>5} {:>7}",
                config.key,
                median_of(runs, |r| Some(r.tpmc)).unwrap_or(0.0),
                median_of(runs, |r| Some(r.tps)).unwrap_or(0.0),
                flushes,
                cpu,
                share,
                misses
            );
        }
    }
    println!("\nratios of median tpmC (> 1: ferrite-pmem faster)");
    for (key, value) in report.ratios() {
        println!("  {key:<36} {value:.3}");
    }
}
