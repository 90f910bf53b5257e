//! `ferrite check [--fix] DIR`: verify a data directory without starting a
//! server, and optionally cut a damaged log at its first bad byte.

use std::path::{Path, PathBuf};

use ferrite_io::{Device, FileDevice, PmPolicy, PmemDevice};

use super::open::LogFiles;
use super::scan::{scan_log, LogEnd, ScanReport};
use crate::commands::lookup;
use crate::error::Result;

/// What `check` found (and did).
#[derive(Debug)]
pub struct CheckOutcome {
    /// The log that was checked; `None` if the directory has no log.
    pub path: Option<PathBuf>,
    /// The scan.
    pub report: Option<ScanReport>,
    /// Bytes cut by `--fix`.
    pub truncated_bytes: u64,
}

impl CheckOutcome {
    /// Whether the log is fine as it is (or was fixed).
    pub fn is_ok(&self) -> bool {
        self.truncated_bytes > 0 || self.report.as_ref().is_none_or(|r| r.end == LogEnd::Clean)
    }
}

/// Checks the log in `dir` (named `name`). With `fix`, a torn or corrupt
/// log is truncated at the first bad offset if `confirm` agrees; it is
/// asked with a description of what would be lost.
pub fn check_dir(
    dir: &Path,
    name: &str,
    fix: bool,
    confirm: impl FnOnce(&str) -> bool,
) -> Result<CheckOutcome> {
    let files = LogFiles::in_dir(dir, name);
    let Some((path, is_pm)) = files.existing()? else {
        return Ok(CheckOutcome {
            path: None,
            report: None,
            truncated_bytes: 0,
        });
    };
    let device: Box<dyn Device> = if is_pm {
        Box::new(PmemDevice::open(&path, PmPolicy::DrainEveryWrite)?)
    } else {
        Box::new(FileDevice::open_existing(&path)?)
    };
    let report = scan_log(&*device, |_, args| match lookup(args.get(0)) {
        Some(spec) if spec.arity_ok(args.len()) => Ok(()),
        Some(spec) => Err(format!("wrong number of arguments for '{}'", spec.name)),
        None => Err(format!(
            "unknown command '{}'",
            String::from_utf8_lossy(args.get(0))
        )),
    })?;
    let cut_at = match &report.end {
        LogEnd::Clean => None,
        LogEnd::Torn { offset } | LogEnd::Corrupt { offset, .. } => Some(*offset),
    };
    let mut truncated_bytes = 0;
    if let (true, Some(offset)) = (fix, cut_at) {
        let question = format!(
            "truncate {} at offset {offset}, discarding the last {} bytes?",
            path.display(),
            report.len - offset
        );
        if confirm(&question) {
            device.set_len(offset)?;
            device.sync()?;
            truncated_bytes = report.len - offset;
        }
    }
    Ok(CheckOutcome {
        path: Some(path),
        report: Some(report),
        truncated_bytes,
    })
}
