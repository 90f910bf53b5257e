//! CLUSTER and ASKING on a server that is not a cluster node: every
//! subcommand exists (arity, flags and ACL categories as Redis 7.0's, so
//! COMMAND, ACL rules and scripts' refusals treat them as Redis does) and
//! answers as Redis does when `cluster-enabled` is no. Ferrite does not
//! run in cluster mode.

use std::borrow::Cow;

use super::table::*;
use super::{acl, CmdResult, Ctx};
use crate::resp::Args;

/// Redis's reply to cluster commands outside cluster mode.
const DISABLED: &str = "ERR This instance has cluster support disabled";

fn disabled(_ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    Err(Cow::Borrowed(DISABLED))
}

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("cluster", -2, 0, K0, "cluster", "Inspects and configures a cluster node.", disabled).with_subcommands(CLUSTER),
    cmd!("asking", 1, FAST, K0, "cluster", "Lets the next command reach a slot being imported.", disabled).with_acl(acl::bit("connection")),
];

/// CLUSTER's subcommands.
#[rustfmt::skip]
static CLUSTER: &[CommandSpec] = &[
    cmd!("addslots", -3, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Assigns slots to this node.", disabled),
    cmd!("addslotsrange", -4, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Assigns ranges of slots to this node.", disabled),
    cmd!("bumpepoch", 2, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Advances the cluster config epoch.", disabled).with_tips(&["nondeterministic_output"]),
    cmd!("count-failure-reports", 3, ADMIN | STALE, K0, "cluster", "Counts failure reports about a node.", disabled).with_tips(&["nondeterministic_output"]),
    cmd!("countkeysinslot", 3, STALE, K0, "cluster", "Counts the keys in a slot.", disabled),
    cmd!("delslots", -3, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Unassigns slots from this node.", disabled),
    cmd!("delslotsrange", -4, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Unassigns ranges of slots from this node.", disabled),
    cmd!("failover", -2, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Makes a replica take over its master.", disabled),
    cmd!("flushslots", 2, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Unassigns every slot of this node.", disabled),
    cmd!("forget", 3, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Removes a node from this node's table.", disabled),
    cmd!("getkeysinslot", 4, STALE, K0, "cluster", "Returns key names in a slot.", disabled).with_tips(&["nondeterministic_output"]),
    cmd!("help", 2, LOADING | STALE, K0, "cluster", "Explains CLUSTER's subcommands.", disabled),
    cmd!("info", 2, STALE, K0, "cluster", "Returns the cluster's state.", disabled).with_tips(&["nondeterministic_output"]),
    cmd!("keyslot", 3, STALE, K0, "cluster", "Returns the slot of a key name.", disabled),
    cmd!("links", 2, STALE, K0, "cluster", "Lists the links to the other nodes.", disabled).with_tips(&["nondeterministic_output"]),
    cmd!("meet", -4, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Connects this node to another.", disabled),
    cmd!("myid", 2, STALE, K0, "cluster", "Returns this node's ID.", disabled),
    cmd!("nodes", 2, STALE, K0, "cluster", "Returns the node table.", disabled).with_tips(&["nondeterministic_output"]),
    cmd!("replicas", 3, ADMIN | STALE, K0, "cluster", "Lists a master's replicas.", disabled).with_tips(&["nondeterministic_output"]),
    cmd!("replicate", 3, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Makes this node a replica of another.", disabled),
    cmd!("reset", -2, ADMIN | STALE | NOSCRIPT, K0, "cluster", "Resets this node's cluster state.", disabled),
    cmd!("saveconfig", 2, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Writes the cluster configuration to disk.", disabled),
    cmd!("set-config-epoch", 3, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Sets this node's config epoch.", disabled),
    cmd!("setslot", -4, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Binds a slot to a node.", disabled),
    cmd!("shards", 2, STALE, K0, "cluster", "Lists the shards and their slots.", disabled).with_tips(&["nondeterministic_output"]),
    cmd!("slaves", 3, ADMIN | STALE, K0, "cluster", "Lists a master's replicas (old name).", disabled).with_tips(&["nondeterministic_output"]),
    cmd!("slots", 2, STALE, K0, "cluster", "Maps slots to nodes.", disabled).with_tips(&["nondeterministic_output"]),
];
