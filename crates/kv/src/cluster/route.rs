//! Routing in the command path: before a command runs (or is queued, or
//! EXEC runs a queue), the slot of each of its keys, from the command
//! table's key positions, decides whether this node serves it or which
//! redirection or refusal the client gets, as Redis 7.0 decides.

use crate::commands::{flatten, resolve, CommandSpec};
use crate::resp::Args;

use super::node::NodeId;
use super::slot::key_slot;
use super::state::ClusterState;

/// Why a command is not served here, as the client is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redirect {
    /// Keys in more than one slot.
    CrossSlot,
    /// Several keys of a slot being moved, some missing.
    TryAgain,
    /// Ask the node the slot is migrating to.
    Ask(u16, NodeId),
    /// Another node serves the slot.
    Moved(u16, NodeId),
    /// The cluster is down.
    Down,
    /// The cluster is down and only reads are served.
    DownReadOnly,
    /// No node serves the slot.
    Unbound,
}

/// What the router needs of the client and command beyond the table.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    /// The command's spec (EXEC for a transaction).
    pub spec: &'a CommandSpec,
    /// The client sent ASKING (for this command).
    pub asking: bool,
    /// The client sent READONLY.
    pub readonly: bool,
    /// `cluster-allow-reads-when-down`.
    pub reads_when_down: bool,
    /// `cluster-allow-pubsubshard-when-down`.
    pub shard_when_down: bool,
}

/// The slot and key facts gathered over every command of the request.
#[derive(Default)]
struct Scan {
    first: Option<Vec<u8>>,
    slot: u16,
    owner: Option<NodeId>,
    migrating: bool,
    importing: bool,
    multiple: bool,
    missing: usize,
    existing: usize,
    write: bool,
}

/// Whether `spec` is subject to routing: it names keys, or is EXEC.
pub fn routed(spec: &CommandSpec) -> bool {
    !matches!(spec.keys, crate::commands::Keys::None) || spec.name == "exec"
}

/// Decides where the request goes. `commands` are the request's commands
/// (one, or a transaction's queue); `exists` says whether a key is in
/// database 0. `Ok(())`: served here.
pub fn route(
    state: &ClusterState,
    query: Query<'_>,
    commands: &[Args<'_>],
    exists: &mut dyn FnMut(&[u8]) -> bool,
) -> Result<(), Redirect> {
    let me = state.myself;
    let mut scan = Scan::default();
    for args in commands {
        let Ok((_, spec)) = resolve(args) else {
            continue;
        };
        scan.write |= spec.has(crate::commands::flags::WRITE);
        let mut positions = Vec::new();
        spec.keys.positions(args, &mut positions);
        for at in positions {
            let key = args.get(at);
            let slot = key_slot(key);
            match &scan.first {
                None => {
                    scan.first = Some(key.to_vec());
                    scan.slot = slot;
                    let owner = state.slots[usize::from(slot)].ok_or(Redirect::Unbound)?;
                    scan.owner = Some(owner);
                    if owner == me && state.migrating.contains_key(&slot) {
                        scan.migrating = true;
                    } else if state.importing.contains_key(&slot) {
                        scan.importing = true;
                    }
                }
                Some(first) if first.as_slice() != key => {
                    if slot != scan.slot {
                        return Err(Redirect::CrossSlot);
                    }
                    scan.multiple = true;
                }
                Some(_) => {}
            }
            if scan.migrating || scan.importing {
                if exists(key) {
                    scan.existing += 1;
                } else {
                    scan.missing += 1;
                }
            }
        }
    }
    decide(state, query, &scan)
}

fn decide(state: &ClusterState, query: Query<'_>, scan: &Scan) -> Result<(), Redirect> {
    let Some(owner) = scan.owner else {
        return Ok(());
    };
    // The down check reads the flags of the command itself (EXEC is not
    // a write; the writes it queued were checked when queued), the
    // replica-read check those of every command of the request.
    let write_cmd = query.spec.has(crate::commands::flags::WRITE);
    let write = write_cmd || scan.write;
    // Sharded Pub/Sub names channels where other commands name keys: a
    // replica serves them for its primary's slots without READONLY, and
    // while the cluster is down by their own setting.
    let shard = matches!(query.spec.name, "ssubscribe" | "sunsubscribe" | "spublish");
    if !state.ok {
        if shard {
            if !query.shard_when_down {
                return Err(Redirect::Down);
            }
        } else if !query.reads_when_down {
            return Err(Redirect::Down);
        }
        if write_cmd {
            return Err(Redirect::DownReadOnly);
        }
    }
    if (scan.migrating || scan.importing) && query.spec.name == "migrate" {
        return Ok(());
    }
    if scan.migrating && scan.missing > 0 {
        if scan.existing > 0 {
            return Err(Redirect::TryAgain);
        }
        let to = state.migrating.get(&scan.slot).copied().unwrap_or(owner);
        return Err(Redirect::Ask(scan.slot, to));
    }
    let asking = query.asking || query.spec.has(crate::commands::flags::ASKING);
    if scan.importing && asking {
        if scan.multiple && scan.missing > 0 {
            return Err(Redirect::TryAgain);
        }
        return Ok(());
    }
    let me = state.me();
    if (query.readonly || shard) && !write && me.is_replica() && me.primary == Some(owner) {
        return Ok(());
    }
    if owner != state.myself {
        return Err(Redirect::Moved(scan.slot, owner));
    }
    Ok(())
}

/// Whether a client blocked on a key of `slot` (BLPOP, BZPOPMIN, XREAD)
/// may keep waiting here, or the redirection it is released with, as
/// Redis 7.0 decides for its blocked clients: the cluster is down; the
/// slot has no owner; another node owns it and this node is not importing
/// it. `readonly_read` is a READONLY client's read, which a replica of
/// the slot's owner serves.
pub fn blocked_redirect(state: &ClusterState, slot: u16, readonly_read: bool) -> Option<Redirect> {
    if !state.ok {
        return Some(Redirect::Down);
    }
    let owner = state.slots.get(usize::from(slot)).copied().flatten();
    let me = state.me();
    if readonly_read && me.is_replica() && owner.is_some() && me.primary == owner {
        return None;
    }
    if owner == Some(state.myself) || state.importing.contains_key(&slot) {
        return None;
    }
    Some(match owner {
        None => Redirect::Unbound,
        Some(id) => Redirect::Moved(slot, id),
    })
}

/// The error text of a redirection (without the leading `-`), naming
/// nodes by the endpoint `endpoint` gives for them.
pub fn error_text(
    redirect: &Redirect,
    state: &ClusterState,
    endpoint: &dyn Fn(&super::node::Node) -> String,
) -> String {
    let at = |slot: &u16, id: &NodeId| match state.nodes.get(id) {
        Some(node) => format!("{slot} {}:{}", endpoint(node), node.port),
        None => format!("{slot} :0"),
    };
    match redirect {
        Redirect::CrossSlot => "CROSSSLOT Keys in request don't hash to the same slot".into(),
        Redirect::TryAgain => "TRYAGAIN Multiple keys request during rehashing of slot".into(),
        Redirect::Down => "CLUSTERDOWN The cluster is down".into(),
        Redirect::DownReadOnly => {
            "CLUSTERDOWN The cluster is down and only accepts read commands".into()
        }
        Redirect::Unbound => "CLUSTERDOWN Hash slot not served".into(),
        Redirect::Ask(slot, id) => format!("ASK {}", at(slot, id)),
        Redirect::Moved(slot, id) => format!("MOVED {}", at(slot, id)),
    }
}

/// One command flattened: its bytes and each argument's range.
pub type Flat = (Vec<u8>, Vec<(usize, usize)>);

/// A transaction's queue as argument lists, for [`route`].
pub fn queue_args(queue: &[Vec<Vec<u8>>]) -> Vec<Flat> {
    queue.iter().map(|c| flatten(c)).collect()
}
