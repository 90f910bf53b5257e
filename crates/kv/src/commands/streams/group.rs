//! XGROUP's subcommands, XACK and XPENDING.

use std::borrow::Cow;

use super::{
    parse_id_full, range_end, range_start, reply_id, stream_mut, stream_ref, strict_id,
    subcommand_syntax,
};
use crate::commands::introspect::help_reply;
use crate::commands::{errors, CmdError, CmdResult, Ctx};
use crate::keyspace::events::STREAM;
use crate::resp::Args;
use crate::types::stream::{Consumer, Group, StreamId};
use crate::types::{Bytes, Value};

/// The NOGROUP error of a missing group.
pub(super) fn no_group(group: &[u8], key: &[u8]) -> CmdError {
    Cow::Owned(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        String::from_utf8_lossy(group),
        String::from_utf8_lossy(key)
    ))
}

/// The NOGROUP error of a missing key or group.
pub(super) fn no_key_or_group(key: &[u8], group: &[u8]) -> CmdError {
    Cow::Owned(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    ))
}

/// CREATE and SETID's options from argument 5 on: MKSTREAM (CREATE) and
/// ENTRIESREAD.
fn group_options(args: &Args<'_>, sub: &[u8]) -> Result<(bool, i64), CmdError> {
    let (create, setid) = (sub == b"create", sub == b"setid");
    let (mut mkstream, mut entries_read) = (false, -1);
    let mut i = 5;
    while i < args.len() {
        let opt = args.get(i).to_ascii_lowercase();
        if create && opt == b"mkstream" {
            mkstream = true;
            i += 1;
        } else if (create || setid) && opt == b"entriesread" && i + 1 < args.len() {
            entries_read = crate::commands::int_arg(args, i + 1)?;
            if entries_read < -1 {
                return Err(Cow::Borrowed(
                    "ERR value for ENTRIESREAD must be positive or -1",
                ));
            }
            i += 2;
        } else {
            return Err(subcommand_syntax(args));
        }
    }
    Ok((mkstream, entries_read))
}

/// XGROUP CREATE, SETID, DESTROY, CREATECONSUMER, DELCONSUMER.
pub(in crate::commands) fn xgroup(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let sub = args.get(1).to_ascii_lowercase();
    let (mkstream, entries_read) = group_options(args, &sub)?;
    let (db, key, name) = (ctx.session.db, args.get(2), args.get(3));
    let (exists, has_group) = match stream_ref(&mut ctx.state.keyspace, db, key)? {
        Some(s) => (true, s.groups.contains_key(name)),
        None => (false, false),
    };
    if !mkstream {
        if !exists {
            return Err(Cow::Borrowed("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."));
        }
        let needs_group = matches!(
            sub.as_slice(),
            b"setid" | b"createconsumer" | b"delconsumer"
        );
        if needs_group && !has_group {
            return Err(no_group(name, key));
        }
    }
    match (sub.as_slice(), args.len()) {
        (b"create", 5..=8) => create(ctx, args, entries_read),
        (b"setid", 5 | 7) => setid(ctx, args, entries_read),
        (b"destroy", 4) => destroy(ctx, args),
        (b"createconsumer", 5) => {
            let now = ctx.state.keyspace.now_ms;
            let created = stream_mut(&mut ctx.state.keyspace, db, key)
                .and_then(|s| s.groups.get_mut(name))
                .is_some_and(|g| create_consumer(g, args.get(4), now));
            if created {
                ctx.notify(STREAM, "xgroup-createconsumer", key);
                ctx.propagate_args(args);
            }
            ctx.reply.int(i64::from(created));
            Ok(())
        }
        (b"delconsumer", 5) => delconsumer(ctx, args),
        _ => Err(subcommand_syntax(args)),
    }
}

/// Adds consumer `name` to `g` unless it exists; whether it did.
pub(super) fn create_consumer(g: &mut Group, name: &[u8], now: i64) -> bool {
    if g.consumers.contains_key(name) {
        return false;
    }
    let consumer = Consumer {
        seen_time: now,
        ..Consumer::default()
    };
    g.consumers.insert(Bytes::from(name), consumer);
    true
}

fn create(ctx: &mut Ctx<'_>, args: &Args<'_>, entries_read: i64) -> CmdResult {
    let (db, key, name) = (ctx.session.db, args.get(2), args.get(3));
    let last = stream_ref(&mut ctx.state.keyspace, db, key)?.map(|s| s.last_id);
    let id = match args.get(4) {
        b"$" => last.unwrap_or(StreamId::MIN),
        text => strict_id(text)?,
    };
    if last.is_none() {
        ctx.state.keyspace.get_or_insert(db, key, Value::new_stream);
    }
    let exists =
        stream_ref(&mut ctx.state.keyspace, db, key)?.is_some_and(|s| s.groups.contains_key(name));
    if exists {
        return Err(Cow::Borrowed(
            "BUSYGROUP Consumer Group name already exists",
        ));
    }
    if let Some(s) = stream_mut(&mut ctx.state.keyspace, db, key) {
        s.groups
            .insert(Bytes::from(name), Group::new(id, entries_read));
    }
    ctx.reply.ok();
    ctx.notify(STREAM, "xgroup-create", key);
    // `$` is logged as the ID it stood for.
    let id_text = id.text();
    let mut logged: Vec<&[u8]> = args.iter().collect();
    logged[4] = id_text.as_bytes();
    ctx.propagate(&logged);
    Ok(())
}

fn setid(ctx: &mut Ctx<'_>, args: &Args<'_>, entries_read: i64) -> CmdResult {
    let (db, key, name) = (ctx.session.db, args.get(2), args.get(3));
    let last = stream_ref(&mut ctx.state.keyspace, db, key)?.map_or(StreamId::MIN, |s| s.last_id);
    let id = match args.get(4) {
        b"$" => last,
        text => parse_id_full(text, 0, false, false)?.id,
    };
    if let Some(g) =
        stream_mut(&mut ctx.state.keyspace, db, key).and_then(|s| s.groups.get_mut(name))
    {
        g.last_id = id;
        g.entries_read = entries_read;
    }
    ctx.reply.ok();
    ctx.notify(STREAM, "xgroup-setid", key);
    let (id_text, read_text) = (id.text(), entries_read.to_string());
    let logged: [&[u8]; 7] = [
        b"XGROUP",
        b"SETID",
        key,
        name,
        id_text.as_bytes(),
        b"ENTRIESREAD",
        read_text.as_bytes(),
    ];
    ctx.propagate(&logged);
    Ok(())
}

fn destroy(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (db, key, name) = (ctx.session.db, args.get(2), args.get(3));
    let has =
        stream_ref(&mut ctx.state.keyspace, db, key)?.is_some_and(|s| s.groups.contains_key(name));
    if has {
        // The change wakes clients blocked in the group, which then fail.
        if let Some(s) = stream_mut(&mut ctx.state.keyspace, db, key) {
            s.groups.remove(name);
        }
        ctx.notify(STREAM, "xgroup-destroy", key);
        ctx.propagate_args(args);
    }
    ctx.reply.int(i64::from(has));
    Ok(())
}

fn delconsumer(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (db, key, name, consumer) = (ctx.session.db, args.get(2), args.get(3), args.get(4));
    let exists = stream_ref(&mut ctx.state.keyspace, db, key)?
        .and_then(|s| s.groups.get(name))
        .is_some_and(|g| g.consumers.contains_key(consumer));
    let mut pending = 0;
    if exists {
        if let Some(g) =
            stream_mut(&mut ctx.state.keyspace, db, key).and_then(|s| s.groups.get_mut(name))
        {
            if let Some(c) = g.consumers.remove(consumer) {
                pending = c.pel.len();
                c.pel.iter().for_each(|id| {
                    g.pel.remove(id);
                });
            }
        }
        ctx.notify(STREAM, "xgroup-delconsumer", key);
        ctx.propagate_args(args);
    }
    ctx.reply.int(pending as i64);
    Ok(())
}

pub(in crate::commands) fn xgroup_help(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    help_reply(
        ctx.reply,
        "XGROUP",
        &[
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
        ],
    );
    Ok(())
}

pub(in crate::commands) fn xack(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (db, key, name) = (ctx.session.db, args.get(1), args.get(2));
    let has =
        stream_ref(&mut ctx.state.keyspace, db, key)?.is_some_and(|s| s.groups.contains_key(name));
    if !has {
        ctx.reply.int(0);
        return Ok(());
    }
    let ids = (3..args.len())
        .map(|i| strict_id(args.get(i)))
        .collect::<Result<Vec<_>, _>>()?;
    let pending = stream_ref(&mut ctx.state.keyspace, db, key)?
        .and_then(|s| s.groups.get(name))
        .is_some_and(|g| ids.iter().any(|id| g.pel.contains_key(id)));
    let mut acked = 0;
    if pending {
        if let Some(g) =
            stream_mut(&mut ctx.state.keyspace, db, key).and_then(|s| s.groups.get_mut(name))
        {
            acked = ids
                .iter()
                .filter(|id| g.remove_pending(**id).is_some())
                .count();
        }
        ctx.propagate_args(args);
    }
    ctx.reply.int(acked as i64);
    Ok(())
}

/// XPENDING's range form, parsed.
struct PendingRange<'a> {
    min_idle: i64,
    start: StreamId,
    end: StreamId,
    count: usize,
    consumer: Option<&'a [u8]>,
}

fn parse_pending<'a>(args: &'a Args<'_>) -> Result<Option<PendingRange<'a>>, CmdError> {
    let argc = args.len();
    if argc != 3 && !(6..=9).contains(&argc) {
        return Err(Cow::Borrowed(errors::SYNTAX));
    }
    if argc == 3 {
        return Ok(None);
    }
    let mut at = 3;
    let mut min_idle = 0;
    if args.get(3).eq_ignore_ascii_case(b"IDLE") {
        min_idle = crate::commands::int_arg(args, 4)?;
        if argc < 8 {
            return Err(Cow::Borrowed(errors::SYNTAX));
        }
        at += 2;
    }
    let count = crate::commands::int_arg(args, at + 2)?.max(0) as usize;
    let start = range_start(args.get(at))?;
    let end = range_end(args.get(at + 1))?;
    let consumer = (at + 3 < argc).then(|| args.get(at + 3));
    Ok(Some(PendingRange {
        min_idle,
        start,
        end,
        count,
        consumer,
    }))
}

pub(in crate::commands) fn xpending(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let range = parse_pending(args)?;
    let (db, key, name) = (ctx.session.db, args.get(1), args.get(2));
    let now = ctx.state.keyspace.now_ms;
    let s = stream_ref(&mut ctx.state.keyspace, db, key)?;
    let Some(g) = s.and_then(|s| s.groups.get(name)) else {
        return Err(no_key_or_group(key, name));
    };
    let r = &mut *ctx.reply;
    let Some(range) = range else {
        r.array(4);
        r.int(g.pel.len() as i64);
        let (Some(first), Some(last)) = (g.pel.keys().next(), g.pel.keys().next_back()) else {
            r.null();
            r.null();
            r.null_array();
            return Ok(());
        };
        reply_id(r, *first);
        reply_id(r, *last);
        let owners: Vec<_> = g
            .consumers
            .iter()
            .filter(|(_, c)| !c.pel.is_empty())
            .collect();
        r.array(owners.len());
        for (cname, c) in owners {
            r.array(2);
            r.bulk(cname);
            r.bulk_i64(c.pel.len() as i64);
        }
        return Ok(());
    };
    let ids: Vec<StreamId> = match range.consumer {
        Some(c) => match g.consumers.get(c) {
            Some(c) => c
                .pel
                .range(range.start..=range.end.max(range.start))
                .copied()
                .collect(),
            None => {
                r.array(0);
                return Ok(());
            }
        },
        None => g
            .pel
            .range(range.start..=range.end.max(range.start))
            .map(|(k, _)| *k)
            .collect(),
    };
    let rows: Vec<_> = ids
        .iter()
        .filter(|id| **id <= range.end)
        .filter_map(|id| g.pel.get(id).map(|n| (id, n)))
        .filter(|(_, n)| range.min_idle == 0 || now - n.delivery_time >= range.min_idle)
        .take(range.count)
        .collect();
    r.array(rows.len());
    for (id, nack) in rows {
        r.array(4);
        reply_id(r, *id);
        r.bulk(&nack.consumer);
        r.int((now - nack.delivery_time).max(0));
        r.int(nack.delivery_count as i64);
    }
    Ok(())
}
