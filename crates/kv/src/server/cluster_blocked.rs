//! Blocked clients in cluster mode (`docs/cluster.md`). A client blocked
//! on a key (BLPOP, BZPOPMIN, XREAD...) waits for a write to a slot this
//! node served when it blocked. When the slot moves away (a reshard's
//! SETSLOT NODE, a failover, DELSLOTS) or the cluster goes down, no write
//! will reach it here; Redis 7.0 then releases the client with the
//! redirection it would get now (`-MOVED`, `-CLUSTERDOWN Hash slot not
//! served`, `-CLUSTERDOWN The cluster is down`), so a cluster client
//! retries at the right node. The server timer checks every blocked
//! client, as Redis's client cron does.

use super::Server;
use crate::cluster::route::{blocked_redirect, error_text};
use crate::cluster::{key_slot, Node};

impl Server {
    /// Releases the blocked clients whose key's slot this node no longer
    /// serves, each with its redirection.
    pub(super) fn redirect_blocked(&mut self) {
        let Some(shared) = self.state.cluster.clone() else {
            return;
        };
        if self.state.blocking.count() == 0 {
            return;
        }
        let mut releases = Vec::new();
        {
            let table = shared.lock();
            let preferred = &self.state.config.cluster.preferred_endpoint;
            let endpoint = |node: &Node| crate::commands::endpoint_for(preferred, node);
            for (id, index, key, command) in self.state.blocking.keyed() {
                let readonly = self
                    .conns
                    .get(index)
                    .and_then(Option::as_ref)
                    .is_some_and(|c| c.session.readonly);
                let write = command
                    .as_deref()
                    .and_then(crate::commands::lookup)
                    .is_none_or(|spec| spec.has(crate::commands::flags::WRITE));
                if let Some(redirect) = blocked_redirect(&table, key_slot(&key), readonly && !write)
                {
                    releases.push((id, error_text(&redirect, &table, &endpoint)));
                }
            }
        }
        for (id, text) in releases {
            self.state
                .blocking
                .release_for_cluster(&mut self.state.keyspace, id, text);
        }
        self.release();
    }
}
