//! The append-only file, on Ferrite's storage devices.
//!
//! Every write command is appended as RESP (Redis's AOF format, so
//! `redis-check-aof` style tools and humans can read it) through the
//! [`CommandLog`] trait; the server never touches a device directly. One
//! client command (or one EXEC) is one *record*: several commands in a
//! record are wrapped in MULTI/EXEC, so recovery keeps all or none of them.
//!
//! [`DeviceLog`] is the log on an `io::Device` with group commit: the event
//! loop writes each iteration's records in one append, a syncer thread
//! makes them durable (one fsync, or nothing on persistent memory where a
//! write is durable when it returns) and wakes the loop, which then sends
//! the replies that were waiting (`appendfsync always`).

mod check;
mod device_log;
mod open;
pub mod scan;

use std::fmt;

pub use check::{check_dir, CheckOutcome};
pub use device_log::DeviceLog;
pub use open::{open_device, open_log, open_log_on, replay, LogFiles, OpenedLog};

use crate::commands::Propagation;
use crate::config::AppendFsync;
use crate::state::LogInfo;

/// Position of a record in the log: the log's length once the record is
/// in it. A reply waiting on ticket `t` may go out once the log has
/// acknowledged everything up to `t`.
pub type Ticket = u64;

/// The log as the server sees it; see the module documentation.
pub trait CommandLog: Send + fmt::Debug {
    /// Buffers one record; returns its ticket. Failures show up in
    /// [`CommandLog::flush`] and [`CommandLog::failure`].
    fn append(&mut self, record: &Propagation) -> Ticket;

    /// Writes the buffered records to the device and, for `always`, asks
    /// for them to be made durable. Called once per event-loop iteration.
    fn flush(&mut self);

    /// Everything up to this ticket may be acknowledged to clients: durable
    /// for `always`, written to the device otherwise.
    fn acknowledged(&self) -> Ticket;

    /// Housekeeping from the server timer (the once-a-second fsync of
    /// `everysec`).
    fn tick(&mut self);

    /// Changes the durability level (CONFIG SET appendfsync).
    fn set_fsync(&mut self, fsync: AppendFsync);

    /// Why the log refuses writes, once a write or sync failed.
    fn failure(&self) -> Option<String>;

    /// Fills INFO persistence figures.
    fn info(&self, into: &mut LogInfo);

    /// Flushes, syncs and stops background work (clean shutdown).
    fn close(&mut self) -> crate::Result<()>;
}

/// The log when `appendonly no`: nothing is written, everything is
/// acknowledged at once.
#[derive(Debug, Default)]
pub struct NullLog;

impl CommandLog for NullLog {
    fn append(&mut self, _record: &Propagation) -> Ticket {
        0
    }
    fn flush(&mut self) {}
    fn acknowledged(&self) -> Ticket {
        0
    }
    fn tick(&mut self) {}
    fn set_fsync(&mut self, _fsync: AppendFsync) {}
    fn failure(&self) -> Option<String> {
        None
    }
    fn info(&self, into: &mut LogInfo) {
        into.enabled = false;
    }
    fn close(&mut self) -> crate::Result<()> {
        Ok(())
    }
}
