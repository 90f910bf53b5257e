//! `ferrite-bench`: run one of Ferrite's experiments.

use clap::Parser;

/// The product's allocator (`ferrite`'s), so the experiments measure it.
#[global_allocator]
static ALLOCATOR: ferrite_alloc::Counting<ferrite_alloc::Jemalloc> = ferrite_alloc::jemalloc();

/// Ferrite's experiments, each with its baseline in the same run.
#[derive(Debug, Parser)]
#[command(name = "ferrite-bench", version)]
struct Cli {
    #[command(subcommand)]
    experiment: ferrite_bench::Experiment,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal, not in a redirected log file.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    ferrite_bench::run(Cli::parse().experiment)
}
