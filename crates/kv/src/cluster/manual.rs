//! The coordinated manual failover, plain `CLUSTER FAILOVER`
//! (`docs/cluster.md`): the replica sends its primary MFSTART; the primary
//! pauses its writing clients and sends the replica PINGs flagged PAUSED
//! whose header carries its replication offset, which no longer grows; once
//! the replica has processed the stream up to that offset it runs an
//! election at once, asking the primaries to vote although its primary has
//! not failed. Nothing written on the primary can be lost: no write is
//! accepted there after the offset the replica waits for. Either side gives
//! up after [`TIMEOUT_MS`], and the primary's clients resume then, or as
//! soon as it has become a replica of the winner.

use super::handler::{header, ping, Plan};
use super::msg::{self, types, Body, Header, Message};
use super::node::NodeId;
use super::state::ClusterState;

/// How long a manual failover may take, from CLUSTER FAILOVER on the
/// replica or MFSTART on the primary (Redis's 5 s).
pub const TIMEOUT_MS: i64 = 5000;

/// The message flag of a primary whose clients are paused for a manual
/// failover (Redis's `CLUSTERMSG_FLAG0_PAUSED`).
pub const PAUSED: u8 = 1;

/// Where the first byte of a header's message flags lies (`msg.rs`).
const MFLAGS_AT: usize = 2253;

/// A manual failover in progress, on either side.
#[derive(Debug, Default, Clone)]
pub struct Manual {
    /// When it gives up, Unix ms; 0 when none runs.
    pub end_ms: i64,
    /// Replica side: MFSTART is still to be sent to the primary.
    pub send_start: bool,
    /// Replica side: the primary's offset once it said it paused.
    pub primary_offset: Option<i64>,
    /// Replica side: the election was started by this manual failover.
    pub started: bool,
    /// Primary side: the replica that asked (writes pause while set).
    pub replica: Option<NodeId>,
    /// Primary side: the event loop paused the writers and recorded the
    /// final offset in `my_offset`, so the PAUSED PINGs may leave.
    pub paused: bool,
}

/// CLUSTER FAILOVER on a replica (the checks are the command's).
pub fn start(state: &mut ClusterState, now: i64) {
    state.manual = Manual {
        end_ms: now + TIMEOUT_MS,
        send_start: true,
        ..Manual::default()
    };
}

/// MFSTART on a primary: accepted from one of its own replicas only.
pub fn on_mfstart(state: &mut ClusterState, sender: NodeId, now: i64) {
    let mine = state.me().is_primary()
        && state
            .nodes
            .get(&sender)
            .is_some_and(|n| n.is_replica() && n.primary == Some(state.myself));
    if !mine {
        return;
    }
    tracing::info!("manual failover requested by replica {sender}");
    state.manual = Manual {
        end_ms: now + TIMEOUT_MS,
        replica: Some(sender),
        ..Manual::default()
    };
}

/// Any message on a replica from its primary: the first one flagged
/// PAUSED during a manual failover gives the offset to reach.
pub fn on_message(state: &mut ClusterState, sender: NodeId, h: &Header) {
    let m = &state.manual;
    if m.end_ms == 0 || m.primary_offset.is_some() || h.mflags[0] & PAUSED == 0 {
        return;
    }
    if state.me().primary != Some(sender) || !state.me().is_replica() {
        return;
    }
    let offset = i64::try_from(h.offset).unwrap_or(i64::MAX);
    tracing::info!("received the primary's replication offset for manual failover: {offset}");
    state.manual.primary_offset = Some(offset);
}

/// Each bus tick, on either side: the timeout, MFSTART, the PAUSED
/// PINGs, and the election once the replica has caught up.
pub fn tick(state: &mut ClusterState, now: i64, plan: &mut Plan) {
    if state.manual.end_ms == 0 {
        return;
    }
    if now > state.manual.end_ms {
        tracing::info!("manual failover timed out");
        if state.manual.started && state.election.forced {
            state.election = super::failover::Election::default();
        }
        state.manual = Manual::default();
        return;
    }
    if state.manual.replica.is_some() {
        primary_tick(state, plan);
    } else {
        replica_tick(state, plan);
    }
}

fn primary_tick(state: &mut ClusterState, plan: &mut Plan) {
    // Once the replica won (this node lost its slots and follows it),
    // the writers resume, on a replica now.
    if !state.me().is_primary() {
        state.manual = Manual::default();
        return;
    }
    let (Some(replica), true) = (state.manual.replica, state.manual.paused) else {
        return;
    };
    let mut bytes = ping(state, types::PING, Some(replica));
    if let Some(flags) = bytes.get_mut(MFLAGS_AT) {
        *flags |= PAUSED;
    }
    if let Some(node) = state.nodes.get_mut(&replica) {
        if node.ping_sent_ms == 0 {
            node.ping_sent_ms = super::now_ms();
        }
    }
    plan.ping.push((replica, bytes));
}

fn replica_tick(state: &mut ClusterState, plan: &mut Plan) {
    let me = state.me();
    let Some(primary) = me.primary.filter(|_| me.is_replica()) else {
        // This replica won, or was made a primary some other way.
        state.manual = Manual::default();
        return;
    };
    if std::mem::take(&mut state.manual.send_start) {
        let bytes = msg::encode(&Message {
            header: header(state, types::MFSTART),
            body: Body::Empty,
        });
        if let Some(n) = state.sent.get_mut(usize::from(types::MFSTART)) {
            *n += 1;
        }
        plan.ping.push((primary, bytes));
        return;
    }
    let caught_up = state
        .manual
        .primary_offset
        .is_some_and(|target| state.my_offset >= target);
    if caught_up && !state.manual.started {
        tracing::info!("all of the primary's replication stream processed: manual failover starts");
        state.manual.started = true;
        super::failover::force(state);
    }
}
