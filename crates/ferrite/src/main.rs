//! `ferrite`: the command-line entry point.
//!
//! `ferrite bench <experiment>` runs one of the benchmark crate's
//! experiments (the same as `cargo run --release -p ferrite-bench -- ...`).

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Ferrite: durability at memory speed.
#[derive(Debug, Parser)]
#[command(name = "ferrite", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run an experiment of the benchmark suite.
    Bench {
        #[command(subcommand)]
        experiment: ferrite_bench::Experiment,
    },
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Bench { experiment } => ferrite_bench::run(experiment),
    }
}
