//! The event loop's timer work, `hz` times a second, and the rewrite's
//! steps between timer ticks.

use std::time::Instant;

use super::{client_evict, conn, notify, Server, ACTIVE_EXPIRE_SEGMENTS_PER_TICK};
use crate::state::unix_ms;

impl Server {
    /// Housekeeping `hz` times a second: active expiry, the everysec sync,
    /// memory figures, CONFIG SET changes that the log must see.
    pub(super) fn timer(&mut self) {
        crate::cluster::tick(&mut self.state);
        self.redirect_blocked();
        self.state.keyspace.now_ms = unix_ms();
        let state = &mut self.state;
        state.instantaneous.tick(&state.stats, Instant::now());
        let cron = !self.state.cron_paused;
        if cron {
            notify::prepare(&mut self.state);
            // A SIGTERM or SIGINT is acted on here, as Redis's cron does:
            // a failed save leaves the server serving.
            if let Some(flags) = super::shutdown::take_signal(&mut self.state) {
                let _ = super::shutdown::prepare(&mut self.state, flags);
            }
        }
        // A replica leaves expiry to its master, which sends the DELs.
        if cron
            && self.state.active_expire_enabled
            && !self.state.keyspace.expiry_paused
            && !self.state.repl.is_replica()
        {
            let started = Instant::now();
            self.state
                .keyspace
                .active_expire(ACTIVE_EXPIRE_SEGMENTS_PER_TICK);
            let ms = started.elapsed().as_millis() as u64;
            crate::commands::diagnostics::latency_event(&mut self.state, "expire-cycle", ms);
        }
        // Only the replica itself expires what its own clients gave a TTL.
        if cron && self.state.active_expire_enabled && self.state.repl.is_replica() {
            self.state.keyspace.expire_local_keys();
        } else if !self.state.repl.is_replica() {
            self.state.keyspace.forget_local_expires();
        }
        // Expired keys: `expired` notifications and invalidations.
        notify::settle(&mut self.state);
        self.log_command();
        if let Some(backlog) = &mut self.state.repl.backlog {
            backlog.resize(self.state.config.repl_backlog_size_bytes as usize);
        }
        self.rdb_cron();
        self.replicas_cron();
        self.failover_cron();
        crate::oom::follow_role(&mut self.state);
        self.link_cron(true);
        crate::aof::apply_config(&mut *self.log, &self.state.config);
        self.log.tick();
        if !self.state.config.appendonly {
            self.rewrite_without_log();
        }
        if let Some(rewriter) = &mut self.rewriter {
            self.log.info(&mut self.state.log);
            rewriter.tick(&mut self.state, &mut *self.log);
        }
        self.state.refresh_used_memory();
        self.log.info(&mut self.state.log);
        self.release_idle_query_buffers();
        self.check_output_limits();
        self.close_idle_clients();
    }

    /// Frees the empty query buffers of connections idle for
    /// [`conn::QUERY_BUF_IDLE_MS`], so idle clients hold no input memory.
    fn release_idle_query_buffers(&mut self) {
        let now = self.state.keyspace.now_ms;
        for conn in self.conns.iter_mut().flatten() {
            if !conn.inbuf.is_empty() || conn.inbuf.capacity() == 0 {
                continue;
            }
            if let Some(info) = self.state.clients.get_mut(&conn.session.id) {
                if now - info.last_ms >= conn::QUERY_BUF_IDLE_MS {
                    conn.inbuf = Vec::new();
                    info.qbuf_free = 0;
                    let bytes = client_evict::footprint(&self.state, conn).total();
                    self.state.client_memory.resize(conn.session.id, bytes);
                    // The next count compares with the ledger's new figure.
                    conn.session.mem_counted = None;
                }
            }
        }
    }

    /// Moves a requested or running rewrite on at once rather than at the
    /// next timer tick: starts one BGREWRITEAOF asked for, switches the log
    /// when the new manifest is durable, and finishes when the workers are
    /// done. Waiting for ticks (100 ms apart at `hz` 10) added up to 200 ms
    /// to a rewrite of 1M x 100 B that takes about 400 ms.
    pub(super) fn rewrite_step(&mut self) {
        if !self.state.config.appendonly {
            self.rewrite_without_log();
        }
        let Some(rewriter) = &mut self.rewriter else {
            return;
        };
        if self.state.rewrite.scheduled {
            self.log.info(&mut self.state.log);
        } else if !rewriter.busy() {
            return;
        }
        rewriter.tick(&mut self.state, &mut *self.log);
    }
}
