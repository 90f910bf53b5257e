//! Opening a data directory: one function, [`open_data_dir`], for the
//! server's start-up, its reload after a replica's full sync
//! (`Rewriter::install`) and `ferrite export` ([`Access`]). All of them read
//! the directory's dataset the same way ([`dataset_files`], which
//! `ferrite check` walks too): the manifest's base parts loaded in
//! parallel, then its incremental logs replayed in order; or, without a
//! manifest, the single log of a directory that never rewrote.

use std::sync::Arc;
use std::time::Instant;

use super::dir::{AofDir, Layout};
use super::driver::{reserve_write_buffers, rewrite_threads, Rewriter, Wake};
use super::fs::RealFs;
use super::import::{find_redis_aof, import, set_aside_redis_file};
use super::load::{load_bases, BaseLoad};
use super::manifest::{IncrEntry, IncrKind, Manifest};
use crate::aof::{
    open_log, open_log_device, open_log_on, prefetch_logs, replay_old_log, wbuf_dir, LogFiles,
    OpenedLog,
};
use crate::config::{Config, LogDevice};
use crate::error::{Error, Result};
use crate::state::State;

/// What the directory is opened for.
#[derive(Debug)]
pub enum Access {
    /// Serving it: a Redis append-only file found there is imported,
    /// orphans are removed, and the last log is opened for appending, its
    /// torn tail cut; `Wake` wakes the event loop from the rewrite's
    /// threads.
    Serve(Wake),
    /// Reading it (`ferrite export`): every log is replayed and nothing is
    /// created or removed (a torn tail is cut, as at start-up).
    Load,
}

/// A directory opened to serve it.
#[derive(Debug)]
pub struct Serving {
    /// The log, ready for appends.
    pub log: OpenedLog,
    /// The manifest's owner, `None` with `appendonly no`.
    pub rewriter: Option<Rewriter>,
}

/// An opened directory.
#[derive(Debug)]
pub enum Opened {
    /// [`Access::Serve`] (boxed: far larger than the other variant).
    Serving(Box<Serving>),
    /// [`Access::Load`]: the dataset is in the state.
    Loaded,
}

impl Opened {
    /// The log and rewriter of a directory opened to serve it; an error
    /// for one opened read-only.
    pub fn into_serving(self) -> Result<(OpenedLog, Option<Rewriter>)> {
        match self {
            Opened::Serving(serving) => Ok((serving.log, serving.rewriter)),
            Opened::Loaded => Err(Error::Rewrite {
                reason: "the data directory was opened read-only".into(),
            }),
        }
    }
}

/// The files a directory's dataset is made of, in load order.
#[derive(Debug)]
pub struct DatasetFiles {
    /// The manifest, which names the base parts; `None` for a directory
    /// with a single log or none.
    pub manifest: Option<Manifest>,
    /// The logs to replay after the base parts, oldest first.
    pub logs: Vec<IncrEntry>,
}

/// The files of the dataset in `aof`'s directory (a damaged manifest, or
/// one naming a missing file, is an error naming the file).
pub fn dataset_files(aof: &AofDir) -> Result<DatasetFiles> {
    Ok(match aof.layout()? {
        Layout::Empty => DatasetFiles {
            manifest: None,
            logs: vec![],
        },
        Layout::Legacy(log) => DatasetFiles {
            manifest: None,
            logs: vec![log],
        },
        Layout::Manifest(m) => DatasetFiles {
            logs: m.incrs.clone(),
            manifest: Some(m),
        },
    })
}

/// Opens the data directory of `state.config` for `access`, loading its
/// dataset into `state`.
pub fn open_data_dir(state: &mut State, access: Access) -> Result<Opened> {
    match access {
        Access::Serve(wake) => {
            let (log, rewriter) = serve(state, wake)?;
            Ok(Opened::Serving(Box::new(Serving { log, rewriter })))
        }
        Access::Load => {
            let aof = AofDir::new(
                Arc::new(RealFs),
                &state.config.dir,
                &state.config.appendfilename,
            )
            .with_wbuf_dir(wbuf_dir(&state.config));
            let files = dataset_files(&aof)?;
            let threads = rewrite_threads(state);
            load_dataset(state, &aof, files.manifest.as_ref(), &files.logs, threads)?;
            Ok(Opened::Loaded)
        }
    }
}

/// Loads the base parts `manifest` names into `state` with up to
/// `threads` threads, then replays `logs` in order.
fn load_dataset(
    state: &mut State,
    aof: &AofDir,
    manifest: Option<&Manifest>,
    logs: &[IncrEntry],
    threads: usize,
) -> Result<BaseLoad> {
    let load = match manifest {
        Some(m) => load_bases(aof, m, threads, &mut state.keyspace)?,
        None => BaseLoad::default(),
    };
    for incr in logs {
        let device = open_log_device(&aof.path(&incr.file), incr.kind, &state.config)?;
        replay_old_log(state, device)?;
    }
    Ok(load)
}

/// [`Access::Serve`]: from the manifest if there is one (base parts
/// loaded in parallel, then every incremental log replayed in order, the
/// last one opened for appending), else the single log.
fn serve(state: &mut State, wake: Wake) -> Result<(OpenedLog, Option<Rewriter>)> {
    let started = Instant::now();
    if !state.config.appendonly {
        return Ok((open_log(state, wake.boxed())?, None));
    }
    let config = state.config.clone();
    let dir = serving_dir(&config)?;
    let layout = dir.layout()?;
    let redis = match layout {
        Layout::Manifest(_) => None,
        _ => find_redis_aof(&config.dir, &config.appendfilename)?,
    };
    let (opened, manifest, kind) = match (layout, redis) {
        (_, Some(source)) => {
            dir.remove_orphans(None)?;
            let kind = requested_kind(config.log_device).unwrap_or(IncrKind::File);
            let m = import(state, &dir, &source, kind, rewrite_threads(state))?;
            state.rewrite.base_bytes = m.bases.iter().map(|b| b.bytes).sum();
            state.rewrite.parts = m.bases.len();
            let device = open_log_device(&dir.path(&m.incrs[0].file), kind, &config)?;
            (open_log_on(state, device, wake.boxed())?, m, kind)
        }
        (Layout::Manifest(m), None) => {
            set_aside_redis_file(&dir)?;
            dir.remove_orphans(Some(&m))?;
            // The logs were released from the page cache as they became
            // durable: the device reads them while the parts load.
            prefetch_logs(
                m.incrs
                    .iter()
                    .filter(|incr| incr.kind == IncrKind::File)
                    .map(|incr| dir.path(&incr.file))
                    .collect(),
            );
            let (last, older) = m.incrs.split_last().ok_or_else(|| Error::Rewrite {
                reason: "manifest without an incremental log".into(),
            })?;
            let threads = rewrite_threads(state);
            let load = load_dataset(state, &dir, Some(&m), older, threads)?;
            tracing::info!(
                "loaded {} keys from {} base parts ({} bytes) with {} threads in {} ms",
                load.keys,
                load.parts,
                load.bytes,
                load.threads,
                started.elapsed().as_millis()
            );
            state.rewrite.base_bytes = load.bytes;
            state.rewrite.parts = load.parts;
            check_log_device(&config, last)?;
            let device = open_log_device(&dir.path(&last.file), last.kind, &config)?;
            let (kind, last_file) = (last.kind, last.file.clone());
            let mut opened = open_log_on(state, device, wake.boxed())?;
            let mut m = m;
            let next = state.keyspace.capture_lsn() + 1;
            if state.keyspace.replay_needs_decision(next) {
                // The last log ends below a capture position of the parts
                // (`ferrite check --fix` cut it there): its next records
                // would get LSNs the parts claim to hold, and the next
                // load would skip them. New records go to a new log whose
                // LSNs start after every capture position.
                tracing::warn!(
                    "{}: the log ends at record {} but the base parts hold records up to {}; \
                     appending to a new log that continues after them",
                    last_file,
                    next - 1,
                    state.keyspace.next_lsn_floor() - 1
                );
                drop(opened);
                m = dir.start(&m, kind)?;
                let incr = m.incrs.last().map(|i| i.file.clone()).unwrap_or_default();
                let device = open_log_device(&dir.path(&incr), kind, &config)?;
                opened = open_log_on(state, device, wake.boxed())?;
            }
            state.keyspace.end_replay_captures();
            (opened, m, kind)
        }
        (Layout::Legacy(_) | Layout::Empty, None) => {
            dir.remove_orphans(None)?;
            let opened = open_log(state, wake.boxed())?;
            let files = LogFiles::in_dir(&config.dir, &config.appendfilename);
            let kind = if files.pm.exists() {
                IncrKind::Pm
            } else if files.wbuf.exists() {
                IncrKind::Wbuf
            } else {
                IncrKind::File
            };
            let manifest = Manifest {
                generation: 0,
                bases: vec![],
                incrs: vec![IncrEntry {
                    file: dir.legacy_name(kind),
                    kind,
                }],
            };
            (opened, manifest, kind)
        }
    };
    state.rewrite.threads = rewrite_threads(state);
    state.rewrite.load_to_serve_ms = started.elapsed().as_millis() as u64;
    tracing::info!(
        "data loaded; serving after {} ms",
        state.rewrite.load_to_serve_ms
    );
    reserve_write_buffers(state.rewrite.threads);
    let size_ref = state.rewrite.base_bytes + state.log.command_bytes;
    let rewriter = Rewriter::new(dir, manifest, kind, size_ref, wake);
    Ok((opened, Some(rewriter)))
}

/// The data directory of `config` as the server appends to it (on the
/// real file system, its write buffers where `config` puts them),
/// created if it does not exist.
pub(crate) fn serving_dir(config: &Config) -> Result<AofDir> {
    crate::aof::create_data_dir(&config.dir)?;
    Ok(
        AofDir::new(Arc::new(RealFs), &config.dir, &config.appendfilename)
            .with_wbuf_dir(wbuf_dir(config)),
    )
}

/// The kind of incremental log `log-device` asks for; `None` for `auto`,
/// which follows what the directory holds.
pub(crate) fn requested_kind(device: LogDevice) -> Option<IncrKind> {
    match device {
        LogDevice::File => Some(IncrKind::File),
        LogDevice::Pmem | LogDevice::PmemEmulated => Some(IncrKind::Pm),
        LogDevice::Wbuf => Some(IncrKind::Wbuf),
        LogDevice::Auto => None,
    }
}

/// Refuses a `log-device` that contradicts the device of the log the
/// manifest appends to, as start-up does for a single log: silently
/// switching a PM directory to files (or back) is never what was meant.
fn check_log_device(config: &Config, last: &IncrEntry) -> Result<()> {
    let matches = requested_kind(config.log_device).is_none_or(|kind| kind == last.kind);
    if matches {
        return Ok(());
    }
    Err(Error::Config {
        origin: "log-device".into(),
        reason: format!(
            "log-device is {} but the manifest's current log {} is on {}; use the matching log-device",
            config.log_device.name(),
            last.file,
            match last.kind {
                IncrKind::Pm => "persistent memory",
                IncrKind::Wbuf => "a write buffer",
                IncrKind::File => "a file",
            }
        ),
    })
}
