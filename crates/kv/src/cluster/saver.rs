//! The thread that writes `nodes.conf` (`docs/cluster.md`). Each save
//! replaces the file atomically with two `fsync`s, which on a busy disk
//! can take seconds; neither the bus thread nor a waiting client may hold
//! anything the other needs meanwhile. So saves are requests: whoever
//! changes the table asks for a save and gets a generation number; this
//! thread takes the table's text under its lock (a copy, released at
//! once), writes it outside the lock, and then publishes the generation
//! it reached. Requests made while a save runs are folded into the next
//! one, as that save takes the table as it is by then.
//!
//! The bus thread only asks and never waits: a reply that Redis sends
//! only after the change is on disk (a failover vote) is held by the bus
//! until this thread reports the generation saved. A CLUSTER command on
//! the event loop waits for its generation before it replies, as Redis
//! saves the table before the reply is written.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use super::Shared;

/// How often the thread looks at the stop flag while idle.
const IDLE_CHECK: Duration = Duration::from_millis(100);

/// What the saver has done: the highest generation whose table is on
/// disk, and the error of the last attempt if it failed.
#[derive(Debug, Default)]
pub struct Progress {
    pub saved: u64,
    pub failed: Option<(u64, String)>,
}

/// The requests and the progress, shared by the saver and its callers.
#[derive(Debug, Default)]
pub struct SaveQueue {
    /// The newest generation asked for.
    wanted: Mutex<u64>,
    wanted_cond: Condvar,
    progress: Mutex<Progress>,
    progress_cond: Condvar,
}

impl SaveQueue {
    /// Asks for a save of the table as it is now; returns the generation
    /// to wait for.
    pub fn request(&self) -> u64 {
        let generation = {
            let mut wanted = self.wanted.lock().unwrap_or_else(PoisonError::into_inner);
            *wanted += 1;
            *wanted
        };
        self.wanted_cond.notify_one();
        generation
    }

    /// The newest generation asked for.
    pub fn newest(&self) -> u64 {
        *self.wanted.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `generation` is saved: `Some(Ok)` once on disk, `Some(Err)`
    /// when the save meant to cover it failed, `None` while pending.
    pub fn status(&self, generation: u64) -> Option<Result<(), String>> {
        let progress = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        status_of(&progress, generation)
    }

    /// Blocks until `generation` is saved or its save failed.
    pub fn wait(&self, generation: u64) -> Result<(), String> {
        let mut progress = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(result) = status_of(&progress, generation) {
                return result;
            }
            progress = self
                .progress_cond
                .wait(progress)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

fn status_of(progress: &Progress, generation: u64) -> Option<Result<(), String>> {
    if progress.saved >= generation {
        return Some(Ok(()));
    }
    match &progress.failed {
        Some((at, error)) if *at >= generation => Some(Err(error.clone())),
        _ => None,
    }
}

/// Starts the saver thread of `shared`.
pub fn spawn(shared: Arc<Shared>) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("cluster-conf".into())
        .spawn(move || run(&shared))
}

fn run(shared: &Shared) {
    let queue = &shared.saves;
    let mut done = 0;
    loop {
        let target = {
            let mut wanted = queue.wanted.lock().unwrap_or_else(PoisonError::into_inner);
            while *wanted <= done {
                if shared.stop.load(Ordering::Relaxed) {
                    return;
                }
                wanted = queue
                    .wanted_cond
                    .wait_timeout(wanted, IDLE_CHECK)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            *wanted
        };
        // The text is taken after `target` was read, so it holds every
        // change made before any request up to `target`.
        let result = shared.write_table();
        {
            let mut progress = queue
                .progress
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match result {
                Ok(()) => progress.saved = target,
                Err(e) => {
                    tracing::warn!("can't update the cluster config file: {e}");
                    progress.failed = Some((target, e.to_string()));
                    // The next change asks again; the table stays dirty.
                    shared.lock().dirty = true;
                }
            }
        }
        done = target;
        queue.progress_cond.notify_all();
        shared.wake_bus();
    }
}
