//! Client memory in the event loop, and client eviction: each
//! connection's figure goes to the ledger (`client_memory.rs`) whenever
//! it may have changed, and while normal and Pub/Sub clients hold at
//! least `maxmemory-clients`, the largest are closed: before each command
//! a client sends (so a command never runs while clients are over the
//! limit, and key eviction, which comes after, does not evict keys for
//! memory clients hold) and once per turn of the loop, after the replies
//! were written, as Redis does before sleeping.

use super::conn::Conn;
use super::Server;
use crate::client_memory::{pubsub_bytes, transaction_bytes, ClientKind, Footprint};
use crate::state::State;

/// What connection `conn` holds, as Redis counts a client's memory:
/// its buffers' allocations, its queued transaction and watched keys,
/// its subscriptions and tracking prefixes. O(1).
pub(super) fn footprint(state: &State, conn: &Conn) -> Footprint {
    Footprint {
        query: conn.inbuf.capacity() as u64,
        output: conn.reply.buf.capacity() as u64,
        multi: transaction_bytes(&conn.session),
        pubsub: pubsub_bytes(&state.pubsub, conn.session.id),
    }
}

impl Server {
    /// The kind of client connection `index` is, for memory.
    fn client_kind(&self, conn: &Conn, index: usize) -> ClientKind {
        if conn.session.sync_requested {
            ClientKind::Replica
        } else if self.is_link(index) {
            ClientKind::Master
        } else if self.state.pubsub.is_subscribed(conn.session.id) {
            ClientKind::Pubsub
        } else {
            ClientKind::Normal
        }
    }

    /// Gives the ledger connection `index`'s current figure, unless it
    /// is the one it last gave (the common case after a command: buffers
    /// keep their capacity), which costs no lookup.
    pub(super) fn count_client(&mut self, conn: &mut Conn, index: usize) {
        let kind = self.client_kind(conn, index);
        let bytes = footprint(&self.state, conn).total();
        if conn.session.mem_counted == Some((bytes, kind)) {
            return;
        }
        conn.session.mem_counted = Some((bytes, kind));
        self.state
            .client_memory
            .update(conn.session.id, bytes, kind);
    }

    /// Closes clients, the largest first, until normal and Pub/Sub
    /// clients hold less than `maxmemory-clients` (or none is left to
    /// close). `current` is the connection whose command is about to run,
    /// out of the table: if it is chosen, its pending replies are dropped
    /// and it is marked for closing, and `true` is returned so that its
    /// command does not run. O(1) when under the limit.
    pub(super) fn evict_clients(&mut self, current: Option<&mut Conn>) -> bool {
        let config = &self.state.config;
        let limit = config.client_eviction_limit();
        // Buckets are kept while `maxmemory-clients` is set (as Redis
        // keeps them); CONFIG SET turns them on or off here.
        let ledger = &mut self.state.client_memory;
        ledger.set_enabled(config.maxmemory_clients != 0);
        if !ledger.over(limit) {
            return false;
        }
        let current_id = current.as_ref().map(|c| c.session.id);
        let mut current_evicted = false;
        let victims = self.state.client_memory.victims(limit);
        for &id in &victims {
            self.state.stats.evicted_clients += 1;
            tracing::info!("Evicting client: id={id} (maxmemory-clients reached)");
            if Some(id) == current_id {
                current_evicted = true;
                self.state.client_memory.remove(id);
                continue;
            }
            let Some(&index) = self.ids.get(&id) else {
                self.state.client_memory.remove(id);
                continue;
            };
            match self.conns.get_mut(index).and_then(Option::take) {
                Some(conn) => self.close(conn, index),
                None => self.state.client_memory.remove(id),
            }
        }
        if let (true, Some(conn)) = (current_evicted, current) {
            conn.reply.buf.truncate(conn.out_sent);
            conn.closing = true;
            self.evicted_current = true;
        }
        if !victims.is_empty() && self.state.client_memory.over(limit) {
            tracing::warn!("Over client maxmemory after evicting all evictable clients");
        }
        current_evicted
    }
}
