//! `CONFIG SET appendonly yes|no` on the event loop: opening a log with
//! its first rewrite, or stopping the rewrite and closing the log
//! (`docs/aof-runtime.md` has the steps and the crash argument).

use std::sync::Arc;

use super::conn::Conn;
use super::Server;
use crate::aof::{check_new_device, open_log_device, open_new_log, CommandLog, NullLog};
use crate::error::{Error, Result};
use crate::rewrite::dir::AofDir;
use crate::rewrite::driver::{log_preamble, Rewriter, Wake};
use crate::rewrite::manifest::IncrKind;
use crate::rewrite::turn_on::{self, TurnOn};
use crate::state::AppendonlyChange;

/// Redis's reply when the log cannot start.
const CANNOT_TURN_ON: &str = "ERR CONFIG SET failed (possibly related to argument 'appendonly') - Unable to turn on AOF. Check server logs.";

impl Server {
    /// Carries out a CONFIG SET appendonly after the command ran (for
    /// `conn`, whose reply it writes when `change.reply`).
    pub(super) fn switch_appendonly(&mut self, change: AppendonlyChange, conn: &mut Conn) {
        // What ran so far goes to the log it ran under.
        self.log_command();
        if !change.on {
            self.turn_log_off(conn);
            return;
        }
        match self.turn_log_on() {
            Ok(()) => {
                if change.reply {
                    conn.reply.ok();
                }
            }
            Err(e) => {
                tracing::warn!("cannot turn the log on: {e}; appendonly stays no");
                self.state.config.appendonly = false;
                if change.reply {
                    conn.reply.error(CANNOT_TURN_ON);
                }
            }
        }
    }

    fn wake(&self) -> Wake {
        let waker = Arc::clone(&self.waker);
        Wake::new(move || {
            let _ = waker.wake();
        })
    }

    /// The data directory of the log, created if need be, and the device
    /// kind `log-device` asks for (`None` for `auto`).
    fn log_dir(&self) -> Result<(AofDir, Option<IncrKind>)> {
        let config = &self.state.config;
        let dir = crate::rewrite::open_dir::serving_dir(config)?;
        let kind = crate::rewrite::open_dir::requested_kind(config.log_device);
        Ok((dir, kind))
    }

    /// BGREWRITEAOF with `appendonly no`, as Redis's: the dataset as base
    /// parts, taken whole at the start (no log covers later writes), with
    /// an empty incremental log, under a manifest that replaces the old
    /// one once they are durable. The rewriter goes once it is done.
    pub(super) fn rewrite_without_log(&mut self) {
        if let Some(rewriter) = &mut self.rewriter {
            if !rewriter.busy() && !self.state.rewrite.scheduled {
                rewriter.wait(&mut self.state);
                self.rewriter = None;
            }
            return;
        }
        if !self.state.rewrite.scheduled {
            return;
        }
        let started = self.log_dir().and_then(|(dir, kind)| {
            let started = turn_on::begin(&dir, kind)?;
            if let Err(e) = self.write_preamble(&dir, &started) {
                let _ = turn_on::abandon(&dir, &started);
                return Err(e);
            }
            Ok((started, dir))
        });
        match started {
            Ok((started, dir)) => {
                let mut rewriter = Rewriter::turned_on(dir, started, self.wake());
                rewriter.tick(&mut self.state, &mut *self.log);
                self.rewriter = Some(rewriter);
            }
            Err(e) => {
                tracing::warn!("the rewrite could not start: {e}");
                self.state.rewrite.scheduled = false;
                self.state.rewrite.last_ok = false;
            }
        }
    }

    /// Writes what a log starts with (function libraries, replication
    /// history: base parts hold neither) into the new incremental log of
    /// a rewrite with the log off, which nothing else is appended to.
    fn write_preamble(&self, dir: &AofDir, started: &TurnOn) -> Result<()> {
        let first = self.state.keyspace.capture_lsn() + 1;
        let mut log = self.open_turned_on(dir, started, first)?;
        log_preamble(&self.state, &mut *log);
        log.close()?;
        match log.failure() {
            Some(why) => Err(Error::Rewrite { reason: why }),
            None => Ok(()),
        }
    }

    /// Opens a new log that no manifest names and starts its first
    /// rewrite; on an error the directory is left as it was.
    fn turn_log_on(&mut self) -> Result<()> {
        // A rewrite started with the log off has no log to follow: it
        // stops, and the first rewrite of the log replaces it.
        if let Some(mut rewriter) = self.rewriter.take() {
            rewriter.stop(&mut self.state);
        }
        let (dir, kind) = self.log_dir()?;
        let started = turn_on::begin(&dir, kind)?;
        let first = self.state.keyspace.capture_lsn() + 1;
        let mut log = match self.open_turned_on(&dir, &started, first) {
            Ok(log) => log,
            Err(e) => {
                if let Err(undo) = turn_on::abandon(&dir, &started) {
                    tracing::warn!("cannot remove the new log ({undo}); the next start removes it");
                }
                return Err(e);
            }
        };
        log_preamble(&self.state, &mut *log);
        let file = started.incr().map(|i| i.file.clone()).unwrap_or_default();
        self.log = log;
        // As Redis: a write error of the log that was turned off is
        // forgotten with it.
        self.state.log_failure = None;
        self.log.info(&mut self.state.log);
        tracing::info!(
            "appendonly yes: logging to {file} from record {first}; the log is complete once its first rewrite is done"
        );
        let mut rewriter = Rewriter::turned_on(dir, started, self.wake());
        rewriter.tick(&mut self.state, &mut *self.log);
        self.rewriter = Some(rewriter);
        Ok(())
    }

    /// The log on the new incremental file of `started`, its first record
    /// numbered `first`.
    fn open_turned_on(
        &self,
        dir: &AofDir,
        started: &TurnOn,
        first: u64,
    ) -> Result<Box<dyn CommandLog>> {
        let config = &self.state.config;
        let incr = started.incr().ok_or_else(|| Error::Rewrite {
            reason: "the new manifest names no log".into(),
        })?;
        let device = open_log_device(&dir.path(&incr.file), incr.kind, config)?;
        check_new_device(config, &*device)?;
        open_new_log(device, config, first, self.wake().boxed())
    }

    /// Stops a running rewrite, makes everything appended durable and
    /// closes the log; from here on the server runs without one.
    fn turn_log_off(&mut self, conn: &mut Conn) {
        if let Some(mut rewriter) = self.rewriter.take() {
            if rewriter.stop(&mut self.state) {
                // Redis's test suite waits for "Killing" and "AOF child".
                tracing::warn!(
                    "Killing running AOF rewrite: its threads stopped and the parts they wrote were removed (Ferrite has no AOF child process)"
                );
            }
        }
        let closed = self.log.close();
        let acked = self.log.acknowledged();
        let failed = closed.as_ref().err().map(ToString::to_string);
        if let Some(why) = failed.or_else(|| self.log.failure()) {
            tracing::warn!(
                "appendonly no: the log could not be made durable ({why}); the clients waiting for it are disconnected"
            );
            self.drop_unacknowledged(acked, conn);
        }
        self.log = Box::new(NullLog::after(acked));
        self.state.log_failure = None;
        self.state.rewrite.scheduled = false;
        self.log.info(&mut self.state.log);
    }

    /// Closes the connections whose replies wait for records above
    /// `acked`, which the closed log can no longer acknowledge.
    fn drop_unacknowledged(&mut self, acked: u64, current: &mut Conn) {
        if current.wait_ticket > acked {
            // Its replies must not go out: it is closed without them.
            current.reply.buf.clear();
            current.closing = true;
            current.wait_ticket = 0;
        }
        let lost: Vec<usize> = (0..self.conns.len())
            .filter(|&i| {
                self.conns[i]
                    .as_ref()
                    .is_some_and(|c| c.wait_ticket > acked)
            })
            .collect();
        for index in lost {
            if let Some(conn) = self.conns[index].take() {
                self.close(conn, index);
            }
        }
    }
}
