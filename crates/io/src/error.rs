//! Errors of the io crate.

use std::path::PathBuf;

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong on a [`crate::Device`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system call failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// The operation (`open`, `pwrite`, `fdatasync`...).
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The file system or medium is full. Nothing was written; free space
    /// and retry.
    #[error("{path}: no space left on the device; free space and retry")]
    NoSpace {
        /// The file.
        path: PathBuf,
    },
    /// An earlier sync failed, so the device no longer knows what is durable.
    /// Writes are refused; reads go on. Restart to recover from what is on
    /// the medium.
    #[error("{path}: writes refused because an earlier sync failed ({cause}); reads still work, restart to recover")]
    Poisoned {
        /// The file.
        path: PathBuf,
        /// The first failure.
        cause: String,
    },
    /// The medium holds bytes this crate did not write.
    #[error("{path}: corrupt at offset {offset}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Where the bad bytes are.
        offset: u64,
        /// What is wrong with them.
        reason: String,
    },
    /// An offset or length the device cannot represent.
    #[error("{path}: offset {offset} + {len} bytes is beyond the largest supported file")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Start of the access.
        offset: u64,
        /// Its length.
        len: u64,
    },
    /// The persistent-memory layer failed.
    #[error(transparent)]
    Pmem(#[from] ferrite_pmem::Error),
}

impl Error {
    /// Wraps an OS error, recognising a full disk.
    pub fn io(op: &'static str, path: &std::path::Path, source: std::io::Error) -> Error {
        if source.kind() == std::io::ErrorKind::StorageFull || source.raw_os_error() == Some(28) {
            return Error::NoSpace {
                path: path.to_path_buf(),
            };
        }
        Error::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }

    /// Whether the error means the medium is full.
    pub fn is_no_space(&self) -> bool {
        matches!(
            self,
            Error::NoSpace { .. } | Error::Pmem(ferrite_pmem::Error::NoSpace { .. })
        )
    }
}
