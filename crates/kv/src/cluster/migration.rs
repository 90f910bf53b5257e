//! Replica migration (`docs/cluster.md`), as Redis 7.0 does it: a primary
//! that serves slots, used to have a replica and has none left working
//! (its replicas failed, or one was promoted away) is *orphaned*; a
//! replica of a primary with the most working replicas moves to it, so
//! that one more failure does not take the orphan's slots down. Only the
//! replica with the smallest node ID among those of the best-served
//! primaries moves, only when its own primary keeps more than
//! `cluster-migration-barrier` working replicas, only while the cluster
//! is `ok`, and only after the orphan stayed orphaned for five seconds
//! (during a failover the orphan's own replicas get that long to show up).
//! `cluster-allow-replica-migration no` turns it off, and also stops a
//! primary that loses its last slot from following the new owner unless
//! every slot the new owner claims came from it (`handler.rs`).

use std::collections::BTreeMap;

use super::failover::RoleChange;
use super::node::{flags, NodeId};
use super::state::ClusterState;

/// How long a primary must stay orphaned before a replica moves to it
/// (milliseconds, Redis's figure).
const DELAY_MS: i64 = 5000;

/// The settings, as the event loop's tick last copied them, and since
/// when each orphaned primary has been orphaned.
#[derive(Clone, Debug)]
pub struct Migration {
    /// `cluster-migration-barrier`.
    pub barrier: i64,
    /// `cluster-allow-replica-migration`.
    pub allowed: bool,
    orphaned_since: BTreeMap<NodeId, i64>,
}

impl Default for Migration {
    fn default() -> Migration {
        Migration {
            barrier: 1,
            allowed: true,
            orphaned_since: BTreeMap::new(),
        }
    }
}

/// Replicas of `primary` not flagged FAIL (and, when `strict`, not PFAIL).
fn working_replicas(state: &ClusterState, primary: &NodeId, strict: bool) -> usize {
    let bad = if strict {
        flags::FAIL | flags::PFAIL
    } else {
        flags::FAIL
    };
    state
        .replicas_of(primary)
        .iter()
        .filter(|n| !n.has(bad))
        .count()
}

/// The bus's periodic check: marks primaries that have replicas as
/// eligible targets, and moves this replica if it is the one to move.
pub fn tick(state: &mut ClusterState, now: i64) {
    let served: Vec<NodeId> = state
        .nodes
        .values()
        .filter(|n| n.is_replica())
        .filter_map(|n| n.primary)
        .collect();
    for id in served {
        if let Some(primary) = state.nodes.get_mut(&id).filter(|p| p.is_primary()) {
            primary.flags |= flags::MIGRATE_TO;
        }
    }
    if !state.me().is_replica() || !state.migration.allowed {
        state.migration.orphaned_since.clear();
        return;
    }
    let mine = state.me().primary;
    let (mut orphans, mut most, mut my_primarys) = (0, 0, 0);
    for node in state.nodes.values() {
        let skip = flags::MYSELF | flags::NOADDR | flags::HANDSHAKE;
        if node.has(skip) || !node.is_primary() || node.has(flags::FAIL) {
            continue;
        }
        let working = working_replicas(state, &node.id, false);
        if working == 0 && node.has(flags::MIGRATE_TO) && state.slot_count(&node.id) > 0 {
            orphans += 1;
        }
        most = most.max(working);
        if mine == Some(node.id) {
            my_primarys = working;
        }
    }
    if orphans > 0 && most >= 2 && my_primarys == most {
        consider_moving(state, most, now);
    }
}

/// Moves this replica to an orphaned primary if it is the candidate and
/// the orphan waited long enough.
fn consider_moving(state: &mut ClusterState, most: usize, now: i64) {
    if !state.ok {
        return;
    }
    let Some(mine) = state.me().primary else {
        return;
    };
    let barrier = usize::try_from(state.migration.barrier).unwrap_or(0);
    if working_replicas(state, &mine, true) <= barrier {
        return;
    }
    let mut candidate = state.myself;
    let mut target = None;
    let ids: Vec<NodeId> = state.nodes.keys().copied().collect();
    for id in ids {
        let Some(node) = state.nodes.get(&id) else {
            continue;
        };
        let working = if node.is_primary() {
            working_replicas(state, &id, false)
        } else {
            0
        };
        let orphaned = node.is_primary()
            && !node.has(flags::FAIL)
            && node.has(flags::MIGRATE_TO)
            && working == 0;
        if working == most {
            for replica in state.replicas_of(&id) {
                candidate = candidate.min(replica.id);
            }
        }
        if orphaned {
            if target.is_none() && state.slot_count(&id) > 0 {
                target = Some(id);
            }
            state.migration.orphaned_since.entry(id).or_insert(now);
        } else {
            state.migration.orphaned_since.remove(&id);
        }
    }
    let Some(target) = target else {
        return;
    };
    let since = state.migration.orphaned_since.get(&target).copied();
    if candidate == state.myself && since.is_some_and(|t| now - t > DELAY_MS) {
        tracing::warn!("migrating to orphaned primary {target}");
        follow(state, target);
    }
}

/// Makes this node a replica of `primary`; the event loop's tick starts
/// the replication.
pub fn follow(state: &mut ClusterState, primary: NodeId) {
    let Some(node) = state.nodes.get(&primary) else {
        return;
    };
    let change = RoleChange::Follow(node.ip.clone(), node.port);
    let me = state.me_mut();
    me.flags = (me.flags | flags::SLAVE) & !flags::MASTER;
    me.primary = Some(primary);
    state.migrating.clear();
    state.importing.clear();
    state.role_change = Some(change);
    state.dirty = true;
}
