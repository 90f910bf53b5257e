//! Automatic failover (`docs/cluster.md`): a replica whose primary the
//! cluster marked FAIL asks the primaries for votes in a new epoch
//! (FAILOVER_AUTH_REQUEST); each primary grants at most one vote per
//! epoch (FAILOVER_AUTH_ACK), recorded in `nodes.conf` before the ACK
//! leaves; a replica with the votes of a majority takes its primary's
//! slots with the election's epoch and tells everyone.

use super::handler::{header, ping, Outgoing, Plan};
use super::msg::{self, types, Body, Message};
use super::node::{flags, NodeId};
use super::state::ClusterState;

/// What the running election of this replica holds.
#[derive(Debug, Default, Clone)]
pub struct Election {
    /// When the votes may be asked for (or were), Unix milliseconds; 0
    /// when no election is planned.
    pub start_ms: i64,
    /// The epoch the votes were asked in, once asked.
    pub epoch: Option<u64>,
    /// Votes received in that epoch.
    pub votes: usize,
    /// CLUSTER FAILOVER FORCE: the primary need not have failed, and the
    /// request asks primaries to vote anyway (Redis's FORCEACK flag).
    pub forced: bool,
}

/// A role change the event loop must carry out on the replication side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleChange {
    /// This replica became a primary: stop following (REPLICAOF NO ONE).
    Promote,
    /// This node now replicates the primary at `ip:port`.
    Follow(String, u16),
}

/// How long an election may take before it is retried (Redis: twice the
/// node timeout, at least 2 s).
fn auth_timeout(timeout: i64) -> i64 {
    (timeout * 2).max(2000)
}

/// The message flag asking primaries to vote although the primary has not
/// failed (CLUSTER FAILOVER FORCE).
const FORCEACK: u8 = 2;

/// Starts a forced election at the next tick (CLUSTER FAILOVER FORCE).
pub fn force(state: &mut ClusterState) {
    state.election = Election {
        forced: true,
        ..Election::default()
    };
}

/// Takes the primary's slots at once with a new epoch and no votes
/// (CLUSTER FAILOVER TAKEOVER); the event loop promotes the replication
/// side, and the next PINGs carry the claim.
pub fn takeover(state: &mut ClusterState) {
    let Some(primary) = state.me().primary else {
        return;
    };
    crate::commands::bump_config_epoch(state);
    state.election.epoch = Some(state.me().config_epoch);
    let mut plan = Plan::default();
    take_over(state, primary, &mut plan);
}

/// The replica's side, each tick: plan, ask, count, take over.
pub fn replica_tick(state: &mut ClusterState, now: i64, timeout: i64, plan: &mut Plan) {
    let me = state.me();
    let Some(primary) = me.primary.filter(|_| me.is_replica()) else {
        state.election = Election::default();
        return;
    };
    if me.has(flags::NOFAILOVER) && !state.election.forced {
        return;
    }
    let failed = state
        .nodes
        .get(&primary)
        .is_some_and(|p| p.has(flags::FAIL));
    let forced = state.election.forced;
    if !(failed || forced) || state.slot_count(&primary) == 0 {
        state.election = Election::default();
        return;
    }
    let limit = auth_timeout(timeout);
    if state.election.start_ms == 0 || now - state.election.start_ms > limit * 2 {
        // A random delay lets the FAIL reach every node first; a replica
        // with less data waits longer (its rank among its siblings). A
        // forced election asks at once, as Redis's manual one does.
        let delay = if forced {
            0
        } else {
            500 + fastrand::i64(0..500) + rank(state, primary) * 1000
        };
        state.election = Election {
            start_ms: now + delay,
            epoch: None,
            votes: 0,
            forced,
        };
        return;
    }
    if now < state.election.start_ms || now - state.election.start_ms > limit {
        return;
    }
    if state.election.epoch.is_none() {
        state.current_epoch += 1;
        state.election.epoch = Some(state.current_epoch);
        state.dirty = true;
        let mut head = header(state, types::FAILOVER_AUTH_REQUEST);
        if forced {
            head.mflags[0] |= FORCEACK;
        }
        let request = msg::encode(&Message {
            header: head,
            body: Body::Empty,
        });
        count_sent(state, types::FAILOVER_AUTH_REQUEST);
        plan.broadcast.push(request);
        return;
    }
    if state.election.votes > state.size / 2 {
        take_over(state, primary, plan);
    }
}

fn count_sent(state: &mut ClusterState, kind: u16) {
    if let Some(n) = state.sent.get_mut(usize::from(kind)) {
        *n += 1;
    }
}

/// This replica's rank among its primary's replicas: how many have a
/// larger replication offset.
fn rank(state: &ClusterState, primary: NodeId) -> i64 {
    let mine = state.my_offset;
    state
        .replicas_of(&primary)
        .iter()
        .filter(|r| r.id != state.myself && r.repl_offset > mine)
        .count() as i64
}

/// Becomes the primary of the failed primary's slots.
fn take_over(state: &mut ClusterState, old: NodeId, plan: &mut Plan) {
    let me = state.myself;
    let epoch = state.election.epoch.unwrap_or(state.current_epoch);
    tracing::info!("cluster failover: taking over the slots of {old} in epoch {epoch}");
    for owner in state.slots.iter_mut() {
        if *owner == Some(old) {
            *owner = Some(me);
        }
    }
    let node = state.me_mut();
    node.flags = (node.flags | flags::MASTER) & !flags::SLAVE;
    node.primary = None;
    if node.config_epoch < epoch {
        node.config_epoch = epoch;
    }
    state.election = Election::default();
    state.role_change = Some(RoleChange::Promote);
    state.dirty = true;
    let pong = ping(state, types::PONG, None);
    plan.broadcast.push(pong);
}

/// A primary's side of a FAILOVER_AUTH_REQUEST: vote at most once per
/// epoch, for a replica of a failed primary whose claim is not older
/// than the slots' current owners'.
pub fn on_request(
    state: &mut ClusterState,
    message: &Message,
    now: i64,
    timeout: i64,
    out: &mut Outgoing,
) {
    let h = &message.header;
    let me = state.me();
    if me.is_replica() || state.slot_count(&state.myself) == 0 {
        return;
    }
    if h.current_epoch < state.current_epoch || state.last_vote_epoch == state.current_epoch {
        return;
    }
    let Some(sender) = msg::node_id(&h.sender).filter(|id| state.nodes.contains_key(id)) else {
        return;
    };
    let Some(primary) = msg::node_id(&h.primary) else {
        return;
    };
    let force = h.mflags[0] & FORCEACK != 0;
    let Some(p) = state.nodes.get(&primary) else {
        return;
    };
    if !p.has(flags::FAIL) && !force {
        return;
    }
    if now - p.voted_ms < timeout * 2 {
        return;
    }
    for slot in 0..super::slot::SLOTS {
        if !msg::bit(&h.slots, slot) {
            continue;
        }
        let owner_epoch = state.slots[slot]
            .and_then(|o| state.nodes.get(&o))
            .map_or(0, |n| n.config_epoch);
        if owner_epoch > h.config_epoch {
            return;
        }
    }
    state.last_vote_epoch = state.current_epoch;
    if let Some(p) = state.nodes.get_mut(&primary) {
        p.voted_ms = now;
    }
    state.dirty = true;
    // The vote is written to nodes.conf before the ACK leaves.
    out.save_first = true;
    let _ = sender;
    count_sent(state, types::FAILOVER_AUTH_ACK);
    out.reply.push(msg::encode(&Message {
        header: header(state, types::FAILOVER_AUTH_ACK),
        body: Body::Empty,
    }));
}

/// A replica counts an ACK from a primary with slots in its election's
/// epoch.
pub fn on_ack(state: &mut ClusterState, message: &Message) {
    let h = &message.header;
    let Some(sender) = msg::node_id(&h.sender) else {
        return;
    };
    let serving =
        state.nodes.get(&sender).is_some_and(|n| n.is_primary()) && state.slot_count(&sender) > 0;
    if let Some(epoch) = state.election.epoch {
        if serving && h.current_epoch >= epoch {
            state.election.votes += 1;
        }
    }
}
