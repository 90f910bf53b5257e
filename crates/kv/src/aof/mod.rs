//! The append-only file, on Ferrite's write-ahead log (`ferrite-wal`).
//!
//! Every write command is logged as RESP (Redis's AOF format, so the
//! payloads read like a Redis AOF) through the [`CommandLog`] trait; the
//! server never touches a device or the wal directly. One client command
//! (or one EXEC) is one *record*, which the wal frames with an LSN and a
//! CRC32C (`docs/format.md`, "The AOF on the wal"): recovery keeps all of a
//! record or none of it, and damage in the middle of the log is told from a
//! torn tail exactly, by the wal's recovery rather than by parsing RESP.
//!
//! [`WalLog`] is the log on a [`ferrite_wal::Wal`]. The event loop appends
//! each command's record as it runs, into a pending batch that gets the
//! record its LSN as ticket; once per loop iteration the batch goes to the
//! wal in one append (on persistent memory that append persists it) and
//! the loop hands the new records to a committer thread, which commits
//! them (on a disk file: one write and, for `appendfsync always`, one
//! `fdatasync` for the whole group) and wakes the loop, which then sends
//! the replies that were waiting. At `everysec`
//! and `no`, where a commit is only a write into the page cache, the loop
//! does that write itself and replies at once.
//!
//! Where the log's files live is decided here only ([`LogFiles`]), so that a
//! manifest can name them (issue #5, the fork-less rewrite).

mod check;
mod committer;
mod open;
mod prefetch;
mod record;
pub(crate) mod repl_mark;
mod replay;
mod wal_log;
mod wbuf_log;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferrite_io::Device;

pub use check::{check_device, CheckReport, LogEnd};
pub use open::{
    check_new_device, create_data_dir, open_device, open_device_at, open_log, open_log_on,
    open_new_log, replay_old_log, replay_resp, OpenedLog,
};
pub use prefetch::prefetch_logs;
pub(crate) use record::SCRATCH_KEEP_BYTES;
pub use wal_log::{wal_config, WalLog};
pub use wbuf_log::{
    create_wbuf_file, log_wbuf_config, open_log_device, open_wbuf_log, wbuf_dir, wbuf_path,
    LOG_WBUF_BLOCK_BYTES,
};

use crate::commands::Propagation;
use crate::config::{AppendFsync, Config};
use crate::error::{Error, Result};
use crate::rewrite::manifest::IncrKind;
use crate::state::LogInfo;

/// Position of a record in the log: its LSN (`ferrite_wal::Lsn`; the first
/// record of a log is 1, and LSNs continue across a [`CommandLog::switch`]).
/// A reply waiting on ticket `t` may go out once the log has acknowledged
/// everything up to `t`. `Ticket::MAX` is never acknowledged: it is the
/// ticket of a record the log failed to take.
pub type Ticket = u64;

/// A wait for durability to run on another thread
/// ([`CommandLog::prepare_switch`]).
pub type SyncWait = Box<dyn FnOnce() -> Result<()> + Send>;

/// Where a [`CommandLog::switch`] happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchPoint {
    /// The last record in the old file (0 if there was none). Every record
    /// up to it is durable in the old file when `switch` returns; every
    /// later record goes to the new one.
    pub last_in_old: Ticket,
    /// The file appends went to before the switch.
    pub old_path: PathBuf,
    /// The file they go to now.
    pub new_path: PathBuf,
}

/// Applies the directives a log follows while it runs (`appendfsync`,
/// `aof-release-log-cache`, `aof-everysec-sync-bytes`): when it opens, and
/// from the server's timer after a CONFIG SET.
pub fn apply_config(log: &mut dyn CommandLog, config: &Config) {
    log.set_fsync(config.appendfsync);
    log.set_release_cache(config.release_log_cache());
    log.set_everysec_sync_bytes(config.everysec_sync_bytes());
}

/// The log as the server sees it; see the module documentation.
pub trait CommandLog: Send + fmt::Debug {
    /// Takes one record; returns its ticket. Failures show up in
    /// [`CommandLog::failure`] (and the ticket is then never acknowledged).
    /// The record may wait in memory, with the others of this loop turn,
    /// until [`CommandLog::drain`] or [`CommandLog::flush`] hands them to
    /// the log file together; its ticket is its LSN all the same.
    fn append(&mut self, record: &Propagation) -> Ticket;

    /// Hands the records appended so far to the log file (on persistent
    /// memory: persists them), without asking for a commit: from now on a
    /// sync of the log covers them. A failure shows up in
    /// [`CommandLog::failure`], and their tickets are never acknowledged.
    fn drain(&mut self) {}

    /// Hands the records appended so far to the log file
    /// ([`CommandLog::drain`]) and starts making them durable (for
    /// `always`) or written (otherwise), without waiting. Called once per
    /// event-loop iteration, before the replies are sent.
    fn flush(&mut self);

    /// Everything up to this ticket may be acknowledged to clients: durable
    /// for `always`, handed to the operating system otherwise.
    fn acknowledged(&self) -> Ticket;

    /// Housekeeping from the server timer.
    fn tick(&mut self);

    /// Changes the durability level (CONFIG SET appendfsync).
    fn set_fsync(&mut self, fsync: AppendFsync);

    /// Whether synced stretches of the log file leave the page cache
    /// (`aof-release-log-cache`); logs without a page cache ignore it.
    fn set_release_cache(&mut self, _release: bool) {}

    /// At `everysec`, also sync once this many bytes are written but not
    /// synced, 0 for only every second (`aof-everysec-sync-bytes`); logs
    /// that do not sync periodically ignore it.
    fn set_everysec_sync_bytes(&mut self, _bytes: u64) {}

    /// Why the log refuses writes, once a write or sync failed.
    fn failure(&self) -> Option<String>;

    /// Fills INFO persistence figures.
    fn info(&self, into: &mut LogInfo);

    /// Switches appends to a new log file on `next` (empty or all zero, the
    /// same kind of device as the current one; `AofDir::incr_name`
    /// names it and [`open_device_at`] opens it). The current file is made
    /// durable first, so this waits for one sync: call it at the start of a
    /// rewrite, not per command. Returns where the switch happened: a
    /// rewrite's base covers the state up to `last_in_old`, and the new file
    /// holds everything after it. Record numbering (tickets) continues in
    /// the new file, so acknowledgement is unaffected. The old file is no
    /// longer written; deleting it is the caller's business (once a manifest
    /// no longer names it).
    fn switch(&mut self, next: Arc<dyn Device>) -> Result<SwitchPoint>;

    /// A [`CommandLog::switch`] is coming. Starts making the current file
    /// durable in the background where the log syncs there anyway
    /// (`everysec`), and returns at once with a wait for another thread:
    /// it returns once every record appended before it ran is durable (or
    /// the sync failed, which poisons the log). Run off the event loop
    /// before the switch, it leaves the switch's own sync, on the loop,
    /// only the records appended after it.
    fn prepare_switch(&mut self) -> SyncWait;

    /// A wait for another thread: when called, it makes every record
    /// appended by then durable (starting a sync where one is not due
    /// yet) and returns once they are, or the sync failed. A rewrite that
    /// left superseded keys out of its parts calls it before its manifest.
    fn sync_wait(&mut self) -> SyncWait;

    /// Makes everything durable and stops background work (clean shutdown).
    fn close(&mut self) -> Result<()>;
}

/// The log when `appendonly no`: nothing is written, everything is
/// acknowledged at once.
#[derive(Debug, Default)]
pub struct NullLog {
    /// The last ticket of the log this one replaced (`appendonly no` at
    /// run time), which the replies still queued may wait for: all of it
    /// was made durable when that log closed.
    acked: Ticket,
}

impl NullLog {
    /// The log after a log closed at run time whose records up to `acked`
    /// were acknowledged.
    pub fn after(acked: Ticket) -> NullLog {
        NullLog { acked }
    }
}

impl CommandLog for NullLog {
    fn append(&mut self, _record: &Propagation) -> Ticket {
        0
    }
    fn flush(&mut self) {}
    fn acknowledged(&self) -> Ticket {
        self.acked
    }
    fn tick(&mut self) {}
    fn set_fsync(&mut self, _fsync: AppendFsync) {}
    fn failure(&self) -> Option<String> {
        None
    }
    fn info(&self, into: &mut LogInfo) {
        into.enabled = false;
    }
    fn prepare_switch(&mut self) -> SyncWait {
        Box::new(|| Ok(()))
    }
    fn sync_wait(&mut self) -> SyncWait {
        Box::new(|| Ok(()))
    }
    fn switch(&mut self, next: Arc<dyn Device>) -> Result<SwitchPoint> {
        Err(Error::Config {
            origin: "appendonly".into(),
            reason: format!(
                "cannot switch the log to {}: appendonly is no, there is no log",
                next.path().display()
            ),
        })
    }
    fn close(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Where the log lives in a data directory: the one place that names log
/// files.
#[derive(Clone, Debug)]
pub struct LogFiles {
    /// The log on a file device (`appendfilename`).
    pub file: PathBuf,
    /// The log on a persistent-memory device (`appendfilename` + `.pm`).
    pub pm: PathBuf,
    /// The log in a file behind a write buffer (`appendfilename` +
    /// `.wbuf`; its buffer is [`wbuf_path`] of it).
    pub wbuf: PathBuf,
}

impl LogFiles {
    /// The log files of `dir` for log name `name` (`appendfilename`).
    pub fn in_dir(dir: &Path, name: &str) -> LogFiles {
        LogFiles {
            file: dir.join(name),
            pm: dir.join(format!("{name}.pm")),
            wbuf: dir.join(format!("{name}.wbuf")),
        }
    }

    /// The log that exists and its device kind, if exactly one does; an
    /// error if two do. A file or PM log counts when it holds data; a
    /// write buffer's log as soon as its file exists, since its records
    /// may all still be in the buffer.
    pub fn existing(&self) -> Result<Option<(PathBuf, IncrKind)>> {
        let non_empty = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.len() > 0);
        let found: Vec<(PathBuf, IncrKind)> = [
            (non_empty(&self.file), &self.file, IncrKind::File),
            (non_empty(&self.pm), &self.pm, IncrKind::Pm),
            (self.wbuf.exists(), &self.wbuf, IncrKind::Wbuf),
        ]
        .into_iter()
        .filter(|(present, _, _)| *present)
        .map(|(_, path, kind)| (path.clone(), kind))
        .collect();
        match found.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(one.clone())),
            [a, b, ..] => Err(Error::Config {
                origin: a.0.display().to_string(),
                reason: format!(
                    "both {} and {} exist; move the one you do not want away",
                    a.0.display(),
                    b.0.display()
                ),
            }),
        }
    }
}
