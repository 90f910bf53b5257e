//! A primary flagged FAIL that answers again: its flag stays while the
//! node timeout's grace (twice the timeout, as in Redis) has not passed,
//! so a replica may still take over; after it, the flag is cleared, so a
//! primary flagged on a loaded host does not keep the cluster down for
//! good. A replica's flag is cleared at its first answer.

use ferrite_kv::cluster::handler::{self, LinkView};
use ferrite_kv::cluster::msg::{self, types};
use ferrite_kv::cluster::node::{flags, Node, NodeId};
use ferrite_kv::cluster::state::ClusterState;

const TIMEOUT: i64 = 2000;
const T0: i64 = 1_000_000;

/// Node A's view: B is a primary serving slots 0-99 (or a replica of A),
/// flagged FAIL at T0.
fn view(a: NodeId, b: NodeId, b_is_primary: bool) -> ClusterState {
    let mut state = ClusterState::new(a, 7000, 17000, T0 - 10_000);
    let role = if b_is_primary {
        flags::MASTER
    } else {
        flags::SLAVE
    };
    let mut node = Node::new(b, role | flags::FAIL, "127.0.0.1", 7001, 17001, T0 - 10_000);
    node.fail_time_ms = T0;
    node.link_up = true;
    if !b_is_primary {
        node.primary = Some(a);
    }
    state.nodes.insert(b, node);
    if b_is_primary {
        for slot in state.slots.iter_mut().take(100) {
            *slot = Some(b);
        }
    }
    state
}

/// A's state after B's PONG arrives on A's link to B at `now`.
fn after_pong(mut state: ClusterState, b_state: &mut ClusterState, now: i64) -> ClusterState {
    let (a, b) = (state.myself, b_state.myself);
    let bytes = handler::ping(b_state, types::PONG, Some(a));
    let message = msg::decode(&bytes).expect("B's PONG decodes");
    let link = LinkView {
        inbound: false,
        node: Some(b),
        local_ip: "127.0.0.1".into(),
        peer_ip: "127.0.0.1".into(),
    };
    let _ = handler::handle(&mut state, &link, &message, now, TIMEOUT);
    state
}

fn ids() -> (NodeId, NodeId) {
    let mut rng = fastrand::Rng::with_seed(7);
    (NodeId::random(&mut rng), NodeId::random(&mut rng))
}

#[test]
fn a_primary_with_slots_keeps_fail_through_the_grace_then_loses_it() {
    let (a, b) = ids();
    let mut b_state = ClusterState::new(b, 7001, 17001, T0 - 10_000);
    for slot in b_state.slots.iter_mut().take(100) {
        *slot = Some(b);
    }
    let within = after_pong(view(a, b, true), &mut b_state, T0 + TIMEOUT * 2);
    assert!(
        within.nodes[&b].has(flags::FAIL),
        "cleared within the grace"
    );
    let past = after_pong(view(a, b, true), &mut b_state, T0 + TIMEOUT * 2 + 1);
    assert!(!past.nodes[&b].has(flags::FAIL), "kept past the grace");
    assert_eq!(past.slots[0], Some(b), "its slots are still its own");
}

#[test]
fn a_replica_loses_fail_at_its_first_answer() {
    let (a, b) = ids();
    let mut b_state = ClusterState::new(b, 7001, 17001, T0 - 10_000);
    if let Some(me) = b_state.nodes.get_mut(&b) {
        me.flags = (me.flags & !flags::MASTER) | flags::SLAVE;
        me.primary = Some(a);
    }
    let state = after_pong(view(a, b, false), &mut b_state, T0 + 1);
    assert!(!state.nodes[&b].has(flags::FAIL));
}
