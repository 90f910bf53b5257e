//! Diskless loading on a replica (`repl-diskless-load`), as Redis 7.0
//! reports and enforces it.
//!
//! Ferrite's replica always gathers a full sync's payload in memory and
//! decodes it into a new dataset, which replaces the old one only once it
//! is whole (`master_link.rs`): a failed transfer never touches the old
//! dataset. What the setting changes is what clients see while the
//! payload arrives, which is what Redis's diskless modes define:
//!
//! - `disabled`: Redis writes the payload to a file and keeps serving the
//!   old dataset meanwhile. Ferrite serves it too; nothing is reported.
//! - `on-empty-db` with an empty dataset, and `swapdb` when the master's
//!   replication ID differs from this server's: Redis loads from the
//!   socket and is in the LOADING state (`loading:1`): commands without
//!   the `loading` flag are refused with `-LOADING`. `on-empty-db` had
//!   nothing to keep; `swapdb` keeps the old dataset for a failed load.
//! - `swapdb` with the same replication ID (a full sync of the history
//!   this server already follows): `async_loading:1`, the old dataset is
//!   served and only commands flagged `no-async-loading` (REPLICAOF, the
//!   `appendonly`/`dir`/`repl-diskless-load` settings) are refused.
//!
//! The state ends when the new dataset is installed or the link drops.

use super::repl::Loading;
use super::Server;
use crate::state::unix_ms;

impl Server {
    /// The payload's `$` line arrived (`bulk`: its length, `None` for the
    /// EOF-marker form): enters the loading state the setting asks for.
    /// `replid` is the master's, from `+FULLRESYNC`.
    pub(super) fn payload_begins(&mut self, replid: &str, bulk: Option<u64>) {
        let mode = self.state.config.repl_diskless_load.as_str();
        let keyspace = &self.state.keyspace;
        let empty = (0..keyspace.databases()).all(|db| keyspace.db(db).is_empty());
        let swapdb = mode == "swapdb";
        let diskless = swapdb || (mode == "on-empty-db" && empty);
        let to = if diskless { "to parser" } else { "to memory" };
        match bulk {
            Some(len) => {
                tracing::info!("MASTER <-> REPLICA sync: receiving {len} bytes from master {to}")
            }
            None => tracing::info!(
                "MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF {to}"
            ),
        }
        if !diskless {
            return;
        }
        let since_s = unix_ms() / 1000;
        self.state.repl.loading = if swapdb && replid == self.state.repl.replid {
            Loading::Async { since_s }
        } else {
            Loading::Blocking { since_s, swapdb }
        };
        tracing::info!("MASTER <-> REPLICA sync: Loading DB in memory");
    }

    /// The payload is whole and about to be decoded.
    pub(super) fn payload_whole(&mut self) {
        if self.state.repl.loading == Loading::Off {
            tracing::info!("MASTER <-> REPLICA sync: Loading DB in memory");
        }
    }

    /// The load ended: installed (`failure` none), or failed for the
    /// reason given (the payload did not decode, or the link dropped).
    pub(super) fn loading_ends(&mut self, failure: Option<&str>) {
        let swapdb = match std::mem::take(&mut self.state.repl.loading) {
            Loading::Off => return,
            Loading::Blocking { swapdb, .. } => swapdb,
            Loading::Async { .. } => true,
        };
        if let Some(why) = failure {
            // Redis's loader reports a payload cut short with this
            // prefix; its suite waits for it.
            let read = self.state.repl.master.as_ref().map_or(0, |m| m.transfer.1);
            tracing::warn!(
                "Internal error in RDB reading offset {read} of the MASTER's payload: {why}"
            );
        }
        if !swapdb {
            return;
        }
        if failure.is_none() {
            tracing::info!("MASTER <-> REPLICA sync: Swapping active DB with loaded DB");
            tracing::info!("MASTER <-> REPLICA sync: Discarding old DB in background");
        } else {
            tracing::info!("MASTER <-> REPLICA sync: Discarding temporary DB in background");
        }
    }
}
