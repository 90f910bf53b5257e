//! Shutdown as Redis 7.0 orders it: SIGTERM and SIGINT only record the
//! request, and the timer acts on it (so `DEBUG PAUSE-CRON` holds it and
//! `SHUTDOWN ABORT` can cancel it); SHUTDOWN and a signal then share one
//! preparation, which saves `dump.rdb` when Redis would and, when that save
//! fails, keeps the server serving unless FORCE was given.
//!
//! Durability: the log is written before a reply acknowledges a write, so
//! every exit path (including the second SIGINT that exits at once) leaves
//! every acknowledged write in the log. With `appendonly no` and save
//! points, the server leaves only after `dump.rdb` is saved, or not at all.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use signal_hook::consts::{SIGINT, SIGTERM};

use crate::state::State;

/// What the signal thread and the event loop share.
#[derive(Debug, Default, Clone)]
pub struct Shared {
    /// The last SIGTERM or SIGINT not yet acted on (0 for none).
    pub pending: Arc<AtomicI32>,
    /// A shutdown is being prepared (a save may be running): a SIGINT now
    /// exits at once, as Redis does when the user insists.
    pub preparing: Arc<AtomicBool>,
    /// The directory a save writes its temporary file in, for that exit.
    pub dir: Arc<Mutex<PathBuf>>,
}

/// SHUTDOWN's options, from the command or from `shutdown-on-sig*`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Flags {
    /// NOSAVE: no save even with save points.
    pub nosave: bool,
    /// SAVE: a save even without save points.
    pub save: bool,
    /// FORCE: exit even when the save fails.
    pub force: bool,
}

impl Flags {
    /// The flags a `shutdown-on-sigterm`/`shutdown-on-sigint` value names
    /// (`default` names none; the value was checked by CONFIG SET).
    pub fn from_config(value: &str) -> Flags {
        let mut flags = Flags::default();
        for word in value.split_whitespace() {
            match word.to_ascii_lowercase().as_str() {
                "nosave" => flags.nosave = true,
                "save" => flags.save = true,
                "force" => flags.force = true,
                _ => {}
            }
        }
        flags
    }
}

/// Starts the thread that receives SIGTERM and SIGINT and records them for
/// the loop, waking it through `wake`.
pub fn listen(shared: &Shared, wake: impl Fn() + Send + 'static) -> std::io::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])?;
    let shared = shared.clone();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                on_signal(&shared, signal);
                wake();
            }
        })?;
    Ok(())
}

/// One signal: recorded, or, for a SIGINT while a shutdown is prepared,
/// the exit at once with the save's temporary file removed.
fn on_signal(shared: &Shared, signal: i32) {
    if signal == SIGINT && shared.preparing.load(Ordering::SeqCst) {
        tracing::warn!("You insist on shutting down: exiting now, the save abandoned.");
        let dir = shared.dir.lock().map(|d| d.clone()).unwrap_or_default();
        let temp = dir.join(crate::rdb::dump::temp_name());
        if let Err(e) = std::fs::remove_file(&temp) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!("cannot remove {}: {e}", temp.display());
            }
        }
        std::process::exit(1);
    }
    let name = if signal == SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    };
    tracing::warn!("Received {name}: scheduling shutdown...");
    shared.pending.store(signal, Ordering::SeqCst);
}

/// The flags configured for a pending signal, taking it; `None` when no
/// signal is pending.
pub fn take_signal(state: &mut State) -> Option<Flags> {
    let signal = state.shutdown.pending.swap(0, Ordering::SeqCst);
    let value = match signal {
        0 => return None,
        SIGINT => &state.config.shutdown_on_sigint,
        _ => &state.config.shutdown_on_sigterm,
    };
    Some(Flags::from_config(value))
}

/// SHUTDOWN ABORT: cancels a signalled shutdown not yet acted on.
pub fn abort(state: &mut State) -> bool {
    if state.shutdown.pending.swap(0, Ordering::SeqCst) == 0 {
        return false;
    }
    tracing::warn!("Shutdown manually aborted.");
    true
}

/// Prepares the exit: stops a running BGSAVE and, with `appendonly no`,
/// saves `dump.rdb` when asked or when save points are configured.
/// Returns whether the server exits: `false` when it must keep serving
/// (the save failed without FORCE).
pub fn prepare(state: &mut State, flags: Flags) -> bool {
    let points = !crate::rdb::persist::save_points(state).is_empty();
    if !state.config.appendonly && !flags.nosave && (flags.save || points) {
        if let Some(mut job) = state.rdb.job.take() {
            job.running.stop_and_join();
        }
        if let Ok(mut dir) = state.shutdown.dir.lock() {
            *dir = state.config.dir.clone();
        }
        state.shutdown.preparing.store(true, Ordering::SeqCst);
        let saved = crate::rdb::persist::save_now(state);
        state.shutdown.preparing.store(false, Ordering::SeqCst);
        match saved {
            Ok(_) => state.rdb.shutdown_saved = true,
            Err(e) => {
                tracing::warn!("Error trying to save the DB, can't exit: {e}");
                if !flags.force {
                    tracing::warn!(
                        "Errors trying to shut down the server. Check the logs for more information."
                    );
                    return false;
                }
            }
        }
    }
    state.rdb.shutdown_saved |= flags.nosave;
    state.shutdown_requested = true;
    true
}
