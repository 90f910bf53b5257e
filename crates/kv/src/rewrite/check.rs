//! `ferrite check [--fix] DIR` on a whole data directory: with a manifest,
//! every base part is read through (each segment block's CRC32C, the
//! trailer, and the totals against the manifest) and every incremental log
//! is checked as a log (`aof::check_device`); without one, the single log.
//!
//! `--fix` only ever truncates the tail of the *last* incremental log (the
//! one the server appends to, where a crash leaves a torn record), and only
//! after `confirm` agrees. A damaged base part or older log is reported with
//! its file and offset and left alone: cutting it would drop data that was
//! acknowledged, and deleting a part would lose whole segments.

use std::path::PathBuf;
use std::sync::Arc;

use ferrite_io::{Device, FileDevice, PmPolicy, PmemDevice};

use super::dir::AofDir;
use super::fs::RealFs;
use super::load::{first_generation, read_part};
use super::manifest::IncrKind;
use super::open_dir::dataset_files;
use crate::aof::{check_device, CheckReport, LogEnd};
use crate::error::{Error, Result};

/// What checking one file found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Checked {
    /// A base part.
    Base {
        /// Bytes the manifest names.
        bytes: u64,
        /// Keys the manifest names.
        keys: u64,
        /// The first damage, if any: offset and reason.
        damage: Option<(u64, String)>,
    },
    /// An incremental (or the legacy single) log.
    Log {
        /// Whether the server appends to it (only this one may be fixed).
        last: bool,
        /// The check.
        report: CheckReport,
    },
}

/// One file of the directory and what its check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileCheck {
    /// The file.
    pub path: PathBuf,
    /// What was found.
    pub checked: Checked,
}

impl FileCheck {
    /// Whether the server would load this file as it is without refusing
    /// or dropping anything.
    pub fn is_ok(&self) -> bool {
        match &self.checked {
            Checked::Base { damage, .. } => damage.is_none(),
            Checked::Log { report, .. } => report.end == LogEnd::Clean,
        }
    }
}

/// What `check` found in a data directory (and did).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DirCheck {
    /// The manifest, if the directory has one.
    pub manifest: Option<PathBuf>,
    /// Every file the directory's load would read, in load order.
    pub files: Vec<FileCheck>,
    /// The log `--fix` truncated and the bytes it cut.
    pub truncated: Option<(PathBuf, u64)>,
}

impl DirCheck {
    /// Whether the directory loads as it is (or does after the fix).
    pub fn is_ok(&self) -> bool {
        self.files
            .iter()
            .all(|f| f.is_ok() || self.truncated.as_ref().is_some_and(|(p, _)| *p == f.path))
    }
}

fn open_log(aof: &AofDir, file: &str, kind: IncrKind) -> Result<Arc<dyn Device>> {
    let path = aof.path(file);
    Ok(match kind {
        IncrKind::Pm => Arc::new(PmemDevice::open(&path, PmPolicy::DrainEveryWrite)?),
        IncrKind::File => Arc::new(FileDevice::open_existing(&path)?),
        // The log as acknowledged is the file plus its buffer: the
        // buffer's recovery writes what it holds past its destage mark to
        // the file, then the file is checked.
        IncrKind::Wbuf => {
            let buffer = aof.wbuf_path(file);
            if !buffer.exists() {
                return Err(Error::Config {
                    origin: "log-wbuf-dir".into(),
                    reason: format!(
                        "the log {} is on a write buffer, but its buffer {} does not exist",
                        path.display(),
                        buffer.display()
                    ),
                });
            }
            let config = ferrite_wbuf::WbufConfig {
                block_bytes: crate::aof::LOG_WBUF_BLOCK_BYTES,
                background: false,
                ..ferrite_wbuf::WbufConfig::default()
            };
            Arc::new(ferrite_wbuf::WriteBuffer::open(&buffer, &path, config)?)
        }
    })
}

/// Checks the data directory `dir` whose files are named `name*`
/// (`appendfilename`), the buffers of its write-buffer logs in `dir` too
/// ([`check_dir_with_wbuf`] names another directory). With `fix`, a torn or corrupt tail of the last log is
/// truncated at its first bad record if `confirm` agrees; it is asked with a
/// description of what would be lost. A damaged or unreadable manifest, or
/// one naming a missing file, is an error naming the file.
pub fn check_dir(
    dir: &std::path::Path,
    name: &str,
    fix: bool,
    confirm: impl FnOnce(&str) -> bool,
) -> Result<DirCheck> {
    check_dir_with_wbuf(dir, name, dir, fix, confirm)
}

/// [`check_dir`] with the write buffers of the logs in `wbuf_dir`
/// (`log-wbuf-dir`).
pub fn check_dir_with_wbuf(
    dir: &std::path::Path,
    name: &str,
    wbuf_dir: &std::path::Path,
    fix: bool,
    confirm: impl FnOnce(&str) -> bool,
) -> Result<DirCheck> {
    let aof = AofDir::new(Arc::new(RealFs), dir, name).with_wbuf_dir(wbuf_dir.to_path_buf());
    let mut out = DirCheck::default();
    let files = dataset_files(&aof)?;
    if let Some(manifest) = &files.manifest {
        out.manifest = Some(aof.path(&aof.manifest_name()));
        out.files.extend(check_bases(&aof, manifest)?);
    }
    let incrs = files.logs;
    let mut last_device = None;
    for (i, incr) in incrs.iter().enumerate() {
        let path = aof.path(&incr.file);
        let device = open_log(&aof, &incr.file, incr.kind)?;
        let report = check_device(&device)?;
        let last = i + 1 == incrs.len();
        if last {
            last_device = Some(device);
        }
        out.files.push(FileCheck {
            path,
            checked: Checked::Log { last, report },
        });
    }
    if let (true, Some(device), Some(file)) = (fix, last_device, out.files.last()) {
        out.truncated = fix_last_log(&*device, file, confirm)?;
    }
    Ok(out)
}

/// Reads every base part through, collecting damage instead of stopping.
fn check_bases(aof: &AofDir, manifest: &super::manifest::Manifest) -> Result<Vec<FileCheck>> {
    let generation = match first_generation(aof, manifest) {
        Ok(g) => g,
        // The first part's header is damaged: its own check reports it.
        Err(Error::CorruptBase { .. }) => None,
        Err(e) => return Err(e),
    };
    let mut files = Vec::new();
    for entry in &manifest.bases {
        let damage = match read_part(aof, entry, generation, |_| true) {
            Ok(_) => None,
            Err(Error::CorruptBase { offset, reason, .. }) => Some((offset, reason)),
            Err(e) => return Err(e),
        };
        files.push(FileCheck {
            path: aof.path(&entry.file),
            checked: Checked::Base {
                bytes: entry.bytes,
                keys: entry.keys,
                damage,
            },
        });
    }
    Ok(files)
}

/// Truncates the last log at its first bad record, if it has one and
/// `confirm` agrees; returns what was cut.
fn fix_last_log(
    device: &dyn Device,
    file: &FileCheck,
    confirm: impl FnOnce(&str) -> bool,
) -> Result<Option<(PathBuf, u64)>> {
    let Checked::Log { report, .. } = &file.checked else {
        return Ok(None);
    };
    let (offset, lsn) = match &report.end {
        LogEnd::Clean => return Ok(None),
        LogEnd::Torn { offset, lsn, .. } | LogEnd::Corrupt { offset, lsn, .. } => (*offset, *lsn),
    };
    let bytes = report.len - offset;
    let question = format!(
        "truncate {} at offset {offset}, discarding record {lsn} and everything after it ({bytes} bytes)?",
        file.path.display(),
    );
    if !confirm(&question) {
        return Ok(None);
    }
    ferrite_wal::repair(device, offset)?;
    Ok(Some((file.path.clone(), bytes)))
}
