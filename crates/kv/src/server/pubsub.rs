//! Publish/subscribe state and delivery to other clients.
//!
//! A command runs with only its own connection at hand, so what it sends
//! to other clients (messages, keyspace notifications, invalidations,
//! MONITOR lines) is encoded here, in each receiver's protocol, into an
//! outbox keyed by client id. The event loop moves the outbox into the
//! receivers' reply buffers before it writes replies
//! ([`super::Server::deliver_outbox`]). What goes to the running client
//! itself cannot wait for that: a message it receives while it runs a
//! command precedes the command's reply ([`Hub::inline`]), and an
//! invalidation of a key it changed follows it ([`Hub::after`]), as Redis
//! orders them.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::keyspace::glob::glob_match;
use crate::resp::{Protocol, ReplyBuf};
use crate::state::ClientInfo;
use crate::types::Bytes;

use super::tracking::Tracking;

/// What one client is subscribed to.
#[derive(Debug, Default)]
pub struct ClientSubs {
    /// SUBSCRIBE channels.
    pub channels: HashSet<Bytes>,
    /// PSUBSCRIBE patterns, in subscription order.
    pub patterns: Vec<Bytes>,
    /// SSUBSCRIBE shard channels.
    pub shard: HashSet<Bytes>,
}

impl ClientSubs {
    /// Channels and patterns: the count (P)SUBSCRIBE replies carry.
    pub fn count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// Every subscription: while non-zero the client is in Pub/Sub mode.
    pub fn total(&self) -> usize {
        self.count() + self.shard.len()
    }
}

/// The kind of channel a subscription names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// SUBSCRIBE / PUBLISH.
    Plain,
    /// SSUBSCRIBE / SPUBLISH.
    Shard,
}

impl Kind {
    /// The words of the confirmations and of a delivered message.
    pub fn words(self) -> (&'static [u8], &'static [u8], &'static [u8]) {
        match self {
            Kind::Plain => (b"subscribe", b"unsubscribe", b"message"),
            Kind::Shard => (b"ssubscribe", b"sunsubscribe", b"smessage"),
        }
    }
}

/// Server-wide Pub/Sub, tracking and MONITOR state, and the outbox.
#[derive(Debug, Default)]
pub struct Hub {
    /// Channel to subscribers, in subscription order.
    pub channels: HashMap<Bytes, Vec<u64>>,
    /// Shard channel to subscribers.
    pub shard_channels: HashMap<Bytes, Vec<u64>>,
    /// Pattern to subscribers (a map: PUBSUB NUMPAT counts unique ones).
    pub patterns: BTreeMap<Bytes, Vec<u64>>,
    /// Per-client subscriptions (only clients with some).
    pub clients: HashMap<u64, ClientSubs>,
    /// Bytes for other clients, encoded in their protocols.
    pub outbox: HashMap<u64, Vec<u8>>,
    /// The client running a command (0: none, as in the timer).
    pub current: u64,
    /// For the running client, to precede the rest of its reply.
    pub inline: Vec<u8>,
    /// For the running client, to follow its command's whole reply.
    pub after: Vec<u8>,
    /// MONITOR clients, in the order they started.
    pub monitors: Vec<u64>,
    /// Client-side caching.
    pub tracking: Tracking,
    /// CLIENT REPLY modes other than ON, by client.
    pub reply_modes: HashMap<u64, ReplyMode>,
    /// Where the running client's reply began (to drop it when silenced).
    pub reply_start: usize,
    /// For a silenced running client: its pushes, which are still sent.
    pub kept: Vec<u8>,
    /// Eviction before a command is being settled: the running client's
    /// invalidations precede its reply instead of following it.
    pub evicting: bool,
}

/// CLIENT REPLY OFF and SKIP, as Redis's client flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplyMode {
    /// OFF: no replies until ON.
    pub off: bool,
    /// The reply of the command now running is dropped (after SKIP).
    pub skip: bool,
    /// SKIP was just given: the next command's reply is dropped.
    pub skip_next: bool,
}

/// Which buffer of the hub a message for a client goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// As soon as possible: now in the running client's reply, or through
    /// the outbox for another client.
    Now,
    /// For the running client after its command's reply; for another
    /// client, as [`When::Now`].
    AfterReply,
}

/// The protocol client `id` speaks.
pub fn proto_of(clients: &BTreeMap<u64, ClientInfo>, id: u64) -> Protocol {
    match clients.get(&id).map_or(2, |c| c.resp) {
        3 => Protocol::Resp3,
        _ => Protocol::Resp2,
    }
}

impl Hub {
    /// Encodes something for client `to` with `encode`, in protocol
    /// `proto`, into the buffer `when` picks.
    pub fn send(
        &mut self,
        to: u64,
        proto: Protocol,
        when: When,
        encode: impl FnOnce(&mut ReplyBuf),
    ) {
        let target = if to == self.current {
            match when {
                When::Now => &mut self.inline,
                When::AfterReply => &mut self.after,
            }
        } else {
            self.outbox.entry(to).or_default()
        };
        let mut reply = ReplyBuf {
            buf: std::mem::take(target),
            proto,
        };
        encode(&mut reply);
        *target = reply.buf;
    }

    /// Whether client `id` is in Pub/Sub mode (subscribed to anything).
    pub fn is_subscribed(&self, id: u64) -> bool {
        self.clients.get(&id).is_some_and(|s| s.total() > 0)
    }

    /// The (channels, patterns, shard channels) counts of client `id`.
    pub fn counts(&self, id: u64) -> (usize, usize, usize) {
        self.clients.get(&id).map_or((0, 0, 0), |s| {
            (s.channels.len(), s.patterns.len(), s.shard.len())
        })
    }

    fn table(&mut self, kind: Kind) -> &mut HashMap<Bytes, Vec<u64>> {
        match kind {
            Kind::Plain => &mut self.channels,
            Kind::Shard => &mut self.shard_channels,
        }
    }

    /// Subscribes `id` to `channel`; returns the client's new count.
    pub fn subscribe(&mut self, id: u64, channel: &[u8], kind: Kind) -> usize {
        let subs = self.clients.entry(id).or_default();
        let set = match kind {
            Kind::Plain => &mut subs.channels,
            Kind::Shard => &mut subs.shard,
        };
        if set.insert(channel.into()) {
            self.table(kind).entry(channel.into()).or_default().push(id);
        }
        self.count_of(id, kind)
    }

    /// Unsubscribes `id` from `channel`; returns whether it was subscribed.
    pub fn unsubscribe(&mut self, id: u64, channel: &[u8], kind: Kind) -> bool {
        let Some(subs) = self.clients.get_mut(&id) else {
            return false;
        };
        let set = match kind {
            Kind::Plain => &mut subs.channels,
            Kind::Shard => &mut subs.shard,
        };
        if !set.remove(channel) {
            return false;
        }
        let table = self.table(kind);
        if let Some(ids) = table.get_mut(channel) {
            ids.retain(|&c| c != id);
            if ids.is_empty() {
                table.remove(channel);
            }
        }
        true
    }

    /// Subscribes `id` to `pattern`; returns the client's new count.
    pub fn psubscribe(&mut self, id: u64, pattern: &[u8]) -> usize {
        let subs = self.clients.entry(id).or_default();
        if !subs.patterns.iter().any(|p| &**p == pattern) {
            subs.patterns.push(pattern.into());
            self.patterns.entry(pattern.into()).or_default().push(id);
        }
        self.count_of(id, Kind::Plain)
    }

    /// Unsubscribes `id` from `pattern`; returns whether it was subscribed.
    pub fn punsubscribe(&mut self, id: u64, pattern: &[u8]) -> bool {
        let Some(subs) = self.clients.get_mut(&id) else {
            return false;
        };
        let before = subs.patterns.len();
        subs.patterns.retain(|p| &**p != pattern);
        if subs.patterns.len() == before {
            return false;
        }
        if let Some(ids) = self.patterns.get_mut(pattern) {
            ids.retain(|&c| c != id);
            if ids.is_empty() {
                self.patterns.remove(pattern);
            }
        }
        true
    }

    /// The count a (un)subscription reply of `kind` carries.
    pub fn count_of(&self, id: u64, kind: Kind) -> usize {
        self.clients.get(&id).map_or(0, |s| match kind {
            Kind::Plain => s.count(),
            Kind::Shard => s.shard.len(),
        })
    }

    /// Drops the client's record once it has no subscription left.
    pub fn tidy(&mut self, id: u64) {
        if self.clients.get(&id).is_some_and(|s| s.total() == 0) {
            self.clients.remove(&id);
        }
    }

    /// Forgets client `id` entirely (RESET, a closed connection): its
    /// subscriptions, tracking, MONITOR, and anything still for it.
    pub fn forget_client(&mut self, id: u64) {
        self.drop_subscriptions(id);
        self.tracking.disable(id);
        self.monitors.retain(|&m| m != id);
        self.outbox.remove(&id);
        self.reply_modes.remove(&id);
    }

    /// Whether the running client's replies are being dropped (CLIENT
    /// REPLY OFF or SKIP); its pushes still go out.
    pub fn silenced(&self) -> bool {
        !self.reply_modes.is_empty()
            && self
                .reply_modes
                .get(&self.current)
                .is_some_and(|m| m.off || m.skip)
    }

    /// Removes every subscription of `id` without replies.
    pub fn drop_subscriptions(&mut self, id: u64) {
        let Some(subs) = self.clients.remove(&id) else {
            return;
        };
        for (set, table) in [
            (subs.channels, &mut self.channels),
            (subs.shard, &mut self.shard_channels),
        ] {
            for channel in set {
                if let Some(ids) = table.get_mut(&channel) {
                    ids.retain(|&c| c != id);
                    if ids.is_empty() {
                        table.remove(&channel);
                    }
                }
            }
        }
        for pattern in subs.patterns {
            if let Some(ids) = self.patterns.get_mut(&pattern) {
                ids.retain(|&c| c != id);
                if ids.is_empty() {
                    self.patterns.remove(&pattern);
                }
            }
        }
    }
}

/// Publishes `message` on `channel` to its subscribers and, for plain
/// channels, to the clients whose patterns match; returns how many
/// deliveries were made (a client matching twice counts twice).
pub fn publish(
    hub: &mut Hub,
    clients: &BTreeMap<u64, ClientInfo>,
    channel: &[u8],
    message: &[u8],
    kind: Kind,
) -> usize {
    let mut receivers = 0;
    let subscribers = match kind {
        Kind::Plain => hub.channels.get(channel).cloned(),
        Kind::Shard => hub.shard_channels.get(channel).cloned(),
    };
    let word = kind.words().2;
    for id in subscribers.unwrap_or_default() {
        hub.send(id, proto_of(clients, id), When::Now, |r| {
            r.push(3);
            r.bulk(word);
            r.bulk(channel);
            r.bulk(message);
        });
        receivers += 1;
    }
    if kind == Kind::Shard || hub.patterns.is_empty() {
        return receivers;
    }
    let matching: Vec<(Bytes, Vec<u64>)> = hub
        .patterns
        .iter()
        .filter(|(pattern, _)| glob_match(pattern, channel))
        .map(|(p, ids)| (p.clone(), ids.clone()))
        .collect();
    for (pattern, ids) in matching {
        for id in ids {
            hub.send(id, proto_of(clients, id), When::Now, |r| {
                r.push(4);
                r.bulk(b"pmessage");
                r.bulk(&pattern);
                r.bulk(channel);
                r.bulk(message);
            });
            receivers += 1;
        }
    }
    receivers
}

/// INFO clients: `tracking_clients`.
pub fn info_clients(state: &crate::state::State, out: &mut String) {
    use std::fmt::Write;
    let _ = write!(
        out,
        "tracking_clients:{}\r\n",
        state.pubsub.tracking.clients.len()
    );
}

/// INFO stats: the Pub/Sub and tracking table sizes.
pub fn info_stats(state: &crate::state::State, out: &mut String) {
    use std::fmt::Write;
    let hub = &state.pubsub;
    let _ = write!(
        out,
        "pubsub_channels:{}\r\npubsub_patterns:{}\r\npubsubshard_channels:{}\r\ntracking_total_keys:{}\r\ntracking_total_items:{}\r\ntracking_total_prefixes:{}\r\n",
        hub.channels.len(),
        hub.patterns.len(),
        hub.shard_channels.len(),
        hub.tracking.keys(),
        hub.tracking.items(),
        hub.tracking.prefixes(),
    );
}

impl super::Server {
    /// Moves what commands and the timer left for clients into their reply
    /// buffers (after this iteration's BCAST invalidations are collected),
    /// and queues those connections for writing.
    pub(super) fn deliver_outbox(&mut self) {
        let state = &mut self.state;
        if !state.pubsub.tracking.clients.is_empty() {
            super::tracking::broadcast(&mut state.pubsub, &state.clients);
        }
        if state.pubsub.outbox.is_empty() {
            return;
        }
        for (id, bytes) in std::mem::take(&mut self.state.pubsub.outbox) {
            let Some(&index) = self.ids.get(&id) else {
                continue;
            };
            let Some(conn) = self.conns.get_mut(index).and_then(Option::as_mut) else {
                continue;
            };
            conn.reply.buf.extend_from_slice(&bytes);
            if let Some(mut conn) = self.conns[index].take() {
                // A subscriber that does not read would hold every message
                // in memory (`obuf.rs`).
                self.enforce_output_limit(&mut conn);
                self.count_client(&mut conn, index);
                self.conns[index] = Some(conn);
            }
            self.mark_ready(index);
        }
    }
}
