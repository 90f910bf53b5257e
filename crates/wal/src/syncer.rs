//! The background syncer of [`crate::Durability::Periodic`].

use std::sync::{Arc, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::group::Shared;

/// Starts the thread that syncs the log every `interval` while there is
/// something to sync, until the log is closed or poisoned.
pub(crate) fn spawn(shared: Arc<Shared>, interval: Duration) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("wal-syncer".into())
        .spawn(move || run(&shared, interval))
}

fn run(shared: &Shared, interval: Duration) {
    loop {
        let mut state = shared.lock();
        let deadline = Instant::now() + interval;
        loop {
            if state.closed || state.poison.is_some() {
                return;
            }
            if state.sync_soon {
                state.sync_soon = false;
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            state = shared
                .syncer_wake
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        if state.segment.self_persist {
            continue;
        }
        // A commit is writing: let it finish, then sync what it wrote. One
        // sync runs at a time here, so a sync slower than the interval
        // simply delays the next one.
        while state.io_active && !state.closed && state.poison.is_none() {
            state = shared.wait(state);
        }
        if state.closed || state.poison.is_some() || state.durable_lsn + 1 >= state.next_lsn {
            continue;
        }
        // Hand the buffered records to the OS, then sync without holding
        // the writers back (`Shared::sync_written`).
        if !state.buffer.is_empty() {
            let (next, result) = shared.leader_round(state, false);
            if let Err(e) = result {
                tracing::error!("periodic log write failed: {e}");
                return;
            }
            state = next;
            if state.closed || state.poison.is_some() {
                continue;
            }
        }
        // This sync covers every record appended so far: a request for an
        // early one made meanwhile (`periodic_sync_bytes`) is met by it.
        state.sync_soon = false;
        let (_state, result) = shared.sync_written(state);
        if let Err(e) = result {
            tracing::error!("periodic log sync failed: {e}");
            return;
        }
    }
}
