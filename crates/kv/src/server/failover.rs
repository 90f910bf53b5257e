//! FAILOVER, the master's side. The command (`commands/failover.rs`)
//! pauses writes and records the request; each timer tick here checks
//! whether the target (or, without one, any replica) acknowledged the whole
//! stream. When one did — or the timeout passed with FORCE — this server
//! becomes that replica's replica, and the link (`master_link.rs`) sends
//! `PSYNC <id> <offset> FAILOVER`: the target, whose ID is this server's,
//! becomes a master and answers +CONTINUE, which ends the failover. A
//! refusal, or FAILOVER ABORT while handing over, makes this server a
//! master again (a new history, so its replicas resync partially).
//!
//! No write is lost: writes are paused from the command on, the handover
//! starts only once the target acknowledged the last offset (or FORCE
//! said to go on without it), and writes resume only when the roles have
//! changed — a write paused here then meets a replica and is refused.

use super::repl::Master;
use super::Server;
use crate::state::{unix_ms, State};

impl Server {
    /// Each tick while a FAILOVER waits for its replica.
    pub(super) fn failover_cron(&mut self) {
        let Some(failover) = self.state.repl.failover.clone() else {
            return;
        };
        if failover.in_progress {
            return;
        }
        let now = unix_ms();
        if failover.end_ms.is_some_and(|end| end <= now) {
            match (&failover.target, failover.force) {
                (Some((host, port)), true) => {
                    tracing::info!("FAILOVER to {host}:{port} time out exceeded, failing over.");
                    self.hand_over(host.clone(), *port);
                }
                _ => abort(&mut self.state, "Replica never caught up before timeout"),
            }
            return;
        }
        let repl = &self.state.repl;
        let caught_up = repl.replicas.iter().find(|r| {
            let wanted = match &failover.target {
                Some((host, port)) => r.ip.eq_ignore_ascii_case(host) && r.port == *port,
                None => true,
            };
            wanted && r.ack == repl.offset
        });
        if let Some(r) = caught_up {
            let (host, port) = (r.ip.clone(), r.port);
            tracing::info!("Failover target {host}:{port} is synced, failing over.");
            self.hand_over(host, port);
        }
    }

    /// Becomes the replica of `host:port`, asking it to take over.
    fn hand_over(&mut self, host: String, port: u16) {
        if let Some(f) = &mut self.state.repl.failover {
            f.target = Some((host.clone(), port));
            f.in_progress = true;
        }
        let state = &mut self.state;
        state
            .blocking
            .unblock_all_for_role_change(&mut state.keyspace);
        // Its history is its own stream, which selected this database.
        state.repl.stream_db = state.repl.seldb.unwrap_or(0);
        state.repl.master = Some(Master::new(host, port));
        state.repl.changed = true;
        // As Redis: this server's replicas resync, with it or the new master.
        self.disconnect_replicas();
    }
}

/// The target took over: writes resume (on a replica now).
pub(crate) fn end(state: &mut State) {
    state.repl.failover = None;
    state.blocking.failover_pause = false;
}

/// Gives up the FAILOVER (`why` goes to the log); a server that was
/// handing over is a master again.
pub(crate) fn abort(state: &mut State, why: &str) {
    let Some(failover) = state.repl.failover.take() else {
        return;
    };
    match &failover.target {
        Some((host, port)) => tracing::info!("FAILOVER to {host}:{port} aborted: {why}"),
        None => tracing::info!("FAILOVER to any replica aborted: {why}"),
    }
    if failover.in_progress {
        state.repl.promote();
    }
    state.blocking.failover_pause = false;
}
