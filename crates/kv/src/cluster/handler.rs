//! What a node does with each bus message and on each tick, as pure
//! functions of the node table (`docs/cluster.md`): the bus thread
//! (`bus.rs`) does the I/O and calls these under the table's lock.

use std::net::SocketAddr;

use super::msg::{self, types, Body, Gossip, Header, Message, BITMAP_LEN};
use super::node::{flags, Node, NodeId};
use super::slot::SLOTS;
use super::state::ClusterState;

/// What the bus knows of the link a message came on.
#[derive(Debug, Clone)]
pub struct LinkView {
    pub inbound: bool,
    pub node: Option<NodeId>,
    pub local_ip: String,
    pub peer_ip: String,
}

/// What handling a message calls for.
#[derive(Debug, Default)]
pub struct Outgoing {
    /// Messages to send back on the link.
    pub reply: Vec<Vec<u8>>,
    /// Messages to send to every node.
    pub broadcast: Vec<Vec<u8>>,
    /// The link now belongs to this node.
    pub link_node: Option<NodeId>,
    /// Close the link.
    pub close_link: bool,
    /// Write `nodes.conf` before sending the replies (a vote).
    pub save_first: bool,
}

/// What a tick calls for.
#[derive(Debug, Default)]
pub struct Plan {
    /// Open a link to the node at the address and send it the message.
    pub connect: Vec<(NodeId, SocketAddr, Vec<u8>)>,
    /// Send the node a PING.
    pub ping: Vec<(NodeId, Vec<u8>)>,
    /// Send every node a message.
    pub broadcast: Vec<Vec<u8>>,
    /// Nodes whose links must close.
    pub gone: Vec<NodeId>,
}

fn count_sent(state: &mut ClusterState, kind: u16) {
    if let Some(n) = state.sent.get_mut(usize::from(kind)) {
        *n += 1;
    }
}

/// This node's header for a message of `kind`.
pub(crate) fn header(state: &ClusterState, kind: u16) -> Header {
    let me = state.me();
    let serving = state.serving_primary();
    let mut slots = Box::new([0u8; BITMAP_LEN]);
    if let Some(owner) = serving {
        for (slot, o) in state.slots.iter().enumerate() {
            if *o == Some(owner) {
                msg::set_bit(&mut slots, slot);
            }
        }
    }
    let config_epoch = match serving.and_then(|p| state.nodes.get(&p)) {
        Some(p) if me.is_replica() => p.config_epoch,
        _ => me.config_epoch,
    };
    let mut primary = [0u8; 40];
    if me.is_replica() {
        if let Some(p) = me.primary {
            primary = p.0;
        }
    }
    Header {
        kind,
        port: me.port,
        count: 0,
        current_epoch: state.current_epoch,
        config_epoch,
        offset: state.my_offset.max(0) as u64,
        sender: state.myself.0,
        slots,
        primary,
        ip: String::new(),
        pport: me.pport,
        cport: me.cport,
        flags: me.flags & !(flags::MEET),
        state_fail: !state.ok,
        mflags: [0; 3],
    }
}

/// A PING, PONG or MEET for `to`, gossiping about the other nodes.
pub fn ping(state: &mut ClusterState, kind: u16, to: Option<NodeId>) -> Vec<u8> {
    let gossip: Vec<Gossip> = state
        .nodes
        .values()
        .filter(|n| n.id != state.myself && Some(n.id) != to)
        .filter(|n| !n.has(flags::HANDSHAKE | flags::NOADDR))
        .map(|n| Gossip {
            id: n.id.0,
            ping_sent_s: (n.ping_sent_ms / 1000) as u32,
            pong_received_s: (n.pong_received_ms / 1000) as u32,
            ip: n.ip.clone(),
            port: n.port,
            cport: n.cport,
            flags: n.flags,
            pport: n.pport,
        })
        .collect();
    let message = Message {
        header: header(state, kind),
        body: Body::Ping(gossip),
    };
    count_sent(state, kind);
    msg::encode(&message)
}

/// A PUBLISH or PUBLISHSHARD message.
pub fn publish_message(
    state: &mut ClusterState,
    channel: &[u8],
    payload: &[u8],
    shard: bool,
) -> Vec<u8> {
    let kind = if shard {
        types::PUBLISHSHARD
    } else {
        types::PUBLISH
    };
    count_sent(state, kind);
    msg::encode(&Message {
        header: header(state, kind),
        body: Body::Publish(channel.to_vec(), payload.to_vec()),
    })
}

/// The nodes of this node's shard: its primary (or itself) and that
/// primary's replicas, this node left out.
pub fn shard_members(state: &ClusterState) -> Vec<NodeId> {
    let Some(primary) = state.serving_primary() else {
        return Vec::new();
    };
    let mut out: Vec<NodeId> = state.replicas_of(&primary).iter().map(|n| n.id).collect();
    out.push(primary);
    out.retain(|id| *id != state.myself);
    out
}

fn fail_message(state: &mut ClusterState, id: NodeId) -> Vec<u8> {
    count_sent(state, types::FAIL);
    msg::encode(&Message {
        header: header(state, types::FAIL),
        body: Body::Fail(id.0),
    })
}

fn update_message(state: &mut ClusterState, owner: NodeId) -> Vec<u8> {
    let mut slots = Box::new([0u8; BITMAP_LEN]);
    for (slot, o) in state.slots.iter().enumerate() {
        if *o == Some(owner) {
            msg::set_bit(&mut slots, slot);
        }
    }
    let epoch = state.nodes.get(&owner).map(|n| n.config_epoch).unwrap_or(0);
    count_sent(state, types::UPDATE);
    msg::encode(&Message {
        header: header(state, types::UPDATE),
        body: Body::Update(epoch, owner.0, slots),
    })
}

/// Handles one message.
pub fn handle(
    state: &mut ClusterState,
    link: &LinkView,
    message: &Message,
    now: i64,
    timeout: i64,
) -> Outgoing {
    let h = &message.header;
    let mut out = Outgoing::default();
    if let Some(n) = state.received.get_mut(usize::from(h.kind)) {
        *n += 1;
    }
    let sender_id = msg::node_id(&h.sender);
    let sender = sender_id.filter(|id| {
        state
            .nodes
            .get(id)
            .is_some_and(|n| !n.has(flags::HANDSHAKE))
    });
    if let Some(id) = sender {
        if h.current_epoch > state.current_epoch {
            state.current_epoch = h.current_epoch;
            state.dirty = true;
        }
        if let Some(node) = state.nodes.get_mut(&id) {
            if h.config_epoch > node.config_epoch && msg::node_id(&h.primary).is_none() {
                node.config_epoch = h.config_epoch;
                state.dirty = true;
            }
        }
        super::manual::on_message(state, id, h);
    }
    match h.kind {
        types::PING | types::MEET | types::PONG => {
            on_ping(state, link, message, sender, (now, timeout), &mut out);
        }
        types::FAIL => {
            if let (Some(_), Body::Fail(id)) = (sender, &message.body) {
                if let Some(node) = msg::node_id(id).and_then(|id| state.nodes.get_mut(&id)) {
                    if !node.has(flags::FAIL | flags::MYSELF) {
                        tracing::warn!("FAIL message received about {}", node.id);
                        node.flags = (node.flags | flags::FAIL) & !flags::PFAIL;
                        node.fail_time_ms = now;
                        state.dirty = true;
                    }
                }
            }
        }
        types::UPDATE => {
            if let (Some(_), Body::Update(epoch, id, slots)) = (sender, &message.body) {
                if let Some(id) = msg::node_id(id).filter(|id| state.nodes.contains_key(id)) {
                    if state.nodes[&id].config_epoch < *epoch {
                        if let Some(node) = state.nodes.get_mut(&id) {
                            node.config_epoch = *epoch;
                            node.flags = (node.flags | flags::MASTER) & !flags::SLAVE;
                            node.primary = None;
                        }
                        claim_slots(state, id, *epoch, slots, &mut out);
                    }
                }
            }
        }
        types::PUBLISH | types::PUBLISHSHARD if sender.is_some() => {
            if let Body::Publish(channel, payload) = &message.body {
                let shard = h.kind == types::PUBLISHSHARD;
                state
                    .publish_in
                    .push((channel.clone(), payload.clone(), shard));
            }
        }
        types::FAILOVER_AUTH_REQUEST if sender.is_some() => {
            super::failover::on_request(state, message, now, timeout, &mut out);
        }
        types::FAILOVER_AUTH_ACK if sender.is_some() => super::failover::on_ack(state, message),
        types::MFSTART => {
            if let Some(id) = sender {
                super::manual::on_mfstart(state, id, now);
            }
        }
        _ => {}
    }
    out
}

/// PING, PONG and MEET: learn the sender, its address, role and slots,
/// and the gossip; answer PING and MEET with a PONG.
fn on_ping(
    state: &mut ClusterState,
    link: &LinkView,
    message: &Message,
    sender: Option<NodeId>,
    (now, timeout): (i64, i64),
    out: &mut Outgoing,
) {
    let h = &message.header;
    let Some(sender_id) = msg::node_id(&h.sender) else {
        out.close_link = true;
        return;
    };
    let sender_ip = learn_addresses(state, link, h, sender, now);
    if h.kind == types::PING || h.kind == types::MEET {
        out.reply.push(ping(state, types::PONG, sender));
    }
    if !link.inbound && !outbound_identity(state, link, h, sender_id, out) {
        return;
    }
    let known = state
        .nodes
        .get(&sender_id)
        .is_some_and(|n| !n.has(flags::HANDSHAKE));
    if !known {
        return;
    }
    if link.inbound && link.node != Some(sender_id) {
        // An inbound link belongs to the node that speaks on it (CLUSTER
        // LINKS lists it as `from` that node).
        out.link_node = Some(sender_id);
    }
    if !link.inbound && h.kind == types::PONG {
        if let Some(node) = state.nodes.get_mut(&sender_id) {
            node.pong_received_ms = now;
            node.ping_sent_ms = 0;
            node.link_up = true;
            if node.has(flags::PFAIL) {
                node.flags &= !flags::PFAIL;
            }
        }
        clear_fail_if_back(state, sender_id, now, timeout);
    }
    refresh_sender(state, sender_id, h, &sender_ip);
    if let Some(node) = state.nodes.get_mut(&sender_id) {
        node.repl_offset = i64::try_from(h.offset).unwrap_or(i64::MAX);
    }
    if msg::node_id(&h.primary).is_none() {
        claim_slots(state, sender_id, h.config_epoch, &h.slots, out);
    }
    if let Body::Ping(gossip) = &message.body {
        gossip_section(state, sender_id, gossip, now);
    }
}

/// This node's own address (from the link a MEET came on) and the
/// sender's; a MEET from an unknown node adds it in handshake. Returns
/// the sender's address.
fn learn_addresses(
    state: &mut ClusterState,
    link: &LinkView,
    h: &Header,
    sender: Option<NodeId>,
    now: i64,
) -> String {
    // A node learns its own address from the first link another node
    // opened to it, as Redis does (unless `cluster-announce-ip` says).
    let learn = h.kind == types::MEET || state.me().ip.is_empty();
    if learn && !link.local_ip.is_empty() && state.me().ip != link.local_ip {
        state.me_mut().ip = link.local_ip.clone();
        state.dirty = true;
    }
    let sender_ip = if h.ip.is_empty() {
        link.peer_ip.clone()
    } else {
        h.ip.clone()
    };
    if sender.is_none() && h.kind == types::MEET {
        let mut node = Node::new(
            NodeId::random(&mut fastrand::Rng::new()),
            flags::HANDSHAKE,
            &sender_ip,
            h.port,
            h.cport,
            now,
        );
        node.pport = h.pport;
        state.nodes.insert(node.id, node);
        state.dirty = true;
    }
    sender_ip
}

/// On an outbound link: a PONG completes the handshake of the node the
/// link was opened to (it gets its real ID), and a reply from another ID
/// than the link's node means the address now belongs to another node.
/// `false` when the link must close and the message go no further.
fn outbound_identity(
    state: &mut ClusterState,
    link: &LinkView,
    h: &Header,
    sender_id: NodeId,
    out: &mut Outgoing,
) -> bool {
    let Some(link_id) = link.node else {
        return true;
    };
    let in_handshake = state
        .nodes
        .get(&link_id)
        .is_some_and(|n| n.has(flags::HANDSHAKE));
    if in_handshake && h.kind == types::PONG {
        if state.nodes.contains_key(&sender_id) {
            // Already known under its real ID: drop the stand-in.
            state.forget(&link_id);
            out.link_node = Some(sender_id);
        } else if let Some(mut node) = state.nodes.remove(&link_id) {
            node.id = sender_id;
            node.flags &= !(flags::HANDSHAKE | flags::MEET);
            node.flags |= if msg::node_id(&h.primary).is_some() {
                flags::SLAVE
            } else {
                flags::MASTER
            };
            state.nodes.insert(sender_id, node);
            out.link_node = Some(sender_id);
            state.dirty = true;
        }
    } else if !in_handshake && link_id != sender_id {
        if let Some(node) = state.nodes.get_mut(&link_id) {
            node.flags |= flags::NOADDR;
            node.ip.clear();
            node.link_up = false;
        }
        state.dirty = true;
        out.close_link = true;
        return false;
    }
    true
}

/// The sender's address and role, as its header states them.
fn refresh_sender(state: &mut ClusterState, id: NodeId, h: &Header, ip: &str) {
    let primary = msg::node_id(&h.primary);
    let Some(node) = state.nodes.get_mut(&id) else {
        return;
    };
    let mut changed = false;
    if node.ip != ip || node.port != h.port || node.cport != h.cport {
        node.ip = ip.to_string();
        node.port = h.port;
        node.cport = h.cport;
        node.flags &= !flags::NOADDR;
        changed = true;
    }
    node.pport = h.pport;
    match primary {
        None if !node.is_primary() => {
            // A replica turned primary (promoted): its old primary's
            // replicas were meant for its slots, so replicas may migrate
            // to it once it has none, as Redis marks it.
            if node.is_replica() {
                node.flags |= flags::MIGRATE_TO;
            }
            node.flags = (node.flags | flags::MASTER) & !flags::SLAVE;
            node.primary = None;
            changed = true;
        }
        Some(p) if !node.is_replica() || node.primary != Some(p) => {
            node.flags = (node.flags | flags::SLAVE) & !flags::MASTER;
            node.primary = Some(p);
            changed = true;
        }
        _ => {}
    }
    if primary.is_some() {
        // A replica serves no slots of its own.
        for owner in state.slots.iter_mut() {
            if *owner == Some(id) {
                *owner = None;
            }
        }
    }
    state.dirty |= changed;
}

/// Hands `sender` the slots its bitmap claims where its config epoch
/// beats the current owner's; tells a sender with a stale claim, with an
/// UPDATE, who owns the slot now.
fn claim_slots(
    state: &mut ClusterState,
    sender: NodeId,
    epoch: u64,
    bitmap: &[u8; BITMAP_LEN],
    out: &mut Outgoing,
) {
    let me = state.myself;
    let mine_before = state.slot_count(&me);
    let mut stale_owner = None;
    let (mut claimed, mut taken_from_me) = (0, 0);
    for slot in 0..SLOTS {
        if !msg::bit(bitmap, slot) {
            continue;
        }
        claimed += 1;
        let owner = state.slots[slot];
        if owner == Some(sender) || state.importing.contains_key(&(slot as u16)) {
            continue;
        }
        let owner_epoch = owner
            .and_then(|o| state.nodes.get(&o))
            .map(|n| n.config_epoch);
        match owner_epoch {
            Some(e) if e >= epoch => stale_owner = owner,
            _ => {
                if owner == Some(me) && sender != me {
                    state.migrating.remove(&(slot as u16));
                    taken_from_me += 1;
                }
                state.slots[slot] = Some(sender);
                state.dirty = true;
            }
        }
    }
    // A primary that lost its last slot to the sender (it was failed over
    // while away) follows the sender, as Redis's does; with replica
    // migration off, only when all the sender's slots were its own.
    let me_primary = state.me().is_primary();
    let may_follow = state.migration.allowed || claimed == taken_from_me;
    if me_primary && may_follow && sender != me && mine_before > 0 && state.slot_count(&me) == 0 {
        if let Some(target) = state.nodes.get(&sender) {
            let follow = super::failover::RoleChange::Follow(target.ip.clone(), target.port);
            let node = state.me_mut();
            node.flags = (node.flags | flags::SLAVE) & !flags::MASTER;
            node.primary = Some(sender);
            state.role_change = Some(follow);
            state.dirty = true;
        }
    }
    if let Some(owner) = stale_owner {
        if state.nodes.get(&owner).map(|n| n.config_epoch) > Some(epoch) {
            let update = update_message(state, owner);
            out.reply.push(update);
        }
    }
}

/// Learns from the gossip entries: failure reports from primaries, and
/// nodes this node did not know.
fn gossip_section(state: &mut ClusterState, sender: NodeId, gossip: &[Gossip], now: i64) {
    let sender_primary = state.nodes.get(&sender).is_some_and(|n| n.is_primary());
    for g in gossip {
        let Some(id) = msg::node_id(&g.id) else {
            continue;
        };
        if let Some(node) = state.nodes.get_mut(&id) {
            if sender_primary && id != state.myself {
                node.fail_reports.retain(|(r, _)| *r != sender);
                if g.flags & (flags::PFAIL | flags::FAIL) != 0 {
                    node.fail_reports.push((sender, now));
                }
            }
            continue;
        }
        let banned = state.blacklist.get(&id).is_some_and(|until| *until > now);
        if g.flags & flags::NOADDR == 0 && !banned && !g.ip.is_empty() {
            let bits = g.flags & (flags::MASTER | flags::SLAVE);
            let mut node = Node::new(id, bits, &g.ip, g.port, g.cport, now);
            node.pport = g.pport;
            state.nodes.insert(id, node);
            state.dirty = true;
        }
    }
}

/// A FAIL flag is cleared when the node answers again: at once for a
/// replica or a primary without slots; for a primary with slots, once
/// twice the node timeout has passed since it was flagged with no replica
/// taking its slots meanwhile (they would no longer be its own then), so
/// a primary flagged on a slow network or a loaded host does not keep
/// the cluster down for good.
fn clear_fail_if_back(state: &mut ClusterState, id: NodeId, now: i64, timeout: i64) {
    let slots = state.slot_count(&id);
    if let Some(node) = state.nodes.get_mut(&id) {
        if !node.has(flags::FAIL) {
            return;
        }
        let undo = node.is_primary() && slots > 0 && now - node.fail_time_ms > timeout * 2;
        if node.is_replica() || slots == 0 || undo {
            tracing::info!("clearing the FAIL state of node {id}: it is reachable again");
            node.flags &= !flags::FAIL;
            state.dirty = true;
        }
    }
}

/// The timed work: links to open, PINGs to send, PFAIL and FAIL
/// detection, handshakes that never completed.
pub fn cron(state: &mut ClusterState, linked: &[NodeId], now: i64, timeout: i64) -> Plan {
    let mut plan = Plan::default();
    state.blacklist.retain(|_, until| *until > now);
    let handshake_limit = timeout.max(1000);
    let expired: Vec<NodeId> = state
        .nodes
        .values()
        .filter(|n| n.has(flags::HANDSHAKE) && now - n.created_ms > handshake_limit)
        .map(|n| n.id)
        .collect();
    for id in expired {
        state.nodes.remove(&id);
        plan.gone.push(id);
    }
    let ids: Vec<NodeId> = state.nodes.keys().copied().collect();
    let mut suspected = false;
    for id in ids {
        if id == state.myself {
            continue;
        }
        let Some(node) = state.nodes.get(&id) else {
            continue;
        };
        if node.has(flags::NOADDR) || node.ip.is_empty() {
            continue;
        }
        if !linked.contains(&id) {
            let Ok(addr) = format!("{}:{}", node.ip, node.cport)
                .parse::<SocketAddr>()
                .or_else(|_| format!("[{}]:{}", node.ip, node.cport).parse())
            else {
                continue;
            };
            let kind = if node.has(flags::MEET) {
                types::MEET
            } else {
                types::PING
            };
            let first = ping(state, kind, Some(id));
            if let Some(node) = state.nodes.get_mut(&id) {
                node.flags &= !flags::MEET;
                if node.ping_sent_ms == 0 {
                    node.ping_sent_ms = now;
                }
            }
            plan.connect.push((id, addr, first));
            // A node that cannot be reached times out like one that
            // does not answer.
            suspected |= detect_failure(state, id, now, timeout, &mut plan);
            continue;
        }
        let (ping_sent, pong) = (node.ping_sent_ms, node.pong_received_ms);
        if ping_sent == 0 && now - pong > (timeout / 2).min(1000) {
            let bytes = ping(state, types::PING, Some(id));
            if let Some(node) = state.nodes.get_mut(&id) {
                node.ping_sent_ms = now;
            }
            plan.ping.push((id, bytes));
        }
        suspected |= detect_failure(state, id, now, timeout, &mut plan);
    }
    if suspected {
        spread_suspicion(state, linked, now, &mut plan);
    }
    super::manual::tick(state, now, &mut plan);
    super::failover::replica_tick(state, now, timeout, &mut plan);
    super::migration::tick(state, now);
    plan
}

/// PFAIL after the node timeout without a PONG; FAIL once a majority of
/// primaries (this one included when a primary) report it failing.
/// Returns whether the node was flagged PFAIL just now.
fn detect_failure(
    state: &mut ClusterState,
    id: NodeId,
    now: i64,
    timeout: i64,
    plan: &mut Plan,
) -> bool {
    let Some(node) = state.nodes.get_mut(&id) else {
        return false;
    };
    if node.has(flags::HANDSHAKE) {
        return false;
    }
    let newly = node.ping_sent_ms != 0
        && now - node.ping_sent_ms > timeout
        && !node.has(flags::PFAIL | flags::FAIL);
    if newly {
        tracing::info!("node {id} possibly failing: no pong within the node timeout");
        node.flags |= flags::PFAIL;
    }
    node.fail_reports.retain(|(_, at)| now - at <= timeout * 2);
    if !node.has(flags::PFAIL) || node.has(flags::FAIL) {
        return newly;
    }
    let reports = node.fail_reports.len();
    let me_primary = state.me().is_primary();
    let needed = state.size / 2 + 1;
    if reports + usize::from(me_primary) >= needed {
        if let Some(node) = state.nodes.get_mut(&id) {
            tracing::warn!("marking node {id} as failing (quorum of {needed} reached)");
            node.flags = (node.flags | flags::FAIL) & !flags::PFAIL;
            node.fail_time_ms = now;
        }
        state.dirty = true;
        let bytes = fail_message(state, id);
        plan.broadcast.push(bytes);
    }
    newly
}

/// A node this one just flagged PFAIL is reported to every linked node
/// at once, in the gossip of an extra PING, rather than in the next
/// periodic one up to a ping interval later: the FAIL quorum, and so the
/// replica's election, is reached that much sooner. A PING is always
/// allowed, and one already unanswered keeps its send time, so failure
/// detection of the receivers is not affected.
fn spread_suspicion(state: &mut ClusterState, linked: &[NodeId], now: i64, plan: &mut Plan) {
    for id in linked {
        let Some(node) = state.nodes.get(id) else {
            continue;
        };
        if node.has(flags::PFAIL | flags::FAIL | flags::HANDSHAKE) {
            continue;
        }
        if plan.ping.iter().any(|(to, _)| to == id) {
            continue;
        }
        let bytes = ping(state, types::PING, Some(*id));
        if let Some(node) = state.nodes.get_mut(id) {
            if node.ping_sent_ms == 0 {
                node.ping_sent_ms = now;
            }
        }
        plan.ping.push((*id, bytes));
    }
}
