//! The `ferrite` command: `serve` runs the Redis-compatible server, `check`
//! verifies (and optionally repairs) a data directory, `bench <experiment>`
//! runs one of the benchmark crate's experiments (the same as
//! `cargo run --release -p ferrite-bench -- ...`).

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use ferrite_kv::aof::{check_dir, LogEnd};
use ferrite_kv::config::Config;

#[derive(Debug, Parser)]
#[command(
    name = "ferrite",
    version,
    about = "Ferrite: durability at memory speed"
)]
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
    /// Runs the Redis-compatible server (127.0.0.1:6379, data in ./ferrite-data).
    ///
    /// Any redis.conf directive can be given as a flag: `--port 6380
    /// --appendfsync always --log-device pmem-emulated --requirepass s3cret`.
    Serve {
        /// `[CONFIG_FILE] [--directive value...]`: a redis.conf-style file,
        /// read first, then directives as flags.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0.., value_name = "ARGS")]
        args: Vec<String>,
    },
    /// Verifies a data directory's log without starting a server.
    Check {
        /// Truncate a torn or corrupt log at its first bad record (asks first).
        #[arg(long)]
        fix: bool,
        /// With --fix, do not ask.
        #[arg(long)]
        yes: bool,
        /// The log's file name (`appendfilename`).
        #[arg(long, default_value = "appendonly.aof")]
        appendfilename: String,
        /// The data directory.
        dir: PathBuf,
    },
}

fn serve(args: Vec<String>) -> anyhow::Result<ExitCode> {
    // Like redis-server: an optional config file first, then `--name value`.
    let (file, flags) = match args.split_first() {
        Some((first, rest)) if !first.starts_with("--") => (Some(PathBuf::from(first)), rest),
        _ => (None, &args[..]),
    };
    let config = Config::load(file.as_deref(), flags)?;
    ferrite_kv::serve(config).context("the server stopped with an error")?;
    Ok(ExitCode::SUCCESS)
}

fn ask(question: &str) -> bool {
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).is_ok() && line.trim().eq_ignore_ascii_case("y")
}

fn check(dir: PathBuf, name: &str, fix: bool, yes: bool) -> anyhow::Result<ExitCode> {
    let outcome = check_dir(&dir, name, fix, |q| yes || ask(q))?;
    let mut out = std::io::stdout().lock();
    let Some(report) = &outcome.report else {
        writeln!(out, "{}: no log found (nothing to check)", dir.display())?;
        return Ok(ExitCode::SUCCESS);
    };
    let path = outcome
        .path
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    writeln!(
        out,
        "{path}: {} bytes, {} intact records, {} commands",
        report.len, report.records, report.commands
    )?;
    match &report.end {
        LogEnd::Clean => writeln!(out, "OK: the log is complete")?,
        LogEnd::Torn { offset, lsn, bytes } => writeln!(
            out,
            "TORN at offset {offset}: record {lsn} is incomplete ({bytes} bytes never acknowledged); the server truncates it at start-up with aof-load-truncated yes, or `ferrite check --fix {}` does now",
            dir.display()
        )?,
        LogEnd::Corrupt {
            offset,
            lsn,
            reason,
        } => writeln!(
            out,
            "CORRUPT record {lsn} at offset {offset}: {reason}; `ferrite check --fix {}` truncates the log there, losing that record and the {} bytes from it on",
            dir.display(),
            report.len - offset
        )?,
    }
    if outcome.truncated_bytes > 0 {
        writeln!(out, "FIXED: truncated {} bytes", outcome.truncated_bytes)?;
    }
    Ok(if outcome.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench { experiment } => ferrite_bench::run(experiment).map(|()| ExitCode::SUCCESS),
        Command::Serve { args } => serve(args),
        Command::Check {
            fix,
            yes,
            appendfilename,
            dir,
        } => check(dir, &appendfilename, fix, yes),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ferrite: {e:#}");
            ExitCode::FAILURE
        }
    }
}
