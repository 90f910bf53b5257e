//! Reading the log back: every command with its offset, and how the log
//! ends (cleanly, with a torn tail, or corrupt in the middle).

use ferrite_io::Device;

use crate::resp::{Args, Limits, Parser};

/// Bytes read from the device at a time during a scan.
const READ_CHUNK_BYTES: usize = 1 << 20;

/// Limits while reading the log: what the server could ever have logged.
const LOG_LIMITS: Limits = Limits {
    args_max: 1 << 30,
    bulk_len_max_bytes: 1 << 30,
};

/// How a scanned log ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogEnd {
    /// Every byte belongs to a complete command (and every MULTI has its EXEC).
    Clean,
    /// The log ends inside a command or an unfinished MULTI/EXEC record,
    /// which a crash during a write can leave: everything from `offset` on
    /// was never acknowledged and can be cut.
    Torn {
        /// Where the incomplete part starts.
        offset: u64,
    },
    /// Bytes that are not a command, followed by more data: not something
    /// a crash leaves. Refuse to guess.
    Corrupt {
        /// Where the bad bytes start.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
}

/// What a scan found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanReport {
    /// Commands read (MULTI/EXEC/SELECT included).
    pub commands: u64,
    /// How the log ends.
    pub end: LogEnd,
    /// The log's length.
    pub len: u64,
}

/// Whether `device` holds only zeros from `offset` to its end (the shape
/// of a file extended by a crash before its data reached the disk).
fn zeros_to_end(device: &dyn Device, mut offset: u64) -> ferrite_io::Result<bool> {
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    loop {
        let n = device.read_at(offset, &mut chunk)?;
        if n == 0 {
            return Ok(true);
        }
        if chunk[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        offset += n as u64;
    }
}

/// Reads every command of the log, calling `on_command(offset, args)` for
/// each, in order. Commands of a MULTI/EXEC record are passed on as they
/// come; if the record is unfinished at the end, the report says the log
/// is torn at its MULTI (the caller discards the queued commands).
pub fn scan_log(
    device: &dyn Device,
    mut on_command: impl FnMut(u64, &Args<'_>) -> Result<(), String>,
) -> ferrite_io::Result<ScanReport> {
    let len = device.len();
    let mut buf: Vec<u8> = Vec::new();
    let mut buf_offset = 0u64;
    let mut read_offset = 0u64;
    let mut parser = Parser::new();
    let mut commands = 0u64;
    let mut multi_at: Option<u64> = None;
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    let mut at = 0usize;
    loop {
        while at < buf.len() {
            let command_offset = buf_offset + at as u64;
            let parsed = if buf[at] == b'*' {
                parser
                    .parse(&buf[at..], &LOG_LIMITS)
                    .map_err(|e| e.to_string())
            } else {
                Err(format!(
                    "expected '*' at the start of a command, found byte {:#04x}",
                    buf[at]
                ))
            };
            let consumed = match parsed {
                Ok(Some(n)) => n,
                Ok(None) => break,
                Err(reason) => {
                    let end = if zeros_to_end(device, command_offset)? {
                        LogEnd::Torn {
                            offset: command_offset,
                        }
                    } else {
                        LogEnd::Corrupt {
                            offset: command_offset,
                            reason,
                        }
                    };
                    return Ok(ScanReport { commands, end, len });
                }
            };
            let args = parser.args(&buf[at..]);
            let name = args.get(0).to_ascii_uppercase();
            if name == b"MULTI" {
                multi_at = Some(command_offset);
            } else if name == b"EXEC" {
                multi_at = None;
            }
            if let Err(reason) = on_command(command_offset, &args) {
                let end = LogEnd::Corrupt {
                    offset: command_offset,
                    reason,
                };
                return Ok(ScanReport { commands, end, len });
            }
            commands += 1;
            at += consumed;
        }
        // Keep the unparsed tail (a command spanning two chunks).
        buf.drain(..at);
        buf_offset += at as u64;
        at = 0;
        if read_offset >= len {
            break;
        }
        let n = device.read_at(read_offset, &mut chunk)?;
        if n == 0 {
            break;
        }
        read_offset += n as u64;
        buf.extend_from_slice(&chunk[..n]);
    }
    let end = if let Some(offset) = multi_at {
        LogEnd::Torn { offset }
    } else if !buf.is_empty() {
        LogEnd::Torn { offset: buf_offset }
    } else {
        LogEnd::Clean
    };
    Ok(ScanReport { commands, end, len })
}
