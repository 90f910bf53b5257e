//! The event loop's side of the RDB productions (`docs/rdb.md`): moving a
//! full sync's chunks to its replicas as their sockets drain, ending the
//! sync with the `$EOF` mark (the stream since the snapshot follows from
//! the backlog at the replica's first ACK), collecting a
//! BGSAVE's result, the save points, `dump.rdb` at start-up and at exit.

use std::sync::atomic::Ordering;
use std::sync::mpsc::TryRecvError;
use std::sync::Arc;

use super::Server;
use crate::rdb::persist::{self, JobKind};
use crate::rdb::produce::Msg;
use crate::rewrite::fs::RealFs;
use crate::state::{unix_ms, State};

/// Unsent bytes a syncing replica may have before the loop stops moving
/// chunks to it: the worker then waits on its full channel.
const SYNC_UNSENT_MAX: usize = 4 << 20;

impl Server {
    /// Moves the running production on: called every loop iteration.
    pub(super) fn rdb_step(&mut self) {
        let delay = self.state.config.rdb_key_save_delay;
        self.state.rdb.key_delay.store(delay, Ordering::Relaxed);
        if persist::poll_file(&mut self.state) {
            self.start_scheduled_bgsave();
        }
        self.pump_sync();
    }

    /// Timer work: a due save point or a scheduled BGSAVE starts one.
    pub(super) fn rdb_cron(&mut self) {
        self.start_scheduled_bgsave();
        if persist::save_point_due(&self.state) {
            tracing::info!("save point reached: saving");
            if let Err(e) = persist::start_bgsave(&mut self.state) {
                tracing::warn!("cannot start a background save: {e}");
            }
        }
    }

    fn start_scheduled_bgsave(&mut self) {
        if self.state.rdb.scheduled && self.state.rdb.job.is_none() {
            self.state.rdb.scheduled = false;
            if let Err(e) = persist::start_bgsave(&mut self.state) {
                tracing::warn!("cannot start the scheduled background save: {e}");
            }
        }
    }

    /// Hands the sync's chunks to its replicas while none has more than
    /// [`SYNC_UNSENT_MAX`] unsent; ends the sync at the worker's result.
    fn pump_sync(&mut self) {
        loop {
            let Some(job) = &self.state.rdb.job else {
                return;
            };
            let JobKind::Replicas { targets, .. } = &job.kind else {
                return;
            };
            let full = targets.iter().any(|&i| {
                self.conns.get(i).and_then(Option::as_ref).is_some_and(|c| {
                    c.reply.buf.len().saturating_sub(c.out_sent) >= SYNC_UNSENT_MAX
                })
            });
            if full {
                return;
            }
            let result = match job.running.rx.try_recv() {
                Ok(Msg::Chunk(bytes)) => {
                    for index in targets.clone() {
                        if let Some(conn) = self.conns.get_mut(index).and_then(Option::as_mut) {
                            conn.reply.buf.extend_from_slice(&bytes);
                        }
                        self.mark_ready(index);
                    }
                    continue;
                }
                Ok(Msg::Done(result)) => result,
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => Err("the sync thread died".into()),
            };
            return self.end_sync(result);
        }
    }

    /// Ends a full sync: on success each replica gets the end mark (the
    /// stream since the snapshot follows at its first ACK,
    /// `replica_input`); on failure they are dropped (they retry and get a
    /// new sync).
    fn end_sync(&mut self, result: Result<u64, String>) {
        let Some(job) = self.state.rdb.job.take() else {
            return;
        };
        let JobKind::Replicas { targets, mark } = &job.kind else {
            return;
        };
        let secs = job.running.started.elapsed().as_secs_f64();
        match &result {
            Ok(keys) => tracing::info!(
                "Diskless sync of {keys} keys to {} replicas ended in {secs:.2} s",
                targets.len()
            ),
            Err(e) => tracing::warn!("Diskless sync failed: {e}"),
        }
        for &index in targets {
            if let Some(r) = self
                .state
                .repl
                .replicas
                .iter_mut()
                .find(|r| r.index == index)
            {
                r.rdb_sent = true;
            }
            let Some(mut conn) = self.conns.get_mut(index).and_then(Option::take) else {
                continue;
            };
            if result.is_err() {
                self.close(conn, index);
                continue;
            }
            conn.reply.buf.extend_from_slice(mark.as_bytes());
            self.conns[index] = Some(conn);
            self.mark_ready(index);
        }
    }

    /// A closed connection leaves the sync it was a target of; the
    /// production stops when no target is left.
    pub(super) fn forget_sync_target(&mut self, index: usize) {
        let Some(job) = &mut self.state.rdb.job else {
            return;
        };
        let JobKind::Replicas { targets, .. } = &mut job.kind else {
            return;
        };
        targets.retain(|&i| i != index);
        if targets.is_empty() {
            tracing::warn!("Diskless sync stopped: no replica left");
            // Dropping the job stops its worker and waits for it.
            self.state.rdb.job = None;
        }
    }

    /// At exit: stops a running production and, with `appendonly no` and
    /// save points, saves `dump.rdb` unless SHUTDOWN already did (or said
    /// NOSAVE).
    pub(super) fn rdb_at_exit(&mut self) {
        if let Some(mut job) = self.state.rdb.job.take() {
            job.running.stop_and_join();
        }
        let state = &mut self.state;
        if state.config.appendonly
            || state.rdb.shutdown_saved
            || persist::save_points(state).is_empty()
        {
            return;
        }
        if let Err(e) = persist::save_now(state) {
            tracing::warn!("Error trying to save the DB at exit: {e}");
        }
    }
}

/// Gives the productions a way to wake the loop.
pub(super) fn set_waker(state: &mut State, waker: Arc<mio::Waker>) {
    state.rdb.wake = Some(Arc::new(move || {
        let _ = waker.wake();
    }));
}

/// Loads `dump.rdb` at start-up when the log is off and the file exists;
/// its history (`repl-id`, `repl-offset`) becomes the log's mark would.
pub(super) fn load_at_startup(state: &mut State) -> crate::error::Result<()> {
    let (dir, name) = persist::file_location(state);
    let as_master = state.config.replicaof.is_empty();
    let started = std::time::Instant::now();
    let now = unix_ms();
    let loaded = crate::rdb::dump::load(&RealFs, &dir, &name, &mut state.keyspace, as_master, now)
        .map_err(|reason| crate::Error::Rewrite {
            reason: format!("cannot load the RDB file: {reason}"),
        })?;
    let Some(loaded) = loaded else {
        return Ok(());
    };
    crate::commands::load_libraries(state, &loaded.libraries).map_err(|reason| {
        crate::Error::Rewrite {
            reason: format!("cannot load a function library of the RDB file: {reason}"),
        }
    })?;
    tracing::info!(
        "DB loaded from disk: {} keys ({} expired) in {} ms",
        loaded.keys_loaded,
        loaded.keys_expired,
        started.elapsed().as_millis()
    );
    state.rdb.last_load_keys_loaded = loaded.keys_loaded;
    state.rdb.last_load_keys_expired = loaded.keys_expired;
    if let Some(h) = loaded.history {
        state.repl.log_mark = Some((h.replid, h.offset, h.stream_db));
    }
    state.rdb.expired_at_load = loaded.expired;
    Ok(())
}

/// Deletes the keys `dump.rdb` held already expired, once the file's
/// history is the server's: each DEL goes into the replication stream
/// (after a SELECT where the database changes), so a replica continuing
/// from that history deletes them too, or, when they overflow the
/// backlog, syncs in full, as with Redis.
pub(super) fn expire_loaded(state: &mut State) {
    for (db, key) in std::mem::take(&mut state.rdb.expired_at_load) {
        state.keyspace.remove(db, &key);
        let repl = &mut state.repl;
        if repl.backlog.is_none() {
            continue;
        }
        let mut bytes = Vec::new();
        if repl.seldb != Some(db) {
            let text = db.to_string();
            crate::commands::encode_command(&mut bytes, &[b"SELECT", text.as_bytes()]);
            repl.seldb = Some(db);
        }
        crate::commands::encode_command(&mut bytes, &[b"DEL", &key]);
        repl.advance(&bytes);
    }
}
