//! Hash commands.

use std::borrow::Cow;

use super::keys::scan_options;
use super::table::*;
use super::{errors, int_arg, CmdError, CmdResult, Ctx};
use crate::keyspace::events::HASH;
use crate::keyspace::glob::glob_match;
use crate::keyspace::Keyspace;
use crate::resp::{Args, Protocol};

use super::zsets::{count_and_with, pick_indices};
use crate::types::long_double::LongDouble;
use crate::types::number::value_as_i64;
use crate::types::{HashValue, Value};

fn hash_ref<'k>(
    ks: &'k mut Keyspace,
    db: usize,
    key: &[u8],
) -> Result<Option<&'k HashValue>, CmdError> {
    match ks.get(db, key) {
        None => Ok(None),
        Some(Value::Hash(h)) => Ok(Some(h)),
        Some(_) => Err(Cow::Borrowed(errors::WRONGTYPE)),
    }
}

fn hash_create<'k>(
    ks: &'k mut Keyspace,
    db: usize,
    key: &[u8],
) -> Result<&'k mut HashValue, CmdError> {
    // An existing hash is found in one search; only a new key takes
    // the insert's.
    let found = ks.get_mut_checked(db, key, Some(Value::new_hash), |v| match v {
        Value::Hash(_) => Ok(()),
        _ => Err(Cow::Borrowed(errors::WRONGTYPE)),
    })?;
    match found {
        Some(Value::Hash(h)) => Ok(h),
        _ => Err(Cow::Borrowed(errors::WRONGTYPE)),
    }
}

fn hset_generic(ctx: &mut Ctx<'_>, args: &Args<'_>, name: &str) -> Result<i64, CmdError> {
    if !args.len().is_multiple_of(2) {
        return Err(Cow::Owned(format!(
            "ERR wrong number of arguments for '{name}' command"
        )));
    }
    let hash = hash_create(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    let mut added = 0;
    for i in (2..args.len()).step_by(2) {
        let (field, value) = (args.get(i), args.get(i + 1));
        // An existing field keeps its name: only the value is replaced, so
        // the common update allocates no copy of the field's name.
        match hash.get_mut(field) {
            Some(slot) => *slot = value.into(),
            None => {
                hash.insert(field.into(), value.into());
                added += 1;
            }
        }
    }
    ctx.propagate_args(args);
    Ok(added)
}

pub(super) fn hset(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let added = hset_generic(ctx, args, "hset")?;
    ctx.reply.int(added);
    ctx.notify(HASH, "hset", args.get(1));
    Ok(())
}

pub(super) fn hmset(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    hset_generic(ctx, args, "hmset")?;
    ctx.reply.ok();
    ctx.notify(HASH, "hset", args.get(1));
    Ok(())
}

pub(super) fn hsetnx(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let hash = hash_create(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    let field = args.get(2);
    let added = !hash.contains_key(field);
    if added {
        hash.insert(field.into(), args.get(3).into());
        ctx.propagate(&[b"HSET", args.get(1), field, args.get(3)]);
        ctx.notify(HASH, "hset", args.get(1));
    }
    ctx.reply.int(i64::from(added));
    Ok(())
}

pub(super) fn hget(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let hash = hash_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    ctx.reply
        .bulk_opt(hash.and_then(|h| h.get(args.get(2))).map(|v| &v[..]));
    Ok(())
}

pub(super) fn hmget(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let hash = hash_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    ctx.reply.array(args.len() - 2);
    for field in args.iter().skip(2) {
        ctx.reply
            .bulk_opt(hash.and_then(|h| h.get(field)).map(|v| &v[..]));
    }
    Ok(())
}

pub(super) fn hdel(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (db, key) = (ctx.session.db, args.get(1));
    if hash_ref(&mut ctx.state.keyspace, db, key)?.is_none() {
        ctx.reply.int(0);
        return Ok(());
    }
    let mut removed = 0;
    if let Some(Value::Hash(h)) = ctx.state.keyspace.get_mut(db, key) {
        removed = args
            .iter()
            .skip(2)
            .filter(|f| h.remove(*f).is_some())
            .count();
    }
    ctx.state.keyspace.remove_if_empty(db, key);
    if removed > 0 {
        ctx.propagate_args(args);
        ctx.notify(HASH, "hdel", key);
        ctx.notify_del_if_gone(key);
    }
    ctx.reply.int(removed as i64);
    Ok(())
}

/// HGETALL, HKEYS, HVALS.
fn hash_listing(ctx: &mut Ctx<'_>, args: &Args<'_>, keys: bool, values: bool) -> CmdResult {
    let hash = hash_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    let len = hash.map_or(0, |h| h.len());
    if keys && values {
        ctx.reply.map(len);
    } else {
        ctx.reply.array(len);
    }
    for (field, value) in hash.into_iter().flatten() {
        if keys {
            ctx.reply.bulk(field);
        }
        if values {
            ctx.reply.bulk(value);
        }
    }
    Ok(())
}

pub(super) fn hgetall(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    hash_listing(ctx, args, true, true)
}

pub(super) fn hkeys(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    hash_listing(ctx, args, true, false)
}

pub(super) fn hvals(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    hash_listing(ctx, args, false, true)
}

pub(super) fn hlen(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let hash = hash_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    ctx.reply.int(hash.map_or(0, |h| h.len()) as i64);
    Ok(())
}

pub(super) fn hstrlen(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let hash = hash_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    let len = hash.and_then(|h| h.get(args.get(2))).map_or(0, |v| v.len());
    ctx.reply.int(len as i64);
    Ok(())
}

pub(super) fn hexists(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let hash = hash_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    let found = hash.is_some_and(|h| h.contains_key(args.get(2)));
    ctx.reply.int(i64::from(found));
    Ok(())
}

pub(super) fn hincrby(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let delta = int_arg(args, 3)?;
    let (db, key, field) = (ctx.session.db, args.get(1), args.get(2));
    let current = match hash_ref(&mut ctx.state.keyspace, db, key)?.and_then(|h| h.get(field)) {
        None => 0,
        Some(v) => value_as_i64(v).ok_or(Cow::Borrowed("ERR hash value is not an integer"))?,
    };
    let next = current
        .checked_add(delta)
        .ok_or(Cow::Borrowed(errors::OVERFLOW))?;
    let hash = hash_create(&mut ctx.state.keyspace, db, key)?;
    hash.insert(field.into(), next.to_string().as_bytes().into());
    ctx.propagate_args(args);
    ctx.notify(HASH, "hincrby", key);
    ctx.reply.int(next);
    Ok(())
}

/// HINCRBYFLOAT computes in Redis's 80-bit long double, so its digits
/// are Redis's (`0.1` plus `0.2` is `0.3`); logged as the HSET of the
/// result.
pub(super) fn hincrbyfloat(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let delta = LongDouble::parse(args.get(3)).ok_or(Cow::Borrowed(errors::NOT_FLOAT))?;
    if delta.is_infinite() {
        return Err(Cow::Borrowed("ERR value is NaN or Infinity"));
    }
    let (db, key, field) = (ctx.session.db, args.get(1), args.get(2));
    let current = match hash_ref(&mut ctx.state.keyspace, db, key)?.and_then(|h| h.get(field)) {
        None => LongDouble::ZERO,
        Some(v) => LongDouble::parse(v).ok_or(Cow::Borrowed("ERR hash value is not a float"))?,
    };
    let next = current.add(delta);
    if next.is_infinite() {
        return Err(Cow::Borrowed("ERR increment would produce NaN or Infinity"));
    }
    let text = next.to_human();
    let hash = hash_create(&mut ctx.state.keyspace, db, key)?;
    hash.insert(field.into(), text.as_bytes().into());
    ctx.propagate(&[b"HSET", key, field, text.as_bytes()]);
    ctx.notify(HASH, "hincrbyfloat", key);
    ctx.reply.bulk(text.as_bytes());
    Ok(())
}

/// HRANDFIELD key [count [WITHVALUES]].
pub(super) fn hrandfield(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let db = ctx.session.db;
    if args.len() == 2 {
        let Some(hash) = hash_ref(&mut ctx.state.keyspace, db, args.get(1))? else {
            ctx.reply.null();
            return Ok(());
        };
        let pick = ctx.state.rng.u64(..(hash.len() as u64).max(1)) as usize;
        ctx.reply.bulk_opt(hash.keys().nth(pick).map(|f| &f[..]));
        return Ok(());
    }
    let (count, withvalues) = count_and_with(args, b"WITHVALUES")?;
    let Some(hash) = hash_ref(&mut ctx.state.keyspace, db, args.get(1))? else {
        ctx.reply.array(0);
        return Ok(());
    };
    let pairs: Vec<(&[u8], &[u8])> = hash.iter().map(|(f, v)| (&f[..], &v[..])).collect();
    let picks = pick_indices(&mut ctx.state.rng, pairs.len(), count);
    let chosen: Vec<(&[u8], &[u8])> = picks
        .into_iter()
        .filter_map(|i| pairs.get(i).copied())
        .collect();
    if !withvalues {
        ctx.reply.bulks(chosen.iter().map(|(f, _)| *f));
        return Ok(());
    }
    // Pairs: a flat array in RESP2, `[field, value]` arrays in RESP3.
    let nested = ctx.reply.proto == Protocol::Resp3;
    ctx.reply.array(if nested {
        chosen.len()
    } else {
        chosen.len() * 2
    });
    for (f, v) in chosen {
        if nested {
            ctx.reply.array(2);
        }
        ctx.reply.bulk(f);
        ctx.reply.bulk(v);
    }
    Ok(())
}

/// HSCAN returns the whole (matching) hash in one step with cursor 0: a
/// valid, if unchunked, SCAN iteration.
pub(super) fn hscan(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (_, o) = scan_options(args, 2, false)?;
    let hash = hash_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    let pairs: Vec<(&[u8], &[u8])> = hash
        .into_iter()
        .flatten()
        .filter(|(f, _)| o.pattern.as_ref().is_none_or(|p| glob_match(p, f)))
        .map(|(f, v)| (&f[..], &v[..]))
        .collect();
    ctx.reply.array(2);
    ctx.reply.bulk(b"0");
    ctx.reply.array(pairs.len() * 2);
    for (f, v) in pairs {
        ctx.reply.bulk(f);
        ctx.reply.bulk(v);
    }
    Ok(())
}

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("hset", -4, WF, K1, "hash", "Sets fields of a hash.", hset),
    cmd!("hmset", -4, WF, K1, "hash", "Sets fields of a hash (old form).", hmset),
    cmd!("hsetnx", 4, WF, K1, "hash", "Sets a field if it does not exist.", hsetnx),
    cmd!("hget", 3, RF, K1, "hash", "Returns a field's value.", hget),
    cmd!("hmget", -3, RF, K1, "hash", "Returns fields' values.", hmget),
    cmd!("hdel", -3, D, K1, "hash", "Deletes fields.", hdel),
    cmd!("hgetall", 2, R, K1, "hash", "Returns all fields and values.", hgetall).with_tips(&["nondeterministic_output_order"]),
    cmd!("hkeys", 2, R, K1, "hash", "Returns all fields.", hkeys).with_tips(&["nondeterministic_output_order"]),
    cmd!("hvals", 2, R, K1, "hash", "Returns all values.", hvals).with_tips(&["nondeterministic_output_order"]),
    cmd!("hlen", 2, RF, K1, "hash", "Returns the number of fields.", hlen),
    cmd!("hstrlen", 3, RF, K1, "hash", "Returns a value's length.", hstrlen),
    cmd!("hexists", 3, RF, K1, "hash", "Tells whether a field exists.", hexists),
    cmd!("hincrby", 4, WF, K1, "hash", "Increments an integer field.", hincrby),
    cmd!("hincrbyfloat", 4, WF, K1, "hash", "Increments a float field.", hincrbyfloat),
    cmd!("hrandfield", -2, READONLY | RANDOM, K1, "hash", "Returns a random field.", hrandfield).with_tips(&["nondeterministic_output"]),
    cmd!("hscan", -3, READONLY, K1, "hash", "Iterates over fields.", hscan).with_tips(&["nondeterministic_output"]),
];
