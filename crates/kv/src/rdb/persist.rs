//! The RDB productions of a running server (`docs/rdb.md`): at most one
//! at a time, either a BGSAVE to `dump.rdb` or the stream of a full sync;
//! SAVE's synchronous save; and the figures INFO reports about them.

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use super::dump;
use super::produce::{self, Controls, History, Msg, Running, Snapshot};
use crate::rewrite::fs::RealFs;
use crate::state::{unix_ms, State};

/// What a production feeds.
#[derive(Debug)]
pub enum JobKind {
    /// `dump.rdb` (BGSAVE, a save point).
    File,
    /// Full syncs: the replicas' connection indexes, and the 40-byte mark
    /// that ends their `$EOF:` payload.
    Replicas { targets: Vec<usize>, mark: String },
}

/// The running production.
#[derive(Debug)]
pub struct Job {
    pub running: Running,
    pub kind: JobKind,
    /// `rdb_changes_since_last_save` when it started: a BGSAVE that
    /// succeeds leaves only the changes made since.
    pub changes_at_start: u64,
}

/// The server's RDB state.
pub struct RdbState {
    pub job: Option<Job>,
    /// `rdb-key-save-delay`, shared with every worker.
    pub key_delay: Arc<AtomicI32>,
    /// Wakes the event loop (set once the server has its waker).
    pub wake: Option<Arc<dyn Fn() + Send + Sync>>,
    /// BGSAVE SCHEDULE waits for the running production.
    pub scheduled: bool,
    pub last_bgsave_ok: bool,
    /// Seconds the last BGSAVE took, -1 before the first.
    pub last_bgsave_time_s: i64,
    /// When the last BGSAVE failed (Unix ms): save points wait 5 s then.
    pub last_failure_ms: i64,
    /// Saves completed (`rdb_saves`).
    pub saves: u64,
    pub last_load_keys_loaded: u64,
    pub last_load_keys_expired: u64,
    /// Keys `dump.rdb` held already expired, deleted once the server has
    /// the file's history (start-up).
    pub expired_at_load: Vec<(usize, Vec<u8>)>,
    /// SHUTDOWN already saved (a later exit path must not save again).
    pub shutdown_saved: bool,
}

impl Default for RdbState {
    fn default() -> RdbState {
        RdbState {
            job: None,
            key_delay: Arc::default(),
            wake: None,
            scheduled: false,
            last_bgsave_ok: true,
            last_bgsave_time_s: -1,
            last_failure_ms: 0,
            saves: 0,
            last_load_keys_loaded: 0,
            last_load_keys_expired: 0,
            expired_at_load: Vec::new(),
            shutdown_saved: false,
        }
    }
}

impl fmt::Debug for RdbState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RdbState")
            .field("job", &self.job)
            .field("saves", &self.saves)
            .finish_non_exhaustive()
    }
}

/// The file `dir`/`dbfilename` names.
pub fn file_location(state: &State) -> (PathBuf, String) {
    (state.config.dir.clone(), state.config.dbfilename.clone())
}

/// The history to write into a snapshot: the server's ID and offset when
/// it has one (a backlog), and the database its stream is in.
fn history(state: &State) -> Option<History> {
    let repl = &state.repl;
    repl.backlog.as_ref()?;
    let stream_db = if repl.is_replica() {
        repl.stream_db
    } else {
        repl.seldb.unwrap_or(0)
    };
    Some(History {
        replid: repl.replid.clone(),
        offset: repl.offset,
        stream_db,
    })
}

/// Takes a snapshot of the dataset now (between two commands).
pub fn snapshot(state: &State) -> Snapshot {
    let libraries = state
        .functions
        .iter()
        .map(|(_, lib)| lib.code.clone())
        .collect();
    Snapshot::take(
        &state.keyspace,
        libraries,
        history(state),
        state.used_memory_bytes,
    )
}

/// Fresh controls sharing the server's delay cell.
fn controls(state: &State) -> Controls {
    state
        .rdb
        .key_delay
        .store(state.config.rdb_key_save_delay, Ordering::Relaxed);
    Controls {
        key_delay: Arc::clone(&state.rdb.key_delay),
        ..Controls::default()
    }
}

fn wake_of(state: &State) -> Arc<dyn Fn() + Send + Sync> {
    state.rdb.wake.clone().unwrap_or_else(|| Arc::new(|| {}))
}

/// BGSAVE: starts the production of `dump.rdb` on a worker thread.
pub fn start_bgsave(state: &mut State) -> Result<(), String> {
    if state.rdb.job.is_some() {
        return Err("Background save already in progress".into());
    }
    let snap = snapshot(state);
    let (dir, name) = file_location(state);
    let keys = snap.keys();
    let running = produce::spawn(
        "rdb-bgsave",
        keys,
        controls(state),
        wake_of(state),
        move |controls, _sink| dump::save(&RealFs, &dir, &name, snap, controls),
    )
    .map_err(|e| format!("cannot start the save thread: {e}"))?;
    tracing::info!("Background saving started");
    state.rdb.job = Some(Job {
        running,
        kind: JobKind::File,
        changes_at_start: state.rewrite.changes_since_save,
    });
    Ok(())
}

/// Starts the stream of a full sync for the replicas at `targets`; the
/// caller sends them `$EOF:<mark>` and then the chunks.
pub fn start_sync(state: &mut State, targets: Vec<usize>) -> Result<String, String> {
    if state.rdb.job.is_some() {
        return Err("a production is already running".into());
    }
    let snap = snapshot(state);
    let keys = snap.keys();
    let mark = crate::server::repl::random_id();
    let running = produce::spawn(
        "rdb-sync",
        keys,
        controls(state),
        wake_of(state),
        move |controls, sink| {
            produce::encode(snap, false, controls, sink).map_err(|e| e.to_string())
        },
    )
    .map_err(|e| format!("cannot start the sync thread: {e}"))?;
    state.rdb.job = Some(Job {
        running,
        kind: JobKind::Replicas {
            targets,
            mark: mark.clone(),
        },
        changes_at_start: state.rewrite.changes_since_save,
    });
    Ok(mark)
}

/// SAVE (and SHUTDOWN's, DEBUG RELOAD's save): writes `dump.rdb` on this
/// thread. A BGSAVE still running is stopped first: both would write the
/// same temporary file.
pub fn save_now(state: &mut State) -> Result<u64, String> {
    if state
        .rdb
        .job
        .as_ref()
        .is_some_and(|job| matches!(job.kind, JobKind::File))
    {
        state.rdb.job = None;
    }
    let snap = snapshot(state);
    let (dir, name) = file_location(state);
    let controls = controls(state);
    let keys = dump::save(&RealFs, &dir, &name, snap, &controls)?;
    let all = state.rewrite.changes_since_save;
    saved(state, all);
    tracing::info!("DB saved on disk");
    Ok(keys)
}

/// FLUSHALL: a running BGSAVE would write the data just emptied, so it is
/// stopped (the worker removes its temporary file), as Redis kills its
/// RDB child then. The changes it would have saved stay counted and
/// `rdb_last_bgsave_status` is left as it was, as Redis leaves them for a
/// child it killed on purpose. A full sync's production goes on.
pub fn stop_bgsave(state: &mut State) {
    let file_job = state
        .rdb
        .job
        .as_ref()
        .is_some_and(|job| matches!(job.kind, JobKind::File));
    if file_job {
        state.rdb.job = None;
        tracing::info!("Background saving stopped: the dataset was flushed");
    }
}

/// A save completed: LASTSAVE, and the changes it holds (`saved_changes`
/// of them; those made while it ran are still to save).
fn saved(state: &mut State, saved_changes: u64) {
    state.start_unix_s = unix_ms() / 1000;
    state.rdb.saves += 1;
    let rewrite = &mut state.rewrite;
    rewrite.changes_since_save = rewrite.changes_since_save.saturating_sub(saved_changes);
}

/// DEBUG RELOAD with `appendonly no`: saves `dump.rdb` (when `save`),
/// empties the dataset and loads the file back, as Redis does.
pub fn reload(state: &mut State, save: bool) -> Result<(), String> {
    if save {
        save_now(state)?;
    }
    let (dir, name) = file_location(state);
    let mut keyspace = crate::keyspace::Keyspace::new(state.keyspace.databases());
    let now = unix_ms();
    keyspace.now_ms = now;
    let loaded = dump::load(&RealFs, &dir, &name, &mut keyspace, false, now)?
        .ok_or_else(|| format!("{} does not exist", dir.join(&name).display()))?;
    state.keyspace = keyspace;
    state.functions = Default::default();
    crate::commands::load_libraries(state, &loaded.libraries)?;
    Ok(())
}

/// Takes the result of a finished file production.
pub fn finish_file(state: &mut State, job: &Job, result: Result<u64, String>) {
    let secs = job.running.started.elapsed().as_secs() as i64;
    state.rdb.last_bgsave_time_s = secs;
    match result {
        Ok(keys) => {
            state.rdb.last_bgsave_ok = true;
            saved(state, job.changes_at_start);
            tracing::info!("Background saving terminated with success ({keys} keys)");
        }
        Err(e) => {
            state.rdb.last_bgsave_ok = false;
            state.rdb.last_failure_ms = unix_ms();
            tracing::warn!("Background saving error: {e}");
        }
    }
}

/// Polls a file production; true when it ended (its result taken).
pub fn poll_file(state: &mut State) -> bool {
    let Some(job) = &state.rdb.job else {
        return false;
    };
    if !matches!(job.kind, JobKind::File) {
        return false;
    }
    let result = match job.running.rx.try_recv() {
        Ok(Msg::Done(result)) => result,
        Ok(Msg::Chunk(_)) => return false,
        Err(std::sync::mpsc::TryRecvError::Empty) => return false,
        Err(std::sync::mpsc::TryRecvError::Disconnected) => Err("the save thread died".into()),
    };
    if let Some(job) = state.rdb.job.take() {
        finish_file(state, &job, result);
    }
    true
}

/// Whether a save point asks for a BGSAVE now: `save <seconds> <changes>`
/// pairs, at least `changes` writes and `seconds` since the last save;
/// after a failure, not before 5 seconds, as Redis.
pub fn save_point_due(state: &State) -> bool {
    if state.config.appendonly || state.rdb.job.is_some() {
        return false;
    }
    let now = unix_ms();
    if !state.rdb.last_bgsave_ok && now - state.rdb.last_failure_ms < 5000 {
        return false;
    }
    let changes = state.rewrite.changes_since_save;
    let since_s = now / 1000 - state.start_unix_s;
    save_points(state)
        .into_iter()
        .any(|(secs, min)| changes >= min && since_s >= secs)
}

/// The configured `save` pairs.
pub fn save_points(state: &State) -> Vec<(i64, u64)> {
    let numbers: Vec<&str> = state.config.save.split_whitespace().collect();
    numbers
        .chunks(2)
        .filter_map(|pair| match pair {
            [s, c] => Some((s.parse().ok()?, c.parse().ok()?)),
            _ => None,
        })
        .collect()
}

/// INFO persistence's RDB fields.
pub fn info_fields(state: &State) -> String {
    let rdb = &state.rdb;
    let (in_progress, current_s, processed, total) = match &rdb.job {
        Some(job) => (
            1,
            job.running.started.elapsed().as_secs() as i64,
            job.running.controls.processed.load(Ordering::Relaxed),
            job.running.keys_total,
        ),
        None => (0, -1, 0, 0),
    };
    format!(
        "current_save_keys_processed:{processed}\r\ncurrent_save_keys_total:{total}\r\nrdb_changes_since_last_save:{}\r\nrdb_bgsave_in_progress:{in_progress}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\nrdb_last_bgsave_time_sec:{}\r\nrdb_current_bgsave_time_sec:{current_s}\r\nrdb_saves:{}\r\nrdb_last_cow_size:0\r\nrdb_last_load_keys_expired:{}\r\nrdb_last_load_keys_loaded:{}\r\n",
        state.rewrite.changes_since_save,
        state.start_unix_s,
        if rdb.last_bgsave_ok { "ok" } else { "err" },
        rdb.last_bgsave_time_s,
        rdb.saves,
        rdb.last_load_keys_expired,
        rdb.last_load_keys_loaded,
    )
}
