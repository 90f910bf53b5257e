//! Recovery: find the end of a log after a crash, tell a torn tail (drop it)
//! from damage in the middle (refuse, name the offset), and the explicit
//! [`repair`] that truncates at a damaged record.
//!
//! The rule, argued in `docs/format.md`: records are read in LSN order from
//! the header until the first offset `X` without the intact record of the
//! expected LSN `k`. Everything from `X` on is a *torn tail* unless an intact
//! record further on proves that record `k` had been durable:
//!
//! - its `durable_hint >= k` (it was framed after `k` was known durable), or
//! - it starts at or beyond `X + window_bytes` (no append can reach that far
//!   past the durable end, and the durable end is at most `X`), or
//! - its LSN is below `k` (a record cannot come after its successor).
//!
//! A torn tail never holds an acknowledged record (acknowledged records are
//! durable and so are all records before them), so truncating it is safe.

use ferrite_io::Device;

use crate::error::{Error, Result};
use crate::reader::{parse_at, payload_of, read_header, Cursor, Parsed};
use crate::record::{LogHeader, Lsn, RECORD_ALIGN, RECORD_MAGIC};

/// What recovery found in a log file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// The file's header.
    pub header: LogHeader,
    /// Intact records kept.
    pub records: u64,
    /// LSN of the next record to append.
    pub next_lsn: Lsn,
    /// Offset just past the last intact record: where appending resumes.
    pub end_offset: u64,
    /// The torn tail found (and, by [`recover`], dropped), if any.
    pub torn_tail: Option<TornTail>,
}

/// A torn tail: bytes after the last intact record that a crash left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// Where it starts (the end of the intact log).
    pub offset: u64,
    /// Bytes from there to the end of the file that were not all zero.
    pub bytes: u64,
    /// Intact records beyond the first missing one, dropped with the tail
    /// because a record before them never reached the medium (none of them
    /// was ever reported durable).
    pub records_dropped: u64,
    /// What was wrong with the first bad record.
    pub reason: String,
}

/// One intact record of the intact log, as [`check_visiting`] reads it.
#[derive(Clone, Copy, Debug)]
pub struct Visit<'a> {
    /// Its LSN.
    pub lsn: Lsn,
    /// Byte offset of its header in the file.
    pub offset: u64,
    /// The payload, as appended.
    pub payload: &'a [u8],
}

/// Scans `device` and reports what [`recover`] would keep, without changing
/// anything. A corrupt record followed by durable ones is
/// [`Error::Corrupt`], naming the file and offset.
pub fn check(device: &dyn Device) -> Result<Recovery> {
    check_visiting(device, &mut |_| true)
}

/// [`check`], handing each record it keeps to `visit`, in LSN order, as
/// the scan reads it: a caller that replays the log needs no second pass
/// over it. `visit` returns false to stop the scan ([`Error::Stopped`]).
///
/// The records come before the verdict on what follows them: when the
/// result is an error, discard whatever was built from them.
pub fn check_visiting(
    device: &dyn Device,
    visit: &mut dyn FnMut(Visit<'_>) -> bool,
) -> Result<Recovery> {
    let header = read_header(device)?;
    let mut cursor = Cursor::new(device);
    let mut offset = crate::record::LOG_HEADER_LEN as u64;
    let mut lsn = header.base_lsn;
    let reason = loop {
        match parse_at(&mut cursor, &header, offset, Some(lsn))? {
            Parsed::Record {
                header: record,
                end,
            } => {
                let payload = payload_of(&mut cursor, offset, &record)?;
                if !visit(Visit {
                    lsn,
                    offset,
                    payload,
                }) {
                    return Err(Error::Stopped {
                        path: device.path().to_path_buf(),
                        lsn,
                    });
                }
                offset = end;
                lsn += 1;
            }
            Parsed::Invalid(reason) => break reason,
        }
    };
    let tail = scan_tail(&mut cursor, &header, offset, lsn)?;
    if let Some(evidence) = tail.evidence {
        return Err(Error::Corrupt {
            path: device.path().to_path_buf(),
            offset,
            lsn,
            reason: format!("{reason}; but {evidence}"),
        });
    }
    let torn_tail = (tail.nonzero_bytes > 0).then(|| TornTail {
        offset,
        bytes: cursor.len() - offset,
        records_dropped: tail.intact_records,
        reason,
    });
    Ok(Recovery {
        header,
        records: lsn - header.base_lsn,
        next_lsn: lsn,
        end_offset: offset,
        torn_tail,
    })
}

/// [`check`], then drops a torn tail (truncating the file at the end of the
/// intact log and syncing), so the log can be appended to.
pub fn recover(device: &dyn Device) -> Result<Recovery> {
    recover_visiting(device, &mut |_| true)
}

/// [`recover`], handing each record kept to `visit` as
/// [`check_visiting`] does.
pub fn recover_visiting(
    device: &dyn Device,
    visit: &mut dyn FnMut(Visit<'_>) -> bool,
) -> Result<Recovery> {
    let recovery = check_visiting(device, visit)?;
    if let Some(tail) = &recovery.torn_tail {
        tracing::warn!(
            path = %device.path().display(),
            offset = tail.offset,
            bytes = tail.bytes,
            records_dropped = tail.records_dropped,
            "dropping the torn tail of the log: {}",
            tail.reason
        );
        device.set_len(tail.offset)?;
        device.sync()?;
    }
    Ok(recovery)
}

/// Truncates the log at `offset` (as reported by [`Error::Corrupt`]) and
/// syncs: every record from there on is lost. For an explicit fix command,
/// never called automatically.
pub fn repair(device: &dyn Device, offset: u64) -> Result<Recovery> {
    // Refuse to truncate a file that is not a log.
    read_header(device)?;
    let first = crate::record::LOG_HEADER_LEN as u64;
    if offset < first || offset > device.len() || !offset.is_multiple_of(RECORD_ALIGN as u64) {
        return Err(Error::Config {
            reason: format!(
                "repair offset {offset} is not a record boundary of {} (header ends at {first}, file is {} bytes)",
                device.path().display(),
                device.len()
            ),
        });
    }
    tracing::warn!(path = %device.path().display(), offset, "repair: truncating the log");
    device.set_len(offset)?;
    device.sync()?;
    let recovery = check(device)?;
    debug_assert!(recovery.end_offset <= offset);
    Ok(recovery)
}

/// What lies beyond the end of the intact log.
struct TailScan {
    /// Bytes that are not zero.
    nonzero_bytes: u64,
    /// Intact records found.
    intact_records: u64,
    /// Why the missing record must have been durable, if some record says so.
    evidence: Option<String>,
}

/// Looks at every aligned offset from `from` to the end for intact records
/// and weighs them as evidence (see the module docs).
fn scan_tail(
    cursor: &mut Cursor<'_>,
    header: &LogHeader,
    from: u64,
    expect: Lsn,
) -> Result<TailScan> {
    let mut scan = TailScan {
        nonzero_bytes: 0,
        intact_records: 0,
        evidence: None,
    };
    let len = cursor.len();
    let mut offset = from;
    while offset < len {
        let word_len = (len - offset).min(RECORD_ALIGN as u64) as usize;
        let Some(word) = cursor.bytes(offset, word_len)? else {
            break;
        };
        scan.nonzero_bytes += word.iter().filter(|&&b| b != 0).count() as u64;
        let magic = word.len() >= 4 && word[..4] == RECORD_MAGIC.to_le_bytes();
        if magic {
            if let Parsed::Record { header: record, .. } = parse_at(cursor, header, offset, None)? {
                scan.intact_records += 1;
                if scan.evidence.is_none() {
                    scan.evidence = weigh(
                        record.lsn,
                        record.durable_hint,
                        offset,
                        from,
                        expect,
                        header,
                    );
                }
            }
        }
        offset += RECORD_ALIGN as u64;
    }
    Ok(scan)
}

/// Why an intact record at `offset` proves record `expect` (missing at
/// `from`) had been durable, if it does.
fn weigh(
    lsn: Lsn,
    hint: Lsn,
    offset: u64,
    from: u64,
    expect: Lsn,
    header: &LogHeader,
) -> Option<String> {
    if hint >= expect {
        return Some(format!(
            "record {lsn} at offset {offset} was written after record {expect} was durable"
        ));
    }
    if offset >= from.saturating_add(header.window_bytes) {
        return Some(format!(
            "record {lsn} at offset {offset} lies beyond the {}-byte in-flight window",
            header.window_bytes
        ));
    }
    if lsn < expect {
        return Some(format!(
            "record {lsn} at offset {offset} follows a later record"
        ));
    }
    None
}
