//! Checking one log without starting a server (`ferrite check`; the whole
//! directory, with a manifest's base parts, is `rewrite::check`).
//!
//! Two layers are checked: the wal's framing (every record's checksum and
//! LSN, and whether damage is a torn tail or lies in the middle, by the
//! wal's own recovery rule), then every intact record's payload (complete
//! RESP commands the server knows).

use std::sync::Arc;

use ferrite_io::Device;

use super::record::{check_command, for_each_command};
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

/// Checks the log on `device` without changing it: the wal's framing
/// check, with every intact record's payload checked as the scan reads it
/// (one pass over the log).
pub fn check_device(device: &Arc<dyn Device>) -> Result<CheckReport> {
    let len = device.len();
    let mut payloads = PayloadScan {
        records: 0,
        commands: 0,
        bad: None,
    };
    let mut parser = Parser::new();
    let framing = ferrite_wal::check_visiting(&**device, &mut |record| match for_each_command(
        record.payload,
        &mut parser,
        check_command,
    ) {
        Ok(commands) => {
            payloads.records += 1;
            payloads.commands += commands;
            true
        }
        Err(reason) => {
            payloads.bad = Some(LogEnd::Corrupt {
                offset: record.offset,
                lsn: record.lsn,
                reason: format!("the record is intact but its payload is not a command: {reason}"),
            });
            false
        }
    });
    // A bad payload stops the scan, so it comes before any damage the
    // framing check would have found further on.
    let end = match (payloads.bad, framing) {
        (Some(bad), _) => bad,
        (
            None,
            Err(ferrite_wal::Error::Corrupt {
                offset,
                lsn,
                reason,
                ..
            }),
        ) => LogEnd::Corrupt {
            offset,
            lsn,
            reason,
        },
        (None, Err(e)) => return Err(Error::Log(e)),
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
