//! Replaying a log at start-up: the wal's recovery scan reads and checks
//! the records on its own thread and hands them over in batches while the
//! calling thread runs them.
//!
//! Reading the log twice, once by recovery (`Wal::open`, checking every
//! record's checksum to find the end) and again by the replay, one after
//! the other, spent a large part of a replay in reading and checksums
//! before any command ran (`docs/results/recovery.md`, "Reading the log
//! once"). So recovery hands each record it keeps to the replay
//! ([`ferrite_wal::Wal::open_visiting`]): the log is read once, and
//! reading overlaps running.
//!
//! The records come before recovery's verdict on what follows them. When
//! the verdict is an error (a damaged record in the middle), the start
//! fails and the state built so far is never served.

use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;

use ferrite_io::Device;
use ferrite_wal::{Lsn, Visit, Wal, WalConfig};

use super::open::start_error;
use super::record::{check_command, for_each_command};
use super::repl_mark;
use crate::commands::{execute, resolve, Ctx, Propagation, SegmentWalk, Session};
use crate::error::{Error, Result};
use crate::resp::{Args, Parser, Protocol, ReplyBuf};
use crate::state::{unix_ms, State};

/// Payload bytes per batch handed from the scan to the replay.
const BATCH_BYTES: usize = 256 << 10;

/// Batches the scan may read ahead of the replay.
const BATCHES_AHEAD: usize = 4;

/// Records read by the scan, their payloads back to back.
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    /// LSN, file offset, and end of the payload in `bytes` (each starts
    /// where the one before ends).
    records: Vec<(Lsn, u64, usize)>,
}

impl Batch {
    fn push(&mut self, visit: Visit<'_>) {
        self.bytes.extend_from_slice(visit.payload);
        self.records
            .push((visit.lsn, visit.offset, self.bytes.len()));
    }

    fn is_full(&self) -> bool {
        self.bytes.len() >= BATCH_BYTES
    }
}

/// Opens the wal on `device` (recovering it) and runs every record it
/// keeps against `state`; returns the wal, the commands run and the
/// records' payload bytes.
///
/// LSNs continue across every log a manifest names, and the base parts'
/// capture positions count on it: a blank log (one a crash left empty
/// between a new manifest and the log switch) starts after the last LSN
/// of the logs and parts loaded before it, not at 1, or its records would
/// be taken for ones the parts already hold.
pub(super) fn open_and_replay(
    state: &mut State,
    device: &Arc<dyn Device>,
    config: WalConfig,
    dir: &str,
) -> Result<(Wal, u64, u64)> {
    let config = WalConfig {
        base_lsn: state.keyspace.next_lsn_floor(),
        ..config
    };
    state.keyspace.loading = true;
    state.keyspace.now_ms = unix_ms();
    let result = std::thread::scope(|scope| {
        let (send, batches) = mpsc::sync_channel(BATCHES_AHEAD);
        let scan = std::thread::Builder::new()
            .name("log-scan".into())
            .spawn_scoped(scope, || scan(Arc::clone(device), config, send))
            .map_err(|source| Error::Io {
                op: "start a thread to read",
                path: device.path().to_path_buf(),
                source,
            })?;
        let replayed = replay_batches(state, &batches, device.as_ref(), dir);
        // A failed replay stops the scan: its next hand-over finds no one.
        drop(batches);
        let opened = match scan.join() {
            Ok(opened) => opened,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        match (opened, replayed) {
            (Ok((wal, payload)), Ok(commands)) => {
                state.keyspace.logged(wal.next_lsn() - 1);
                Ok((wal, commands, payload))
            }
            // The replay's own error, not the scan's "stopped" that follows it.
            (_, Err(e)) => Err(e),
            (Err(e), Ok(_)) => Err(start_error(e, dir)),
        }
    });
    state.keyspace.loading = false;
    state.keyspace.expired.clear();
    result
}

/// The scan's side: recovery, handing batches to `send` as they fill;
/// returns the wal and its records' payload bytes.
fn scan(
    device: Arc<dyn Device>,
    config: WalConfig,
    send: SyncSender<Batch>,
) -> ferrite_wal::Result<(Wal, u64)> {
    let mut batch = Batch::default();
    let mut payload = 0u64;
    let wal = Wal::open_visiting(device, config, &mut |visit| {
        payload += visit.payload.len() as u64;
        batch.push(visit);
        !batch.is_full() || send.send(std::mem::take(&mut batch)).is_ok()
    })?;
    if !batch.records.is_empty() {
        // A replay that stopped has its own error to report.
        let _ = send.send(batch);
    }
    Ok((wal, payload))
}

/// The replay's side: runs every record of every batch; returns the
/// commands run.
fn replay_batches(
    state: &mut State,
    batches: &Receiver<Batch>,
    device: &dyn Device,
    dir: &str,
) -> Result<u64> {
    let mut replayer = Replayer::new();
    let mut commands = 0;
    for batch in batches.iter() {
        let mut start = 0;
        for &(lsn, offset, end) in &batch.records {
            let payload = &batch.bytes[start..end];
            start = end;
            // Every record names its database (see `record.rs`).
            replayer.session.db = 0;
            let bad = match replayer.run(state, payload, lsn) {
                Ok(_) if replayer.session.multi.take().is_some() => {
                    Some("it ends inside MULTI".to_string())
                }
                Ok(n) => {
                    commands += n;
                    None
                }
                Err(reason) => Some(reason),
            };
            if let Some(reason) = bad {
                // The checksum matched, so this is not damage on the medium
                // but a record the server cannot run: refuse, as for damage.
                return Err(Error::CorruptLog {
                    path: device.path().to_path_buf(),
                    offset,
                    lsn,
                    reason: format!("the record is intact but cannot be replayed: {reason}"),
                    dir: dir.to_string(),
                });
            }
        }
    }
    Ok(commands)
}

/// Whether the replay runs `args`, the next command of the record with
/// LSN `lsn` (`walk` follows the record's SELECTs).
fn replay_applies(
    state: &State,
    args: &Args<'_>,
    walk: &mut SegmentWalk,
    lsn: Lsn,
    segments: &mut Vec<u32>,
) -> std::result::Result<bool, String> {
    let Ok((_, spec)) = resolve(args) else {
        return Ok(true);
    };
    segments.clear();
    walk.step(spec, args, segments);
    state.keyspace.replay_decision(segments, lsn)
}

/// What replaying commands needs besides the state: a client `Session` that is
/// authenticated and marked as replay, and scratch buffers for the replies
/// and propagation that replay throws away.
pub(super) struct Replayer {
    pub(super) session: Session,
    reply: ReplyBuf,
    prop: Propagation,
    parser: Parser,
}

impl Replayer {
    pub(super) fn new() -> Replayer {
        Replayer {
            session: Session {
                authenticated: true,
                is_replay: true,
                ..Session::default()
            },
            reply: ReplyBuf::new(Protocol::Resp2),
            prop: Propagation::default(),
            parser: Parser::new(),
        }
    }

    /// Runs every command in `bytes`, the record with LSN `lsn`, against
    /// `state` (skipping those the base parts already hold, see
    /// [`crate::keyspace::Keyspace::replay_decision`]); returns how many
    /// commands there were, or why the bytes are not complete, known
    /// commands.
    pub(super) fn run(
        &mut self,
        state: &mut State,
        bytes: &[u8],
        lsn: Lsn,
    ) -> std::result::Result<u64, String> {
        let Replayer {
            session,
            reply,
            prop,
            parser,
        } = self;
        let decide = state.keyspace.replay_needs_decision(lsn);
        let mut walk = SegmentWalk::new(session.db, state.keyspace.databases());
        let mut segments = Vec::new();
        let mut mark = None;
        let commands = for_each_command(bytes, parser, |args| {
            if let repl_mark::Parsed::Mark(replid, offset, db) = repl_mark::parse(args)? {
                mark = Some((replid, offset, db));
                return Ok(());
            }
            check_command(args)?;
            if decide && !replay_applies(state, args, &mut walk, lsn, &mut segments)? {
                return Ok(());
            }
            let mut ctx = Ctx {
                state: &mut *state,
                session: &mut *session,
                reply: &mut *reply,
                prop: &mut *prop,
                busy: None,
            };
            execute(&mut ctx, args);
            reply.buf.clear();
            prop.clear();
            Ok(())
        })?;
        // A record without a mark changed the dataset outside the master's
        // stream: the last mark no longer describes it.
        state.repl.log_mark = mark;
        Ok(commands)
    }
}
