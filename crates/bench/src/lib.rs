//! Ferrite's experiments. Each reproduces a paper's figure with its
//! baseline measured in the same run, and writes `DIR/<name>.json` (every
//! figure, plus a `ratios` object where > 1 means Ferrite is better) and a
//! plot `DIR/<name>.svg`.
//!
//! Run one with `cargo run --release -p ferrite-bench -- <experiment> --out DIR`
//! (add `--quick` for a short run).

// A benchmark harness reports its tables to the person running it.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;

use anyhow::Result;

pub mod cluster;
pub mod idle;
pub mod kv;
mod kv_blocking;
mod kv_streams;
mod kv_tls;
mod kv_wbuf_log;
pub mod kvload;
mod media_validation;
pub mod pmem;
pub mod report;
pub mod rewrite;
pub mod tier;
pub mod tier_load;
pub mod tier_plan;
pub mod tonic;
mod tonic_structures;
pub mod tpcc;
pub mod wal;
pub mod wbuf;

/// Options every experiment takes.
#[derive(Clone, Debug, clap::Args)]
pub struct Common {
    /// Directory for the JSON result and the plot.
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
    /// A short run (seconds, not minutes) with fewer repetitions.
    #[arg(long)]
    pub quick: bool,
    /// Repetitions; figures are medians over them (default 5, 3 with --quick).
    #[arg(long)]
    pub runs: Option<usize>,
    /// Leave idle CPUs to the host's idle driver: by default the
    /// client-server experiments (kv, rewrite) hold a 0 µs CPU latency
    /// request so that idle CPUs poll (`idle.rs`).
    #[arg(long)]
    pub host_idle: bool,
    /// PM media model for every region the experiment maps (and for the
    /// servers it starts): `off` (DRAM costs, the default) or `optane`
    /// (`ferrite_pmem::model`). Recorded in the report's `machine` object.
    #[arg(long, value_parser = parse_model)]
    pub model: Option<ferrite_pmem::ModelChoice>,
}

fn parse_model(text: &str) -> std::result::Result<ferrite_pmem::ModelChoice, String> {
    ferrite_pmem::ModelChoice::parse(text).map_err(|err| err.to_string())
}

/// Applies `--model`: for this process's regions and, through the
/// environment, for the servers and clients it starts.
fn apply_model(common: &Common) {
    if let Some(choice) = common.model {
        ferrite_pmem::model::select(choice);
        // Set before any thread of ours starts, so no thread reads the
        // environment while it changes.
        std::env::set_var(ferrite_pmem::model::ENV_MODEL, choice.name());
    }
}

impl Common {
    /// Fills in the defaults that depend on `--quick`.
    pub fn resolved(mut self) -> Common {
        let default = if self.quick { 3 } else { 5 };
        self.runs = Some(self.runs.unwrap_or(default).max(1));
        self
    }

    /// The number of repetitions.
    pub fn runs(&self) -> usize {
        self.runs.unwrap_or(5).max(1)
    }
}

/// The experiments.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum Experiment {
    /// Persist primitives vs libpmem and msync; Device write+sync latency;
    /// the media model's validation shapes (model off vs optane).
    Pmem(Common),
    /// Paper 001 (Tonic): requests vs media writes by footprint, write
    /// amplification vs bandwidth with two threads, flushes, fences and
    /// media bytes per operation of Ferrite's persistent structures, and
    /// a lifetime estimate.
    Tonic(Common),
    /// Paper 004: redo log with group commit vs one sync per commit, on
    /// disk and on emulated PM, 1 to 64 sessions.
    Wal(Common),
    /// Paper 003: synchronous writes through the PM write buffer vs the
    /// disk's O_SYNC / O_DSYNC / fdatasync / O_DIRECT paths; sustained
    /// throughput past the buffer; write absorption under Zipf overwrites.
    Wbuf(wbuf::WbufArgs),
    /// TPC-C on SQLite: ferrite-pmem vs ferrite-mmap vs vanilla (paper 000).
    Tpcc(tpcc::TpccArgs),
    /// Ferrite's Redis-compatible server vs redis-server 7 (paper 002's
    /// setting): throughput by appendfsync level and log medium, memory;
    /// with `--tls`, SET/GET over TLS against redis-server's TLS.
    Kv(kv::KvArgs),
    /// Paper 002's figures (issue #5): Ferrite's parallel log rewrite vs
    /// redis-server 7 BGREWRITEAOF under a SET load: rewrite time,
    /// throughput and p99 during it, memory (PSS), recovery time.
    Rewrite(rewrite::RewriteArgs),
    /// Paper 001 (AliusM), issue #40: a keyspace larger than its DRAM
    /// budget, values on the PM tier, against all-DRAM Ferrite and
    /// redis-server 7 at DRAM shares 10 to 100%.
    Tier(tier::TierArgs),
    /// Issue #42: a three-primary Redis Cluster of Ferrite vs of
    /// redis-server 7 under the same `redis-benchmark --cluster` load:
    /// throughput and p99 of SET and GET.
    Cluster(Common),
    /// (internal) Runs a Ferrite server for the kv experiment:
    /// `kv-serve --name value...`.
    #[command(hide = true)]
    KvServe {
        /// redis.conf directives as `--name value` flags.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// (internal) The kv experiment's own load generator.
    #[command(hide = true)]
    KvLoad(kvload::LoadArgs),
}

/// Runs one experiment.
pub fn run(experiment: Experiment) -> Result<()> {
    match &experiment {
        Experiment::Pmem(common) | Experiment::Wal(common) | Experiment::Tonic(common) => {
            apply_model(common)
        }
        Experiment::Kv(args) => apply_model(&args.common),
        Experiment::Wbuf(args) => apply_model(&args.common),
        Experiment::Tpcc(args) => apply_model(&args.common),
        Experiment::Rewrite(args) => apply_model(&args.common),
        Experiment::Tier(_) | Experiment::Cluster(_) => {}
        Experiment::KvServe { .. } | Experiment::KvLoad(_) => {}
    }
    match experiment {
        Experiment::Pmem(common) => pmem::run(&common.resolved()),
        Experiment::Tonic(common) => tonic::run(&common.resolved()),
        Experiment::Wal(common) => wal::run(&common.resolved()),
        Experiment::Wbuf(args) => wbuf::run(&args),
        Experiment::Tpcc(args) => tpcc::run(&args),
        Experiment::Kv(args) if args.tls => kv_tls::run(&args.common.resolved()),
        Experiment::Kv(args) => kv::run(&args),
        Experiment::Rewrite(args) => rewrite::run(&args),
        Experiment::Tier(args) => tier::run(&args),
        Experiment::Cluster(common) => cluster::run(&common.resolved()),
        Experiment::KvServe { args } => {
            // As `ferrite serve` does.
            ferrite_kv::memory::install(ferrite_kv::memory::jemalloc_probe());
            let config = ferrite_kv::config::Config::load(None, &args)?;
            Ok(ferrite_kv::serve(config)?)
        }
        Experiment::KvLoad(args) => {
            println!("{:.1}", kvload::run_load(&args)?);
            Ok(())
        }
    }
}
