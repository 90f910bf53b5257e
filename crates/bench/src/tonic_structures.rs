//! Flushes, fences and media bytes per operation of Ferrite's persistent
//! structures on emulated PM (paper 001's Fig. 2 normalised each index to
//! the one with the fewest flushes; here each structure is normalised to
//! its own payload's cache lines, the least any structure could flush):
//!
//! - a log append (`ferrite-wal`, one commit per record) by record size;
//! - a server SET with the log on PM (`appendfsync always`, the server in
//!   this process so its regions' counters are readable);
//! - a SQLite page write (an UPDATE in its own transaction) on the
//!   `ferrite-pmem` and `ferrite-mmap` VFSes.
//!
//! The counts come from the process-wide media accounting
//! (`ferrite_pmem::stats::global`), so each measurement runs alone.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use ferrite_io::Backend;
use ferrite_pmem::FlushStats;
use ferrite_wal::{Durability, Wal, WalConfig};
use rusqlite::{Connection, OpenFlags};
use serde::Serialize;

use crate::report::Report;
use crate::tonic::median_of;
use crate::Common;

/// Record sizes of the log append.
const RECORD_SIZES: [usize; 5] = [16, 64, 256, 1024, 4096];
/// Value bytes of the server SET and of the SQLite row update.
const VALUE_BYTES: usize = 256;
/// Port of the in-process server.
const PORT: u16 = 17390;

/// One structure's costs per operation.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StructureFigure {
    /// `wal_append`, `server_set`, `sqlite_page_write`.
    pub kind: String,
    /// Bytes the user asked to persist per operation.
    pub payload_bytes: usize,
    /// The payload's own cache lines: the fewest flushes it could take.
    pub payload_lines: u64,
    /// Operations per second (single thread, this machine, media model as
    /// selected).
    pub ops_per_s: f64,
    /// Cache lines flushed (or streamed) per operation.
    pub flushes_per_op: f64,
    /// Fences per operation.
    pub fences_per_op: f64,
    /// 64-byte requests to the DIMM per operation.
    pub requests_per_op: f64,
    /// Media bytes written per operation.
    pub media_bytes_per_op: f64,
    /// Media bytes per payload byte.
    pub media_bytes_per_user_byte: f64,
    /// Flushes per operation over the payload's lines (1 = minimum).
    pub flushes_per_payload_line: f64,
    /// Media bytes per second at `ops_per_s`.
    pub media_bytes_per_s: f64,
}

impl StructureFigure {
    fn new(kind: &str, payload: usize, ops: u64, seconds: f64, delta: FlushStats) -> Self {
        let per_op = |n: u64| n as f64 / ops.max(1) as f64;
        let flushes = delta.lines_flushed + delta.bytes_nt.div_ceil(64);
        let lines = payload.div_ceil(64).max(1) as u64;
        let ops_per_s = ops as f64 / seconds;
        StructureFigure {
            kind: kind.into(),
            payload_bytes: payload,
            payload_lines: lines,
            ops_per_s,
            flushes_per_op: per_op(flushes),
            fences_per_op: per_op(delta.fences),
            requests_per_op: per_op(delta.requests),
            media_bytes_per_op: per_op(delta.media_bytes()),
            media_bytes_per_user_byte: delta.media_bytes_per_user_byte(ops * payload as u64),
            flushes_per_payload_line: per_op(flushes) / lines as f64,
            media_bytes_per_s: per_op(delta.media_bytes()) * ops_per_s,
        }
    }
}

/// Runs every structure; figures keyed `<kind>_<detail>`.
pub fn run(
    common: &Common,
    dir: &Path,
    report: &mut Report,
) -> Result<BTreeMap<String, StructureFigure>> {
    let ops = if common.quick { 2_000 } else { 20_000 };
    let mut out = BTreeMap::new();
    for size in RECORD_SIZES {
        let figures: Vec<StructureFigure> = (0..common.runs())
            .map(|run| wal_append(dir, size, ops, run))
            .collect::<Result<_>>()?;
        out.insert(format!("wal_append_{size}"), pick_median(figures));
    }
    match server_set(dir, ops / 4) {
        Ok(figure) => {
            out.insert("server_set_pm".into(), figure);
        }
        Err(err) => report.note(format!("server SET on PM not measured: {err:#}")),
    }
    ferrite_sqlite::register_defaults_linked()?;
    for vfs in ["ferrite-pmem", "ferrite-mmap"] {
        let figure =
            sqlite_page_write(dir, vfs, ops / 4).with_context(|| format!("SQLite on {vfs}"))?;
        let key = format!("sqlite_page_write_{}", vfs.trim_start_matches("ferrite-"));
        out.insert(key, figure);
    }
    Ok(out)
}

fn pick_median(mut figures: Vec<StructureFigure>) -> StructureFigure {
    let rates: Vec<f64> = figures.iter().map(|f| f.ops_per_s).collect();
    let middle = median_of(&rates);
    figures.sort_by(|a, b| {
        (a.ops_per_s - middle)
            .abs()
            .total_cmp(&(b.ops_per_s - middle).abs())
    });
    figures.swap_remove(0)
}

/// Appends `ops` records of `size` bytes, each committed (persisted).
fn wal_append(dir: &Path, size: usize, ops: u64, run: usize) -> Result<StructureFigure> {
    let path = dir.join(format!("wal-{size}-{run}.log"));
    let _ = std::fs::remove_file(&path);
    let device: Arc<dyn ferrite_io::Device> = Arc::from(Backend::Pmem.open(&path)?);
    let wal = Wal::open(
        Arc::clone(&device),
        WalConfig::with_durability(Durability::EveryCommit),
    )?;
    let payload = vec![0x42u8; size];
    // Warm up: the first appends grow the log.
    for _ in 0..64 {
        wal.append_commit(&payload)?;
    }
    let before = device.flush_stats().unwrap_or_default();
    let start = Instant::now();
    for _ in 0..ops {
        wal.append_commit(&payload)?;
    }
    let seconds = start.elapsed().as_secs_f64();
    let delta = device.flush_stats().unwrap_or_default() - before;
    wal.close()?;
    drop(device);
    let _ = std::fs::remove_file(&path);
    Ok(StructureFigure::new(
        "wal_append",
        size,
        ops,
        seconds,
        delta,
    ))
}

/// One RESP request and its reply.
fn request(stream: &mut TcpStream, parts: &[&[u8]], reply: &mut Vec<u8>) -> Result<usize> {
    let mut out = format!("*{}\r\n", parts.len()).into_bytes();
    for part in parts {
        out.extend_from_slice(format!("${}\r\n", part.len()).as_bytes());
        out.extend_from_slice(part);
        out.extend_from_slice(b"\r\n");
    }
    stream.write_all(&out)?;
    reply.clear();
    let mut chunk = [0u8; 256];
    while !reply.ends_with(b"\r\n") {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            bail!("server closed the connection");
        }
        reply.extend_from_slice(&chunk[..n]);
    }
    Ok(out.len())
}

/// SETs with `appendfsync always` and the log on emulated PM, against a
/// server running in this process.
fn server_set(dir: &Path, ops: u64) -> Result<StructureFigure> {
    let data = dir.join("server");
    let _ = std::fs::remove_dir_all(&data);
    std::fs::create_dir_all(&data)?;
    let args: Vec<String> = [
        "--port",
        &PORT.to_string(),
        "--dir",
        &data.display().to_string(),
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--log-device",
        "pmem-emulated",
        "--save",
        "",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let config = ferrite_kv::config::Config::load(None, &args)?;
    ferrite_kv::memory::install(ferrite_kv::memory::jemalloc_probe());
    // The server runs until the process exits.
    std::thread::Builder::new()
        .name("tonic-server".into())
        .spawn(move || {
            if let Err(err) = ferrite_kv::serve(config) {
                tracing::error!("in-process server stopped: {err}");
            }
        })?;
    crate::kv::wait_for_port(PORT)?;
    let mut stream = TcpStream::connect(("127.0.0.1", PORT))?;
    stream.set_nodelay(true)?;
    let value = vec![b'v'; VALUE_BYTES];
    let mut reply = Vec::new();
    for i in 0..256u64 {
        request(
            &mut stream,
            &[b"SET", format!("key:{i}").as_bytes(), &value],
            &mut reply,
        )?;
    }
    let before = ferrite_pmem::stats::global();
    let start = Instant::now();
    let mut logged = 0usize;
    for i in 0..ops {
        let key = format!("key:{:08}", i % 10_000);
        logged = request(&mut stream, &[b"SET", key.as_bytes(), &value], &mut reply)?;
        if !reply.starts_with(b"+OK") {
            bail!("SET answered {:?}", String::from_utf8_lossy(&reply));
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let delta = ferrite_pmem::stats::global() - before;
    // The payload is the command as logged: its RESP text.
    Ok(StructureFigure::new(
        "server_set",
        logged,
        ops,
        seconds,
        delta,
    ))
}

/// UPDATEs of one row's `VALUE_BYTES` blob, each its own transaction
/// (rollback journal, `synchronous=FULL`), on `vfs`.
fn sqlite_page_write(dir: &Path, vfs: &str, ops: u64) -> Result<StructureFigure> {
    let path = dir.join(format!("{vfs}.db"));
    for suffix in ["", "-journal"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let db = Connection::open_with_flags_and_vfs(&path, OpenFlags::default(), vfs)?;
    db.execute_batch(
        "PRAGMA journal_mode=TRUNCATE; PRAGMA synchronous=FULL;
         CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB);",
    )?;
    let rows = 1000u64;
    {
        let mut insert = db.prepare("INSERT INTO t(k, v) VALUES (?1, ?2)")?;
        for k in 0..rows {
            insert.execute(rusqlite::params![k, vec![0u8; VALUE_BYTES]])?;
        }
    }
    let mut update = db.prepare("UPDATE t SET v = ?2 WHERE k = ?1")?;
    let before = ferrite_pmem::stats::global();
    let start = Instant::now();
    for i in 0..ops {
        let value = vec![(i % 251) as u8; VALUE_BYTES];
        update.execute(rusqlite::params![(i * 7919) % rows, value])?;
    }
    let seconds = start.elapsed().as_secs_f64();
    let delta = ferrite_pmem::stats::global() - before;
    drop(update);
    drop(db);
    for suffix in ["", "-journal"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    Ok(StructureFigure::new(
        "sqlite_page_write",
        VALUE_BYTES,
        ops,
        seconds,
        delta,
    ))
}
