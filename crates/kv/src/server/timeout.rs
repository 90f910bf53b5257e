//! `timeout`: a client idle longer than this many seconds is closed by the
//! timer, as Redis's client cron closes it. Idle means no command read and
//! no reply written (CLIENT LIST's `idle`). Replicas and MONITOR clients,
//! the link to a master, clients blocked in a command (their own timeout
//! governs them) and subscribed clients (they wait for messages by design)
//! are never closed for it, as in Redis. A TLS client that stopped in the
//! middle of its handshake is idle too, so `timeout` also ends those.

impl super::Server {
    /// Closes the clients idle past `timeout` (no-op when it is 0).
    pub(super) fn close_idle_clients(&mut self) {
        let timeout_s = self.state.config.timeout_s;
        if timeout_s == 0 {
            return;
        }
        let now_s = self.state.keyspace.now_ms / 1000;
        for index in 0..self.conns.len() {
            let Some(conn) = self.conns[index].as_ref() else {
                continue;
            };
            let id = conn.session.id;
            let exempt = conn.session.sync_requested
                || self.is_link(index)
                || self.is_replica_conn(index)
                || self.state.blocking.is_blocked(id)
                || self.state.pubsub.is_subscribed(id)
                || self.state.pubsub.monitors.contains(&id);
            if exempt {
                continue;
            }
            let idle = self
                .state
                .clients
                .get(&id)
                .is_some_and(|info| now_s - info.last_ms / 1000 > timeout_s as i64);
            if idle {
                tracing::debug!("closing idle client {id}");
                if let Some(conn) = self.conns[index].take() {
                    self.close(conn, index);
                }
            }
        }
    }
}
