//! Ferrite's experiments. Each reproduces a paper's figure with its
//! baseline measured in the same run, and writes `DIR/<name>.json` (every
//! figure, plus a `ratios` object where > 1 means Ferrite is better) and a
//! plot `DIR/<name>.svg`.
//!
//! Run one with `cargo run --release -p ferrite-bench -- <experiment> --out DIR`
//! (add `--quick` for a short run), or `ferrite bench <experiment>`.

// A benchmark harness reports its tables to the person running it.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;

use anyhow::Result;

pub mod pmem;
pub mod report;

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
    /// Persist primitives vs libpmem and msync; Device write+sync latency.
    Pmem(Common),
}

/// Runs one experiment.
pub fn run(experiment: Experiment) -> Result<()> {
    match experiment {
        Experiment::Pmem(common) => pmem::run(&common.resolved()),
    }
}
