//! Generic key commands: existence, type, renaming, expiry, iteration.

use std::borrow::Cow;

use super::acl;
use super::table::*;
use super::{errors, int_arg, upper, CmdError, CmdResult, Ctx};
use crate::keyspace::events::GENERIC;
use crate::keyspace::glob::glob_match;
use crate::keyspace::SEGMENTS_PER_DB;
use crate::resp::Args;

pub(super) fn del(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let db = ctx.session.db;
    let mut removed = 0;
    // UNLINK, and DEL under `lazyfree-lazy-user-del`, free large values on
    // the lazyfree thread.
    let lazy =
        args.get(0).eq_ignore_ascii_case(b"unlink") || ctx.state.config.lazyfree_lazy_user_del;
    for key in args.iter().skip(1) {
        if let Some(value) = ctx.state.keyspace.remove(db, key) {
            if lazy {
                ctx.state.lazyfree.free_value(value);
            }
            ctx.state.keyspace.supersede(db, key);
            removed += 1;
            ctx.prop.push(db, &[b"DEL", key]);
            ctx.notify(GENERIC, "del", key);
        }
    }
    ctx.reply.int(removed);
    Ok(())
}

pub(super) fn exists(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let db = ctx.session.db;
    let count = args
        .iter()
        .skip(1)
        .filter(|k| ctx.state.keyspace.contains(db, k))
        .count();
    ctx.reply.int(count as i64);
    Ok(())
}

pub(super) fn type_(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let name = ctx
        .state
        .keyspace
        .peek(ctx.session.db, args.get(1))
        .map_or("none", |v| v.type_name());
    ctx.reply.simple(name);
    Ok(())
}

fn rename_generic(ctx: &mut Ctx<'_>, args: &Args<'_>, nx: bool) -> CmdResult {
    let (db, from, to) = (ctx.session.db, args.get(1), args.get(2));
    let ks = &mut ctx.state.keyspace;
    if !ks.contains(db, from) {
        return Err(Cow::Borrowed(errors::NO_SUCH_KEY));
    }
    if from == to {
        if nx {
            ctx.reply.int(0);
        } else {
            ctx.reply.ok();
        }
        return Ok(());
    }
    if nx && ks.contains(db, to) {
        ctx.reply.int(0);
        return Ok(());
    }
    let expire = ks.expire_at(db, from);
    if let Some(value) = ks.remove(db, from) {
        ks.set(db, to, value, false);
        if let Some(at) = expire {
            ks.set_expire(db, to, at);
        }
    }
    ctx.propagate_args(args);
    ctx.notify(GENERIC, "rename_from", from);
    ctx.notify(GENERIC, "rename_to", to);
    if nx {
        ctx.reply.int(1);
    } else {
        ctx.reply.ok();
    }
    Ok(())
}

pub(super) fn rename(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    rename_generic(ctx, args, false)
}

pub(super) fn renamenx(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    rename_generic(ctx, args, true)
}

/// A database index argument as COPY and MOVE read it: an `int`, then a
/// database that exists.
fn target_db(ctx: &Ctx<'_>, args: &Args<'_>, index: usize) -> Result<usize, CmdError> {
    let n = int_arg(args, index)?;
    if n < i64::from(i32::MIN) || n > i64::from(i32::MAX) {
        return Err(Cow::Owned(format!(
            "ERR value is out of range, value must between {} and {}",
            i32::MIN,
            i32::MAX
        )));
    }
    if n < 0 || n as usize >= ctx.state.keyspace.databases() {
        return Err(Cow::Borrowed("ERR DB index is out of range"));
    }
    Ok(n as usize)
}

/// The error COPY and MOVE give when source and target are one key.
const SAME_OBJECT: &str = "ERR source and destination objects are the same";

/// COPY source destination [DB index] [REPLACE]: the value (shared
/// copy-on-write, so the copies are independent) and its expiry.
pub(super) fn copy(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (db, from, to) = (ctx.session.db, args.get(1), args.get(2));
    let (mut target, mut replace) = (db, false);
    let mut i = 3;
    while i < args.len() {
        match upper(args, i).as_slice() {
            b"REPLACE" => replace = true,
            b"DB" if i + 1 < args.len() => {
                target = target_db(ctx, args, i + 1)?;
                i += 1;
            }
            _ => return Err(Cow::Borrowed(errors::SYNTAX)),
        }
        i += 1;
    }
    if target == db && from == to {
        return Err(Cow::Borrowed(SAME_OBJECT));
    }
    let ks = &mut ctx.state.keyspace;
    let Some(value) = ks.get(db, from).cloned() else {
        ctx.reply.int(0);
        return Ok(());
    };
    let expire = ks.expire_at(db, from);
    if ks.contains(target, to) {
        if !replace {
            ctx.reply.int(0);
            return Ok(());
        }
        ks.remove(target, to);
    }
    ks.set(target, to, value, false);
    if let Some(at) = expire {
        ks.set_expire(target, to, at);
    }
    ctx.notify_db(GENERIC, "copy_to", target, to);
    ctx.propagate_args(args);
    ctx.reply.int(1);
    Ok(())
}

/// MOVE key db: moves the key, with its expiry, unless the target has it.
pub(super) fn move_(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (db, key) = (ctx.session.db, args.get(1));
    let target = target_db(ctx, args, 2)?;
    if target == db {
        return Err(Cow::Borrowed(SAME_OBJECT));
    }
    let ks = &mut ctx.state.keyspace;
    if !ks.contains(db, key) || ks.contains(target, key) {
        ctx.reply.int(0);
        return Ok(());
    }
    let expire = ks.expire_at(db, key);
    if let Some(value) = ks.remove(db, key) {
        ks.set(target, key, value, false);
        if let Some(at) = expire {
            ks.set_expire(target, key, at);
        }
    }
    ctx.notify_db(GENERIC, "move_from", db, key);
    ctx.notify_db(GENERIC, "move_to", target, key);
    ctx.propagate_args(args);
    ctx.reply.int(1);
    Ok(())
}

/// Sets an expiry given as `amount` in `unit_ms` relative (or absolute
/// when `absolute`), with the NX/XX/GT/LT options of Redis 7.
fn expire_generic(ctx: &mut Ctx<'_>, args: &Args<'_>, unit_ms: i64, absolute: bool) -> CmdResult {
    let (db, key) = (ctx.session.db, args.get(1));
    let amount = int_arg(args, 2)?;
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for i in 3..args.len() {
        match upper(args, i).as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            _ => {
                return Err(Cow::Owned(format!(
                    "ERR Unsupported option {}",
                    String::from_utf8_lossy(args.get(i))
                )))
            }
        }
    }
    if nx && (xx || gt || lt) {
        return Err(Cow::Borrowed(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if gt && lt {
        return Err(Cow::Borrowed(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    // The name is lower-cased only for the error (not on every call).
    let invalid = || {
        let name = String::from_utf8_lossy(args.get(0)).to_ascii_lowercase();
        Cow::Owned(format!("ERR invalid expire time in '{name}' command"))
    };
    let now = ctx.state.keyspace.now_ms;
    let at = amount.checked_mul(unit_ms).ok_or_else(invalid)?;
    let at = if absolute {
        Some(at)
    } else {
        at.checked_add(now)
    };
    let at = at.ok_or_else(invalid)?;
    let ks = &mut ctx.state.keyspace;
    if !ks.contains(db, key) {
        ctx.reply.int(0);
        return Ok(());
    }
    let current = ks.expire_at(db, key);
    let allowed = match current {
        Some(cur) => !nx && (!gt || at > cur) && (!lt || at < cur),
        None => !xx && !gt,
    };
    if !allowed {
        ctx.reply.int(0);
        return Ok(());
    }
    if at <= now && !ks.loading {
        ks.remove(db, key);
        ctx.propagate(&[b"DEL", key]);
        ctx.notify(GENERIC, "del", key);
    } else {
        ks.set_expire(db, key, at);
        let mut text = Vec::with_capacity(20);
        crate::resp::reply::push_i64(&mut text, at);
        ctx.propagate(&[b"PEXPIREAT", key, &text]);
        ctx.notify(GENERIC, "expire", key);
    }
    ctx.reply.int(1);
    Ok(())
}

pub(super) fn expire(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    expire_generic(ctx, args, 1000, false)
}

pub(super) fn pexpire(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    expire_generic(ctx, args, 1, false)
}

pub(super) fn expireat(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    expire_generic(ctx, args, 1000, true)
}

pub(super) fn pexpireat(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    expire_generic(ctx, args, 1, true)
}

/// TTL-style replies: -2 missing, -1 no expiry, else `f(expire_at)`.
fn ttl_generic(ctx: &mut Ctx<'_>, args: &Args<'_>, f: impl Fn(i64, i64) -> i64) -> CmdResult {
    let (db, key) = (ctx.session.db, args.get(1));
    let ks = &mut ctx.state.keyspace;
    let reply = if !ks.contains(db, key) {
        -2
    } else {
        ks.expire_at(db, key).map_or(-1, |at| f(at, ks.now_ms))
    };
    ctx.reply.int(reply);
    Ok(())
}

pub(super) fn ttl(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    ttl_generic(ctx, args, |at, now| ((at - now).max(0) + 500) / 1000)
}

pub(super) fn pttl(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    ttl_generic(ctx, args, |at, now| (at - now).max(0))
}

pub(super) fn expiretime(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    ttl_generic(ctx, args, |at, _| at / 1000)
}

pub(super) fn pexpiretime(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    ttl_generic(ctx, args, |at, _| at)
}

pub(super) fn persist(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (db, key) = (ctx.session.db, args.get(1));
    let done = ctx.state.keyspace.contains(db, key) && ctx.state.keyspace.persist(db, key);
    if done {
        ctx.propagate_args(args);
        ctx.notify(GENERIC, "persist", key);
    }
    ctx.reply.int(i64::from(done));
    Ok(())
}

pub(super) fn keys(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (db, pattern) = (ctx.session.db, args.get(1));
    let ks = &ctx.state.keyspace;
    let mut found: Vec<&[u8]> = Vec::new();
    for seg in 0..SEGMENTS_PER_DB {
        found.extend(ks.segment_keys(db, seg).filter(|k| glob_match(pattern, k)));
    }
    ctx.reply.bulks(found.into_iter());
    Ok(())
}

/// SCAN-family options: MATCH, COUNT and (for SCAN) TYPE.
pub(super) struct ScanOptions {
    pub pattern: Option<Vec<u8>>,
    pub count: usize,
    pub type_name: Option<String>,
}

/// Parses `cursor [MATCH p] [COUNT n] [TYPE t]` starting at `first`.
pub(super) fn scan_options(
    args: &Args<'_>,
    first: usize,
    allow_type: bool,
) -> Result<(u64, ScanOptions), CmdError> {
    let cursor = std::str::from_utf8(args.get(first))
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or(Cow::Borrowed(errors::INVALID_CURSOR))?;
    let mut options = ScanOptions {
        pattern: None,
        count: 10,
        type_name: None,
    };
    let mut i = first + 1;
    while i < args.len() {
        if i + 1 >= args.len() {
            return Err(Cow::Borrowed(errors::SYNTAX));
        }
        match upper(args, i).as_slice() {
            b"MATCH" => options.pattern = Some(args.get(i + 1).to_vec()),
            b"COUNT" => {
                let n = int_arg(args, i + 1)?;
                if n < 1 {
                    return Err(Cow::Borrowed(errors::SYNTAX));
                }
                options.count = n as usize;
            }
            b"TYPE" if allow_type => {
                options.type_name =
                    Some(String::from_utf8_lossy(args.get(i + 1)).to_ascii_lowercase())
            }
            _ => return Err(Cow::Borrowed(errors::SYNTAX)),
        }
        i += 2;
    }
    Ok((cursor, options))
}

/// SCAN: the cursor is the next segment to visit. Every call returns whole
/// segments, so a key present for the whole iteration is always returned,
/// and no state is kept between calls.
pub(super) fn scan(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (cursor, o) = scan_options(args, 1, true)?;
    let db = ctx.session.db;
    let mut seg = cursor as usize;
    let mut found: Vec<Vec<u8>> = Vec::new();
    while seg < SEGMENTS_PER_DB && found.len() < o.count {
        expire_segment(&mut ctx.state.keyspace, db, seg);
        let keys: Vec<Vec<u8>> = ctx
            .state
            .keyspace
            .segment_keys(db, seg)
            .map(<[u8]>::to_vec)
            .collect();
        seg += 1;
        for key in keys {
            if o.pattern.as_ref().is_some_and(|p| !glob_match(p, &key)) {
                continue;
            }
            if let Some(t) = &o.type_name {
                if ctx.state.keyspace.get(db, &key).map(|v| v.type_name()) != Some(t.as_str()) {
                    continue;
                }
            }
            found.push(key);
        }
    }
    let next = if seg >= SEGMENTS_PER_DB { 0 } else { seg };
    ctx.reply.array(2);
    ctx.reply.bulk(next.to_string().as_bytes());
    ctx.reply.bulks(found.iter().map(Vec::as_slice));
    Ok(())
}

/// Removes the keys of one segment whose expiry has passed, as Redis's
/// SCAN deletes the expired keys it meets (each removal is logged as a
/// `DEL`, like any lazy expiry).
fn expire_segment(ks: &mut crate::keyspace::Keyspace, db: usize, seg: usize) {
    let now = ks.now_ms;
    let due: Vec<crate::types::Bytes> = ks.db(db).segments()[seg]
        .expires
        .iter()
        .filter(|(_, &at)| at <= now)
        .map(|(k, _)| k.clone())
        .collect();
    for key in due {
        ks.contains(db, &key);
    }
}

pub(super) fn randomkey(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let db = ctx.session.db;
    let state = &mut *ctx.state;
    let rng = &mut state.rng;
    let key = state
        .keyspace
        .random_key(db, |n| rng.u64(..(n as u64).max(1)) as usize);
    if key.is_none() && !state.keyspace.db(db).is_empty() {
        // Only expired keys are left: Redis's RANDOMKEY deletes the
        // expired keys it meets (each logged as a `DEL`) and answers nil.
        for seg in 0..crate::keyspace::SEGMENTS_PER_DB {
            expire_segment(&mut state.keyspace, db, seg);
        }
    }
    ctx.reply.bulk_opt(key.as_deref());
    Ok(())
}

pub(super) fn dbsize(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let len = ctx.state.keyspace.db(ctx.session.db).len();
    ctx.reply.int(len as i64);
    Ok(())
}

pub(super) fn touch(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let db = ctx.session.db;
    let count = args
        .iter()
        .skip(1)
        .filter(|k| ctx.state.keyspace.touch_access(db, k))
        .count();
    ctx.reply.int(count as i64);
    Ok(())
}

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("del", -2, WRITE | SUPERSEDES, KALL, "generic", "Deletes keys.", del).with_tips(&["request_policy:multi_shard", "response_policy:agg_sum"]).with_acl(acl::KEYSPACE),
    cmd!("unlink", -2, D | SUPERSEDES, KALL, "generic", "Deletes keys.", del).with_tips(&["request_policy:multi_shard", "response_policy:agg_sum"]).with_acl(acl::KEYSPACE),
    cmd!("exists", -2, RF, KALL, "generic", "Counts existing keys.", exists).with_tips(&["request_policy:multi_shard", "response_policy:agg_sum"]).with_acl(acl::KEYSPACE),
    cmd!("touch", -2, RF, KALL, "generic", "Counts existing keys.", touch).with_tips(&["request_policy:multi_shard", "response_policy:agg_sum"]).with_acl(acl::KEYSPACE),
    cmd!("type", 2, RF, K1, "generic", "Returns a key's type.", type_).with_acl(acl::KEYSPACE),
    cmd!("rename", 3, WRITE, (1, 2, 1), "generic", "Renames a key.", rename).with_acl(acl::KEYSPACE),
    cmd!("renamenx", 3, D, (1, 2, 1), "generic", "Renames a key if the new name is free.", renamenx).with_acl(acl::KEYSPACE),
    cmd!("copy", -3, W | CROSS_DB, (1, 2, 1), "generic", "Copies a key.", copy).with_acl(acl::KEYSPACE),
    cmd!("move", 3, D | CROSS_DB, K1, "generic", "Moves a key to another database.", move_).with_acl(acl::KEYSPACE),
    cmd!("keys", 2, READONLY, K0, "generic", "Returns keys matching a pattern.", keys).with_tips(&["request_policy:all_shards", "nondeterministic_output_order"]).with_acl(acl::DANGEROUS | acl::KEYSPACE),
    cmd!("scan", -2, READONLY, K0, "generic", "Iterates over keys.", scan).with_tips(&["nondeterministic_output", "request_policy:special"]).with_acl(acl::KEYSPACE),
    cmd!("randomkey", 1, READONLY | RANDOM, K0, "generic", "Returns a random key.", randomkey).with_tips(&["request_policy:all_shards", "nondeterministic_output"]).with_acl(acl::KEYSPACE),
    cmd!("dbsize", 1, RF, K0, "server", "Returns the number of keys.", dbsize).with_tips(&["request_policy:all_shards", "response_policy:agg_sum"]).with_acl(acl::KEYSPACE),
    cmd!("expire", -3, D, K1, "generic", "Sets an expiry in seconds.", expire).with_acl(acl::KEYSPACE),
    cmd!("pexpire", -3, D, K1, "generic", "Sets an expiry in milliseconds.", pexpire).with_acl(acl::KEYSPACE),
    cmd!("expireat", -3, D, K1, "generic", "Sets an expiry as a Unix time.", expireat).with_acl(acl::KEYSPACE),
    cmd!("pexpireat", -3, D, K1, "generic", "Sets an expiry as a Unix time in ms.", pexpireat).with_acl(acl::KEYSPACE),
    cmd!("ttl", 2, RF, K1, "generic", "Returns the time to live in seconds.", ttl).with_tips(&["nondeterministic_output"]).with_acl(acl::KEYSPACE),
    cmd!("pttl", 2, RF, K1, "generic", "Returns the time to live in ms.", pttl).with_tips(&["nondeterministic_output"]).with_acl(acl::KEYSPACE),
    cmd!("expiretime", 2, RF, K1, "generic", "Returns the expiry as a Unix time.", expiretime).with_acl(acl::KEYSPACE),
    cmd!("pexpiretime", 2, RF, K1, "generic", "Returns the expiry as a Unix time in ms.", pexpiretime).with_acl(acl::KEYSPACE),
    cmd!("persist", 2, D, K1, "generic", "Removes an expiry.", persist).with_acl(acl::KEYSPACE),
];
