//! XINFO STREAM [FULL [COUNT n]], XINFO GROUPS, XINFO CONSUMERS, XINFO HELP.

use std::borrow::Cow;

use super::group::no_group;
use super::{reply_entry, reply_id, stream_ref, subcommand_syntax};
use crate::commands::introspect::help_reply;
use crate::commands::{errors, CmdResult, Ctx};
use crate::resp::{Args, ReplyBuf};
use crate::types::stream::{Group, Stream, StreamId};

pub(in crate::commands) fn xinfo_help(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    help_reply(
        ctx.reply,
        "XINFO",
        &[
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
        ],
    );
    Ok(())
}

/// XINFO CONSUMERS, GROUPS and STREAM.
pub(in crate::commands) fn xinfo(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let sub = args.get(1).to_ascii_lowercase();
    let (db, key) = (ctx.session.db, args.get(2));
    let now = ctx.state.keyspace.now_ms;
    let Some(s) = stream_ref(&mut ctx.state.keyspace, db, key)? else {
        return Err(Cow::Borrowed(errors::NO_SUCH_KEY));
    };
    let r = &mut *ctx.reply;
    match (sub.as_slice(), args.len()) {
        (b"consumers", 4) => {
            let group = args.get(3);
            let g = s.groups.get(group).ok_or_else(|| no_group(group, key))?;
            r.array(g.consumers.len());
            for (name, c) in &g.consumers {
                r.map(3);
                r.bulk(b"name");
                r.bulk(name);
                r.bulk(b"pending");
                r.int(c.pel.len() as i64);
                r.bulk(b"idle");
                r.int((now - c.seen_time).max(0));
            }
        }
        (b"groups", 3) => {
            r.array(s.groups.len());
            for (name, g) in &s.groups {
                r.map(6);
                r.bulk(b"name");
                r.bulk(name);
                r.bulk(b"consumers");
                r.int(g.consumers.len() as i64);
                r.bulk(b"pending");
                r.int(g.pel.len() as i64);
                group_counters(r, s, g);
            }
        }
        (b"stream", _) => stream_info(r, s, args)?,
        _ => return Err(subcommand_syntax(args)),
    }
    Ok(())
}

/// A group's last delivered ID, read counter and lag.
fn group_counters(r: &mut ReplyBuf, s: &Stream, g: &Group) {
    r.bulk(b"last-delivered-id");
    reply_id(r, g.last_id);
    r.bulk(b"entries-read");
    match g.entries_read {
        -1 => r.null(),
        n => r.int(n),
    }
    r.bulk(b"lag");
    match s.group_lag(g) {
        Some(lag) => r.int(lag),
        None => r.null(),
    }
}

/// A block's key in Redis's radix tree: the ID as 16 big-endian bytes.
fn id_key(id: StreamId) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&id.ms.to_be_bytes());
    k[8..].copy_from_slice(&id.seq.to_be_bytes());
    k
}

/// How many nodes Redis's radix tree has for these sorted keys: a
/// compressed node for each run shared by all keys below a point, a
/// branching node where they diverge, and a node per key at its end (an
/// empty tree is its root alone).
fn rax_nodes(keys: &[[u8; 16]]) -> usize {
    if keys.is_empty() {
        1
    } else {
        subtree_nodes(keys, 0)
    }
}

/// Nodes of the subtree of `keys` (sorted, sharing their first `depth`
/// bytes) whose node starts at byte `depth`.
fn subtree_nodes(keys: &[[u8; 16]], depth: usize) -> usize {
    let (first, last) = (keys[0], keys[keys.len() - 1]);
    if keys.len() == 1 {
        // A compressed node for the rest of the key, then the key's node.
        return if depth < 16 { 2 } else { 1 };
    }
    // Sorted keys share what the first and the last share.
    let shared = (depth..16).take_while(|&i| first[i] == last[i]).count();
    let at = depth + shared;
    let compressed = usize::from(shared > 0);
    let mut nodes = compressed + 1;
    let mut start = 0;
    while start < keys.len() {
        let byte = keys[start][at];
        let end = start + keys[start..].iter().take_while(|k| k[at] == byte).count();
        nodes += subtree_nodes(&keys[start..end], at + 1);
        start = end;
    }
    nodes
}

/// The fields XINFO STREAM starts with, in both forms.
fn stream_counters(r: &mut ReplyBuf, s: &Stream) {
    r.bulk(b"length");
    r.int(s.length as i64);
    r.bulk(b"radix-tree-keys");
    r.int(s.block_count() as i64);
    r.bulk(b"radix-tree-nodes");
    let keys: Vec<[u8; 16]> = s.blocks().map(|(id, _)| id_key(id)).collect();
    r.int(rax_nodes(&keys) as i64);
    for (name, id) in [
        (&b"last-generated-id"[..], s.last_id),
        (b"max-deleted-entry-id", s.max_deleted_id),
    ] {
        r.bulk(name);
        reply_id(r, id);
    }
    r.bulk(b"entries-added");
    r.int(s.entries_added as i64);
    r.bulk(b"recorded-first-entry-id");
    reply_id(r, s.first_id);
}

fn stream_info(r: &mut ReplyBuf, s: &Stream, args: &Args<'_>) -> CmdResult {
    let options = args.len() - 3;
    let mut count = 10i64;
    if options > 0 {
        if (options != 1 && options != 3) || !args.get(3).eq_ignore_ascii_case(b"full") {
            return Err(subcommand_syntax(args));
        }
        if options == 3 {
            if !args.get(4).eq_ignore_ascii_case(b"count") {
                return Err(subcommand_syntax(args));
            }
            count = crate::commands::int_arg(args, 5)?;
            if count < 0 {
                count = 10;
            }
        }
    }
    if options == 0 {
        r.map(10);
        stream_counters(r, s);
        r.bulk(b"groups");
        r.int(s.groups.len() as i64);
        r.bulk(b"first-entry");
        match s.range(StreamId::MIN, StreamId::MAX, false).next() {
            Some(e) => reply_entry(r, &e),
            None => r.null(),
        }
        r.bulk(b"last-entry");
        match s.range(StreamId::MIN, StreamId::MAX, true).next() {
            Some(e) => reply_entry(r, &e),
            None => r.null(),
        }
        return Ok(());
    }
    let limit = if count == 0 {
        usize::MAX
    } else {
        count as usize
    };
    r.map(9);
    stream_counters(r, s);
    r.bulk(b"entries");
    let entries: Vec<_> = s
        .range(StreamId::MIN, StreamId::MAX, false)
        .take(limit)
        .collect();
    r.array(entries.len());
    entries.iter().for_each(|e| reply_entry(r, e));
    r.bulk(b"groups");
    r.array(s.groups.len());
    for (name, g) in &s.groups {
        full_group(r, s, name, g, limit);
    }
    Ok(())
}

fn full_group(r: &mut ReplyBuf, s: &Stream, name: &[u8], g: &Group, limit: usize) {
    r.map(7);
    r.bulk(b"name");
    r.bulk(name);
    group_counters(r, s, g);
    r.bulk(b"pel-count");
    r.int(g.pel.len() as i64);
    r.bulk(b"pending");
    let shown = g.pel.len().min(limit);
    r.array(shown);
    for (id, nack) in g.pel.iter().take(shown) {
        r.array(4);
        reply_id(r, *id);
        r.bulk(&nack.consumer);
        r.int(nack.delivery_time);
        r.int(nack.delivery_count as i64);
    }
    r.bulk(b"consumers");
    r.array(g.consumers.len());
    for (cname, c) in &g.consumers {
        r.map(4);
        r.bulk(b"name");
        r.bulk(cname);
        r.bulk(b"seen-time");
        r.int(c.seen_time);
        r.bulk(b"pel-count");
        r.int(c.pel.len() as i64);
        r.bulk(b"pending");
        let shown = c.pel.len().min(limit);
        r.array(shown);
        for id in c.pel.iter().take(shown) {
            let nack = g.pel.get(id);
            r.array(3);
            reply_id(r, *id);
            r.int(nack.map_or(0, |n| n.delivery_time));
            r.int(nack.map_or(0, |n| n.delivery_count) as i64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(ids: &[u64]) -> Vec<[u8; 16]> {
        ids.iter()
            .map(|&ms| id_key(StreamId { ms, seq: 0 }))
            .collect()
    }

    /// The counts Redis 7.0.15's XINFO reported for blocks starting at
    /// these milliseconds.
    #[test]
    fn radix_tree_nodes_count_as_redis_counts_them() {
        assert_eq!(rax_nodes(&[]), 1);
        assert_eq!(rax_nodes(&keys(&[1])), 2);
        assert_eq!(rax_nodes(&keys(&[1, 4, 7])), 8);
        let ids: Vec<u64> = (1..=300).collect();
        assert_eq!(rax_nodes(&keys(&ids)), 604);
        let mixed: Vec<[u8; 16]> = [(5, 0), (5, 1), (5, 2), (256, 0), (256, 7), (65536, 0)]
            .into_iter()
            .chain([
                (1_700_000_000_000, 0),
                (1_700_000_000_000, 1),
                (1_700_000_000_001, 0),
            ])
            .map(|(ms, seq)| id_key(StreamId { ms, seq }))
            .collect();
        assert_eq!(rax_nodes(&mixed), 24);
    }
}
