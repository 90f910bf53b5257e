//! The `ferrite` command: `serve` runs the Redis-compatible server, `check`
//! verifies (and optionally repairs) a data directory, `export` writes its
//! dataset as a RESP append-only file for Redis. The experiments are a
//! separate binary, `ferrite-bench` (`cargo run --release -p ferrite-bench
//! -- <experiment>`), so the server links none of their dependencies.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use ferrite_kv::aof::{CheckReport, LogEnd};
use ferrite_kv::config::Config;
use ferrite_kv::rewrite::check::{check_dir_with_wbuf, Checked, FileCheck};
use ferrite_kv::rewrite::export::{export_state, load_dir};

/// jemalloc (as Redis 7.0 ships with) behind a counter of the bytes
/// allocated, which is `used_memory` (docs/memory.md; the choice:
/// docs/results/allocator.md).
#[global_allocator]
static ALLOCATOR: ferrite_alloc::Counting<ferrite_alloc::Jemalloc> = ferrite_alloc::jemalloc();

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
    /// Verifies a data directory without starting a server: the manifest,
    /// every base part's checksums and every incremental log.
    Check {
        /// Truncate a torn or corrupt tail of the last log at its first bad
        /// record (asks first). Never changes base parts or older logs.
        #[arg(long)]
        fix: bool,
        /// With --fix, do not ask.
        #[arg(long)]
        yes: bool,
        /// The log's file name (`appendfilename`).
        #[arg(long, default_value = "appendonly.aof")]
        appendfilename: String,
        /// Where the logs' write buffers are (`log-wbuf-dir`; default: the
        /// data directory). A log on a write buffer is checked through its
        /// buffer, whose staged blocks are written into the log file first.
        #[arg(long)]
        log_wbuf_dir: Option<PathBuf>,
        /// The data directory.
        dir: PathBuf,
    },
    /// Moves SQLite databases between Ferrite's PM device files
    /// (`ferrite-pmem`, `ferrite-mmap`: a 4 KiB header, then the database)
    /// and plain SQLite files that stock `sqlite3` opens.
    Sqlite {
        #[command(subcommand)]
        action: SqliteAction,
    },
    /// Writes a data directory's dataset as a plain RESP append-only file
    /// that Redis loads (run it on a stopped server's directory).
    Export {
        /// The log's file name (`appendfilename`).
        #[arg(long, default_value = "appendonly.aof")]
        appendfilename: String,
        /// Where the logs' write buffers are (`log-wbuf-dir`; default: the
        /// data directory).
        #[arg(long)]
        log_wbuf_dir: Option<PathBuf>,
        /// The data directory.
        dir: PathBuf,
        /// The file to write.
        file: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum SqliteAction {
    /// Copies a database on `ferrite-pmem`/`ferrite-mmap` to a new plain
    /// SQLite file. Refused while a hot journal or an uncheckpointed WAL
    /// lies beside it.
    Export {
        /// The PM device file (what `file:PATH?vfs=ferrite-pmem` opened).
        pm: PathBuf,
        /// The plain SQLite file to create (must not exist).
        plain: PathBuf,
    },
    /// Copies a plain SQLite file into a new PM device file.
    Import {
        /// The plain SQLite file.
        plain: PathBuf,
        /// The PM device file to create (must not exist).
        pm: PathBuf,
    },
}

fn sqlite(action: SqliteAction) -> anyhow::Result<ExitCode> {
    let (from, to, bytes) = match action {
        SqliteAction::Export { pm, plain } => {
            let bytes = ferrite_sqlite::export(&pm, &plain)
                .with_context(|| format!("exporting {}", pm.display()))?;
            (pm, plain, bytes)
        }
        SqliteAction::Import { plain, pm } => {
            let bytes = ferrite_sqlite::import(&plain, &pm)
                .with_context(|| format!("importing {}", plain.display()))?;
            (plain, pm, bytes)
        }
    };
    writeln!(
        std::io::stdout().lock(),
        "{} -> {}: {bytes} bytes",
        from.display(),
        to.display()
    )?;
    Ok(ExitCode::SUCCESS)
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

fn check(
    dir: PathBuf,
    name: &str,
    wbuf_dir: Option<PathBuf>,
    fix: bool,
    yes: bool,
) -> anyhow::Result<ExitCode> {
    let wbuf_dir = wbuf_dir.unwrap_or_else(|| dir.clone());
    let outcome = check_dir_with_wbuf(&dir, name, &wbuf_dir, fix, |q| yes || ask(q))?;
    let mut out = std::io::stdout().lock();
    if outcome.files.is_empty() {
        writeln!(out, "{}: no log found (nothing to check)", dir.display())?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(manifest) = &outcome.manifest {
        writeln!(out, "{}: manifest OK", manifest.display())?;
    }
    for file in &outcome.files {
        print_file(&mut out, &dir, file)?;
    }
    if let Some((path, bytes)) = &outcome.truncated {
        writeln!(out, "FIXED: truncated {bytes} bytes of {}", path.display())?;
    }
    Ok(if outcome.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// One line (two on damage) per file: what it holds and what is wrong.
fn print_file(out: &mut impl Write, dir: &Path, file: &FileCheck) -> std::io::Result<()> {
    let path = file.path.display();
    let dir = dir.display();
    match &file.checked {
        Checked::Base { bytes, keys, damage } => match damage {
            None => writeln!(out, "{path}: base part, {bytes} bytes, {keys} keys: OK"),
            Some((offset, reason)) => writeln!(
                out,
                "{path}: base part DAMAGED at offset {offset}: {reason}; the server refuses to start. Restore the file from a backup: --fix never changes base parts"
            ),
        },
        Checked::Log { last, report } => {
            writeln!(
                out,
                "{path}: log, {} bytes, {} intact records, {} commands",
                report.len, report.records, report.commands
            )?;
            print_log_end(out, &path.to_string(), &dir.to_string(), *last, report)
        }
    }
}

fn print_log_end(
    out: &mut impl Write,
    path: &str,
    dir: &str,
    last: bool,
    report: &CheckReport,
) -> std::io::Result<()> {
    match (&report.end, last) {
        (LogEnd::Clean, _) => writeln!(out, "  OK: the log is complete"),
        (LogEnd::Torn { offset, lsn, bytes }, true) => writeln!(
            out,
            "  TORN at offset {offset}: record {lsn} is incomplete ({bytes} bytes never acknowledged); the server truncates it at start-up with aof-load-truncated yes, or `ferrite check --fix {dir}` does now"
        ),
        (LogEnd::Corrupt { offset, lsn, reason }, true) => writeln!(
            out,
            "  CORRUPT record {lsn} at offset {offset}: {reason}; `ferrite check --fix {dir}` truncates the log there, losing that record and the {} bytes from it on",
            report.len - offset
        ),
        (LogEnd::Torn { offset, lsn, .. }, false) => writeln!(
            out,
            "  TORN at offset {offset} (record {lsn}) in an older log {path}: the server drops the tail at start-up; --fix only cuts the last log"
        ),
        (LogEnd::Corrupt { offset, lsn, reason }, false) => writeln!(
            out,
            "  CORRUPT record {lsn} at offset {offset} of an older log: {reason}; the server refuses to start. Restore the file from a backup: --fix only cuts the last log"
        ),
    }
}

fn export(
    dir: PathBuf,
    name: &str,
    wbuf_dir: Option<PathBuf>,
    file: PathBuf,
) -> anyhow::Result<ExitCode> {
    let config = Config {
        dir: dir.clone(),
        appendfilename: name.to_string(),
        log_wbuf_dir: wbuf_dir
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
        ..Config::default()
    };
    let state = load_dir(&config).with_context(|| format!("loading {}", dir.display()))?;
    let stats = export_state(&state, &file)?;
    writeln!(
        std::io::stdout().lock(),
        "{}: {} keys, {} bytes of RESP",
        file.display(),
        stats.keys,
        stats.bytes
    )?;
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal, not in a redirected log file.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    // The server reads its memory from the allocator's counter
    // (docs/memory.md).
    ferrite_kv::memory::install(ferrite_kv::memory::jemalloc_probe());
    let result = match cli.command {
        Command::Serve { args } => serve(args),
        Command::Check {
            fix,
            yes,
            appendfilename,
            log_wbuf_dir,
            dir,
        } => check(dir, &appendfilename, log_wbuf_dir, fix, yes),
        Command::Export {
            appendfilename,
            log_wbuf_dir,
            dir,
            file,
        } => export(dir, &appendfilename, log_wbuf_dir, file),
        Command::Sqlite { action } => sqlite(action),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ferrite: {e:#}");
            ExitCode::FAILURE
        }
    }
}
