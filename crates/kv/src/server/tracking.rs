//! Client-side caching (CLIENT TRACKING): which clients read which keys,
//! and the invalidation messages sent when those keys change.
//!
//! In the default mode the table maps each key read by a tracking client
//! to the clients that read it; a write to the key sends each of them one
//! invalidation and forgets the key, until they read it again. In BCAST
//! mode clients name key prefixes instead, and every change to a key under
//! a prefix is collected and sent to them once per event-loop iteration.
//! As in Redis the table is global: keys of every database share it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::resp::Protocol;
use crate::state::ClientInfo;
use crate::types::Bytes;

use super::pubsub::{proto_of, Hub, When};

/// The channel RESP2 clients receive redirected invalidations on.
pub const INVALIDATE_CHANNEL: &[u8] = b"__redis__:invalidate";

/// One tracking client's options.
#[derive(Clone, Debug, Default)]
pub struct ClientTracking {
    /// Client that receives the invalidations (0: this one).
    pub redirect: u64,
    /// BCAST mode.
    pub bcast: bool,
    /// OPTIN: track only reads after CLIENT CACHING YES.
    pub optin: bool,
    /// OPTOUT: track reads unless after CLIENT CACHING NO.
    pub optout: bool,
    /// NOLOOP: no invalidations for the client's own writes.
    pub noloop: bool,
    /// CLIENT CACHING was given for the next command.
    pub caching: bool,
    /// The redirect client disconnected.
    pub broken_redirect: bool,
    /// BCAST prefixes, sorted as Redis lists them.
    pub prefixes: BTreeSet<Bytes>,
}

/// A BCAST prefix: its clients and the keys changed under it since the
/// last broadcast, each with the client that changed it last (0: none).
#[derive(Debug, Default)]
struct Prefix {
    clients: BTreeSet<u64>,
    keys: BTreeMap<Bytes, u64>,
}

/// The tracking state of the server.
#[derive(Debug, Default)]
pub struct Tracking {
    /// Clients with tracking on.
    pub clients: HashMap<u64, ClientTracking>,
    /// Key to the clients that read it since its last invalidation.
    table: HashMap<Bytes, HashSet<u64>>,
    /// BCAST prefixes.
    prefixes: BTreeMap<Bytes, Prefix>,
}

/// What an invalidation names.
#[derive(Clone, Copy, Debug)]
enum Payload<'a> {
    /// One key.
    Key(&'a [u8]),
    /// Several keys (a BCAST round).
    Keys(&'a [Bytes]),
    /// Every key (after FLUSHDB and FLUSHALL): a null encoded in the
    /// protocol of this tracking client.
    All(Protocol),
}

impl Tracking {
    /// Whether any client tracks keys (so changes must be looked at).
    pub fn active(&self) -> bool {
        !self.clients.is_empty()
    }

    /// Keys in the table (INFO's `tracking_total_keys`).
    pub fn keys(&self) -> usize {
        self.table.len()
    }

    /// Client entries in the table (INFO's `tracking_total_items`).
    pub fn items(&self) -> usize {
        self.table.values().map(HashSet::len).sum()
    }

    /// BCAST prefixes in use (INFO's `tracking_total_prefixes`).
    pub fn prefixes(&self) -> usize {
        self.prefixes.len()
    }

    /// Turns tracking on for `id`, replacing earlier options but keeping
    /// earlier BCAST prefixes.
    pub fn enable(&mut self, id: u64, options: ClientTracking, prefixes: &[Bytes]) {
        let entry = self.clients.entry(id).or_default();
        let kept = std::mem::take(&mut entry.prefixes);
        *entry = ClientTracking {
            prefixes: kept,
            ..options
        };
        if !entry.bcast {
            return;
        }
        let wanted: Vec<Bytes> = if prefixes.is_empty() {
            vec![Bytes::from(&b""[..])]
        } else {
            prefixes.to_vec()
        };
        for prefix in wanted {
            entry.prefixes.insert(prefix.clone());
            self.prefixes.entry(prefix).or_default().clients.insert(id);
        }
    }

    /// Turns tracking off for `id`. Its entries in the key table stay
    /// until those keys change, as in Redis; they are skipped then.
    pub fn disable(&mut self, id: u64) {
        let Some(client) = self.clients.remove(&id) else {
            return;
        };
        for prefix in client.prefixes {
            if let Some(state) = self.prefixes.get_mut(&prefix) {
                state.clients.remove(&id);
                if state.clients.is_empty() {
                    self.prefixes.remove(&prefix);
                }
            }
        }
    }

    /// Records that `id` read `keys`, if its mode and CLIENT CACHING say
    /// the read counts.
    pub fn remember(&mut self, id: u64, keys: impl Iterator<Item = Bytes>) {
        let Some(client) = self.clients.get(&id) else {
            return;
        };
        if client.bcast || (client.optin && !client.caching) || (client.optout && client.caching) {
            return;
        }
        for key in keys {
            self.table.entry(key).or_default().insert(id);
        }
    }

    /// The prefixes of `id` that overlap `prefix` (one is a prefix of the
    /// other), for CLIENT TRACKING's collision check.
    pub fn overlapping(&self, id: u64, prefix: &[u8]) -> Option<Bytes> {
        let client = self.clients.get(&id)?;
        client
            .prefixes
            .iter()
            .find(|p| overlaps(p, prefix))
            .cloned()
    }
}

/// Whether one of `a` and `b` is a prefix of the other.
pub fn overlaps(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// Key `key` changed: queues it for BCAST clients and invalidates it for
/// the clients that read it. `by_command`: the running client
/// (`hub.current`) changed it, rather than expiry; BCAST's NOLOOP leaves
/// out only such changes, while the default mode's NOLOOP, as Redis's,
/// leaves out anything that happens while the client runs a command.
pub fn invalidate_key(
    hub: &mut Hub,
    clients: &BTreeMap<u64, ClientInfo>,
    key: &[u8],
    by_command: bool,
) {
    let current = hub.current;
    let modifier = if by_command { current } else { 0 };
    for (prefix, state) in hub.tracking.prefixes.iter_mut() {
        if key.starts_with(prefix) {
            state.keys.insert(key.into(), modifier);
        }
    }
    let Some(ids) = hub.tracking.table.remove(key) else {
        return;
    };
    let mut ids: Vec<u64> = ids.into_iter().collect();
    ids.sort_unstable();
    for id in ids {
        let Some(client) = hub.tracking.clients.get(&id) else {
            continue;
        };
        if client.bcast || (client.noloop && id == current) {
            continue;
        }
        send(hub, clients, id, Payload::Key(key), true);
    }
}

/// A database was flushed: every tracking client learns that all keys
/// are invalid, and the table starts again empty.
pub fn invalidate_all(hub: &mut Hub, clients: &BTreeMap<u64, ClientInfo>) {
    let mut ids: Vec<u64> = hub.tracking.clients.keys().copied().collect();
    ids.sort_unstable();
    for id in ids {
        let proto = proto_of(clients, id);
        send(hub, clients, id, Payload::All(proto), true);
    }
    hub.tracking.table.clear();
}

/// Sends every BCAST prefix's collected keys to its clients (once per
/// event-loop iteration, before replies are written).
pub fn broadcast(hub: &mut Hub, clients: &BTreeMap<u64, ClientInfo>) {
    let mut rounds = Vec::new();
    for state in hub.tracking.prefixes.values_mut() {
        if state.keys.is_empty() {
            continue;
        }
        let keys = std::mem::take(&mut state.keys);
        rounds.push((state.clients.iter().copied().collect::<Vec<_>>(), keys));
    }
    for (ids, keys) in rounds {
        for id in ids {
            let noloop = hub.tracking.clients.get(&id).is_some_and(|c| c.noloop);
            let names: Vec<Bytes> = keys
                .iter()
                .filter(|(_, &by)| !(noloop && by == id))
                .map(|(k, _)| k.clone())
                .collect();
            if !names.is_empty() {
                send(hub, clients, id, Payload::Keys(&names), true);
            }
        }
    }
}

/// Sends one invalidation for tracking client `id`: to itself in RESP3,
/// or to its redirect client (a RESP3 push, or a message on
/// [`INVALIDATE_CHANNEL`] if that client is subscribed in RESP2). An
/// invalidation the running client caused for itself follows its reply
/// when `after_own_reply`.
fn send(
    hub: &mut Hub,
    clients: &BTreeMap<u64, ClientInfo>,
    id: u64,
    payload: Payload<'_>,
    after_own_reply: bool,
) {
    let Some(client) = hub.tracking.clients.get_mut(&id) else {
        return;
    };
    let when = if id == hub.current && after_own_reply && !hub.evicting {
        When::AfterReply
    } else {
        When::Now
    };
    let mut to = id;
    if client.redirect != 0 {
        let redirect = client.redirect;
        if !clients.contains_key(&redirect) {
            client.broken_redirect = true;
            if proto_of(clients, id) == Protocol::Resp3 {
                hub.send(id, Protocol::Resp3, when, |r| {
                    r.push(2);
                    r.bulk(b"tracking-redir-broken");
                    r.int(redirect as i64);
                });
            }
            return;
        }
        to = redirect;
    }
    let proto = proto_of(clients, to);
    let as_message = proto == Protocol::Resp2;
    if as_message && (to == id || !hub.is_subscribed(to)) {
        // RESP2 has no push messages: without a subscribed redirect
        // client there is nowhere to send this.
        return;
    }
    hub.send(to, proto, when, |r| {
        if as_message {
            r.array(3);
            r.bulk(b"message");
            r.bulk(INVALIDATE_CHANNEL);
        } else {
            r.push(2);
            r.bulk(b"invalidate");
        }
        match payload {
            Payload::Key(key) => {
                r.array(1);
                r.bulk(key);
            }
            Payload::Keys(keys) => r.bulks(keys.iter().map(|k| &k[..])),
            Payload::All(Protocol::Resp2) => r.buf.extend_from_slice(b"$-1\r\n"),
            Payload::All(Protocol::Resp3) => r.buf.extend_from_slice(b"_\r\n"),
        }
    });
}

/// Keeps the table within `tracking-table-max-keys` (0: no limit): keys
/// beyond it are dropped, and their clients told to drop them too, since
/// the server no longer tracks them for them.
pub fn limit(hub: &mut Hub, clients: &BTreeMap<u64, ClientInfo>, keys_max: usize) {
    if keys_max == 0 {
        return;
    }
    while hub.tracking.table.len() > keys_max {
        let Some(key) = hub.tracking.table.keys().next().cloned() else {
            return;
        };
        let Some(ids) = hub.tracking.table.remove(&key) else {
            return;
        };
        let mut ids: Vec<u64> = ids.into_iter().collect();
        ids.sort_unstable();
        for id in ids {
            if hub.tracking.clients.get(&id).is_some_and(|c| !c.bcast) {
                // Not a change the client made: no reply to wait for.
                send(hub, clients, id, Payload::Key(&key), false);
            }
        }
    }
}
