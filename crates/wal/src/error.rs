//! Errors of the wal crate.

use std::path::PathBuf;

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong with a write-ahead log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The device underneath failed.
    #[error(transparent)]
    Io(#[from] ferrite_io::Error),
    /// An earlier write or sync of this log failed, so the log no longer
    /// knows what is durable. Every waiting and later append or commit gets
    /// this error; nothing more is reported durable. Reopen the log (after
    /// freeing space if `no_space`) to recover from what is on the medium.
    #[error("{path}: log refuses writes because an earlier write or sync failed ({cause}); reopen it to recover")]
    Poisoned {
        /// The log file.
        path: PathBuf,
        /// The first failure.
        cause: String,
        /// Whether that failure was a full medium.
        no_space: bool,
    },
    /// A record that is not at the tail is damaged: records after it prove
    /// it had once been durable, so dropping it would lose committed data.
    /// Nothing was changed. Restore the file from a copy, or, to keep what
    /// precedes the damage and lose the rest, call [`crate::repair`] with
    /// this offset (the `ferrite check --repair` command).
    #[error("{path}: corrupt log record {lsn} at offset {offset}: {reason}; records after it were durable, so this is not a torn tail; repair truncates here and loses them")]
    Corrupt {
        /// The log file.
        path: PathBuf,
        /// Byte offset of the damaged record.
        offset: u64,
        /// LSN the damaged record should carry.
        lsn: u64,
        /// What is wrong.
        reason: String,
    },
    /// The file is not a log of this format (bad header).
    #[error("{path}: not a Ferrite log: {reason}")]
    BadHeader {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A payload larger than the configured `record_bytes_max`.
    #[error("record of {len} bytes exceeds record_bytes_max = {max}; split it or raise the limit")]
    RecordTooLarge {
        /// Payload length asked for.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A batch of records larger, framed, than the in-flight window: it
    /// could never be admitted whole.
    #[error("a batch of {bytes} framed bytes exceeds the in-flight window of {window} bytes; append it in smaller batches")]
    BatchTooLarge {
        /// Framed bytes of the batch.
        bytes: u64,
        /// The window of the log file.
        window: u64,
    },
    /// A configuration value out of range.
    #[error("wal configuration: {reason}")]
    Config {
        /// What is wrong and what is accepted.
        reason: String,
    },
    /// A recovery scan that hands records to its caller
    /// ([`crate::check_visiting`]) was stopped by it; nothing was changed.
    #[error("{path}: the caller stopped reading the log at record {lsn}")]
    Stopped {
        /// The log file.
        path: PathBuf,
        /// The record the caller refused.
        lsn: u64,
    },
    /// The log was closed (or switched away from) while an operation waited.
    #[error("{path}: the log is closed")]
    Closed {
        /// The log file.
        path: PathBuf,
    },
}

impl Error {
    /// Whether the error means the medium is full.
    pub fn is_no_space(&self) -> bool {
        match self {
            Error::Io(e) => e.is_no_space(),
            Error::Poisoned { no_space, .. } => *no_space,
            _ => false,
        }
    }
}
