//! [`WalLog`]: the AOF on a [`Wal`], with group commit on a committer
//! thread and self-persisting appends on persistent memory.
//!
//! Records are not handed to the wal one by one: [`CommandLog::append`]
//! encodes each into a pending [`Batch`] and gives it the LSN the wal will
//! give it (the event loop is the log's only appender, so LSNs are
//! predictable), and the batch goes to the wal in one
//! [`Wal::append_batch`] when the loop flushes the log before it sends
//! replies (or earlier, see [`CommandLog::drain`]). On persistent memory
//! that is one copy, one persist and two lock rounds per loop turn instead
//! of per command; replies wait for it as they did for each record.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrite_io::Device;
use ferrite_wal::{Batch, Durability, Lsn, Wal, WalConfig};

use super::committer::Committer;
use super::{record, CommandLog, SwitchPoint, SyncWait, Ticket};
use crate::commands::Propagation;
use crate::config::AppendFsync;
use crate::error::Result;
use crate::state::LogInfo;

/// The largest record (one command or transaction, as RESP) the log takes:
/// as large as a client's query buffer may grow by default.
pub const LOG_RECORD_BYTES_MAX: usize = 1 << 30;
/// Bytes that may be appended but not yet durable before appends wait. It
/// must hold one record of [`LOG_RECORD_BYTES_MAX`] with its header and
/// padding; it is also written into each log file, where it bounds how far
/// past the durable end a crash can leave records.
pub const LOG_IN_FLIGHT_BYTES_MAX: usize = LOG_RECORD_BYTES_MAX + (64 << 10);
/// With `appendfsync no`, the committer syncs after this many bytes, so that
/// the in-flight bound is never reached by the event loop itself (which
/// would then have to sync).
const NO_FSYNC_SYNC_EVERY_BYTES: u64 = 64 << 20;
/// Pending payload bytes that make an append hand the batch to the wal at
/// once, so one turn of a pipelined bulk load neither holds its whole log
/// in memory nor writes it as one huge batch.
const BATCH_BYTES_MAX: usize = 1 << 20;
/// How often `everysec` syncs.
const EVERYSEC_INTERVAL: Duration = Duration::from_secs(1);

/// The wal configuration for `appendfsync` on a device. On persistent
/// memory every append persists its record (each appender fences its own
/// stores), so every level is `EveryCommit` there and needs no thread.
pub fn wal_config(fsync: AppendFsync, durable_on_write: bool) -> WalConfig {
    let durability = match fsync {
        _ if durable_on_write => Durability::EveryCommit,
        AppendFsync::Always => Durability::EveryCommit,
        AppendFsync::EverySec => Durability::Periodic(EVERYSEC_INTERVAL),
        AppendFsync::No => Durability::None,
    };
    WalConfig {
        durability,
        max_in_flight_bytes: LOG_IN_FLIGHT_BYTES_MAX,
        record_bytes_max: LOG_RECORD_BYTES_MAX,
        ..WalConfig::default()
    }
}

/// Lets go of the device a switch left behind. A write buffer's close
/// destages everything it holds and syncs the file (its records are
/// durable in the buffer already): a thread of its own does that, not the
/// event loop. Other devices close at once.
fn close_off_loop(old: Arc<dyn Device>) {
    if old.info().kind != ferrite_io::DeviceKind::Wbuf {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("log-close".into())
        .spawn(move || drop(old));
    if let Err(e) = spawned {
        // The device went with the failed closure: it closed here.
        tracing::warn!("could not close the old log off the event loop: {e}");
    }
}

/// The AOF on a wal; see the module documentation of [`super`].
#[derive(Debug)]
pub struct WalLog {
    wal: Arc<Wal>,
    committer: Committer,
    fsync: AppendFsync,
    /// Records encoded but not yet handed to the wal, in LSN order.
    batch: Batch,
    /// LSN of the last record handed out as a ticket (`appended` plus the
    /// records of `batch`, or more if a batch failed).
    queued: Lsn,
    /// LSN of the last record appended to the wal.
    appended: Lsn,
    /// LSN up to which a commit was asked for.
    requested: Lsn,
    /// LSN up to which the loop wrote the log itself (see
    /// [`WalLog::commit_inline`]).
    written_inline: Lsn,
    /// Payload bytes appended since the last sync was asked for.
    unsynced_bytes: u64,
    last_sync_request: Instant,
    /// Bytes of the current file when it was opened (header and recovered
    /// records) and the wal's device bytes counter then: the file's size is
    /// derived from them.
    file_base_bytes: u64,
    device_bytes_base: u64,
    /// The wal's payload bytes counter when the current file was opened,
    /// so INFO pmem divides the file's media bytes by its own records.
    payload_bytes_base: u64,
    /// Payload bytes of the records the current file held when opened.
    file_base_payload: u64,
}

impl WalLog {
    /// A log appending to `wal` (opened and replayed by the caller).
    /// `notify` wakes the event loop when records become acknowledged.
    pub fn new(
        wal: Wal,
        fsync: AppendFsync,
        notify: Box<dyn Fn() + Send + Sync>,
    ) -> Result<WalLog> {
        let file_base_bytes = wal.recovery().end_offset;
        let appended = wal.next_lsn() - 1;
        let wal = Arc::new(wal);
        let committer = Committer::start(Arc::clone(&wal), appended, notify).map_err(|source| {
            crate::Error::Io {
                op: "start the log committer thread",
                path: wal.device().path().to_path_buf(),
                source,
            }
        })?;
        Ok(WalLog {
            device_bytes_base: wal.stats().device_bytes,
            payload_bytes_base: wal.stats().payload_bytes,
            wal,
            committer,
            fsync,
            batch: Batch::new(),
            queued: appended,
            appended,
            requested: appended,
            written_inline: appended,
            unsynced_bytes: 0,
            last_sync_request: Instant::now(),
            file_base_bytes,
            file_base_payload: 0,
        })
    }

    /// Counts `bytes` of payload in the records the file held when it was
    /// opened (the replay read them), for [`LogInfo::command_bytes`].
    pub fn with_replayed_payload(mut self, bytes: u64) -> WalLog {
        self.file_base_payload = bytes;
        self
    }

    /// The wal underneath.
    pub fn wal(&self) -> &Wal {
        &self.wal
    }

    /// Whether the wal's own durability level already gives `fsync`'s
    /// durability at commit; if not (CONFIG SET appendfsync always on a wal
    /// opened for everysec), commits must also sync.
    fn commit_is_durable(&self) -> bool {
        self.wal.config().durability == Durability::EveryCommit
    }

    /// Whether the loop hands this iteration's records to the OS itself
    /// instead of through the committer thread: for `everysec` and `no` on
    /// a wal that never syncs in a commit, the commit is one `pwrite` into
    /// the page cache (or nothing, while a background sync runs: Redis's
    /// postponed write, which the committer thread then does before the
    /// replies go out), as in Redis's `beforeSleep`. The committer's two
    /// thread wake-ups per batch cost more than that write (measured: ~1.9
    /// context switches per SET with 4 clients). Syncs never run here.
    fn commit_inline(&self, sync: bool) -> bool {
        !sync
            && self.fsync != AppendFsync::Always
            && matches!(
                self.wal.config().durability,
                Durability::Periodic(_) | Durability::None
            )
    }
}

impl CommandLog for WalLog {
    fn append(&mut self, record: &Propagation) -> Ticket {
        if !record::holds_anything(record) {
            return self.queued;
        }
        if self.committer.shared().failed() {
            return Ticket::MAX;
        }
        let before = self.batch.payload_bytes();
        self.batch.push_with(|out| record::encode_into(record, out));
        self.unsynced_bytes += (self.batch.payload_bytes() - before) as u64;
        self.queued += 1;
        let ticket = self.queued;
        if self.batch.payload_bytes() >= BATCH_BYTES_MAX {
            self.drain();
        }
        ticket
    }

    fn drain(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        match self.wal.append_batch(&mut self.batch) {
            Ok(last) if last == self.queued => self.appended = last,
            // Tickets name LSNs the wal did not give: none of them may be
            // acknowledged, so the log refuses writes as after a failure.
            Ok(last) => self.committer.shared().fail(format!(
                "the log gave records up to LSN {last} where {} was expected (another appender?)",
                self.queued
            )),
            // The commands ran but are not in the log: they must never be
            // acknowledged (their tickets lie past `appended`, which the
            // durable LSN never passes now), and the log refuses writes
            // from now on.
            Err(e) => self.committer.shared().fail(e.to_string()),
        }
    }

    fn flush(&mut self) {
        self.drain();
        // On persistent memory the append made the record durable already.
        if self.appended <= self.requested || self.wal.durable_lsn() >= self.appended {
            return;
        }
        let sync = match self.fsync {
            AppendFsync::Always => !self.commit_is_durable(),
            AppendFsync::No => self.unsynced_bytes >= NO_FSYNC_SYNC_EVERY_BYTES,
            AppendFsync::EverySec => false,
        };
        if sync {
            self.unsynced_bytes = 0;
        }
        self.requested = self.appended;
        if self.commit_inline(sync) {
            match self.wal.commit(self.appended) {
                Ok(()) => {
                    // Only what reached the OS is acknowledged: a write
                    // postponed behind a running sync would not survive a
                    // crash of the process. The committer thread writes it,
                    // waiting behind the sync, and wakes the loop then; the
                    // loop itself never waits.
                    self.written_inline = self.wal.written_lsn().min(self.appended);
                    if self.written_inline < self.appended {
                        self.committer.request(self.appended, false);
                    }
                }
                // Not written: never acknowledged, and the log refuses
                // writes from now on.
                Err(e) => self.committer.shared().fail(e.to_string()),
            }
            return;
        }
        self.committer.request(self.appended, sync);
    }

    fn acknowledged(&self) -> Ticket {
        let durable = self.wal.durable_lsn();
        match self.fsync {
            AppendFsync::Always => durable,
            AppendFsync::EverySec | AppendFsync::No => durable
                .max(self.committer.shared().committed())
                .max(self.written_inline),
        }
    }

    fn tick(&mut self) {
        // A failed background sync (everysec) poisons the wal while no
        // commit is running: notice it within one tick, not at the next
        // write, so INFO and MISCONF say why at once.
        if let Some(e) = self.wal.refusal() {
            if self.committer.shared().failure().is_none() {
                self.committer.shared().fail(e.to_string());
            }
        }
        // A wal opened for `everysec` syncs on its own thread; one opened for
        // another level syncs here once a second if `everysec` was set later.
        let periodic = matches!(self.wal.config().durability, Durability::Periodic(_));
        if self.fsync == AppendFsync::EverySec
            && !periodic
            && self.last_sync_request.elapsed() >= EVERYSEC_INTERVAL
            && self.wal.durable_lsn() < self.appended
        {
            self.last_sync_request = Instant::now();
            self.unsynced_bytes = 0;
            self.committer.request(self.appended, true);
        }
    }

    fn set_release_cache(&mut self, release: bool) {
        self.wal.set_release_cache(release);
    }

    fn set_everysec_sync_bytes(&mut self, bytes: u64) {
        self.wal.set_periodic_sync_bytes(bytes);
    }

    fn set_fsync(&mut self, fsync: AppendFsync) {
        if fsync == self.fsync {
            return;
        }
        self.fsync = fsync;
        if fsync == AppendFsync::Always && !self.commit_is_durable() {
            // Replies already waiting are now waiting for durability.
            self.committer.request(self.appended, true);
        }
        tracing::info!(
            "appendfsync is now {}; the log was opened for {:?}, a weaker level keeps that level's syncs until restart",
            fsync.name(),
            self.wal.config().durability
        );
    }

    fn failure(&self) -> Option<String> {
        self.committer.shared().failure()
    }

    fn info(&self, into: &mut LogInfo) {
        let device = self.wal.device();
        let info = device.info();
        let stats = self.wal.stats();
        into.enabled = true;
        into.device = info.kind.name().to_string();
        into.pmem_mode = info
            .pmem_mode
            .map(|m| m.name().to_string())
            .unwrap_or_default();
        into.current_size = self.file_base_bytes + stats.device_bytes - self.device_bytes_base;
        into.appends = stats.records;
        into.commits = stats.batches;
        into.syncs = stats.syncs;
        into.mean_batch = stats.batch_mean;
        into.commit_wait_us_total = stats.wait.as_micros() as u64;
        into.durable_lsn = self.wal.durable_lsn();
        into.delayed_fsync = stats.delayed_syncs;
        into.postponed_writes = stats.postponed_writes;
        into.flushes_per_write = stats.flushes_per_record().unwrap_or(0.0);
        into.flush = stats.flush;
        into.payload_bytes = stats.payload_bytes - self.payload_bytes_base;
        into.command_bytes = self.file_base_payload + into.payload_bytes;
        into.device_counters = device.counters();
    }

    fn switch(&mut self, next: Arc<dyn Device>) -> Result<SwitchPoint> {
        self.drain();
        if let Some(why) = self.failure() {
            // Records given tickets are lost: the old file does not end
            // where the keyspace says the log does.
            return Err(crate::Error::Io {
                op: "switch the log to a new file",
                path: next.path().to_path_buf(),
                source: std::io::Error::other(why),
            });
        }
        let old_path = self.wal.device().path().to_path_buf();
        let new_path = next.path().to_path_buf();
        let before = self.wal.stats();
        let old = self.wal.switch(next)?;
        close_off_loop(old);
        // The loop is the only appender, so nothing came in between.
        let last_in_old = self.wal.next_lsn() - 1;
        debug_assert_eq!(last_in_old, self.appended);
        self.file_base_bytes = ferrite_wal::record::LOG_HEADER_LEN as u64;
        self.device_bytes_base = before.device_bytes;
        self.payload_bytes_base = before.payload_bytes;
        self.file_base_payload = 0;
        Ok(SwitchPoint {
            last_in_old,
            old_path,
            new_path,
        })
    }

    fn prepare_switch(&mut self) -> SyncWait {
        self.drain();
        self.wal.sync_soon();
        let wal = Arc::clone(&self.wal);
        Box::new(move || {
            wal.sync()?;
            Ok(())
        })
    }

    fn sync_wait(&mut self) -> SyncWait {
        self.drain();
        let wal = Arc::clone(&self.wal);
        Box::new(move || {
            wal.sync_soon();
            wal.sync()?;
            Ok(())
        })
    }

    fn close(&mut self) -> Result<()> {
        self.flush();
        self.committer.stop();
        if let Some(why) = self.failure() {
            tracing::warn!("closing a failed log: {why}");
            return Ok(());
        }
        self.wal.sync()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_io::{GatedSync, SimFile};
    use std::time::Instant;

    fn set(key: &str) -> Propagation {
        let mut p = Propagation::default();
        p.push(0, &[b"SET", key.as_bytes(), b"v"]);
        p
    }

    /// At `everysec` the event loop does not write during a sync: its
    /// record is not yet in the OS's hands, so its reply must wait for the
    /// write, which the committer thread does without waiting for the sync
    /// (else a crash of the process could lose an acknowledged write, or
    /// every client would wait for the sync).
    #[test]
    fn a_record_postponed_behind_a_slow_sync_is_acknowledged_once_written_before_the_sync_ends() {
        let gated = Arc::new(GatedSync::new(Arc::new(SimFile::new("everysec.aof"))));
        let wal = Wal::open(gated.clone(), wal_config(AppendFsync::EverySec, false)).expect("open");
        let mut log = WalLog::new(wal, AppendFsync::EverySec, Box::new(|| {})).expect("log");
        let first = log.append(&set("first"));
        log.flush();
        assert!(log.acknowledged() >= first, "written inline at once");

        gated.close();
        log.wal().sync_soon();
        gated.wait_for_sync();
        let second = log.append(&set("second"));
        log.flush();
        let postponed = log.wal().stats().postponed_writes;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // Acknowledged, then written: what was acknowledged must have
            // been written by the time it is looked at.
            let acknowledged = log.acknowledged();
            let written = log.wal().written_lsn();
            if acknowledged >= second {
                assert!(written >= second, "acknowledged before its write");
                break;
            }
            if Instant::now() > deadline {
                gated.open();
                panic!("never acknowledged while the sync hangs");
            }
            std::thread::yield_now();
        }
        let durable = log.wal().durable_lsn();
        gated.open();
        assert_eq!(postponed, 1, "the loop left the write to the committer");
        assert!(durable < second, "acknowledged while the sync still hung");
    }
}
