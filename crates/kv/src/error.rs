//! Errors of the kv crate.

use std::path::PathBuf;

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can stop the server from starting or running.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A bad directive in the config file or on the command line.
    #[error("configuration error at {origin}: {reason}")]
    Config {
        /// File and line, or "command line".
        origin: String,
        /// What is wrong and what was expected.
        reason: String,
    },
    /// An operating-system call failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or address.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The log's device failed.
    #[error(transparent)]
    Device(#[from] ferrite_io::Error),
    /// The log underneath failed, or its file is not a Ferrite log.
    #[error(transparent)]
    Log(#[from] ferrite_wal::Error),
    /// The log is damaged before its end: refusing to start rather than
    /// silently dropping acknowledged writes.
    #[error("{path}: corrupt log record {lsn} at offset {offset}: {reason}. The server refuses to start rather than lose the acknowledged writes after it. Restore the file from a copy, or run `ferrite check --fix {dir}` to truncate the log at offset {offset} (record {lsn} and everything after it are lost)")]
    CorruptLog {
        /// The log file.
        path: PathBuf,
        /// Byte offset of the damaged record.
        offset: u64,
        /// LSN of the damaged record.
        lsn: u64,
        /// What is wrong there.
        reason: String,
        /// The data directory, for the suggested command.
        dir: String,
    },
    /// The log's tail is torn and `aof-load-truncated` is `no`.
    #[error("{path}: the log ends with an incomplete record at offset {offset} ({bytes} bytes never acknowledged) and aof-load-truncated is no; run `ferrite check --fix {dir}` or set aof-load-truncated yes")]
    TruncatedLog {
        /// The log file.
        path: PathBuf,
        /// Where the incomplete record starts.
        offset: u64,
        /// Bytes from there to the end of the file.
        bytes: u64,
        /// The data directory.
        dir: String,
    },
    /// Persistent memory was requested but is not available.
    #[error("{path}: log-device pmem needs real persistent memory (a DAX file system), but this file is {mode}; use log-device pmem-emulated to test without it")]
    NoRealPm {
        /// The log file.
        path: PathBuf,
        /// What the mapping turned out to be.
        mode: String,
    },
    /// A base part named by the manifest is damaged.
    #[error("{path}: damaged base part at offset {offset}: {reason}. The manifest names it, so the data cannot be loaded without it: restore the data directory from a copy, or move the manifest away to fall back to nothing but the logs")]
    CorruptBase {
        /// The part.
        path: PathBuf,
        /// Where the damage is.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// The manifest cannot be parsed or fails its checksum.
    #[error("{path}: bad manifest at offset {offset}: {reason}. It is only ever replaced by an atomic rename, so this is damage or a file from another program; restore it from a copy")]
    BadManifest {
        /// The manifest.
        path: PathBuf,
        /// Where parsing stopped.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// The manifest names a file that does not exist.
    #[error("{manifest} names {file}, which does not exist in the data directory: it is incomplete (a file deleted or not copied); restore the missing file")]
    MissingFile {
        /// The manifest.
        manifest: PathBuf,
        /// The missing file's name.
        file: String,
    },
    /// A rewrite could not start or finish (the data directory is
    /// unchanged, or holds orphans cleaned at the next start).
    #[error("log rewrite failed: {reason}")]
    Rewrite {
        /// What failed.
        reason: String,
    },
}
