//! The log in a disk file behind a persistent-memory write buffer
//! (`log-device wbuf`, `ferrite-wbuf`).
//!
//! Each log file `F` of the data directory has its own buffer, the PM file
//! `F.pm` in `log-wbuf-dir` (the data directory when empty). An append is
//! durable once the buffer holds it; the buffer destages to `F` in the
//! background. Opening the log opens its buffer first, and the buffer's
//! recovery writes every block it holds past its destage mark to `F`
//! before the wal reads `F`: the wal then sees every acknowledged record.
//!
//! The buffer file is created (empty, synced, its directory synced) before
//! its log file exists, so a log file whose buffer is missing means the
//! buffer was lost or `log-wbuf-dir` points elsewhere: opening it is then
//! refused rather than serving a log without its newest records.
//! `docs/format.md` ("The log on a write buffer") has the whole argument.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferrite_io::{Device, FileDevice, PmPolicy, PmemDevice};
use ferrite_pmem::{MapMode, PmemMedium};
use ferrite_wbuf::{PmemWriteBuffer, WbufConfig, WriteBuffer};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::rewrite::manifest::IncrKind;

/// Bytes per buffer block for the log. Appends are small and sequential:
/// each one rewrites the image of the block it ends in, so a small block
/// keeps that copy (and its checksum) short; destaging still merges
/// adjacent blocks into large writes.
pub const LOG_WBUF_BLOCK_BYTES: u32 = 4096;

/// The directory holding the logs' buffers: `log-wbuf-dir`, or the data
/// directory when that is empty.
pub fn wbuf_dir(config: &Config) -> PathBuf {
    if config.log_wbuf_dir.is_empty() {
        config.dir.clone()
    } else {
        PathBuf::from(&config.log_wbuf_dir)
    }
}

/// The buffer file of the log file `log`, in the buffer directory
/// `buffers`: the log's file name with `.pm` added.
pub fn wbuf_path(buffers: &Path, log: &Path) -> PathBuf {
    let name = log
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    buffers.join(format!("{name}.pm"))
}

/// The buffer settings for a log: `log-wbuf-size` bytes of PM in blocks
/// of [`LOG_WBUF_BLOCK_BYTES`], the destage policy's defaults otherwise.
pub fn log_wbuf_config(config: &Config) -> WbufConfig {
    WbufConfig {
        block_bytes: LOG_WBUF_BLOCK_BYTES,
        capacity_bytes: usize::try_from(config.log_wbuf_size_bytes).unwrap_or(usize::MAX),
        ..WbufConfig::default()
    }
}

/// Creates the empty buffer file `buffer` if it does not exist, and makes
/// it and its name durable: done before the log file it serves exists.
pub fn create_wbuf_file(buffer: &Path) -> Result<()> {
    let io = |op: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { op, path, source }
    };
    if let Some(parent) = buffer.parent() {
        std::fs::create_dir_all(parent).map_err(io("create buffer directory", parent))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(buffer)
        .map_err(io("create", buffer))?;
    file.sync_all().map_err(io("fsync", buffer))?;
    drop(file);
    let parent = buffer.parent().unwrap_or(Path::new("."));
    std::fs::File::open(parent)
        .and_then(|d| d.sync_all())
        .map_err(io("fsync directory", parent))
}

/// Opens the log file `log` behind its buffer (recovering the buffer, so
/// the file holds every acknowledged write when this returns). With
/// `create`, a missing buffer is created first; without, it is an error.
pub fn open_wbuf_log(log: &Path, config: &Config, create: bool) -> Result<Arc<PmemWriteBuffer>> {
    let buffer = wbuf_path(&wbuf_dir(config), log);
    if create {
        create_wbuf_file(&buffer)?;
    } else if !buffer.exists() {
        return Err(Error::Config {
            origin: "log-wbuf-dir".into(),
            reason: format!(
                "the log {} is on a write buffer, but its buffer {} does not exist: it may hold acknowledged writes the file lacks; set log-wbuf-dir to the directory holding it",
                log.display(),
                buffer.display()
            ),
        });
    }
    let opened = WriteBuffer::open(&buffer, log, log_wbuf_config(config))?;
    if opened.medium().mode() == MapMode::Emulated {
        tracing::warn!(
            "THE LOG'S WRITE BUFFER IS ON EMULATED PERSISTENT MEMORY ({}): acknowledged writes survive a crash of the process, NOT a power failure or a kernel crash",
            buffer.display()
        );
    }
    Ok(Arc::new(opened))
}

/// Opens the existing log file `path` of device kind `kind`, as a
/// manifest names it (a write buffer's log through its buffer).
pub fn open_log_device(path: &Path, kind: IncrKind, config: &Config) -> Result<Arc<dyn Device>> {
    Ok(match kind {
        IncrKind::File => Arc::new(FileDevice::open(path)?),
        // Each append persists its own record: no syncer thread.
        IncrKind::Pm => Arc::new(PmemDevice::open(path, PmPolicy::DrainEveryWrite)?),
        IncrKind::Wbuf => open_wbuf_log(path, config, false)?,
    })
}
