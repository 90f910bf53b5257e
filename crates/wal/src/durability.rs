//! Durability levels and the log's configuration.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::record::{framed_len, Lsn, PAYLOAD_LEN_FORMAT_MAX, PM_RECORD_ALIGN};

/// When [`crate::Wal::commit`] returns, relative to the medium.
///
/// On a device that is durable when a write returns (persistent memory with
/// a drain per write), every level gives [`Durability::EveryCommit`]: each
/// appender persists its own record with its own fence, because a fence
/// orders only the stores of the thread that issues it, so no other thread
/// (leader or timer) could do it later on its behalf. The levels below
/// matter for disk files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Durability {
    /// The operating system decides (Redis `appendfsync no`). A commit hands
    /// its record to the OS (one `write` for a whole group of commits) and
    /// returns; a process crash loses nothing, a machine crash can lose
    /// anything not yet written back. The log still syncs when the unsynced
    /// bytes reach `max_in_flight_bytes`, which bounds both memory and what
    /// a crash can tear.
    None,
    /// Sync at most this often in the background (Redis `appendfsync
    /// everysec` with a one-second interval). A commit hands its record to
    /// the OS and returns; a machine crash loses about the last interval.
    /// If a sync is still running when records are to be written (a slow
    /// disk), the write is postponed rather than made to wait behind the
    /// sync, for up to [`PERIODIC_POSTPONE_MAX`]; after that the commit
    /// waits for the sync and the event is counted in
    /// [`crate::WalStats::delayed_syncs`] (Redis `aof_delayed_fsync`).
    Periodic(Duration),
    /// A commit returns once its record is durable (Redis `appendfsync
    /// always`), with group commit: one sync covers every record appended
    /// before it started.
    EveryCommit,
}

/// How long [`Durability::Periodic`] postpones writes behind a slow sync
/// (Redis uses two seconds).
pub const PERIODIC_POSTPONE_MAX: Duration = Duration::from_secs(2);

/// How a [`crate::Wal`] behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalConfig {
    /// When commits return; see [`Durability`].
    pub durability: Durability,
    /// The most bytes that may be appended but not yet durable. Appenders
    /// past it wait (back-pressure). Also recorded in each new log file: it
    /// bounds how far past the durable end a crash can leave records.
    pub max_in_flight_bytes: usize,
    /// The largest payload accepted.
    pub record_bytes_max: usize,
    /// On persistent memory, the log file is extended (zero-filled) this
    /// many bytes at a time ahead of the appenders, so that appends write
    /// inside the file without taking the device's extend lock.
    pub preallocate_bytes: u64,
    /// File path: once a sync has made a stretch of the log durable, its
    /// pages are released from the OS page cache (see
    /// [`ferrite_io::Device::release_cache`]); [`crate::Wal::set_release_cache`]
    /// changes it while the log is open.
    pub release_synced_cache: bool,
    /// [`Durability::Periodic`]: the syncer also syncs, before its interval
    /// is up, once this many bytes are written but not durable (0: only on
    /// the interval). A sync then writes back a bounded stretch, and its
    /// disturbance of the writers is short and bounded too.
    pub periodic_sync_bytes: u64,
    /// LSN of the first record of a new log.
    pub base_lsn: Lsn,
}

impl Default for WalConfig {
    fn default() -> WalConfig {
        WalConfig {
            durability: Durability::EveryCommit,
            max_in_flight_bytes: 4 << 20,
            record_bytes_max: 1 << 20,
            preallocate_bytes: 4 << 20,
            release_synced_cache: true,
            periodic_sync_bytes: 16 << 20,
            base_lsn: 1,
        }
    }
}

impl WalConfig {
    /// The default configuration with `durability`.
    pub fn with_durability(durability: Durability) -> WalConfig {
        WalConfig {
            durability,
            ..WalConfig::default()
        }
    }

    /// Checks the values against each other.
    pub fn validate(&self) -> Result<()> {
        let bad = |reason: String| Err(Error::Config { reason });
        if self.record_bytes_max > PAYLOAD_LEN_FORMAT_MAX {
            return bad(format!(
                "record_bytes_max = {} exceeds the format's {PAYLOAD_LEN_FORMAT_MAX}",
                self.record_bytes_max
            ));
        }
        if framed_len(self.record_bytes_max, PM_RECORD_ALIGN) > self.max_in_flight_bytes {
            return bad(format!(
                "max_in_flight_bytes = {} must hold one record of record_bytes_max = {} plus its header",
                self.max_in_flight_bytes, self.record_bytes_max
            ));
        }
        if self.base_lsn == 0 {
            return bad("base_lsn must be at least 1 (0 means \"nothing durable\")".into());
        }
        if let Durability::Periodic(interval) = self.durability {
            if interval.is_zero() {
                return bad("a periodic sync interval must be positive; use EveryCommit".into());
            }
        }
        Ok(())
    }
}
