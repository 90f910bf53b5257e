//! The node table every cluster node keeps (`docs/cluster.md`): this
//! node's ID, the epochs, every known node, the owner of each slot and
//! the slots being migrated or imported; the text of `CLUSTER NODES` and
//! of `nodes.conf`, and reading that file back.

use std::collections::BTreeMap;

use super::node::{flags, flags_text, parse_flags, Node, NodeId};
use super::slot::SLOTS;

/// How long a primary stays `fail` after start-up before it may turn
/// `ok`, so the cluster can reconfigure it first (milliseconds, Redis's
/// figure).
const WRITABLE_DELAY_MS: i64 = 2000;
/// Bounds of the delay before a primary that was in a minority partition
/// accepts queries again (milliseconds, Redis's figures).
const REJOIN_DELAY_MS: (i64, i64) = (500, 5000);

/// Number of bus message types counted in `CLUSTER INFO`.
pub const MESSAGE_TYPES: usize = 11;

/// The whole cluster as this node knows it.
#[derive(Clone, Debug)]
pub struct ClusterState {
    /// This node's ID.
    pub myself: NodeId,
    /// The highest epoch seen in the cluster.
    pub current_epoch: u64,
    /// The epoch of the last failover vote this node granted.
    pub last_vote_epoch: u64,
    /// Every known node, this one included.
    pub nodes: BTreeMap<NodeId, Node>,
    /// The owner of each slot.
    pub slots: Vec<Option<NodeId>>,
    /// Slots this node is migrating, to the target node.
    pub migrating: BTreeMap<u16, NodeId>,
    /// Slots this node is importing, from the source node.
    pub importing: BTreeMap<u16, NodeId>,
    /// Whether the cluster serves queries (`cluster_state:ok`).
    pub ok: bool,
    /// Primaries serving at least one slot (`cluster_size`).
    pub size: usize,
    /// When [`ClusterState::update_state`] first ran, and when this node
    /// last saw itself in a minority partition (Unix milliseconds).
    pub first_update_ms: i64,
    pub minority_since_ms: i64,
    /// Bus messages sent and received, by type.
    pub sent: [u64; MESSAGE_TYPES],
    pub received: [u64; MESSAGE_TYPES],
    /// The table changed in a way `nodes.conf` must record.
    pub dirty: bool,
    /// Nodes FORGET removed, not to be re-added from gossip until the
    /// given time (Unix milliseconds).
    pub blacklist: BTreeMap<NodeId, i64>,
    /// This node's replication offset, for the bus header (kept current
    /// by the event loop's tick).
    pub my_offset: i64,
    /// This replica's failover election.
    pub election: super::failover::Election,
    /// A manual failover (plain CLUSTER FAILOVER) in progress.
    pub manual: super::manual::Manual,
    /// A role change for the event loop's replication to carry out.
    pub role_change: Option<super::failover::RoleChange>,
    /// Replica migration's settings and orphan times (`migration.rs`).
    pub migration: super::migration::Migration,
    /// Messages published on this node for the bus to send: channel,
    /// message, and whether sharded (to this shard's nodes only).
    pub publish_out: Vec<(Vec<u8>, Vec<u8>, bool)>,
    /// Messages other nodes published, for the event loop to deliver.
    pub publish_in: Vec<(Vec<u8>, Vec<u8>, bool)>,
    /// DEBUG CLUSTERLINK KILL requests for the bus: the node, and whether
    /// to close the link to it and the link from it.
    pub link_kills: Vec<(NodeId, bool, bool)>,
}

impl ClusterState {
    /// A fresh node: a primary alone in its cluster, with no slots.
    pub fn new(myself: NodeId, port: u16, cport: u16, now_ms: i64) -> ClusterState {
        let me = Node::new(
            myself,
            flags::MYSELF | flags::MASTER,
            "",
            port,
            cport,
            now_ms,
        );
        let mut nodes = BTreeMap::new();
        nodes.insert(myself, me);
        ClusterState {
            myself,
            current_epoch: 0,
            last_vote_epoch: 0,
            nodes,
            slots: vec![None; SLOTS],
            migrating: BTreeMap::new(),
            importing: BTreeMap::new(),
            ok: false,
            // As Redis: 1 until the state is first computed.
            size: 1,
            first_update_ms: 0,
            minority_since_ms: 0,
            sent: [0; MESSAGE_TYPES],
            received: [0; MESSAGE_TYPES],
            dirty: true,
            blacklist: BTreeMap::new(),
            my_offset: 0,
            election: Default::default(),
            manual: Default::default(),
            role_change: None,
            migration: Default::default(),
            publish_out: Vec::new(),
            publish_in: Vec::new(),
            link_kills: Vec::new(),
        }
    }

    /// This node.
    pub fn me(&self) -> &Node {
        // `myself` is inserted at creation and never removed.
        &self.nodes[&self.myself]
    }

    /// This node, to change.
    pub fn me_mut(&mut self) -> &mut Node {
        let id = self.myself;
        self.nodes
            .entry(id)
            .or_insert_with(|| Node::new(id, flags::MYSELF, "", 0, 0, 0))
    }

    /// The node whose slots this node serves: itself, or its primary.
    pub fn serving_primary(&self) -> Option<NodeId> {
        let me = self.me();
        if me.is_replica() {
            me.primary
        } else {
            Some(self.myself)
        }
    }

    /// Number of slots `id` owns.
    pub fn slot_count(&self, id: &NodeId) -> usize {
        self.slots.iter().filter(|s| s.as_ref() == Some(id)).count()
    }

    /// The runs of consecutive slots `id` owns, as `(first, last)`.
    pub fn slot_ranges(&self, id: &NodeId) -> Vec<(u16, u16)> {
        let mut out = Vec::new();
        let mut start: Option<usize> = None;
        for slot in 0..=SLOTS {
            let owned = slot < SLOTS && self.slots[slot].as_ref() == Some(id);
            match (owned, start) {
                (true, None) => start = Some(slot),
                (false, Some(first)) => {
                    out.push((first as u16, (slot - 1) as u16));
                    start = None;
                }
                _ => {}
            }
        }
        out
    }

    /// The replicas of `primary` that this node knows.
    pub fn replicas_of(&self, primary: &NodeId) -> Vec<&Node> {
        self.nodes
            .values()
            .filter(|n| n.is_replica() && n.primary.as_ref() == Some(primary))
            .collect()
    }

    /// The highest config epoch of any node, and the current epoch if higher.
    pub fn max_epoch(&self) -> u64 {
        self.nodes
            .values()
            .map(|n| n.config_epoch)
            .max()
            .unwrap_or(0)
            .max(self.current_epoch)
    }

    /// Removes `id` from the table with its slots and its failure reports.
    pub fn forget(&mut self, id: &NodeId) {
        for owner in self.slots.iter_mut() {
            if owner.as_ref() == Some(id) {
                *owner = None;
            }
        }
        self.migrating.retain(|_, n| n != id);
        self.importing.retain(|_, n| n != id);
        self.nodes.remove(id);
        for node in self.nodes.values_mut() {
            node.fail_reports.retain(|(r, _)| r != id);
        }
        self.dirty = true;
    }

    /// Recomputes `ok` and `size` as Redis does (full coverage when
    /// required, a majority of the primaries with slots reachable, the
    /// start-up and rejoin delays before a primary turns `ok`).
    pub fn update_state(&mut self, now_ms: i64, full_coverage: bool, node_timeout_ms: i64) {
        if self.first_update_ms == 0 {
            self.first_update_ms = now_ms;
        }
        let me_primary = self.me().is_primary();
        if me_primary && !self.ok && now_ms - self.first_update_ms < WRITABLE_DELAY_MS {
            return;
        }
        let mut new_ok = true;
        if full_coverage {
            new_ok = self.slots.iter().all(|s| match s {
                Some(id) => self.nodes.get(id).is_some_and(|n| !n.has(flags::FAIL)),
                None => false,
            });
        }
        let mut counts: BTreeMap<NodeId, usize> = BTreeMap::new();
        for id in self.slots.iter().flatten() {
            *counts.entry(*id).or_default() += 1;
        }
        let serving: Vec<&Node> = self
            .nodes
            .values()
            .filter(|n| n.is_primary() && counts.contains_key(&n.id))
            .collect();
        self.size = serving.len();
        let reachable = serving
            .iter()
            .filter(|n| !n.has(flags::FAIL | flags::PFAIL))
            .count();
        if reachable < self.size / 2 + 1 {
            new_ok = false;
            self.minority_since_ms = now_ms;
        }
        if new_ok != self.ok {
            let rejoin = node_timeout_ms.clamp(REJOIN_DELAY_MS.0, REJOIN_DELAY_MS.1);
            if new_ok && me_primary && now_ms - self.minority_since_ms < rejoin {
                return;
            }
            self.ok = new_ok;
            // Operators read state changes from the log, as in Redis.
            tracing::warn!(
                "cluster state changed: {}",
                if new_ok { "ok" } else { "fail" }
            );
        }
    }

    /// One node's `CLUSTER NODES` line, without the newline.
    pub fn node_line(&self, node: &Node) -> String {
        let mut line = format!(
            "{} {} {} ",
            node.id,
            node.address_text(),
            flags_text(node.flags)
        );
        match node.primary {
            Some(p) if node.is_replica() => line.push_str(p.as_str()),
            _ => line.push('-'),
        }
        let epoch = match node.primary.and_then(|p| self.nodes.get(&p)) {
            Some(primary) if node.is_replica() => primary.config_epoch,
            _ => node.config_epoch,
        };
        let linked = node.link_up || node.has(flags::MYSELF);
        line.push_str(&format!(
            " {} {} {} {}",
            node.ping_sent_ms,
            node.pong_received_ms,
            epoch,
            if linked { "connected" } else { "disconnected" }
        ));
        for (first, last) in self.slot_ranges(&node.id) {
            if first == last {
                line.push_str(&format!(" {first}"));
            } else {
                line.push_str(&format!(" {first}-{last}"));
            }
        }
        if node.has(flags::MYSELF) {
            for slot in 0..SLOTS as u16 {
                if let Some(to) = self.migrating.get(&slot) {
                    line.push_str(&format!(" [{slot}->-{to}]"));
                } else if let Some(from) = self.importing.get(&slot) {
                    line.push_str(&format!(" [{slot}-<-{from}]"));
                }
            }
        }
        line
    }

    /// `CLUSTER NODES`: one line per node, each ending in a newline;
    /// nodes in handshake left out when `skip_handshake`.
    pub fn nodes_text(&self, skip_handshake: bool) -> String {
        let mut out = String::new();
        for node in self.nodes.values() {
            if skip_handshake && node.has(flags::HANDSHAKE) {
                continue;
            }
            out.push_str(&self.node_line(node));
            out.push('\n');
        }
        out
    }

    /// The text of `nodes.conf`.
    pub fn config_text(&self) -> String {
        let mut text = self.nodes_text(true);
        text.push_str(&format!(
            "vars currentEpoch {} lastVoteEpoch {}\n",
            self.current_epoch, self.last_vote_epoch
        ));
        text
    }
}

/// Why a `nodes.conf` could not be read: the line number and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub reason: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

/// Reads `nodes.conf` text back into a table. `port` and `cport` replace
/// this node's own address ports, as Redis takes them from its
/// configuration rather than from the file.
pub fn parse_config(text: &str, port: u16, cport: u16) -> Result<ClusterState, ConfigError> {
    let mut nodes = BTreeMap::new();
    let mut slots = vec![None; SLOTS];
    let mut migrating = BTreeMap::new();
    let mut importing = BTreeMap::new();
    let (mut current_epoch, mut last_vote_epoch) = (0, 0);
    let mut myself = None;
    for (index, raw) in text.lines().enumerate() {
        let fail = |reason: &str| ConfigError {
            line: index + 1,
            reason: reason.to_string(),
        };
        let words: Vec<&str> = raw.split_whitespace().collect();
        let Some(first) = words.first() else {
            continue;
        };
        if *first == "vars" {
            let mut pairs = words[1..].chunks(2);
            for pair in pairs.by_ref() {
                let [name, value] = pair else {
                    return Err(fail("a vars name without a value"));
                };
                let value: u64 = value
                    .parse()
                    .map_err(|_| fail("a vars value is not a number"))?;
                match *name {
                    "currentEpoch" => current_epoch = value,
                    "lastVoteEpoch" => last_vote_epoch = value,
                    _ => {}
                }
            }
            continue;
        }
        if words.len() < 8 {
            return Err(fail("fewer than 8 fields"));
        }
        let node = parse_node_line(&words).map_err(|r| fail(&r))?;
        if node.has(flags::MYSELF) {
            myself = Some(node.id);
        }
        for spec in &words[8..] {
            parse_slot_spec(spec, node.id, &mut slots, &mut migrating, &mut importing)
                .map_err(|r| fail(&r))?;
        }
        nodes.insert(node.id, node);
    }
    let myself = myself.ok_or(ConfigError {
        line: 0,
        reason: "no line is flagged myself".to_string(),
    })?;
    let mut state = ClusterState::new(myself, port, cport, 0);
    state.nodes = nodes;
    let me = state.me_mut();
    me.port = port;
    me.cport = cport;
    state.slots = slots;
    state.migrating = migrating;
    state.importing = importing;
    state.current_epoch = current_epoch;
    state.last_vote_epoch = last_vote_epoch;
    state.dirty = false;
    Ok(state)
}

/// One node line's first eight fields.
fn parse_node_line(words: &[&str]) -> Result<Node, String> {
    let id = NodeId::parse(words[0].as_bytes()).ok_or("the node ID is not 40 hex characters")?;
    let (address, hostname) = match words[1].split_once(',') {
        Some((a, h)) => (a, h),
        None => (words[1], ""),
    };
    let (ip_port, cport) = match address.split_once('@') {
        Some((a, c)) => (a, Some(c)),
        None => (address, None),
    };
    let (ip, port) = ip_port.rsplit_once(':').ok_or("the address has no port")?;
    let port: u16 = port.parse().map_err(|_| "the port is not a number")?;
    let cport: u16 = match cport {
        Some(c) => c.parse().map_err(|_| "the bus port is not a number")?,
        None => port.wrapping_add(10000),
    };
    let bits = parse_flags(words[2]).ok_or("unknown node flag")?;
    let mut node = Node::new(id, bits, ip, port, cport, 0);
    node.hostname = hostname.to_string();
    if words[3] != "-" {
        node.primary =
            Some(NodeId::parse(words[3].as_bytes()).ok_or("the primary's ID is malformed")?);
    }
    node.ping_sent_ms = words[4].parse().map_err(|_| "ping_sent is not a number")?;
    node.pong_received_ms = words[5].parse().map_err(|_| "pong_recv is not a number")?;
    node.config_epoch = words[6]
        .parse()
        .map_err(|_| "the config epoch is not a number")?;
    // A loaded node is not linked yet, whatever the file says.
    node.link_up = false;
    Ok(node)
}

/// A slot field: `N`, `N-M`, `[N->-id]` or `[N-<-id]`.
fn parse_slot_spec(
    spec: &str,
    owner: NodeId,
    slots: &mut [Option<NodeId>],
    migrating: &mut BTreeMap<u16, NodeId>,
    importing: &mut BTreeMap<u16, NodeId>,
) -> Result<(), String> {
    let slot_of = |t: &str| -> Result<u16, String> {
        t.parse::<u16>()
            .ok()
            .filter(|&s| usize::from(s) < SLOTS)
            .ok_or_else(|| format!("bad slot {t:?}"))
    };
    if let Some(inner) = spec.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
        let (slot, id, map) = if let Some((s, id)) = inner.split_once("->-") {
            (s, id, migrating)
        } else if let Some((s, id)) = inner.split_once("-<-") {
            (s, id, importing)
        } else {
            return Err(format!("bad slot state {spec:?}"));
        };
        let id = NodeId::parse(id.as_bytes()).ok_or("bad node ID in a slot state")?;
        map.insert(slot_of(slot)?, id);
        return Ok(());
    }
    let (first, last) = match spec.split_once('-') {
        Some((a, b)) => (slot_of(a)?, slot_of(b)?),
        None => (slot_of(spec)?, slot_of(spec)?),
    };
    for slot in first..=last {
        slots[usize::from(slot)] = Some(owner);
    }
    Ok(())
}
