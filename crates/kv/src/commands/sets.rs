//! Set commands.

use std::borrow::Cow;

use super::keys::scan_options;
use super::table::*;
use super::{errors, int_arg, CmdError, CmdResult, Ctx};
use crate::keyspace::events::{GENERIC, SET};
use crate::keyspace::glob::glob_match;
use crate::keyspace::Keyspace;
use crate::resp::Args;
use crate::types::{SetValue, Shared, Str, Value};

use super::zsets::{pick_indices, COUNT_RANGE, RANDOM_PICKS_MAX};

fn set_ref<'k>(
    ks: &'k mut Keyspace,
    db: usize,
    key: &[u8],
) -> Result<Option<&'k SetValue>, CmdError> {
    match ks.get(db, key) {
        None => Ok(None),
        Some(Value::Set(s)) => Ok(Some(s)),
        Some(_) => Err(Cow::Borrowed(errors::WRONGTYPE)),
    }
}

/// The set at `key`, shared (no copy), if any.
fn set_shared(
    ks: &mut Keyspace,
    db: usize,
    key: &[u8],
) -> Result<Option<Shared<SetValue>>, CmdError> {
    match ks.get(db, key) {
        None => Ok(None),
        Some(Value::Set(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Cow::Borrowed(errors::WRONGTYPE)),
    }
}

pub(super) fn sadd(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (db, key) = (ctx.session.db, args.get(1));
    set_ref(&mut ctx.state.keyspace, db, key)?;
    let Value::Set(set) = ctx.state.keyspace.get_or_insert(db, key, Value::new_set) else {
        return Err(Cow::Borrowed(errors::WRONGTYPE));
    };
    let added = args
        .iter()
        .skip(2)
        .filter(|m| set.insert((*m).into()))
        .count();
    if added > 0 {
        ctx.propagate_args(args);
        ctx.notify(SET, "sadd", key);
    }
    ctx.reply.int(added as i64);
    Ok(())
}

pub(super) fn srem(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (db, key) = (ctx.session.db, args.get(1));
    if set_ref(&mut ctx.state.keyspace, db, key)?.is_none() {
        ctx.reply.int(0);
        return Ok(());
    }
    let mut removed = 0;
    if let Some(Value::Set(set)) = ctx.state.keyspace.get_mut(db, key) {
        removed = args.iter().skip(2).filter(|m| set.remove(*m)).count();
    }
    ctx.state.keyspace.remove_if_empty(db, key);
    if removed > 0 {
        ctx.propagate_args(args);
        ctx.notify(SET, "srem", key);
        ctx.notify_del_if_gone(key);
    }
    ctx.reply.int(removed as i64);
    Ok(())
}

pub(super) fn smembers(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let set = set_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    ctx.reply.set(set.map_or(0, |s| s.len()));
    for m in set.into_iter().flatten() {
        ctx.reply.bulk(m);
    }
    Ok(())
}

pub(super) fn sismember(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let set = set_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    ctx.reply
        .int(i64::from(set.is_some_and(|s| s.contains(args.get(2)))));
    Ok(())
}

pub(super) fn smismember(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let set = set_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    ctx.reply.array(args.len() - 2);
    for m in args.iter().skip(2) {
        ctx.reply.int(i64::from(set.is_some_and(|s| s.contains(m))));
    }
    Ok(())
}

pub(super) fn scard(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let set = set_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    ctx.reply.int(set.map_or(0, |s| s.len()) as i64);
    Ok(())
}

/// The members at `indices` of the set's iteration order, in the order of
/// `indices` (which may repeat): one pass over the set, copying only the
/// members chosen.
fn members_at(set: &SetValue, indices: &[usize]) -> Vec<Str> {
    let mut wanted: Vec<(usize, usize)> =
        indices.iter().enumerate().map(|(p, &i)| (i, p)).collect();
    wanted.sort_unstable();
    let mut out: Vec<Option<Str>> = vec![None; indices.len()];
    let mut next = wanted.iter().peekable();
    for (i, member) in set.iter().enumerate() {
        while let Some(&&(at, slot)) = next.peek() {
            if at != i {
                break;
            }
            out[slot] = Some(member.clone());
            next.next();
        }
        if next.peek().is_none() {
            break;
        }
    }
    out.into_iter().flatten().collect()
}

fn optional_count(args: &Args<'_>) -> Result<Option<i64>, CmdError> {
    if args.len() == 3 {
        Ok(Some(int_arg(args, 2)?))
    } else if args.len() > 3 {
        Err(Cow::Borrowed(errors::SYNTAX))
    } else {
        Ok(None)
    }
}

pub(super) fn spop(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (db, key) = (ctx.session.db, args.get(1));
    if args.len() > 3 {
        return Err(Cow::Borrowed(errors::SYNTAX));
    }
    // A count that is not a number gets the same error as a negative one.
    let count = match args.len() {
        3 => Some(int_arg(args, 2).unwrap_or(-1)),
        _ => None,
    };
    if count.is_some_and(|c| c < 0) {
        return Err(Cow::Borrowed(errors::NOT_POSITIVE));
    }
    let Some(set) = set_ref(&mut ctx.state.keyspace, db, key)? else {
        match count {
            Some(_) => ctx.reply.set(0),
            None => ctx.reply.null(),
        }
        return Ok(());
    };
    let indices = pick_indices(&mut ctx.state.rng, set.len(), count.unwrap_or(1));
    let chosen = members_at(set, &indices);
    if let Some(Value::Set(set)) = ctx.state.keyspace.get_mut(db, key) {
        for m in &chosen {
            set.remove(m);
        }
    }
    ctx.state.keyspace.remove_if_empty(db, key);
    if !chosen.is_empty() {
        // Which members were popped was random: log exactly those.
        let mut logged: Vec<&[u8]> = vec![b"SREM", key];
        logged.extend(chosen.iter().map(|m| &m[..]));
        ctx.propagate(&logged);
        ctx.notify(SET, "spop", key);
        ctx.notify_del_if_gone(key);
    }
    match count {
        None => ctx.reply.bulk_opt(chosen.first().map(|m| &m[..])),
        Some(_) => {
            ctx.reply.set(chosen.len());
            for m in &chosen {
                ctx.reply.bulk(m);
            }
        }
    }
    Ok(())
}

pub(super) fn srandmember(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let count = optional_count(args)?;
    if count == Some(i64::MIN) {
        return Err(Cow::Borrowed(COUNT_RANGE));
    }
    if count.is_some_and(|n| n < 0 && n.unsigned_abs() > RANDOM_PICKS_MAX) {
        return Err(Cow::Borrowed("ERR value is out of range"));
    }
    let Some(set) = set_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))? else {
        match count {
            None => ctx.reply.null(),
            Some(_) => ctx.reply.array(0),
        }
        return Ok(());
    };
    let indices = pick_indices(&mut ctx.state.rng, set.len(), count.unwrap_or(1));
    let chosen = members_at(set, &indices);
    match count {
        None => ctx.reply.bulk_opt(chosen.first().map(|m| &m[..])),
        Some(_) => ctx.reply.bulks(chosen.iter().map(|m| &m[..])),
    }
    Ok(())
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]: the size of the
/// intersection, counting stopped at `limit` (0: no limit).
pub(super) fn sintercard(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    // As in Redis, a count that is not a number gets the range's message.
    let n = int_arg(args, 1).unwrap_or(0);
    if n < 1 {
        return Err(Cow::Borrowed("ERR numkeys should be greater than 0"));
    }
    if n as u64 > (args.len() - 2) as u64 {
        return Err(Cow::Borrowed(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let n = n as usize;
    let mut limit = 0usize;
    let mut i = 2 + n;
    while i < args.len() {
        if args.get(i).eq_ignore_ascii_case(b"LIMIT") && i + 1 < args.len() {
            let value = int_arg(args, i + 1).unwrap_or(-1);
            if value < 0 {
                return Err(Cow::Borrowed("ERR LIMIT can't be negative"));
            }
            limit = usize::try_from(value).unwrap_or(usize::MAX);
            i += 2;
        } else {
            return Err(Cow::Borrowed(errors::SYNTAX));
        }
    }
    let db = ctx.session.db;
    let mut sets: Vec<Option<Shared<SetValue>>> = Vec::with_capacity(n);
    for at in 2..2 + n {
        // Cloning shares the set (a reference count), it copies nothing.
        sets.push(set_shared(&mut ctx.state.keyspace, db, args.get(at))?);
    }
    let count = intersection_size(&sets, limit);
    ctx.reply.int(count as i64);
    Ok(())
}

/// How many members all `sets` share (a missing set is empty), stopping
/// at `limit` when it is not 0.
fn intersection_size(sets: &[Option<Shared<SetValue>>], limit: usize) -> usize {
    let Some(present) = sets
        .iter()
        .map(Option::as_deref)
        .collect::<Option<Vec<&SetValue>>>()
    else {
        return 0;
    };
    let Some(smallest) = present.iter().min_by_key(|s| s.len()) else {
        return 0;
    };
    let mut count = 0;
    for member in smallest.iter() {
        if present.iter().all(|s| s.contains(member)) {
            count += 1;
            if limit != 0 && count >= limit {
                break;
            }
        }
    }
    count
}

#[derive(Clone, Copy)]
enum SetOp {
    Inter,
    Union,
    Diff,
}

/// Computes SINTER/SUNION/SDIFF over `keys`.
fn combine(ctx: &mut Ctx<'_>, keys: &[&[u8]], op: SetOp) -> Result<SetValue, CmdError> {
    let db = ctx.session.db;
    let mut sets: Vec<Option<SetValue>> = Vec::with_capacity(keys.len());
    for key in keys {
        sets.push(set_ref(&mut ctx.state.keyspace, db, key)?.cloned());
    }
    let mut iter = sets.into_iter();
    let mut acc = iter.next().flatten().unwrap_or_default();
    for next in iter {
        let next = next.unwrap_or_default();
        match op {
            SetOp::Inter => acc.retain(|m| next.contains(m)),
            SetOp::Union => acc.extend(next),
            SetOp::Diff => acc.retain(|m| !next.contains(m)),
        }
    }
    Ok(acc)
}

fn set_op(ctx: &mut Ctx<'_>, args: &Args<'_>, op: SetOp) -> CmdResult {
    let keys: Vec<&[u8]> = args.iter().skip(1).collect();
    let result = combine(ctx, &keys, op)?;
    ctx.reply.set(result.len());
    for m in &result {
        ctx.reply.bulk(m);
    }
    Ok(())
}

fn set_op_store(ctx: &mut Ctx<'_>, args: &Args<'_>, op: SetOp) -> CmdResult {
    let keys: Vec<&[u8]> = args.iter().skip(2).collect();
    let result = combine(ctx, &keys, op)?;
    let (db, dest) = (ctx.session.db, args.get(1));
    let len = result.len();
    if result.is_empty() {
        if ctx.state.keyspace.remove(db, dest).is_some() {
            ctx.notify(GENERIC, "del", dest);
        }
    } else {
        ctx.state
            .keyspace
            .set(db, dest, Value::Set(Shared::new(result)), false);
        let event = match op {
            SetOp::Inter => "sinterstore",
            SetOp::Union => "sunionstore",
            SetOp::Diff => "sdiffstore",
        };
        ctx.notify(SET, event, dest);
    }
    ctx.propagate_args(args);
    ctx.reply.int(len as i64);
    Ok(())
}

pub(super) fn sinter(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    set_op(ctx, args, SetOp::Inter)
}

pub(super) fn sunion(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    set_op(ctx, args, SetOp::Union)
}

pub(super) fn sdiff(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    set_op(ctx, args, SetOp::Diff)
}

pub(super) fn sinterstore(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    set_op_store(ctx, args, SetOp::Inter)
}

pub(super) fn sunionstore(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    set_op_store(ctx, args, SetOp::Union)
}

pub(super) fn sdiffstore(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    set_op_store(ctx, args, SetOp::Diff)
}

pub(super) fn smove(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (db, src, dst, member) = (ctx.session.db, args.get(1), args.get(2), args.get(3));
    // A missing source answers 0 before the destination's type is checked.
    let Some(source) = set_ref(&mut ctx.state.keyspace, db, src)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    let has = source.contains(member);
    let dst_has = set_ref(&mut ctx.state.keyspace, db, dst)?.is_some_and(|s| s.contains(member));
    if !has || src == dst {
        ctx.reply.int(i64::from(has));
        return Ok(());
    }
    if let Some(Value::Set(s)) = ctx.state.keyspace.get_mut(db, src) {
        s.remove(member);
    }
    ctx.state.keyspace.remove_if_empty(db, src);
    // The destination is modified (and its watchers told) only when the
    // member is new to it.
    if !dst_has {
        if let Value::Set(s) = ctx.state.keyspace.get_or_insert(db, dst, Value::new_set) {
            s.insert(member.into());
        }
    }
    ctx.propagate_args(args);
    if src != dst {
        ctx.notify(SET, "srem", src);
        ctx.notify_del_if_gone(src);
        ctx.notify(SET, "sadd", dst);
    }
    ctx.reply.int(1);
    Ok(())
}

/// SSCAN returns the whole (matching) set with cursor 0, like HSCAN.
pub(super) fn sscan(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (_, o) = scan_options(args, 2, false)?;
    let set = set_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    let members: Vec<&[u8]> = set
        .into_iter()
        .flatten()
        .map(|m| &m[..])
        .filter(|m| o.pattern.as_ref().is_none_or(|p| glob_match(p, m)))
        .collect();
    ctx.reply.array(2);
    ctx.reply.bulk(b"0");
    ctx.reply.bulks(members.into_iter());
    Ok(())
}

/// Key finder of SINTERCARD: `numkeys` at 1, the keys after it.
const SINTERCARD_KEYS: KeyFinder = |args, out| {
    let Some(n) = crate::types::number::parse_i64(args.get(1)).filter(|&n| n > 0) else {
        return;
    };
    let end = 2u64.saturating_add(n as u64).min(args.len() as u64) as usize;
    out.extend(2..end);
};

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("sadd", -3, WF, K1, "set", "Adds members.", sadd),
    cmd!("srem", -3, D, K1, "set", "Removes members.", srem),
    cmd!("smembers", 2, R, K1, "set", "Returns all members.", smembers).with_tips(&["nondeterministic_output_order"]),
    cmd!("sismember", 3, RF, K1, "set", "Tells whether a member exists.", sismember),
    cmd!("smismember", -3, RF, K1, "set", "Tells whether members exist.", smismember),
    cmd!("scard", 2, RF, K1, "set", "Returns the number of members.", scard),
    cmd!("spop", -2, D | RANDOM, K1, "set", "Removes and returns random members.", spop).with_tips(&["nondeterministic_output"]),
    cmd!("srandmember", -2, READONLY | RANDOM, K1, "set", "Returns random members.", srandmember).with_tips(&["nondeterministic_output"]),
    cmd!("sinter", -2, R, KALL, "set", "Intersects sets.", sinter).with_tips(&["nondeterministic_output_order"]),
    cmd!("sunion", -2, R, KALL, "set", "Unites sets.", sunion).with_tips(&["nondeterministic_output_order"]),
    cmd!("sdiff", -2, R, KALL, "set", "Subtracts sets.", sdiff).with_tips(&["nondeterministic_output_order"]),
    cmd!("sintercard", -3, R, K0, "set", "Counts an intersection.", sintercard).with_key_finder(SINTERCARD_KEYS).with_key_searches(&[keynum_at(1)]),
    cmd!("sinterstore", -3, W, KALL, "set", "Stores an intersection.", sinterstore),
    cmd!("sunionstore", -3, W, KALL, "set", "Stores a union.", sunionstore),
    cmd!("sdiffstore", -3, W, KALL, "set", "Stores a difference.", sdiffstore),
    cmd!("smove", 4, D, (1, 2, 1), "set", "Moves a member between sets.", smove),
    cmd!("sscan", -3, READONLY, K1, "set", "Iterates over members.", sscan).with_tips(&["nondeterministic_output"]),
];
