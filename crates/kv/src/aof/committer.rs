//! The committer thread: commits the wal on behalf of the event loop, so
//! the loop never waits for a write or an fsync.
//!
//! The loop appends records (the wal only frames them into its buffer on a
//! disk file) and asks for a commit up to the last one. The committer runs
//! `Wal::commit` (one write and, for `always`, one `fdatasync` covering
//! everything appended before it started: the group commit), publishes how
//! far it got and wakes the loop through the mio waker. While it commits,
//! the loop goes on appending; the next commit takes all of that, so the
//! batch grows with the device's latency.
//!
//! At `everysec` and `no` the loop writes the log itself (see
//! `WalLog::commit_inline`); the committer then only runs syncs the loop
//! asked for (CONFIG SET appendfsync always on such a wal, `no`'s 64 MiB
//! sync).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use ferrite_wal::{Lsn, Wal};

/// What the loop asked for.
#[derive(Debug, Default)]
struct Request {
    /// Commit the log up to this LSN...
    target: Lsn,
    /// ... and make everything appended so far durable, whatever the wal's
    /// durability level (`always` on a wal opened for `everysec`, the
    /// once-a-second sync on a wal opened for `no`).
    sync: bool,
    stop: bool,
}

/// State shared by the loop and the committer thread.
pub(crate) struct CommitShared {
    request: Mutex<Request>,
    wake: Condvar,
    /// Every record up to this LSN was committed (handed to the OS, or
    /// durable if the commit asked for that).
    committed: AtomicU64,
    /// The first failure of the log; the log refuses writes from then on.
    failure: Mutex<Option<String>>,
    /// Whether `failure` is set: read for every appended record, so
    /// without taking a lock.
    failed: AtomicBool,
    notify: Box<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for CommitShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitShared")
            .field("committed", &self.committed)
            .field("failure", &self.failure)
            .finish_non_exhaustive()
    }
}

impl CommitShared {
    fn request(&self) -> MutexGuard<'_, Request> {
        self.request.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the first failure and wakes the loop to notice it.
    pub(crate) fn fail(&self, why: String) {
        let mut failure = self.failure.lock().unwrap_or_else(PoisonError::into_inner);
        if failure.is_none() {
            tracing::error!("log failure, refusing writes from now on: {why}");
            *failure = Some(why);
            self.failed.store(true, Ordering::Release);
        }
        drop(failure);
        (self.notify)();
    }

    pub(crate) fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether the log failed (then [`CommitShared::failure`] says why).
    pub(crate) fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    pub(crate) fn committed(&self) -> Lsn {
        self.committed.load(Ordering::Acquire)
    }
}

/// The committer thread and its handle.
#[derive(Debug)]
pub(crate) struct Committer {
    shared: Arc<CommitShared>,
    thread: Option<JoinHandle<()>>,
}

impl Committer {
    /// Starts the thread for `wal`, whose records up to `committed` are
    /// already on the medium. `notify` wakes the event loop.
    pub(crate) fn start(
        wal: Arc<Wal>,
        committed: Lsn,
        notify: Box<dyn Fn() + Send + Sync>,
    ) -> std::io::Result<Committer> {
        let shared = Arc::new(CommitShared {
            request: Mutex::new(Request {
                target: committed,
                ..Request::default()
            }),
            wake: Condvar::new(),
            committed: AtomicU64::new(committed),
            failure: Mutex::new(None),
            failed: AtomicBool::new(false),
            notify,
        });
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("ferrite-log-commit".into())
                .spawn(move || commit_loop(&wal, &shared))?
        };
        Ok(Committer {
            shared,
            thread: Some(thread),
        })
    }

    pub(crate) fn shared(&self) -> &CommitShared {
        &self.shared
    }

    /// Asks for a commit up to `target` (and a sync if `sync`); returns at
    /// once.
    pub(crate) fn request(&self, target: Lsn, sync: bool) {
        let mut request = self.shared.request();
        let more = target > request.target || (sync && !request.sync);
        request.target = request.target.max(target);
        request.sync |= sync;
        if more {
            self.shared.wake.notify_one();
        }
    }

    /// Lets the thread finish what was asked, then stops it.
    pub(crate) fn stop(&mut self) {
        self.shared.request().stop = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("the log committer thread panicked");
            }
        }
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn commit_loop(wal: &Wal, shared: &CommitShared) {
    loop {
        let (target, sync) = {
            let mut request = shared.request();
            loop {
                let pending = request.target > shared.committed() || request.sync;
                if pending || request.stop {
                    break;
                }
                request = shared
                    .wake
                    .wait(request)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if request.target <= shared.committed() && !request.sync {
                return;
            }
            let sync = std::mem::take(&mut request.sync);
            (request.target, sync)
        };
        // `sync` covers every record appended before it started, `target`
        // included; a commit returns as the wal's durability level says,
        // but never before its records are written (everysec postpones a
        // write behind a running sync; what this publishes is
        // acknowledged to clients).
        let result = if sync {
            wal.sync().map(drop)
        } else {
            wal.commit_written(target)
        };
        match result {
            Ok(()) => {
                shared.committed.fetch_max(target, Ordering::AcqRel);
                (shared.notify)();
            }
            Err(e) => {
                shared.fail(e.to_string());
                return;
            }
        }
    }
}
