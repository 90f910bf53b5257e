//! [`DeviceLog`]: the AOF on an `io::Device`, with group commit.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ferrite_io::Device;

use super::{CommandLog, Ticket};
use crate::commands::{encode_command, Propagation};
use crate::config::AppendFsync;
use crate::state::LogInfo;

/// How often `everysec` syncs.
const EVERYSEC_INTERVAL: Duration = Duration::from_secs(1);
/// A sync running longer than this counts as delayed (Redis's
/// `aof_delayed_fsync`).
const DELAYED_FSYNC_AFTER: Duration = Duration::from_secs(2);

/// What the syncer thread is asked to do.
#[derive(Debug, Default)]
struct SyncRequest {
    /// Make the log durable up to this ticket...
    target: Ticket,
    /// ... which holds this many records.
    target_records: u64,
    stop: bool,
    /// When the running sync started, if one runs.
    syncing_since: Option<Instant>,
}

/// State shared with the syncer thread.
struct Shared {
    request: Mutex<SyncRequest>,
    wake: Condvar,
    durable: AtomicU64,
    durable_records: AtomicU64,
    commits: AtomicU64,
    failure: Mutex<Option<String>>,
    notify: Box<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("durable", &self.durable)
            .field("commits", &self.commits)
            .finish_non_exhaustive()
    }
}

impl Shared {
    fn fail(&self, why: String) {
        let mut failure = self.failure.lock().unwrap_or_else(PoisonError::into_inner);
        if failure.is_none() {
            tracing::error!("log failure, refusing writes from now on: {why}");
            *failure = Some(why);
        }
        drop(failure);
        (self.notify)();
    }

    fn failed(&self) -> bool {
        self.failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }
}

/// The AOF on a device; see the module documentation of [`super`].
#[derive(Debug)]
pub struct DeviceLog {
    device: Arc<dyn Device>,
    pending: Vec<u8>,
    pending_records: u64,
    /// Ticket of the last appended record (pending included).
    appended: Ticket,
    appended_records: u64,
    written: Ticket,
    written_records: u64,
    /// Database the log's last command ran in, to insert SELECT.
    last_db: Option<usize>,
    fsync: AppendFsync,
    durable_on_write: bool,
    last_everysec: Instant,
    delayed_fsync: u64,
    shared: Arc<Shared>,
    syncer: Option<JoinHandle<()>>,
}

impl DeviceLog {
    /// A log appending to `device`, whose current length is all replayed.
    /// `notify` wakes the event loop when durability advances.
    pub fn new(
        device: Arc<dyn Device>,
        fsync: AppendFsync,
        notify: Box<dyn Fn() + Send + Sync>,
    ) -> DeviceLog {
        let len = device.len();
        let shared = Arc::new(Shared {
            request: Mutex::new(SyncRequest {
                target: len,
                ..SyncRequest::default()
            }),
            wake: Condvar::new(),
            durable: AtomicU64::new(len),
            durable_records: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            failure: Mutex::new(device.poisoned()),
            notify,
        });
        let durable_on_write = device.info().durable_on_write;
        let syncer = {
            let (device, shared) = (Arc::clone(&device), Arc::clone(&shared));
            std::thread::Builder::new()
                .name("ferrite-log-sync".into())
                .spawn(move || syncer_loop(&*device, &shared))
                .ok()
        };
        DeviceLog {
            device,
            pending: Vec::new(),
            pending_records: 0,
            appended: len,
            appended_records: 0,
            written: len,
            written_records: 0,
            last_db: None,
            fsync,
            durable_on_write,
            last_everysec: Instant::now(),
            delayed_fsync: 0,
            shared,
            syncer,
        }
    }

    /// The device the log is on.
    pub fn device(&self) -> &Arc<dyn Device> {
        &self.device
    }

    fn request_sync(&self) {
        let mut request = self
            .shared
            .request
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if self.written > request.target {
            request.target = self.written;
            request.target_records = self.written_records;
            self.shared.wake.notify_one();
        }
    }
}

fn syncer_loop(device: &dyn Device, shared: &Shared) {
    loop {
        let (target, records) = {
            let mut request = shared
                .request
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            request.syncing_since = None;
            while request.target <= shared.durable.load(Ordering::Acquire) && !request.stop {
                request = shared
                    .wake
                    .wait(request)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if request.stop && request.target <= shared.durable.load(Ordering::Acquire) {
                return;
            }
            request.syncing_since = Some(Instant::now());
            (request.target, request.target_records)
        };
        if shared.failed() {
            return;
        }
        // One sync covers every append that returned before it started:
        // this is the group commit.
        match device.sync() {
            Ok(()) => {
                shared.durable.store(target, Ordering::Release);
                shared.durable_records.store(records, Ordering::Release);
                shared.commits.fetch_add(1, Ordering::Relaxed);
                (shared.notify)();
            }
            Err(e) => {
                shared.fail(e.to_string());
                return;
            }
        }
    }
}

impl CommandLog for DeviceLog {
    fn append(&mut self, record: &Propagation) -> Ticket {
        let Some(first_db) = record.first_db else {
            return self.appended;
        };
        let start = self.pending.len();
        let wrap = record.commands > 1;
        if self.last_db != Some(first_db) {
            let text = first_db.to_string();
            encode_command(&mut self.pending, &[b"SELECT", text.as_bytes()]);
        }
        if wrap {
            encode_command(&mut self.pending, &[b"MULTI"]);
        }
        self.pending.extend_from_slice(&record.buf);
        if wrap {
            encode_command(&mut self.pending, &[b"EXEC"]);
        }
        self.last_db = Some(record.last_db);
        self.appended += (self.pending.len() - start) as u64;
        self.pending_records += 1;
        self.appended_records += 1;
        self.appended
    }

    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        if self.shared.failed() {
            self.pending.clear();
            return;
        }
        match self.device.append(&self.pending) {
            Ok(_) => {
                self.written = self.appended;
                self.written_records = self.appended_records;
                if self.durable_on_write {
                    self.shared.durable.store(self.written, Ordering::Release);
                    self.shared
                        .durable_records
                        .store(self.written_records, Ordering::Release);
                    self.shared.commits.fetch_add(1, Ordering::Relaxed);
                } else if self.fsync == AppendFsync::Always {
                    self.request_sync();
                }
            }
            Err(e) => self.shared.fail(e.to_string()),
        }
        self.pending.clear();
        self.pending_records = 0;
    }

    fn acknowledged(&self) -> Ticket {
        match self.fsync {
            AppendFsync::Always => self.shared.durable.load(Ordering::Acquire),
            AppendFsync::EverySec | AppendFsync::No => self.written,
        }
    }

    fn tick(&mut self) {
        if self.fsync == AppendFsync::EverySec && self.last_everysec.elapsed() >= EVERYSEC_INTERVAL
        {
            self.last_everysec = Instant::now();
            let request = self
                .shared
                .request
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let slow = request
                .syncing_since
                .is_some_and(|t| t.elapsed() > DELAYED_FSYNC_AFTER);
            drop(request);
            if slow {
                self.delayed_fsync += 1;
            } else {
                self.request_sync();
            }
        }
    }

    fn set_fsync(&mut self, fsync: AppendFsync) {
        self.fsync = fsync;
        if fsync == AppendFsync::Always {
            self.request_sync();
        }
    }

    fn failure(&self) -> Option<String> {
        self.shared
            .failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn info(&self, into: &mut LogInfo) {
        let info = self.device.info();
        into.enabled = true;
        into.device = info.kind.name().to_string();
        into.pmem_mode = info
            .pmem_mode
            .map(|m| m.name().to_string())
            .unwrap_or_default();
        into.current_size = self.written;
        into.appends = self.appended_records;
        let commits = self.shared.commits.load(Ordering::Relaxed);
        into.commits = commits;
        let durable_records = self.shared.durable_records.load(Ordering::Relaxed);
        into.mean_batch = if commits == 0 {
            0.0
        } else {
            durable_records as f64 / commits as f64
        };
        into.delayed_fsync = self.delayed_fsync;
        if let Some(stats) = self.device.flush_stats() {
            into.flushes_per_write =
                stats.lines_flushed as f64 / self.appended_records.max(1) as f64;
        }
    }

    fn close(&mut self) -> crate::Result<()> {
        self.flush();
        {
            let mut request = self
                .shared
                .request
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            request.stop = true;
            self.shared.wake.notify_one();
        }
        if let Some(handle) = self.syncer.take() {
            let _ = handle.join();
        }
        if let Some(why) = self.failure() {
            tracing::warn!("closing a failed log: {why}");
            return Ok(());
        }
        self.device.sync()?;
        self.shared.durable.store(self.written, Ordering::Release);
        Ok(())
    }
}

impl Drop for DeviceLog {
    fn drop(&mut self) {
        if let Some(handle) = self.syncer.take() {
            {
                let mut request = self
                    .shared
                    .request
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                request.stop = true;
                self.shared.wake.notify_one();
            }
            let _ = handle.join();
        }
    }
}
