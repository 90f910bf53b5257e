//! Ferrite's write-ahead (redo) log, with group commit (paper 004).
//!
//! - Records are opaque payloads framed with a length, a consecutive LSN and
//!   a CRC32C ([`record`]); the layout and its crash argument are in
//!   `docs/format.md` ("Write-ahead log").
//! - [`Wal`] lets many threads [`append`](Wal::append) concurrently; a
//!   [`commit`](Wal::commit) waits only until the durable LSN reaches its
//!   record. On a disk file, one `fdatasync` covers every record appended
//!   before it started (leader/follower); on persistent memory, each
//!   appender persists its own record and the durable LSN advances over
//!   the contiguous prefix of completed records. See `docs/wal.md`.
//! - [`Durability`] says when a commit returns: `None`, `Periodic`
//!   (Redis `everysec`) or `EveryCommit`.
//! - [`recover`] drops a torn tail; a damaged record followed by durable
//!   ones is [`Error::Corrupt`] naming the file and offset, fixed only by an
//!   explicit [`repair`].
//! - A failed write or sync poisons the log: every waiting and later
//!   commit fails ([`Error::Poisoned`]); nothing is reported durable that
//!   is not.
//!
//! ```
//! use std::sync::Arc;
//! use ferrite_io::{Device, FileDevice};
//! use ferrite_wal::{LogReader, Wal, WalConfig};
//!
//! let dir = tempfile::tempdir()?;
//! let device: Arc<dyn Device> = Arc::new(FileDevice::open(dir.path().join("log"))?);
//! let wal = Wal::open(Arc::clone(&device), WalConfig::default())?;
//! std::thread::scope(|s| {
//!     for i in 0..4 {
//!         let wal = &wal;
//!         s.spawn(move || wal.append_commit(format!("SET k{i} v").as_bytes()));
//!     }
//! });
//! assert_eq!(wal.durable_lsn(), 4);
//! wal.close()?;
//!
//! let payloads: Vec<Vec<u8>> = LogReader::open(device)?
//!     .map(|r| r.map(|record| record.payload))
//!     .collect::<Result<_, _>>()?;
//! assert_eq!(payloads.len(), 4);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod batch;
mod durability;
mod error;
mod group;
mod reader;
pub mod record;
mod recovery;
mod stats;
mod syncer;
mod writer;

pub use batch::Batch;
pub use durability::{Durability, WalConfig, PERIODIC_POSTPONE_MAX};
pub use error::{Error, Result};
pub use reader::{LogReader, Record};
pub use record::{LogHeader, Lsn};
pub use recovery::{
    check, check_visiting, recover, recover_visiting, repair, Recovery, TornTail, Visit,
};
pub use stats::WalStats;
pub use writer::Wal;
