//! Publish/subscribe commands: (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE,
//! PUBLISH, SPUBLISH, PUBSUB; and MONITOR. The state and the delivery to
//! other clients are in `server/pubsub.rs`.

use std::borrow::Cow;

use super::table::*;
use super::{CmdResult, Ctx};
use crate::keyspace::glob::glob_match;
use crate::resp::Args;
use crate::server::pubsub::{publish as deliver, Kind, When};
use crate::types::Bytes;

/// Moves what the running client received while it ran (its own
/// messages) into its reply, ahead of what follows.
pub(super) fn flush_inline(ctx: &mut Ctx<'_>) {
    let hub = &mut ctx.state.pubsub;
    if hub.inline.is_empty() {
        return;
    }
    if hub.silenced() {
        hub.kept.append(&mut hub.inline);
    } else {
        ctx.reply.buf.append(&mut hub.inline);
    }
}

/// One (un)subscription confirmation: `[word, name or nil, count]`, a
/// push that CLIENT REPLY OFF does not silence.
fn confirm(ctx: &mut Ctx<'_>, word: &[u8], name: Option<&[u8]>, count: usize) {
    let id = ctx.session.id;
    let hub = &mut ctx.state.pubsub;
    hub.send(id, ctx.reply.proto, When::Now, |r| {
        r.push(3);
        r.bulk(word);
        match name {
            Some(name) => r.bulk(name),
            None => r.null(),
        }
        r.int(count as i64);
    });
    flush_inline(ctx);
}

fn subscribe_kind(ctx: &mut Ctx<'_>, args: &Args<'_>, kind: Kind) -> CmdResult {
    let id = ctx.session.id;
    for channel in args.iter().skip(1) {
        let count = ctx.state.pubsub.subscribe(id, channel, kind);
        confirm(ctx, kind.words().0, Some(channel), count);
    }
    Ok(())
}

fn unsubscribe_kind(ctx: &mut Ctx<'_>, args: &Args<'_>, kind: Kind) -> CmdResult {
    let id = ctx.session.id;
    let word = kind.words().1;
    let named: Vec<Bytes> = if args.len() > 1 {
        args.iter().skip(1).map(Bytes::from).collect()
    } else {
        let subs = ctx.state.pubsub.clients.get(&id);
        let set = subs.map(|s| match kind {
            Kind::Plain => &s.channels,
            Kind::Shard => &s.shard,
        });
        let all: Vec<Bytes> = set.map(|s| s.iter().cloned().collect()).unwrap_or_default();
        if all.is_empty() {
            let count = ctx.state.pubsub.count_of(id, kind);
            confirm(ctx, word, None, count);
            return Ok(());
        }
        all
    };
    for channel in named {
        ctx.state.pubsub.unsubscribe(id, &channel, kind);
        let count = ctx.state.pubsub.count_of(id, kind);
        confirm(ctx, word, Some(&channel), count);
    }
    ctx.state.pubsub.tidy(id);
    Ok(())
}

pub(super) fn subscribe(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    subscribe_kind(ctx, args, Kind::Plain)
}

pub(super) fn ssubscribe(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    subscribe_kind(ctx, args, Kind::Shard)
}

pub(super) fn unsubscribe(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    unsubscribe_kind(ctx, args, Kind::Plain)
}

pub(super) fn sunsubscribe(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    unsubscribe_kind(ctx, args, Kind::Shard)
}

pub(super) fn psubscribe(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let id = ctx.session.id;
    for pattern in args.iter().skip(1) {
        let count = ctx.state.pubsub.psubscribe(id, pattern);
        confirm(ctx, b"psubscribe", Some(pattern), count);
    }
    Ok(())
}

pub(super) fn punsubscribe(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let id = ctx.session.id;
    let named: Vec<Bytes> = if args.len() > 1 {
        args.iter().skip(1).map(Bytes::from).collect()
    } else {
        let all = ctx
            .state
            .pubsub
            .clients
            .get(&id)
            .map(|s| s.patterns.clone())
            .unwrap_or_default();
        if all.is_empty() {
            let count = ctx.state.pubsub.count_of(id, Kind::Plain);
            confirm(ctx, b"punsubscribe", None, count);
            return Ok(());
        }
        all
    };
    for pattern in named {
        ctx.state.pubsub.punsubscribe(id, &pattern);
        let count = ctx.state.pubsub.count_of(id, Kind::Plain);
        confirm(ctx, b"punsubscribe", Some(&pattern), count);
    }
    ctx.state.pubsub.tidy(id);
    Ok(())
}

fn publish_kind(ctx: &mut Ctx<'_>, args: &Args<'_>, kind: Kind) -> CmdResult {
    // Messages reach the replicas' subscribers too (not the log): through
    // the replication stream, or in a cluster, as Redis does, over the
    // bus to every node (a sharded message: to its shard's nodes).
    let replay = ctx.session.is_replay;
    match ctx.state.cluster.clone() {
        Some(shared) if !ctx.session.is_master && !replay => {
            crate::cluster::publish(&shared, args.get(1), args.get(2), kind == Kind::Shard);
        }
        None if !replay => {
            let db = ctx.session.db;
            ctx.state.repl.replicate_only.push((db, args.to_vec()));
        }
        _ => {}
    }
    let state = &mut *ctx.state;
    let receivers = deliver(
        &mut state.pubsub,
        &state.clients,
        args.get(1),
        args.get(2),
        kind,
    );
    flush_inline(ctx);
    ctx.reply.int(receivers as i64);
    Ok(())
}

pub(super) fn publish(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    publish_kind(ctx, args, Kind::Plain)
}

pub(super) fn spublish(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    publish_kind(ctx, args, Kind::Shard)
}

/// PUBSUB CHANNELS / SHARDCHANNELS: active channels matching the
/// optional pattern.
fn channel_list(ctx: &mut Ctx<'_>, args: &Args<'_>, kind: Kind) -> CmdResult {
    if args.len() > 3 {
        return Err(Cow::Owned(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
            String::from_utf8_lossy(args.get(1)),
            String::from_utf8_lossy(args.get(0)).to_ascii_uppercase()
        )));
    }
    let pattern = (args.len() > 2).then(|| args.get(2));
    let table = match kind {
        Kind::Plain => &ctx.state.pubsub.channels,
        Kind::Shard => &ctx.state.pubsub.shard_channels,
    };
    let names: Vec<Bytes> = table
        .keys()
        .filter(|c| pattern.is_none_or(|p| glob_match(p, c)))
        .cloned()
        .collect();
    ctx.reply.bulks(names.iter().map(|n| &n[..]));
    Ok(())
}

/// PUBSUB NUMSUB / SHARDNUMSUB: subscribers of each named channel.
fn numsub(ctx: &mut Ctx<'_>, args: &Args<'_>, kind: Kind) -> CmdResult {
    ctx.reply.array((args.len() - 2) * 2);
    for channel in args.iter().skip(2) {
        let table = match kind {
            Kind::Plain => &ctx.state.pubsub.channels,
            Kind::Shard => &ctx.state.pubsub.shard_channels,
        };
        let n = table.get(channel).map_or(0, Vec::len);
        ctx.reply.bulk(channel);
        ctx.reply.int(n as i64);
    }
    Ok(())
}

pub(super) fn pubsub_channels(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    channel_list(ctx, args, Kind::Plain)
}

pub(super) fn pubsub_shardchannels(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    channel_list(ctx, args, Kind::Shard)
}

pub(super) fn pubsub_numsub(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    numsub(ctx, args, Kind::Plain)
}

pub(super) fn pubsub_shardnumsub(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    numsub(ctx, args, Kind::Shard)
}

pub(super) fn pubsub_numpat(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    ctx.reply.int(ctx.state.pubsub.patterns.len() as i64);
    Ok(())
}

pub(super) fn pubsub_help(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    const LINES: &[&str] = &[
        "CHANNELS [<pattern>]",
        "    Return the currently active channels matching a <pattern> (default: '*').",
        "NUMPAT",
        "    Return number of subscriptions to patterns.",
        "NUMSUB [<channel> ...]",
        "    Return the number of subscribers for the specified channels, excluding",
        "    pattern subscriptions(default: no channels).",
        "SHARDCHANNELS [<pattern>]",
        "    Return the currently active shard level channels matching a <pattern> (default: '*').",
        "SHARDNUMSUB [<shardchannel> ...]",
        "    Return the number of subscribers for the specified shard level channel(s)",
        "HELP",
        "    Prints this help.",
    ];
    let name = String::from_utf8_lossy(args.get(0)).to_ascii_uppercase();
    ctx.reply.array(LINES.len() + 1);
    ctx.reply.simple(&format!(
        "{name} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for line in LINES {
        ctx.reply.simple(line);
    }
    Ok(())
}

pub(super) fn monitor(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let id = ctx.session.id;
    if !ctx.state.pubsub.monitors.contains(&id) {
        ctx.state.pubsub.monitors.push(id);
        ctx.reply.ok();
    }
    Ok(())
}

/// Flags of the (un)subscribe commands.
const SUB: u32 = PUBSUB | NOSCRIPT | LOADING | STALE;

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("subscribe", -2, SUB, K0, "pubsub", "Listens for messages published to channels.", subscribe).with_channels(Channels::Subscribe),
    cmd!("psubscribe", -2, SUB, K0, "pubsub", "Listens for messages published to channels that match one or more patterns.", psubscribe).with_channels(Channels::Pattern),
    cmd!("ssubscribe", -2, SUB, KALL, "pubsub", "Listens for messages published to shard channels.", ssubscribe).with_channels(Channels::Subscribe),
    cmd!("unsubscribe", -1, SUB, K0, "pubsub", "Stops listening to messages posted to channels.", unsubscribe),
    cmd!("punsubscribe", -1, SUB, K0, "pubsub", "Stops listening to messages published to channels that match one or more patterns.", punsubscribe),
    cmd!("sunsubscribe", -1, SUB, KALL, "pubsub", "Stops listening to messages posted to shard channels.", sunsubscribe),
    cmd!("publish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE, K0, "pubsub", "Posts a message to a channel.", publish).with_channels(Channels::Publish),
    cmd!("spublish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE, K1, "pubsub", "Post a message to a shard channel", spublish).with_channels(Channels::Publish),
    cmd!("pubsub", -2, 0, K0, "pubsub", "A container for Pub/Sub commands.", pubsub_help).with_subcommands(PUBSUB_SUBCOMMANDS),
    cmd!("monitor", 1, ADMIN | NOSCRIPT | LOADING | STALE, K0, "server", "Listens for all requests received by the server in real-time.", monitor),
];

/// PUBSUB's subcommands.
#[rustfmt::skip]
static PUBSUB_SUBCOMMANDS: &[CommandSpec] = &[
    cmd!("channels", -2, PUBSUB | LOADING | STALE, K0, "pubsub", "Returns the active channels.", pubsub_channels),
    cmd!("numsub", -2, PUBSUB | LOADING | STALE, K0, "pubsub", "Returns a count of subscribers to channels.", pubsub_numsub),
    cmd!("numpat", 2, PUBSUB | LOADING | STALE, K0, "pubsub", "Returns a count of unique pattern subscriptions.", pubsub_numpat),
    cmd!("shardchannels", -2, PUBSUB | LOADING | STALE, K0, "pubsub", "Returns the active shard channels.", pubsub_shardchannels),
    cmd!("shardnumsub", -2, PUBSUB | LOADING | STALE, K0, "pubsub", "Returns the count of subscribers of shard channels.", pubsub_shardnumsub),
    cmd!("help", 2, LOADING | STALE, K0, "pubsub", "Returns helpful text about the different subcommands.", pubsub_help),
];
