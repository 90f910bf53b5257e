//! Errors of the pmem crate.

use std::path::PathBuf;

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong mapping or persisting persistent memory.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A system call on the backing file failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// The operation that failed (`open`, `mmap`, `fallocate`, `msync`...).
        op: &'static str,
        /// The backing file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The file system has no room to back the region: free space or use a
    /// smaller region.
    #[error("no space to back {len} bytes of persistent memory at {path}: free space on its file system")]
    NoSpace {
        /// The backing file.
        path: PathBuf,
        /// The length that could not be allocated.
        len: u64,
    },
    /// An access outside the mapped region: a bug in the caller.
    #[error("access of {len} bytes at offset {offset} is outside the {mapped}-byte region")]
    OutOfBounds {
        /// Start of the access.
        offset: usize,
        /// Length of the access.
        len: usize,
        /// Bytes currently mapped.
        mapped: usize,
    },
    /// The region cannot grow past the address space reserved when it was
    /// mapped: map it again with a larger `max_len`.
    #[error("region at {path} cannot grow to {requested} bytes: only {reserved} bytes of address space were reserved")]
    ReservationExceeded {
        /// The backing file.
        path: PathBuf,
        /// Length asked for.
        requested: usize,
        /// Length reserved at map time.
        reserved: usize,
    },
    /// An 8-byte atomic access at an offset that is not 8-byte aligned.
    #[error("8-byte atomic access at unaligned offset {offset}")]
    Unaligned {
        /// The offending offset.
        offset: usize,
    },
    /// A bad configuration value (flush instruction, threshold, SIMD width).
    #[error("persistent-memory configuration: {reason}")]
    Config {
        /// What was wrong and what is accepted.
        reason: String,
    },
}

impl Error {
    pub(crate) fn io(op: &'static str, path: &std::path::Path, source: std::io::Error) -> Error {
        if source.raw_os_error() == Some(libc::ENOSPC) {
            return Error::NoSpace {
                path: path.to_path_buf(),
                len: 0,
            };
        }
        Error::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }
}
