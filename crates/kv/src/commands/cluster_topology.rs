//! The CLUSTER subcommands that describe or reshape the topology: INFO,
//! NODES, SLOTS, SHARDS, LINKS, REPLICAS, SETSLOT, RESET, FAILOVER, HELP,
//! and READONLY / READWRITE. Replies are laid out as Redis 7.0 lays them
//! out (`docs/cluster.md`).

use std::borrow::Cow;

use super::cluster::{persist, refresh, shared, word};
use super::{CmdResult, Ctx};
use crate::cluster::msg::TYPE_NAMES;
use crate::cluster::{flags, now_ms, ClusterState, Node, NodeId, SLOTS};
use crate::resp::Args;
use crate::server::repl::Master;

/// How replies name a node (`cluster-preferred-endpoint-type`): its IP,
/// its host name (`?` without one), or nothing.
pub(crate) fn endpoint(ctx: &Ctx<'_>, node: &Node) -> Option<String> {
    endpoint_kind(&ctx.state.config.cluster.preferred_endpoint, node)
}

/// [`endpoint`] for an endpoint type, as redirections name a node
/// (`?` where no endpoint is given).
pub(crate) fn endpoint_for(kind: &str, node: &Node) -> String {
    endpoint_kind(kind, node).unwrap_or_else(|| "?".to_string())
}

fn endpoint_kind(kind: &str, node: &Node) -> Option<String> {
    match kind {
        "hostname" if node.hostname.is_empty() => Some("?".to_string()),
        "hostname" => Some(node.hostname.clone()),
        "unknown-endpoint" => None,
        _ => Some(node.ip.clone()),
    }
}

pub(super) fn info(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let shared = shared(ctx)?;
    let state = shared.lock();
    let (mut assigned, mut ok, mut pfail, mut fail) = (0, 0, 0, 0);
    for owner in state.slots.iter().flatten() {
        assigned += 1;
        match state.nodes.get(owner) {
            Some(n) if n.has(flags::FAIL) => fail += 1,
            Some(n) if n.has(flags::PFAIL) => pfail += 1,
            _ => ok += 1,
        }
    }
    let me = state.me();
    let my_epoch = match me.primary.and_then(|p| state.nodes.get(&p)) {
        Some(p) if me.is_replica() => p.config_epoch,
        _ => me.config_epoch,
    };
    let mut text = format!(
        "cluster_state:{}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{ok}\r\n\
         cluster_slots_pfail:{pfail}\r\ncluster_slots_fail:{fail}\r\ncluster_known_nodes:{}\r\n\
         cluster_size:{}\r\ncluster_current_epoch:{}\r\ncluster_my_epoch:{my_epoch}\r\n",
        if state.ok { "ok" } else { "fail" },
        state.nodes.len(),
        state.size,
        state.current_epoch,
    );
    for (direction, counts) in [("sent", &state.sent), ("received", &state.received)] {
        for (i, n) in counts.iter().enumerate() {
            if *n != 0 {
                text.push_str(&format!(
                    "cluster_stats_messages_{}_{direction}:{n}\r\n",
                    TYPE_NAMES[i]
                ));
            }
        }
        let total: u64 = counts.iter().sum();
        text.push_str(&format!("cluster_stats_messages_{direction}:{total}\r\n"));
    }
    text.push_str("total_cluster_links_buffer_limit_exceeded:0\r\n");
    drop(state);
    ctx.reply.verbatim(&text);
    Ok(())
}

pub(super) fn nodes(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let shared = shared(ctx)?;
    let text = shared.lock().nodes_text(false);
    ctx.reply.verbatim(&text);
    Ok(())
}

/// One node as CLUSTER SLOTS lists it: endpoint, port, ID, and a map of
/// the networking facts the endpoint did not give.
fn slot_node(ctx: &mut Ctx<'_>, node: &Node) {
    let kind = ctx.state.config.cluster.preferred_endpoint.clone();
    ctx.reply.array(4);
    match endpoint(ctx, node) {
        Some(e) => ctx.reply.bulk(e.as_bytes()),
        None => ctx.reply.null(),
    }
    ctx.reply.int(i64::from(node.port));
    ctx.reply.bulk(&node.id.0);
    let show_ip = kind != "ip";
    let show_host = kind != "hostname" && !node.hostname.is_empty();
    ctx.reply.map(usize::from(show_ip) + usize::from(show_host));
    if show_ip {
        ctx.reply.bulk(b"ip");
        ctx.reply.bulk(node.ip.as_bytes());
    }
    if show_host {
        ctx.reply.bulk(b"hostname");
        ctx.reply.bulk(node.hostname.as_bytes());
    }
}

/// The runs of consecutive slots with the same owner, in slot order.
fn owner_runs(state: &ClusterState) -> Vec<(usize, usize, NodeId)> {
    let mut runs: Vec<(usize, usize, NodeId)> = Vec::new();
    for (slot, owner) in state.slots.iter().enumerate() {
        let Some(owner) = owner else { continue };
        match runs.last_mut() {
            Some((_, last, id)) if *last + 1 == slot && id == owner => *last = slot,
            _ => runs.push((slot, slot, *owner)),
        }
    }
    runs
}

/// Whether a replica is listed in CLUSTER SLOTS: not failed, as Redis.
fn replica_available(node: &Node) -> bool {
    !node.has(flags::FAIL)
}

pub(super) fn slots(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let shared = shared(ctx)?;
    let state = shared.lock().clone();
    let runs = owner_runs(&state);
    ctx.reply.array(runs.len());
    for (first, last, id) in runs {
        let Some(primary) = state.nodes.get(&id) else {
            ctx.reply.array(2);
            ctx.reply.int(first as i64);
            ctx.reply.int(last as i64);
            continue;
        };
        let replicas: Vec<&Node> = state
            .replicas_of(&id)
            .into_iter()
            .filter(|n| replica_available(n))
            .collect();
        ctx.reply.array(3 + replicas.len());
        ctx.reply.int(first as i64);
        ctx.reply.int(last as i64);
        slot_node(ctx, primary);
        for r in replicas {
            slot_node(ctx, r);
        }
    }
    Ok(())
}

/// One node of a shard, as CLUSTER SHARDS describes it.
fn shard_node(ctx: &mut Ctx<'_>, state: &ClusterState, node: &Node) {
    let host = !node.hostname.is_empty();
    ctx.reply.map(7 + usize::from(host));
    ctx.reply.bulk(b"id");
    ctx.reply.bulk(&node.id.0);
    ctx.reply.bulk(b"port");
    ctx.reply.int(i64::from(node.port));
    ctx.reply.bulk(b"ip");
    ctx.reply.bulk(node.ip.as_bytes());
    ctx.reply.bulk(b"endpoint");
    let e = endpoint(ctx, node).unwrap_or_else(|| "?".to_string());
    ctx.reply.bulk(e.as_bytes());
    if host {
        ctx.reply.bulk(b"hostname");
        ctx.reply.bulk(node.hostname.as_bytes());
    }
    let offset = if node.id == state.myself {
        ctx.state.repl.offset
    } else {
        node.repl_offset
    };
    ctx.reply.bulk(b"role");
    ctx.reply.bulk(if node.is_replica() {
        &b"replica"[..]
    } else {
        b"master"
    });
    ctx.reply.bulk(b"replication-offset");
    ctx.reply.int(offset);
    ctx.reply.bulk(b"health");
    let health: &[u8] = if node.has(flags::FAIL) {
        b"fail"
    } else if node.is_replica() && offset == 0 {
        b"loading"
    } else {
        b"online"
    };
    ctx.reply.bulk(health);
}

pub(super) fn shards(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let shared = shared(ctx)?;
    let state = shared.lock().clone();
    let primaries: Vec<&Node> = state.nodes.values().filter(|n| n.is_primary()).collect();
    ctx.reply.array(primaries.len());
    for primary in primaries {
        ctx.reply.map(2);
        ctx.reply.bulk(b"slots");
        let ranges = state.slot_ranges(&primary.id);
        ctx.reply.array(ranges.len() * 2);
        for (first, last) in ranges {
            ctx.reply.int(i64::from(first));
            ctx.reply.int(i64::from(last));
        }
        ctx.reply.bulk(b"nodes");
        let members: Vec<&Node> = std::iter::once(primary)
            .chain(state.replicas_of(&primary.id))
            .collect();
        ctx.reply.array(members.len());
        for node in members {
            shard_node(ctx, &state, node);
        }
    }
    Ok(())
}

pub(super) fn links(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let shared = shared(ctx)?;
    let links = crate::cluster::bus::links(&shared);
    ctx.reply.array(links.len());
    for link in links {
        ctx.reply.map(6);
        ctx.reply.bulk(b"direction");
        ctx.reply
            .bulk(if link.inbound { &b"from"[..] } else { b"to" });
        ctx.reply.bulk(b"node");
        ctx.reply.bulk(&link.node.0);
        ctx.reply.bulk(b"create-time");
        ctx.reply.int(link.created_ms);
        ctx.reply.bulk(b"events");
        ctx.reply.bulk(link.events.as_bytes());
        ctx.reply.bulk(b"send-buffer-allocated");
        ctx.reply.int(link.send_allocated as i64);
        ctx.reply.bulk(b"send-buffer-used");
        ctx.reply.int(link.send_used as i64);
    }
    Ok(())
}

pub(super) fn replicas(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let shared = shared(ctx)?;
    let state = shared.lock().clone();
    let Some(id) = NodeId::parse(args.get(2)).filter(|id| state.nodes.contains_key(id)) else {
        return Err(Cow::Owned(format!(
            "ERR Unknown node {}",
            String::from_utf8_lossy(args.get(2))
        )));
    };
    if state.nodes[&id].is_replica() {
        return Err(Cow::Borrowed("ERR The specified node is not a master"));
    }
    let lines: Vec<String> = state
        .replicas_of(&id)
        .into_iter()
        .map(|n| state.node_line(n))
        .collect();
    ctx.reply.bulks(lines.iter().map(|l| l.as_bytes()));
    Ok(())
}

pub(super) fn setslot(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let shared = shared(ctx)?;
    let action = word(args, 3);
    {
        let mut state = shared.lock();
        if state.me().is_replica() {
            return Err(Cow::Borrowed("ERR Please use SETSLOT only with masters."));
        }
        let slot = super::int_arg(args, 2)
            .ok()
            .filter(|s| (0..SLOTS as i64).contains(s))
            .ok_or(Cow::Borrowed("ERR Invalid or out of range slot"))? as usize;
        let me = state.myself;
        let target = |state: &ClusterState, unknown: &str| -> Result<NodeId, Cow<'static, str>> {
            let id = NodeId::parse(args.get(4))
                .filter(|id| state.nodes.contains_key(id))
                .ok_or_else(|| {
                    Cow::Owned(format!(
                        "ERR {unknown} {}",
                        String::from_utf8_lossy(args.get(4))
                    ))
                })?;
            if state.nodes[&id].is_replica() {
                return Err(Cow::Borrowed("ERR Target node is not a master"));
            }
            Ok(id)
        };
        match (action.as_slice(), args.len()) {
            (b"MIGRATING", 5) => {
                if state.slots[slot] != Some(me) {
                    return Err(Cow::Owned(format!(
                        "ERR I'm not the owner of hash slot {slot}"
                    )));
                }
                let id = target(&state, "I don't know about node")?;
                state.migrating.insert(slot as u16, id);
            }
            (b"IMPORTING", 5) => {
                if state.slots[slot] == Some(me) {
                    return Err(Cow::Owned(format!(
                        "ERR I'm already the owner of hash slot {slot}"
                    )));
                }
                let id = target(&state, "I don't know about node")?;
                state.importing.insert(slot as u16, id);
            }
            (b"STABLE", 4) => {
                state.migrating.remove(&(slot as u16));
                state.importing.remove(&(slot as u16));
            }
            (b"NODE", 5) => {
                let id = target(&state, "Unknown node")?;
                let keys = ctx.state.keyspace.count_keys_in_slot(slot);
                if state.slots[slot] == Some(me) && id != me && keys != 0 {
                    return Err(Cow::Owned(format!("ERR Can't assign hashslot {slot} to a different node while I still hold keys for this hash slot.")));
                }
                if keys == 0 {
                    state.migrating.remove(&(slot as u16));
                }
                let was_mine = state.slots[slot] == Some(me);
                state.slots[slot] = Some(id);
                if id == me && state.importing.remove(&(slot as u16)).is_some() {
                    super::cluster::bump_epoch(&mut state);
                }
                // A primary left without slots serves its last slot's new
                // owner as a replica, as Redis's does when allowed.
                let allowed = ctx.state.config.cluster.allow_replica_migration;
                if was_mine && id != me && allowed && state.slot_count(&me) == 0 {
                    crate::cluster::migration::follow(&mut state, id);
                }
            }
            _ => {
                return Err(Cow::Borrowed(
                    "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP",
                ))
            }
        }
        state.dirty = true;
        refresh(&mut state, ctx);
    }
    persist(&shared);
    ctx.reply.ok();
    Ok(())
}

pub(super) fn reset(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let shared = shared(ctx)?;
    let hard = match (args.len(), word(args, 2).as_slice()) {
        (2, _) | (3, b"SOFT") => false,
        (3, b"HARD") => true,
        (3, _) => return Err(Cow::Borrowed(super::errors::SYNTAX)),
        _ => return Err(super::cluster::shape_error(args)),
    };
    let was_replica = {
        let state = shared.lock();
        let me = state.me();
        if me.is_primary() && !ctx.state.keyspace.db(ctx.session.db).is_empty() {
            return Err(Cow::Borrowed(
                "ERR CLUSTER RESET can't be called with master nodes containing keys",
            ));
        }
        me.is_replica()
    };
    if was_replica {
        // As Redis: a replica that resets drops the primary's data.
        ctx.state.repl.promote();
        for db in 0..ctx.state.keyspace.databases() {
            ctx.state.keyspace.flush_db(db);
        }
        ctx.propagate(&[b"FLUSHALL"]);
    }
    {
        let mut state = shared.lock();
        let me = state.myself;
        let ids: Vec<NodeId> = state.nodes.keys().copied().filter(|id| *id != me).collect();
        for id in ids {
            state.forget(&id);
        }
        for owner in state.slots.iter_mut() {
            *owner = None;
        }
        state.migrating.clear();
        state.importing.clear();
        let node = state.me_mut();
        node.flags = flags::MYSELF | flags::MASTER;
        node.primary = None;
        if hard {
            state.current_epoch = 0;
            state.last_vote_epoch = 0;
            state.me_mut().config_epoch = 0;
            let new_id = NodeId::random(&mut fastrand::Rng::new());
            let mut node = state
                .nodes
                .remove(&me)
                .unwrap_or_else(|| Node::new(me, 0, "", 0, 0, now_ms()));
            node.id = new_id;
            state.nodes.insert(new_id, node);
            state.myself = new_id;
        }
        state.dirty = true;
        refresh(&mut state, ctx);
    }
    persist(&shared);
    ctx.reply.ok();
    Ok(())
}

pub(super) fn failover(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let shared = shared(ctx)?;
    let option = word(args, 2);
    let (force, takeover) = match (args.len(), option.as_slice()) {
        (2, _) => (false, false),
        (3, b"FORCE") => (true, false),
        (3, b"TAKEOVER") => (true, true),
        (3, _) => return Err(Cow::Borrowed(super::errors::SYNTAX)),
        _ => return Err(super::cluster::shape_error(args)),
    };
    {
        let mut state = shared.lock();
        let me = state.me();
        if me.is_primary() {
            return Err(Cow::Borrowed(
                "ERR You should send CLUSTER FAILOVER to a replica",
            ));
        }
        let Some(primary) = me.primary.and_then(|p| state.nodes.get(&p)) else {
            return Err(Cow::Borrowed(
                "ERR I'm a replica but my master is unknown to me",
            ));
        };
        if !force && (primary.has(flags::FAIL) || !primary.link_up) {
            return Err(Cow::Borrowed(
                "ERR Master is down or failed, please use CLUSTER FAILOVER FORCE",
            ));
        }
        if !force {
            // The coordinated form: MFSTART, the primary pauses, the
            // election runs once this replica reached its offset.
            crate::cluster::manual::start(&mut state, crate::cluster::now_ms());
        } else if takeover {
            crate::cluster::failover::takeover(&mut state);
            refresh(&mut state, ctx);
        } else {
            crate::cluster::failover::force(&mut state);
        }
    }
    persist(&shared);
    ctx.reply.ok();
    Ok(())
}

pub(super) fn help(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    shared(ctx)?;
    super::introspect::help_reply(
        ctx.reply,
        "CLUSTER",
        &[
            "ADDSLOTS <slot> [<slot> ...]",
            "    Makes this node the owner of the slots.",
            "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
            "    Makes this node the owner of the slot ranges.",
            "BUMPEPOCH",
            "    Gives this node a new config epoch if it does not hold the highest.",
            "COUNT-FAILURE-REPORTS <node-id>",
            "    Counts the recent reports that <node-id> is failing.",
            "COUNTKEYSINSLOT <slot>",
            "    Counts this node's keys in <slot>.",
            "DELSLOTS <slot> [<slot> ...]",
            "    Forgets who owns the slots.",
            "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
            "    Forgets who owns the slot ranges.",
            "FAILOVER [FORCE|TAKEOVER]",
            "    Makes this replica its master's successor.",
            "FORGET <node-id>",
            "    Drops <node-id> from this node's table.",
            "GETKEYSINSLOT <slot> <count>",
            "    Lists up to <count> of this node's keys in <slot>.",
            "FLUSHSLOTS",
            "    Gives up every slot of this node.",
            "INFO",
            "    Shows the cluster's state and bus statistics.",
            "KEYSLOT <key>",
            "    Shows the slot of <key>.",
            "MEET <ip> <port> [<bus-port>]",
            "    Joins the node at <ip>:<port> to this cluster.",
            "MYID",
            "    Shows this node's ID.",
            "NODES",
            "    Shows the node table, one node per line:",
            "    <id> <ip:port@cport> <flags> <master> <ping-sent> <pong-recv> <epoch> <link> <slot> ...",
            "REPLICATE <node-id>",
            "    Makes this node a replica of <node-id>.",
            "RESET [HARD|SOFT]",
            "    Forgets every other node (HARD: also a new ID and epochs).",
            "SET-CONFIG-EPOCH <epoch>",
            "    Sets the config epoch of a node that knows no other.",
            "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
            "    Changes a slot's state or owner.",
            "REPLICAS <node-id>",
            "    Lists the replicas of <node-id>.",
            "SAVECONFIG",
            "    Writes nodes.conf now.",
            "SLOTS",
            "    Lists slot ranges with the addresses and IDs of their nodes.",
            "SHARDS",
            "    Lists the shards: their slots and nodes.",
            "LINKS",
            "    Lists this node's bus links.",
        ],
    );
    Ok(())
}

/// READONLY: in cluster mode, lets this client read from a replica.
pub(super) fn readonly(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    shared(ctx)?;
    ctx.session.readonly = true;
    ctx.reply.ok();
    Ok(())
}

/// READWRITE: undoes READONLY.
pub(super) fn readwrite(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    shared(ctx)?;
    ctx.session.readonly = false;
    ctx.reply.ok();
    Ok(())
}

/// Points this node's replication at the primary `ip:port`, as REPLICAOF
/// does (CLUSTER REPLICATE).
pub(super) fn follow(ctx: &mut Ctx<'_>, ip: String, port: u16) {
    let state = &mut *ctx.state;
    if let Some(m) = &state.repl.master {
        if m.host == ip && m.port == port {
            return;
        }
    }
    state
        .blocking
        .unblock_all_for_role_change(&mut state.keyspace);
    state.repl.master = Some(Master::new(ip, port));
    state.repl.changed = true;
}
