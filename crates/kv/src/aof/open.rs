//! Opening the log at start-up: choosing the device, replaying the log
//! into the keyspace, and dealing with a torn or corrupt log.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use ferrite_io::{Device, FileDevice, PmPolicy, PmemDevice};
use ferrite_pmem::MapMode;

use super::scan::{scan_log, LogEnd, ScanReport};
use super::{CommandLog, DeviceLog, NullLog};
use crate::commands::{execute, lookup, Ctx, Propagation, Session};
use crate::config::{Config, LogDevice};
use crate::error::{Error, Result};
use crate::resp::{Protocol, ReplyBuf};
use crate::state::{unix_ms, State};

/// Where the log lives in a data directory.
#[derive(Clone, Debug)]
pub struct LogFiles {
    /// The log on a file device.
    pub file: PathBuf,
    /// The log on a persistent-memory device.
    pub pm: PathBuf,
}

impl LogFiles {
    /// The log files of `dir` for log name `name`.
    pub fn in_dir(dir: &Path, name: &str) -> LogFiles {
        LogFiles {
            file: dir.join(name),
            pm: dir.join(format!("{name}.pm")),
        }
    }

    /// The log that exists, if exactly one does; an error if both hold data.
    pub fn existing(&self) -> Result<Option<(PathBuf, bool)>> {
        let non_empty = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.len() > 0);
        match (non_empty(&self.file), non_empty(&self.pm)) {
            (true, true) => Err(Error::Config {
                origin: self.file.display().to_string(),
                reason: format!(
                    "both {} and {} exist; move the one you do not want away",
                    self.file.display(),
                    self.pm.display()
                ),
            }),
            (true, false) => Ok(Some((self.file.clone(), false))),
            (false, true) => Ok(Some((self.pm.clone(), true))),
            (false, false) => Ok(None),
        }
    }
}

fn open_pm(path: &Path) -> Result<Arc<dyn Device>> {
    Ok(Arc::new(PmemDevice::open(path, PmPolicy::DrainEveryWrite)?))
}

/// Opens (creating) the log device the configuration asks for.
pub fn open_device(config: &Config) -> Result<Arc<dyn Device>> {
    std::fs::create_dir_all(&config.dir).map_err(|source| Error::Io {
        op: "create data directory",
        path: config.dir.clone(),
        source,
    })?;
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
        (LogDevice::File, Some((found, true))) => return Err(wrong_kind(&found)),
        (LogDevice::Pmem | LogDevice::PmemEmulated, Some((found, false))) => {
            return Err(wrong_kind(&found))
        }
        (LogDevice::File, _) | (LogDevice::Auto, Some((_, false))) => {
            Arc::new(FileDevice::open(&files.file)?)
        }
        (LogDevice::Pmem | LogDevice::PmemEmulated, _) | (LogDevice::Auto, Some((_, true))) => {
            open_pm(&files.pm)?
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
    let mode = device.info().pmem_mode;
    if config.log_device == LogDevice::Pmem && mode != Some(MapMode::RealPm) {
        return Err(Error::NoRealPm {
            path: device.path().to_path_buf(),
            mode: mode.map_or("a disk file", |m| m.name()).to_string(),
        });
    }
    if mode == Some(MapMode::Emulated) {
        tracing::warn!(
            "THE LOG IS ON EMULATED PERSISTENT MEMORY ({}): acknowledged writes survive a crash of the process, NOT a power failure or a kernel crash",
            device.path().display()
        );
    }
    Ok(device)
}

/// The log and what start-up found in it.
#[derive(Debug)]
pub struct OpenedLog {
    /// The log, ready for appends.
    pub log: Box<dyn CommandLog>,
    /// The scan of what was replayed, if a log was read.
    pub report: Option<ScanReport>,
}

/// Replays the log on `device` into `state` (without expiring anything).
pub fn replay(state: &mut State, device: &dyn Device) -> Result<ScanReport> {
    let mut session = Session {
        authenticated: true,
        is_replay: true,
        ..Session::default()
    };
    let mut reply = ReplyBuf::new(Protocol::Resp2);
    let mut prop = Propagation::default();
    state.keyspace.loading = true;
    state.keyspace.now_ms = unix_ms();
    let report = scan_log(device, |_, args| {
        if lookup(args.get(0)).is_none() {
            return Err(format!(
                "unknown command '{}' in the log",
                String::from_utf8_lossy(args.get(0))
            ));
        }
        let mut ctx = Ctx {
            state: &mut *state,
            session: &mut session,
            reply: &mut reply,
            prop: &mut prop,
        };
        execute(&mut ctx, args);
        reply.buf.clear();
        prop.clear();
        Ok(())
    });
    state.keyspace.loading = false;
    state.keyspace.expired.clear();
    Ok(report?)
}

/// Opens the log for `state.config`, replays it into `state`, and applies
/// Redis's rules for a damaged log: a torn tail is cut with a warning
/// (`aof-load-truncated yes`), anything else refuses to start.
pub fn open_log(state: &mut State, notify: Box<dyn Fn() + Send + Sync>) -> Result<OpenedLog> {
    if !state.config.appendonly {
        return Ok(OpenedLog {
            log: Box::new(NullLog),
            report: None,
        });
    }
    let device = open_device(&state.config)?;
    open_log_on(state, device, notify)
}

/// [`open_log`] on a given device (a simulated one in crash tests).
pub fn open_log_on(
    state: &mut State,
    device: Arc<dyn Device>,
    notify: Box<dyn Fn() + Send + Sync>,
) -> Result<OpenedLog> {
    let config = state.config.clone();
    let started = Instant::now();
    let report = replay(state, &*device)?;
    let dir = config.dir.display().to_string();
    match report.end {
        LogEnd::Clean => {}
        LogEnd::Torn { offset } if config.aof_load_truncated => {
            tracing::warn!(
                "{}: the log ends with an incomplete command at offset {offset} (a crash during a write); truncating {} bytes, as aof-load-truncated yes allows",
                device.path().display(),
                report.len - offset
            );
            device.set_len(offset)?;
            device.sync()?;
            state.log.truncated_bytes = report.len - offset;
        }
        LogEnd::Torn { offset } => {
            return Err(Error::TruncatedLog {
                path: device.path().to_path_buf(),
                offset,
                dir,
            })
        }
        LogEnd::Corrupt { offset, ref reason } => {
            return Err(Error::CorruptLog {
                path: device.path().to_path_buf(),
                offset,
                reason: reason.clone(),
                dir,
            })
        }
    }
    state.log.loaded_commands = report.commands;
    state.log.load_ms = started.elapsed().as_millis() as u64;
    state.log.base_size = device.len();
    tracing::info!(
        "log {} ({}): replayed {} commands in {} ms",
        device.path().display(),
        device.info().kind,
        report.commands,
        state.log.load_ms
    );
    let log = DeviceLog::new(device, config.appendfsync, notify);
    Ok(OpenedLog {
        log: Box::new(log),
        report: Some(report),
    })
}
