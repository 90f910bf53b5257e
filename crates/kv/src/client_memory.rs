//! What each client's connection holds in memory, and client eviction
//! (`maxmemory-clients`), as Redis 7.0 keeps them.
//!
//! Every client has a figure: its buffers, its queued transaction, its
//! watched keys and subscriptions ([`Footprint`]). The event loop gives
//! the ledger a client's new figure whenever one of those may have
//! changed (after a read, after each command, after its replies were
//! written or messages delivered to it), so the totals per kind of
//! client are always current without a pass over all clients: INFO's
//! `mem_clients_normal` and the eviction check read them in O(1).
//!
//! Client eviction: while normal and Pub/Sub clients together hold at
//! least the limit, clients are closed, the largest first. As in Redis,
//! evictable clients are kept in buckets by the power of two of their
//! size (32 KiB and below share the first, 8 GiB and above the last), so
//! an update moves a client between buckets in O(1) and eviction starts
//! at the top bucket. Replicas, the master link and clients with `CLIENT
//! NO-EVICT on` are never evicted, but their memory counts all the same.

use std::collections::{HashMap, HashSet};

/// The kinds of client Redis tells apart for memory (`getClientType`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientKind {
    /// Any client not otherwise listed (MONITOR clients too).
    #[default]
    Normal,
    /// A client with subscriptions.
    Pubsub,
    /// A replica attached to this server.
    Replica,
    /// This server's link to its master.
    Master,
}

impl ClientKind {
    fn slot(self) -> usize {
        self as usize
    }

    /// Whether clients of this kind may be evicted.
    fn evictable(self) -> bool {
        matches!(self, ClientKind::Normal | ClientKind::Pubsub)
    }
}

/// Bytes every connection costs before it holds any data: its state in
/// the event loop and the description CLIENT LIST draws from.
pub const CONN_BASE_BYTES: u64 = 1024;
/// Bytes one queued command costs besides its arguments (its vector).
pub const QUEUED_COMMAND_BYTES: u64 = 24;
/// Bytes one argument of a queued command is charged besides its bytes
/// in `multi-mem` (a pointer, as Redis charges it).
pub const QUEUED_ARG_BYTES: u64 = 8;
/// Bytes one watched key costs the client (its entry in the client's
/// list; the key's bytes are not counted, as Redis does not count them).
pub const WATCHED_KEY_BYTES: u64 = 48;
/// Bytes one subscription costs the client (its entry in the client's
/// sets; the channel's bytes are shared with the server's tables).
pub const SUBSCRIPTION_BYTES: u64 = 32;

/// What queuing `args` in a transaction adds to `multi-mem`: the
/// arguments' bytes and a pointer each, as Redis charges them.
pub fn queued_command_bytes(args: &crate::resp::Args<'_>) -> u64 {
    let bytes: usize = (0..args.len()).map(|i| args.get(i).len()).sum();
    args.len() as u64 * QUEUED_ARG_BYTES + bytes as u64
}

/// CLIENT LIST's `multi-mem`: what the queued commands' arguments hold
/// while the client is in a transaction.
pub fn multi_bytes(session: &crate::commands::Session) -> u64 {
    session.multi.as_ref().map_or(0, |_| session.multi_bytes)
}

/// What a client's transaction state costs in all, in O(1): `multi-mem`,
/// a vector per queued command, and the watched keys (whose bytes are
/// not counted, as Redis does not count them: the server's table holds
/// them). Like Redis's figure, it leaves out allocator rounding.
pub fn transaction_bytes(session: &crate::commands::Session) -> u64 {
    let commands = session.multi.as_ref().map_or(0, Vec::len) as u64;
    multi_bytes(session)
        + commands * QUEUED_COMMAND_BYTES
        + session.watched.len() as u64 * WATCHED_KEY_BYTES
}

/// What client `id`'s subscriptions and tracking prefixes cost it.
pub fn pubsub_bytes(hub: &crate::server::pubsub::Hub, id: u64) -> u64 {
    let subscriptions = hub.clients.get(&id).map_or(0, |s| s.total());
    let prefixes = hub
        .tracking
        .clients
        .get(&id)
        .map_or(0, |t| t.prefixes.len());
    (subscriptions + prefixes) as u64 * SUBSCRIPTION_BYTES
}

/// The parts of a client's memory, as CLIENT LIST shows them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Bytes allocated for the query buffer (`qbuf` + `qbuf-free`).
    pub query: u64,
    /// Bytes allocated for replies (`omem`).
    pub output: u64,
    /// The queued transaction and the watched keys
    /// ([`transaction_bytes`]).
    pub multi: u64,
    /// Subscriptions and tracking prefixes.
    pub pubsub: u64,
}

impl Footprint {
    /// `tot-mem`: everything, with the connection's fixed cost.
    pub fn total(&self) -> u64 {
        CONN_BASE_BYTES + self.query + self.output + self.multi + self.pubsub
    }
}

/// Smallest and largest power of two that bound a bucket (Redis's
/// `CLIENT_MEM_USAGE_BUCKET_MIN_LOG` and `_MAX_LOG`).
const BUCKET_MIN_LOG: u32 = 15;
const BUCKET_MAX_LOG: u32 = 33;
const BUCKETS: usize = (BUCKET_MAX_LOG - BUCKET_MIN_LOG + 1) as usize;

/// The bucket of a client holding `bytes`: the number of bits of the
/// figure, clamped to the buckets' range.
fn bucket_of(bytes: u64) -> usize {
    let bits = 64 - bytes.leading_zeros();
    (bits.clamp(BUCKET_MIN_LOG, BUCKET_MAX_LOG) - BUCKET_MIN_LOG) as usize
}

/// One client's entry.
#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    bytes: u64,
    kind: ClientKind,
    no_evict: bool,
    /// The bucket it is in while it may be evicted.
    bucket: Option<usize>,
}

/// Every client's memory, totals per kind, and the eviction buckets.
#[derive(Debug)]
pub struct ClientMemory {
    entries: HashMap<u64, Entry>,
    /// Per kind ([`ClientKind::slot`]), the sum of its clients' figures.
    totals: [u64; 4],
    /// Evictable clients by bucket; kept only while client eviction is on.
    buckets: Vec<HashSet<u64>>,
    enabled: bool,
}

impl Default for ClientMemory {
    fn default() -> ClientMemory {
        ClientMemory {
            entries: HashMap::new(),
            totals: [0; 4],
            buckets: vec![HashSet::new(); BUCKETS],
            enabled: false,
        }
    }
}

impl ClientMemory {
    /// Records client `id`'s figure and kind (adding the client if new).
    pub fn update(&mut self, id: u64, bytes: u64, kind: ClientKind) {
        let entry = self.entries.entry(id).or_default();
        self.totals[entry.kind.slot()] -= entry.bytes;
        self.totals[kind.slot()] += bytes;
        entry.bytes = bytes;
        entry.kind = kind;
        let wanted =
            (self.enabled && kind.evictable() && !entry.no_evict).then(|| bucket_of(bytes));
        if entry.bucket != wanted {
            if let Some(old) = entry.bucket {
                self.buckets[old].remove(&id);
            }
            if let Some(new) = wanted {
                self.buckets[new].insert(id);
            }
            entry.bucket = wanted;
        }
    }

    /// Records client `id`'s figure, its kind unchanged (a client the
    /// ledger does not know is left out: it is being closed).
    pub fn resize(&mut self, id: u64, bytes: u64) {
        if let Some(kind) = self.entries.get(&id).map(|e| e.kind) {
            self.update(id, bytes, kind);
        }
    }

    /// Forgets client `id` (closed).
    pub fn remove(&mut self, id: u64) {
        if let Some(entry) = self.entries.remove(&id) {
            self.totals[entry.kind.slot()] -= entry.bytes;
            if let Some(bucket) = entry.bucket {
                self.buckets[bucket].remove(&id);
            }
        }
    }

    /// CLIENT NO-EVICT: whether client `id` is exempt from eviction.
    pub fn set_no_evict(&mut self, id: u64, on: bool) {
        let entry = self.entries.entry(id).or_default();
        entry.no_evict = on;
        let (bytes, kind) = (entry.bytes, entry.kind);
        self.update(id, bytes, kind);
    }

    /// Whether client `id` is exempt from eviction (CLIENT LIST's `e`).
    pub fn no_evict(&self, id: u64) -> bool {
        self.entries.get(&id).is_some_and(|e| e.no_evict)
    }

    /// Turns the buckets on or off (`maxmemory-clients` set to or from 0),
    /// placing every client where it belongs.
    pub fn set_enabled(&mut self, on: bool) {
        if self.enabled == on {
            return;
        }
        self.enabled = on;
        let ids: Vec<u64> = self.entries.keys().copied().collect();
        for id in ids {
            if let Some(&Entry { bytes, kind, .. }) = self.entries.get(&id) {
                self.update(id, bytes, kind);
            }
        }
    }

    /// Client `id`'s last figure.
    pub fn bytes_of(&self, id: u64) -> Option<u64> {
        self.entries.get(&id).map(|e| e.bytes)
    }

    /// The sum of the figures of one kind of client.
    pub fn total(&self, kind: ClientKind) -> u64 {
        self.totals[kind.slot()]
    }

    /// What client eviction compares with its limit: normal and Pub/Sub
    /// clients, evictable or not.
    pub fn evictable_kinds_total(&self) -> u64 {
        self.total(ClientKind::Normal) + self.total(ClientKind::Pubsub)
    }

    /// INFO's `mem_clients_normal`: every client but the replicas.
    pub fn normal_total(&self) -> u64 {
        self.evictable_kinds_total() + self.total(ClientKind::Master)
    }

    /// Whether clients hold at least `limit` bytes (0: no limit), the
    /// check before every command: O(1).
    pub fn over(&self, limit: u64) -> bool {
        limit > 0 && self.enabled && self.evictable_kinds_total() >= limit
    }

    /// The clients to evict to bring the total under `limit`: the top
    /// bucket's first, each bucket's largest first. Fewer (or none) when
    /// the evictable clients do not suffice.
    pub fn victims(&self, limit: u64) -> Vec<u64> {
        let mut total = self.evictable_kinds_total();
        let mut out = Vec::new();
        for bucket in self.buckets.iter().rev() {
            if total < limit {
                break;
            }
            let mut members: Vec<(u64, u64)> = bucket
                .iter()
                .map(|id| (self.bytes_of(*id).unwrap_or(0), *id))
                .collect();
            members.sort_unstable_by(|a, b| b.cmp(a));
            for (bytes, id) in members {
                if total < limit {
                    break;
                }
                out.push(id);
                total = total.saturating_sub(bytes);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: u64 = 1024;

    #[test]
    fn buckets_are_powers_of_two_from_32k() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(32 * KIB - 1), 0);
        assert_eq!(bucket_of(32 * KIB), 1);
        assert_eq!(bucket_of(64 * KIB - 1), 1);
        assert_eq!(bucket_of(64 * KIB), 2);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn totals_follow_updates_kinds_and_removals() {
        let mut m = ClientMemory::default();
        m.update(1, 100, ClientKind::Normal);
        m.update(2, 50, ClientKind::Pubsub);
        m.update(3, 70, ClientKind::Replica);
        m.update(4, 30, ClientKind::Master);
        assert_eq!(m.evictable_kinds_total(), 150);
        assert_eq!(m.normal_total(), 180);
        assert_eq!(m.total(ClientKind::Replica), 70);
        m.update(1, 10, ClientKind::Pubsub);
        assert_eq!(m.total(ClientKind::Normal), 0);
        assert_eq!(m.total(ClientKind::Pubsub), 60);
        m.remove(2);
        m.remove(2);
        assert_eq!(m.evictable_kinds_total(), 10);
    }

    #[test]
    fn victims_are_the_largest_evictable_clients_until_under_the_limit() {
        let mut m = ClientMemory::default();
        m.set_enabled(true);
        m.update(1, 40 * KIB, ClientKind::Normal);
        m.update(2, 300 * KIB, ClientKind::Normal);
        m.update(3, 200 * KIB, ClientKind::Pubsub);
        m.update(4, 900 * KIB, ClientKind::Replica);
        m.update(5, 500 * KIB, ClientKind::Normal);
        m.set_no_evict(5, true);
        // 1040 KiB of normal and Pub/Sub clients; the replica is neither
        // counted nor evicted, client 5 counted but never evicted.
        assert!(m.over(1000 * KIB));
        assert_eq!(m.victims(1000 * KIB), vec![2]);
        assert_eq!(m.victims(600 * KIB), vec![2, 3]);
        assert_eq!(m.victims(100 * KIB), vec![2, 3, 1], "not enough to evict");
        assert!(!m.over(2000 * KIB));
        m.set_no_evict(5, false);
        assert_eq!(m.victims(1000 * KIB), vec![5]);
    }

    #[test]
    fn disabled_eviction_keeps_totals_but_no_buckets() {
        let mut m = ClientMemory::default();
        m.update(1, 100 * KIB, ClientKind::Normal);
        assert!(!m.over(KIB), "off until maxmemory-clients is set");
        assert!(m.victims(KIB).is_empty());
        m.set_enabled(true);
        assert_eq!(m.victims(KIB), vec![1]);
        m.set_enabled(false);
        assert!(m.victims(KIB).is_empty());
        assert_eq!(m.normal_total(), 100 * KIB);
    }
}
