//! Errors of the SQLite layer.

use std::path::PathBuf;

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong below SQLite, or while registering the VFS.
///
/// Inside a VFS callback an error becomes an SQLite result code (and a
/// `tracing` event with the full message); the Rust functions of this crate
/// return it as is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The device under a file failed.
    #[error(transparent)]
    Device(#[from] ferrite_io::Error),
    /// Mapping or persisting memory failed.
    #[error(transparent)]
    Pmem(#[from] ferrite_pmem::Error),
    /// An operating-system call failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// The operation (`open`, `fcntl`, `unlink`...).
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The file does not exist and the caller did not ask to create it.
    #[error("{path}: no such file")]
    NotFound {
        /// The file.
        path: PathBuf,
    },
    /// A persistent-memory database is open in another process. PM files
    /// cache their length and mapping per process, so only one process may
    /// open them at a time; close the other program, or use `ferrite-file`
    /// for databases shared between processes.
    #[error("{path}: in use by another process (ferrite-{mode} files are single-process); close the other program or use ferrite-file")]
    InUseByAnotherProcess {
        /// The file.
        path: PathBuf,
        /// The VFS mode.
        mode: &'static str,
    },
    /// A PM VFS was asked to open a file that is not a Ferrite PM device
    /// (a plain SQLite database, say). Open it with `ferrite-file` or the
    /// stock VFS, or convert it with [`crate::import`].
    #[error("{path}: not a Ferrite PM device file; open it with ferrite-file or convert it with ferrite_sqlite::import")]
    NotPmDevice {
        /// The file.
        path: PathBuf,
    },
    /// SQLite refused to register a VFS.
    /// A `ferrite-wbuf` file whose buffer is not in the buffer directory
    /// but in another one, not closed clean: the file may lack writes that
    /// buffer acknowledged.
    #[error("{path}: its write buffer {buffer} was not closed clean and is not in the buffer directory {dir}; set FERRITE_WBUF_DIR to the buffer's directory so that its writes are replayed")]
    BufferElsewhere {
        /// The file.
        path: PathBuf,
        /// Its buffer, elsewhere.
        buffer: PathBuf,
        /// The buffer directory in use.
        dir: PathBuf,
    },
    #[error("registering SQLite VFS {name:?}: SQLite returned code {code}")]
    Register {
        /// The VFS name.
        name: String,
        /// SQLite's result code.
        code: i32,
    },
    /// A VFS name that SQLite cannot take (it must be plain text).
    #[error("VFS name {name:?} is not usable: {reason}")]
    BadName {
        /// The name given.
        name: String,
        /// Why not.
        reason: &'static str,
    },
}

impl Error {
    /// Wraps an OS error with the operation and file.
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// Whether the medium is full (SQLite reports `SQLITE_FULL`).
    pub(crate) fn is_no_space(&self) -> bool {
        match self {
            Error::Device(e) => e.is_no_space(),
            Error::Pmem(e) => matches!(e, ferrite_pmem::Error::NoSpace { .. }),
            Error::Io { source, .. } => source.raw_os_error() == Some(libc::ENOSPC),
            _ => false,
        }
    }
}
