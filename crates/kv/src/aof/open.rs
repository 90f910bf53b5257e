//! Opening the log at start-up: choosing the device, recovering the wal
//! (a torn tail is dropped, damage in the middle refuses to start), and
//! replaying its records into the keyspace.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use ferrite_io::{Device, FileDevice, PmPolicy, PmemDevice};
use ferrite_pmem::MapMode;
use ferrite_wal::Recovery;

use super::replay::{open_and_replay, Replayer};
use super::wal_log::{wal_config, WalLog};
use super::wbuf_log::open_wbuf_log;
use super::{CommandLog, LogFiles, NullLog};
use crate::config::{Config, LogDevice};
use crate::error::{Error, Result};
use crate::rewrite::manifest::IncrKind;
use crate::state::{unix_ms, State};

fn open_pm(path: &Path) -> Result<Arc<dyn Device>> {
    // Each append persists its own record (copy, flush, fence) before it
    // returns: the wal's self-persisting path, no syncer thread.
    Ok(Arc::new(PmemDevice::open(path, PmPolicy::DrainEveryWrite)?))
}

/// Opens (creating) a log device at `path`: persistent memory (real or
/// emulated, as the file system allows) if `pm`, else a file with fsync.
/// For the files [`LogFiles`] names, e.g. the next file of a log switch.
pub fn open_device_at(path: &Path, pm: bool) -> Result<Arc<dyn Device>> {
    if pm {
        open_pm(path)
    } else {
        Ok(Arc::new(FileDevice::open(path)?))
    }
}

/// Creates the data directory `dir` if it does not exist.
pub fn create_data_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        op: "create data directory",
        path: dir.to_path_buf(),
        source,
    })
}

/// Opens (creating) the log device the configuration asks for.
pub fn open_device(config: &Config) -> Result<Arc<dyn Device>> {
    create_data_dir(&config.dir)?;
    let files = LogFiles::in_dir(&config.dir, &config.appendfilename);
    let existing = files.existing()?;
    let wrong_kind = |found: &Path| Error::Config {
        origin: "log-device".into(),
        reason: format!(
            "log-device is {} but the data directory holds {}; use the matching log-device",
            config.log_device.name(),
            found.display()
        ),
    };
    let device: Arc<dyn Device> = match (config.log_device, existing) {
        (LogDevice::File, Some((found, kind))) if kind != IncrKind::File => {
            return Err(wrong_kind(&found))
        }
        (LogDevice::Pmem | LogDevice::PmemEmulated, Some((found, kind)))
            if kind != IncrKind::Pm =>
        {
            return Err(wrong_kind(&found))
        }
        (LogDevice::Wbuf, Some((found, kind))) if kind != IncrKind::Wbuf => {
            return Err(wrong_kind(&found))
        }
        (LogDevice::File, _) | (LogDevice::Auto, Some((_, IncrKind::File))) => {
            Arc::new(FileDevice::open(&files.file)?)
        }
        (LogDevice::Pmem | LogDevice::PmemEmulated, _)
        | (LogDevice::Auto, Some((_, IncrKind::Pm))) => open_pm(&files.pm)?,
        // The buffer exists before its log file does (`wbuf_log`): a new
        // log creates both, an existing one needs its buffer.
        (LogDevice::Wbuf, None) => open_wbuf_log(&files.wbuf, config, true)?,
        (LogDevice::Wbuf, Some(_)) | (LogDevice::Auto, Some((_, IncrKind::Wbuf))) => {
            open_wbuf_log(&files.wbuf, config, false)?
        }
        (LogDevice::Auto, None) => {
            let pm = open_pm(&files.pm)?;
            if pm.info().pmem_mode == Some(MapMode::RealPm) {
                pm
            } else {
                drop(pm);
                // Not DAX: a file with fsync is what survives power loss here.
                let _ = std::fs::remove_file(&files.pm);
                Arc::new(FileDevice::open(&files.file)?)
            }
        }
    };
    check_new_device(config, &*device)?;
    Ok(device)
}

/// What every newly opened log device must pass: `log-device pmem`
/// refuses anything but real PM, and a log on emulated PM says loudly
/// what it survives (a write buffer warns about its own PM when it opens).
pub fn check_new_device(config: &Config, device: &dyn Device) -> Result<()> {
    let mode = device.info().pmem_mode;
    if config.log_device == LogDevice::Pmem && mode != Some(MapMode::RealPm) {
        return Err(Error::NoRealPm {
            path: device.path().to_path_buf(),
            mode: mode.map_or("a disk file", |m| m.name()).to_string(),
        });
    }
    if mode == Some(MapMode::Emulated) && device.info().kind != ferrite_io::DeviceKind::Wbuf {
        tracing::warn!(
            "THE LOG IS ON EMULATED PERSISTENT MEMORY ({}): acknowledged writes survive a crash of the process, NOT a power failure or a kernel crash",
            device.path().display()
        );
    }
    Ok(())
}

/// The log and what start-up found in it.
#[derive(Debug)]
pub struct OpenedLog {
    /// The log, ready for appends.
    pub log: Box<dyn CommandLog>,
    /// What the wal's recovery found, if a log was opened.
    pub recovery: Option<Recovery>,
}

/// Opens the log for `state.config`, replays it into `state`, and applies
/// Redis's rules for a damaged log: a torn tail is cut with a warning
/// (`aof-load-truncated yes`), damage in the middle refuses to start.
pub fn open_log(state: &mut State, notify: Box<dyn Fn() + Send + Sync>) -> Result<OpenedLog> {
    if !state.config.appendonly {
        return Ok(OpenedLog {
            log: Box::new(NullLog::default()),
            recovery: None,
        });
    }
    let device = open_device(&state.config)?;
    open_log_on(state, device, notify)
}

/// The kv error for a wal error at start-up: damage names the file, the
/// offset, the record and the command that repairs it.
pub(super) fn start_error(error: ferrite_wal::Error, dir: &str) -> Error {
    match error {
        ferrite_wal::Error::Corrupt {
            path,
            offset,
            lsn,
            reason,
        } => Error::CorruptLog {
            path,
            offset,
            lsn,
            reason,
            dir: dir.to_string(),
        },
        other => Error::Log(other),
    }
}

/// [`open_log`] on a given device (a simulated one in crash tests).
pub fn open_log_on(
    state: &mut State,
    device: Arc<dyn Device>,
    notify: Box<dyn Fn() + Send + Sync>,
) -> Result<OpenedLog> {
    let config = state.config.clone();
    let dir = config.dir.display().to_string();
    let started = Instant::now();
    if !config.aof_load_truncated {
        refuse_torn_tail(&*device, &dir)?;
    }
    let wal_config = wal_config(config.appendfsync, device.info().durable_on_write);
    let (wal, commands, payload) = open_and_replay(state, &device, wal_config, &dir)?;
    let recovery = wal.recovery().clone();
    if let Some(tail) = &recovery.torn_tail {
        tracing::warn!(
            "{}: the log ended with an incomplete record at offset {} (a crash during a write; {} bytes, never acknowledged); truncated, as aof-load-truncated yes allows",
            device.path().display(),
            tail.offset,
            tail.bytes
        );
        state.log.truncated_bytes = tail.bytes;
    }
    state.log.loaded_commands = commands;
    state.log.load_ms = started.elapsed().as_millis() as u64;
    state.log.base_size = recovery.end_offset;
    tracing::info!(
        "log {} ({}): replayed {} records ({} commands) in {} ms",
        device.path().display(),
        device.info().kind,
        recovery.records,
        commands,
        state.log.load_ms
    );
    let mut log = WalLog::new(wal, config.appendfsync, notify)?.with_replayed_payload(payload);
    super::apply_config(&mut log, &config);
    Ok(OpenedLog {
        log: Box::new(log),
        recovery: Some(recovery),
    })
}

/// A new log on the empty `device` (`appendonly yes` at run time), its
/// first record numbered `first_lsn`: one above the last LSN the keyspace
/// knows, against which the next rewrite's captures are compared.
pub fn open_new_log(
    device: Arc<dyn Device>,
    config: &Config,
    first_lsn: u64,
    notify: Box<dyn Fn() + Send + Sync>,
) -> Result<Box<dyn CommandLog>> {
    let mut wal_config = wal_config(config.appendfsync, device.info().durable_on_write);
    wal_config.base_lsn = first_lsn.max(1);
    let wal = ferrite_wal::Wal::open(device, wal_config)?;
    if wal.recovery().records > 0 {
        return Err(Error::Rewrite {
            reason: format!("the new log {} is not empty", wal.device().path().display()),
        });
    }
    let mut log = WalLog::new(wal, config.appendfsync, notify)?;
    super::apply_config(&mut log, config);
    Ok(Box::new(log))
}

/// Recovers and replays a log that is no longer appended to (an older
/// incremental log a manifest names before the current one): a torn tail
/// is dropped as at start-up, then its records run.
pub fn replay_old_log(state: &mut State, device: Arc<dyn Device>) -> Result<u64> {
    let dir = state.config.dir.display().to_string();
    let config = wal_config(state.config.appendfsync, device.info().durable_on_write);
    let (wal, commands, _) = open_and_replay(state, &device, config, &dir)?;
    drop(wal);
    Ok(commands)
}

/// With `aof-load-truncated no`: an error if the log has a torn tail (looked
/// at before recovery would drop it).
fn refuse_torn_tail(device: &dyn Device, dir: &str) -> Result<()> {
    match ferrite_wal::check(device) {
        Ok(Recovery {
            torn_tail: Some(tail),
            ..
        }) => Err(Error::TruncatedLog {
            path: device.path().to_path_buf(),
            offset: tail.offset,
            bytes: tail.bytes,
            dir: dir.to_string(),
        }),
        // A new (blank) file has no header yet; opening the wal decides
        // whether it is blank or not a log.
        Ok(_) | Err(ferrite_wal::Error::BadHeader { .. }) => Ok(()),
        Err(e) => Err(start_error(e, dir)),
    }
}

/// Replays a plain RESP append-only file (Redis's format: commands back to
/// back, SELECT carried from one command to the next) into `state`; returns
/// the commands run. Anything that is not a complete, known command is an
/// error naming `path` and the byte offset.
pub fn replay_resp(state: &mut State, bytes: &[u8], path: &Path) -> Result<u64> {
    state.keyspace.loading = true;
    state.keyspace.now_ms = unix_ms();
    let mut replayer = Replayer::new();
    // A RESP file has no LSNs and no base parts come before it: every
    // command applies.
    let result = replayer.run(state, bytes, u64::MAX);
    state.keyspace.loading = false;
    state.keyspace.expired.clear();
    let bad = match result {
        Ok(_) if replayer.session.multi.is_some() => Err("the file ends inside MULTI".to_string()),
        other => other,
    };
    bad.map_err(|reason| Error::ForeignAof {
        path: path.to_path_buf(),
        reason,
    })
}
