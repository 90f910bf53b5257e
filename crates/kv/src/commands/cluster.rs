//! CLUSTER and ASKING (`docs/cluster.md`). With `cluster-enabled no`
//! every subcommand answers as Redis does outside cluster mode; with it,
//! they read and change the node table (`crate::cluster`), with Redis
//! 7.0's replies and errors. The replies that describe the topology are
//! in `cluster_topology.rs`; READONLY and READWRITE in `cluster_topology.rs`
//! too, as they only set the client's flag.

use std::borrow::Cow;
use std::sync::Arc;

use super::cluster_topology as topo;
use super::table::*;
use super::{acl, int_arg, upper, CmdError, CmdResult, Ctx};
use crate::cluster::{flags, now_ms, ClusterState, NodeId, Shared, SLOTS};
use crate::resp::Args;

/// Redis's reply to cluster commands outside cluster mode.
const DISABLED: &str = "ERR This instance has cluster support disabled";

/// The node table, or the refusal outside cluster mode.
pub(super) fn shared(ctx: &Ctx<'_>) -> Result<Arc<Shared>, CmdError> {
    let shared = ctx.state.cluster.clone().ok_or(Cow::Borrowed(DISABLED))?;
    crate::cluster::sync_myself(&mut shared.lock(), ctx.state);
    Ok(shared)
}

/// Writes `nodes.conf` if the command changed the table; a failure is
/// reported in the log and retried at the next change, as the table in
/// memory is already the truth for the bus.
pub(super) fn persist(shared: &Shared) {
    if let Err(e) = shared.save_if_dirty() {
        tracing::warn!("can't update the cluster config file: {e}");
    }
}

fn disabled(_ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    Err(Cow::Borrowed(DISABLED))
}

/// DEBUG CLUSTERLINK KILL TO|FROM|ALL <node-id>: closes bus links, for
/// tests of what the cluster does while a link is down.
pub(super) fn debug_kill_link(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let Some(shared) = ctx.state.cluster.clone() else {
        return Err(Cow::Borrowed(
            "ERR Debug option only available for cluster mode enabled setup!",
        ));
    };
    let id = node_arg(&shared.lock(), args, 4)?;
    let (to, from) = match upper(args, 3).as_slice() {
        b"TO" => (true, false),
        b"FROM" => (false, true),
        b"ALL" => (true, true),
        _ => {
            return Err(Cow::Owned(format!(
                "ERR Unknown direction {}",
                String::from_utf8_lossy(args.get(3))
            )))
        }
    };
    crate::cluster::kill_link(&shared, id, to, from);
    ctx.reply.ok();
    Ok(())
}

/// A slot argument, or Redis's error.
fn slot_arg(args: &Args<'_>, at: usize) -> Result<usize, CmdError> {
    int_arg(args, at)
        .ok()
        .filter(|s| (0..SLOTS as i64).contains(s))
        .map(|s| s as usize)
        .ok_or(Cow::Borrowed("ERR Invalid or out of range slot"))
}

/// A node named by its ID, or `Unknown node <id>`.
fn node_arg(state: &ClusterState, args: &Args<'_>, at: usize) -> Result<NodeId, CmdError> {
    NodeId::parse(args.get(at))
        .filter(|id| state.nodes.contains_key(id))
        .ok_or_else(|| {
            Cow::Owned(format!(
                "ERR Unknown node {}",
                String::from_utf8_lossy(args.get(at))
            ))
        })
}

fn asking(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    shared(ctx)?;
    ctx.session.asking = true;
    ctx.reply.ok();
    Ok(())
}

fn myid(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let shared = shared(ctx)?;
    let id = shared.lock().myself;
    ctx.reply.bulk(&id.0);
    Ok(())
}

fn keyslot(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    shared(ctx)?;
    ctx.reply
        .int(i64::from(crate::cluster::key_slot(args.get(2))));
    Ok(())
}

fn countkeysinslot(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    shared(ctx)?;
    let slot = int_arg(args, 2)?;
    if !(0..SLOTS as i64).contains(&slot) {
        return Err(Cow::Borrowed("ERR Invalid slot"));
    }
    let n = ctx.state.keyspace.count_keys_in_slot(slot as usize);
    ctx.reply.int(n as i64);
    Ok(())
}

fn getkeysinslot(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    shared(ctx)?;
    let slot = int_arg(args, 2)?;
    let max = int_arg(args, 3)?;
    if !(0..SLOTS as i64).contains(&slot) || max < 0 {
        return Err(Cow::Borrowed("ERR Invalid slot or number of keys"));
    }
    let keys = ctx.state.keyspace.keys_in_slot(slot as usize, max as usize);
    ctx.reply.bulks(keys.iter().map(|k| &k[..]));
    Ok(())
}

/// Checks the slots `ranges` name against the table and marks them in
/// `marked`, with Redis's errors.
fn check_ranges(
    state: &ClusterState,
    ranges: &[(usize, usize)],
    del: bool,
) -> Result<Vec<bool>, CmdError> {
    let mut marked = vec![false; SLOTS];
    for &(first, last) in ranges {
        for (slot, mark) in marked.iter_mut().enumerate().take(last + 1).skip(first) {
            if del && state.slots[slot].is_none() {
                return Err(Cow::Owned(format!("ERR Slot {slot} is already unassigned")));
            }
            if !del && state.slots[slot].is_some() {
                return Err(Cow::Owned(format!("ERR Slot {slot} is already busy")));
            }
            if *mark {
                return Err(Cow::Owned(format!(
                    "ERR Slot {slot} specified multiple times"
                )));
            }
            *mark = true;
        }
    }
    Ok(marked)
}

/// ADDSLOTS, DELSLOTS and their RANGE forms.
fn change_slots(ctx: &mut Ctx<'_>, args: &Args<'_>, del: bool, ranges: bool) -> CmdResult {
    let shared = shared(ctx)?;
    if ranges && args.len() % 2 == 1 {
        return Err(Cow::Owned(format!(
            "ERR wrong number of arguments for 'cluster|{}' command",
            String::from_utf8_lossy(args.get(1)).to_ascii_lowercase()
        )));
    }
    let mut list = Vec::new();
    if ranges {
        for at in (2..args.len()).step_by(2) {
            let (first, last) = (slot_arg(args, at)?, slot_arg(args, at + 1)?);
            if first > last {
                return Err(Cow::Owned(format!(
                    "ERR start slot number {first} is greater than end slot number {last}"
                )));
            }
            list.push((first, last));
        }
    } else {
        for at in 2..args.len() {
            slot_arg(args, at)?;
        }
        for at in 2..args.len() {
            let slot = slot_arg(args, at)?;
            list.push((slot, slot));
        }
    }
    {
        let mut state = shared.lock();
        let marked = check_ranges(&state, &list, del)?;
        let me = state.myself;
        for (slot, on) in marked.into_iter().enumerate() {
            if on {
                state.slots[slot] = if del { None } else { Some(me) };
                if !del {
                    // As Redis: a slot added is no longer being imported.
                    state.importing.remove(&(slot as u16));
                }
            }
        }
        state.dirty = true;
        refresh(&mut state, ctx);
    }
    persist(&shared);
    ctx.reply.ok();
    Ok(())
}

/// Recomputes the cluster's state after a change, with the settings.
pub(super) fn refresh(state: &mut ClusterState, ctx: &Ctx<'_>) {
    let c = &ctx.state.config.cluster;
    state.update_state(now_ms(), c.require_full_coverage, c.node_timeout_ms);
}

fn addslots(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    change_slots(ctx, args, false, false)
}
fn delslots(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    change_slots(ctx, args, true, false)
}
fn addslotsrange(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    change_slots(ctx, args, false, true)
}
fn delslotsrange(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    change_slots(ctx, args, true, true)
}

fn flushslots(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let shared = shared(ctx)?;
    if !ctx.state.keyspace.db(0).is_empty() {
        return Err(Cow::Borrowed(
            "ERR DB must be empty to perform CLUSTER FLUSHSLOTS.",
        ));
    }
    {
        let mut state = shared.lock();
        let me = state.myself;
        for owner in state.slots.iter_mut() {
            if *owner == Some(me) {
                *owner = None;
            }
        }
        state.dirty = true;
        refresh(&mut state, ctx);
    }
    persist(&shared);
    ctx.reply.ok();
    Ok(())
}

fn bumpepoch(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let shared = shared(ctx)?;
    let (bumped, epoch) = {
        let mut state = shared.lock();
        let bumped = bump_epoch(&mut state);
        (bumped, state.me().config_epoch)
    };
    persist(&shared);
    let word = if bumped { "BUMPED" } else { "STILL" };
    ctx.reply.simple(&format!("{word} {epoch}"));
    Ok(())
}

/// Gives this node a new config epoch, unless it already has the
/// highest one and it is not zero: Redis's bump without consensus.
pub fn bump_epoch(state: &mut ClusterState) -> bool {
    let max = state.max_epoch();
    let mine = state.me().config_epoch;
    if mine == 0 || mine != max {
        state.current_epoch += 1;
        let epoch = state.current_epoch;
        state.me_mut().config_epoch = epoch;
        state.dirty = true;
        true
    } else {
        false
    }
}

fn set_config_epoch(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let shared = shared(ctx)?;
    let epoch = int_arg(args, 2)?;
    {
        let mut state = shared.lock();
        if epoch < 0 {
            return Err(Cow::Owned(format!(
                "ERR Invalid config epoch specified: {epoch}"
            )));
        } else if state.nodes.len() > 1 {
            return Err(Cow::Borrowed("ERR The user can assign a config epoch only when the node does not know any other node."));
        } else if state.me().config_epoch != 0 {
            return Err(Cow::Borrowed("ERR Node config epoch is already non-zero"));
        }
        state.me_mut().config_epoch = epoch as u64;
        state.current_epoch = state.current_epoch.max(epoch as u64);
        state.dirty = true;
        refresh(&mut state, ctx);
    }
    persist(&shared);
    ctx.reply.ok();
    Ok(())
}

fn saveconfig(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let shared = shared(ctx)?;
    shared
        .save_now()
        .map_err(|e| Cow::Owned(format!("ERR error saving the cluster node config: {e}")))?;
    ctx.reply.ok();
    Ok(())
}

/// Redis's reply to a subcommand it knows called with a shape it does
/// not accept (MEET, RESET and FAILOVER check their own argument counts).
pub(super) fn shape_error(args: &Args<'_>) -> CmdError {
    let name = String::from_utf8_lossy(args.get(1));
    let name: String = name.chars().take(128).collect();
    Cow::Owned(format!(
        "ERR unknown subcommand or wrong number of arguments for '{name}'. Try CLUSTER HELP."
    ))
}

fn meet(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let shared = shared(ctx)?;
    if args.len() > 5 {
        return Err(shape_error(args));
    }
    let text = |at: usize| String::from_utf8_lossy(args.get(at)).into_owned();
    let port = int_arg(args, 3)
        .map_err(|_| Cow::Owned(format!("ERR Invalid TCP base port specified: {}", text(3))))?;
    let cport = if args.len() == 5 {
        int_arg(args, 4)
            .map_err(|_| Cow::Owned(format!("ERR Invalid TCP bus port specified: {}", text(4))))?
    } else {
        port + 10000
    };
    let ip: Option<std::net::IpAddr> = text(2).parse().ok();
    let (Some(ip), Ok(port), Ok(cport)) = (ip, u16::try_from(port), u16::try_from(cport)) else {
        return Err(Cow::Owned(format!(
            "ERR Invalid node address specified: {}:{}",
            text(2),
            text(3)
        )));
    };
    if port == 0 || cport == 0 {
        return Err(Cow::Owned(format!(
            "ERR Invalid node address specified: {}:{}",
            text(2),
            text(3)
        )));
    }
    crate::cluster::bus::start_handshake(&mut shared.lock(), &ip.to_string(), port, cport);
    ctx.reply.ok();
    Ok(())
}

fn forget(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let shared = shared(ctx)?;
    {
        let mut state = shared.lock();
        let id = node_arg(&state, args, 2)?;
        if id == state.myself {
            return Err(Cow::Borrowed(
                "ERR I tried hard but I can't forget myself...",
            ));
        }
        if state.me().is_replica() && state.me().primary == Some(id) {
            return Err(Cow::Borrowed("ERR Can't forget my master!"));
        }
        state.forget(&id);
        crate::cluster::bus::blacklist(&mut state, id);
        refresh(&mut state, ctx);
    }
    persist(&shared);
    ctx.reply.ok();
    Ok(())
}

fn count_failure_reports(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let shared = shared(ctx)?;
    let state = shared.lock();
    let id = node_arg(&state, args, 2)?;
    let timeout = ctx.state.config.cluster.node_timeout_ms;
    let now = now_ms();
    let n = state.nodes[&id]
        .fail_reports
        .iter()
        .filter(|(_, at)| now - at <= timeout * 2)
        .count();
    drop(state);
    ctx.reply.int(n as i64);
    Ok(())
}

fn replicate(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let shared = shared(ctx)?;
    let (ip, port) = {
        let mut state = shared.lock();
        let id = node_arg(&state, args, 2)?;
        if id == state.myself {
            return Err(Cow::Borrowed("ERR Can't replicate myself"));
        }
        let target = &state.nodes[&id];
        if target.is_replica() {
            return Err(Cow::Borrowed(
                "ERR I can only replicate a master, not a replica.",
            ));
        }
        let (ip, port) = (target.ip.clone(), target.port);
        let me_primary = state.me().is_primary();
        let my_slots = state.slot_count(&state.myself);
        if me_primary && (my_slots != 0 || !ctx.state.keyspace.db(0).is_empty()) {
            return Err(Cow::Borrowed(
                "ERR To set a master the node must be empty and without assigned slots.",
            ));
        }
        let me = state.me_mut();
        me.flags = (me.flags & !flags::MASTER) | flags::SLAVE;
        me.primary = Some(id);
        state.migrating.clear();
        state.importing.clear();
        state.dirty = true;
        refresh(&mut state, ctx);
        (ip, port)
    };
    persist(&shared);
    topo::follow(ctx, ip, port);
    ctx.reply.ok();
    Ok(())
}

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("cluster", -2, 0, K0, "cluster", "Inspects and configures a cluster node.", disabled).with_subcommands(CLUSTER),
    cmd!("asking", 1, FAST, K0, "cluster", "Lets the next command reach a slot being imported.", asking).with_acl(acl::bit("connection")),
];

/// CLUSTER's subcommands.
#[rustfmt::skip]
static CLUSTER: &[CommandSpec] = &[
    cmd!("addslots", -3, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Assigns slots to this node.", addslots),
    cmd!("addslotsrange", -4, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Assigns ranges of slots to this node.", addslotsrange),
    cmd!("bumpepoch", 2, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Advances the cluster config epoch.", bumpepoch).with_tips(&["nondeterministic_output"]),
    cmd!("count-failure-reports", 3, ADMIN | STALE, K0, "cluster", "Counts failure reports about a node.", count_failure_reports).with_tips(&["nondeterministic_output"]),
    cmd!("countkeysinslot", 3, STALE, K0, "cluster", "Counts the keys in a slot.", countkeysinslot),
    cmd!("delslots", -3, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Unassigns slots from this node.", delslots),
    cmd!("delslotsrange", -4, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Unassigns ranges of slots from this node.", delslotsrange),
    cmd!("failover", -2, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Makes a replica take over its master.", topo::failover),
    cmd!("flushslots", 2, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Unassigns every slot of this node.", flushslots),
    cmd!("forget", 3, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Removes a node from this node's table.", forget),
    cmd!("getkeysinslot", 4, STALE, K0, "cluster", "Returns key names in a slot.", getkeysinslot).with_tips(&["nondeterministic_output"]),
    cmd!("help", 2, LOADING | STALE, K0, "cluster", "Explains CLUSTER's subcommands.", topo::help),
    cmd!("info", 2, STALE, K0, "cluster", "Returns the cluster's state.", topo::info).with_tips(&["nondeterministic_output"]),
    cmd!("keyslot", 3, STALE, K0, "cluster", "Returns the slot of a key name.", keyslot),
    cmd!("links", 2, STALE, K0, "cluster", "Lists the links to the other nodes.", topo::links).with_tips(&["nondeterministic_output"]),
    cmd!("meet", -4, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Connects this node to another.", meet),
    cmd!("myid", 2, STALE, K0, "cluster", "Returns this node's ID.", myid),
    cmd!("nodes", 2, STALE, K0, "cluster", "Returns the node table.", topo::nodes).with_tips(&["nondeterministic_output"]),
    cmd!("replicas", 3, ADMIN | STALE, K0, "cluster", "Lists a master's replicas.", topo::replicas).with_tips(&["nondeterministic_output"]),
    cmd!("replicate", 3, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Makes this node a replica of another.", replicate),
    cmd!("reset", -2, ADMIN | STALE | NOSCRIPT, K0, "cluster", "Resets this node's cluster state.", topo::reset),
    cmd!("saveconfig", 2, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Writes the cluster configuration to disk.", saveconfig),
    cmd!("set-config-epoch", 3, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Sets this node's config epoch.", set_config_epoch),
    cmd!("setslot", -4, NO_ASYNC_LOADING | ADMIN | STALE, K0, "cluster", "Binds a slot to a node.", topo::setslot),
    cmd!("shards", 2, STALE, K0, "cluster", "Lists the shards and their slots.", topo::shards).with_tips(&["nondeterministic_output"]),
    cmd!("slaves", 3, ADMIN | STALE, K0, "cluster", "Lists a master's replicas (old name).", topo::replicas).with_tips(&["nondeterministic_output"]),
    cmd!("slots", 2, STALE, K0, "cluster", "Maps slots to nodes.", topo::slots).with_tips(&["nondeterministic_output"]),
];

/// Upper-cased argument, for the option words of RESET and FAILOVER.
pub(super) fn word(args: &Args<'_>, at: usize) -> Vec<u8> {
    upper(args, at)
}
