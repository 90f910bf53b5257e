//! `ferrite check [--fix] DIR`: verify a data directory without starting a
//! server, and optionally cut a damaged log at its first bad record.
//!
//! Two layers are checked: the wal's framing (every record's checksum and
//! LSN, and whether damage is a torn tail or lies in the middle, by the
//! wal's own recovery rule), then every intact record's payload (complete
//! RESP commands the server knows).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferrite_io::{Device, FileDevice, PmPolicy, PmemDevice};
use ferrite_wal::LogReader;

use super::record::{check_command, for_each_command};
use super::LogFiles;
use crate::error::{Error, Result};
use crate::resp::Parser;

/// How a checked log ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogEnd {
    /// Every record is intact and holds commands.
    Clean,
    /// The log ends with an incomplete record, which a crash during a write
    /// leaves: it was never acknowledged, and the server cuts it at start-up
    /// (`aof-load-truncated yes`).
    Torn {
        /// Where the incomplete record starts.
        offset: u64,
        /// The LSN it would have had.
        lsn: u64,
        /// Bytes from `offset` to the end of the file.
        bytes: u64,
    },
    /// A damaged record that later records prove had been durable, or an
    /// intact record that holds no valid command: not something a crash
    /// leaves. The server refuses to start.
    Corrupt {
        /// Where the record starts.
        offset: u64,
        /// Its LSN.
        lsn: u64,
        /// What is wrong.
        reason: String,
    },
}

/// What a check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckReport {
    /// The file's length.
    pub len: u64,
    /// Intact records before the end (or the damage).
    pub records: u64,
    /// Commands in those records.
    pub commands: u64,
    /// How the log ends.
    pub end: LogEnd,
}

/// What `check` found (and did).
#[derive(Debug)]
pub struct CheckOutcome {
    /// The log that was checked; `None` if the directory has no log.
    pub path: Option<PathBuf>,
    /// The check.
    pub report: Option<CheckReport>,
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
/// log is truncated at its first bad record if `confirm` agrees; it is asked
/// with a description of what would be lost.
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
    let device: Arc<dyn Device> = if is_pm {
        Arc::new(PmemDevice::open(&path, PmPolicy::DrainEveryWrite)?)
    } else {
        Arc::new(FileDevice::open_existing(&path)?)
    };
    let report = check_device(&device)?;
    let mut truncated_bytes = 0;
    let cut = match &report.end {
        LogEnd::Clean => None,
        LogEnd::Torn { offset, lsn, .. } | LogEnd::Corrupt { offset, lsn, .. } => {
            Some((*offset, *lsn))
        }
    };
    if let (true, Some((offset, lsn))) = (fix, cut) {
        let question = format!(
            "truncate {} at offset {offset}, discarding record {lsn} and everything after it ({} bytes)?",
            path.display(),
            report.len - offset
        );
        if confirm(&question) {
            ferrite_wal::repair(&*device, offset)?;
            truncated_bytes = report.len - offset;
        }
    }
    Ok(CheckOutcome {
        path: Some(path),
        report: Some(report),
        truncated_bytes,
    })
}

/// Checks the log on `device` without changing it.
pub fn check_device(device: &Arc<dyn Device>) -> Result<CheckReport> {
    let len = device.len();
    let framing = match ferrite_wal::check(&**device) {
        Ok(recovery) => Ok(recovery),
        Err(ferrite_wal::Error::Corrupt {
            offset,
            lsn,
            reason,
            ..
        }) => Err(LogEnd::Corrupt {
            offset,
            lsn,
            reason,
        }),
        Err(e) => return Err(Error::Log(e)),
    };
    // The reader stops at the first record that is not intact, so a bad
    // payload it finds comes before any damage the framing check found.
    let payloads = check_payloads(device)?;
    let end = match (payloads.bad, framing) {
        (Some(bad), _) => bad,
        (None, Err(corrupt)) => corrupt,
        (None, Ok(recovery)) => match recovery.torn_tail {
            Some(tail) => LogEnd::Torn {
                offset: tail.offset,
                lsn: recovery.next_lsn,
                bytes: tail.bytes,
            },
            None => LogEnd::Clean,
        },
    };
    Ok(CheckReport {
        len,
        records: payloads.records,
        commands: payloads.commands,
        end,
    })
}

/// What reading the intact records found.
struct PayloadScan {
    records: u64,
    commands: u64,
    /// The first record whose payload is not valid commands.
    bad: Option<LogEnd>,
}

fn check_payloads(device: &Arc<dyn Device>) -> Result<PayloadScan> {
    let mut scan = PayloadScan {
        records: 0,
        commands: 0,
        bad: None,
    };
    let mut parser = Parser::new();
    for record in LogReader::open(Arc::clone(device))? {
        let record = record?;
        match for_each_command(&record.payload, &mut parser, check_command) {
            Ok(commands) => {
                scan.records += 1;
                scan.commands += commands;
            }
            Err(reason) => {
                scan.bad = Some(LogEnd::Corrupt {
                    offset: record.offset,
                    lsn: record.lsn,
                    reason: format!(
                        "the record is intact but its payload is not a command: {reason}"
                    ),
                });
                break;
            }
        }
    }
    Ok(scan)
}
