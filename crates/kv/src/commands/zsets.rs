//! Sorted-set commands: adding, removing and reading single members here;
//! ranges in [`range`], unions, intersections and differences in
//! [`algebra`], random members in [`random`].

mod algebra;
mod random;
mod range;

use std::borrow::Cow;

use super::keys::scan_options;
use super::table::*;
use super::{errors, int_arg, upper, CmdError, CmdResult, Ctx};
use crate::keyspace::events::ZSET;
use crate::keyspace::glob::glob_match;
use crate::keyspace::Keyspace;
use crate::resp::{Args, Protocol};
use crate::types::number::parse_f64;
use crate::types::{Value, ZSet};

/// The error ZADD INCR and ZINCRBY give when a score would become NaN
/// (`+inf` plus `-inf`).
const NAN_SCORE: &str = "ERR resulting score is not a number (NaN)";

/// The sorted set at `key`, if any; an error if the key holds another type.
fn zset_ref<'k>(ks: &'k mut Keyspace, db: usize, key: &[u8]) -> Result<Option<&'k ZSet>, CmdError> {
    match ks.get(db, key) {
        None => Ok(None),
        Some(Value::ZSet(z)) => Ok(Some(z)),
        Some(_) => Err(Cow::Borrowed(errors::WRONGTYPE)),
    }
}

/// The sorted set at `key`, created empty if missing (the caller removes
/// it again if it stays empty).
fn zset_create<'k>(ks: &'k mut Keyspace, db: usize, key: &[u8]) -> Result<&'k mut ZSet, CmdError> {
    zset_ref(ks, db, key)?;
    match ks.get_or_insert(db, key, Value::new_zset) {
        Value::ZSet(z) => Ok(z),
        _ => Err(Cow::Borrowed(errors::WRONGTYPE)),
    }
}

/// Stores `result` at `dest` (a write's destination), or deletes `dest`
/// when the result is empty, as Redis's store variants do. Returns the
/// stored length and whether anything changed.
/// Stores a STORE command's result at `dest` (deleting `dest` when the
/// result is empty) and raises `event`, or `del` when an existing key was
/// emptied, as Redis does.
fn store_result(
    ctx: &mut Ctx<'_>,
    dest: &[u8],
    mut result: ZSet,
    event: &'static str,
) -> (usize, bool) {
    let db = ctx.session.db;
    let len = result.len();
    if len <= LISTPACK_ENTRIES_MAX {
        // Stored small, as Redis stores it (a listpack), a negative zero
        // reads back as 0.
        let zeros: Vec<Vec<u8>> = result
            .iter()
            .filter(|(_, s)| *s == 0.0 && s.is_sign_negative())
            .map(|(m, _)| m.to_vec())
            .collect();
        for m in zeros {
            result.insert(&m, 0.0);
        }
    }
    if len == 0 {
        let existed = ctx.state.keyspace.remove(db, dest).is_some();
        if existed {
            ctx.notify(crate::keyspace::events::GENERIC, "del", dest);
        }
        return (0, existed);
    }
    ctx.state.keyspace.set(
        db,
        dest,
        Value::ZSet(crate::types::Shared::new(result)),
        false,
    );
    ctx.notify(ZSET, event, dest);
    (len, true)
}

#[derive(Default)]
struct ZaddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// Parses ZADD's options; returns them with the index of the first score.
/// The checks run in Redis's order: pairs, then conflicts, then INCR.
fn zadd_flags(args: &Args<'_>, mut f: ZaddFlags) -> Result<(ZaddFlags, usize), CmdError> {
    let mut i = 2;
    while i < args.len() {
        match upper(args, i).as_slice() {
            b"NX" => f.nx = true,
            b"XX" => f.xx = true,
            b"GT" => f.gt = true,
            b"LT" => f.lt = true,
            b"CH" => f.ch = true,
            b"INCR" => f.incr = true,
            _ => break,
        }
        i += 1;
    }
    let elements = args.len() - i;
    if elements == 0 || !elements.is_multiple_of(2) {
        return Err(Cow::Borrowed(errors::SYNTAX));
    }
    if f.nx && f.xx {
        return Err(Cow::Borrowed(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if (f.gt && f.lt) || (f.nx && (f.gt || f.lt)) {
        return Err(Cow::Borrowed(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if f.incr && elements > 2 {
        return Err(Cow::Borrowed(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    Ok((f, i))
}

/// Most members of a sorted set Redis stores as a listpack by default
/// (`zset-max-listpack-entries`).
const LISTPACK_ENTRIES_MAX: usize = 128;

/// A score as a small sorted set stores it: Redis's listpack keeps a zero
/// as the integer 0, so a negative zero reads back as 0.
fn stored(score: f64) -> f64 {
    if score == 0.0 {
        0.0
    } else {
        score
    }
}

/// What adding one member did.
enum AddOutcome {
    Added(f64),
    Updated(f64),
    /// Nothing to change; the score it has (`None` if it was not added).
    Unchanged(Option<f64>),
    Skipped,
}

/// Adds or updates one member under ZADD's rules.
fn add_one(
    zset: &mut ZSet,
    f: &ZaddFlags,
    member: &[u8],
    score: f64,
) -> Result<AddOutcome, CmdError> {
    let Some(current) = zset.score(member) else {
        if f.xx {
            return Ok(AddOutcome::Skipped);
        }
        zset.insert(member, stored(score));
        return Ok(AddOutcome::Added(score));
    };
    if f.nx {
        return Ok(AddOutcome::Skipped);
    }
    let next = if f.incr { current + score } else { score };
    if next.is_nan() {
        return Err(Cow::Borrowed(NAN_SCORE));
    }
    if (f.lt && next >= current) || (f.gt && next <= current) {
        return Ok(AddOutcome::Skipped);
    }
    if next == current {
        return Ok(AddOutcome::Unchanged(Some(next)));
    }
    zset.insert(member, stored(next));
    Ok(AddOutcome::Updated(next))
}

fn zadd_generic(ctx: &mut Ctx<'_>, args: &Args<'_>, preset: ZaddFlags) -> CmdResult {
    let (f, first) = zadd_flags(args, preset)?;
    let mut pairs = Vec::with_capacity((args.len() - first) / 2);
    for i in (first..args.len()).step_by(2) {
        let score = parse_f64(args.get(i)).ok_or(Cow::Borrowed(errors::NOT_FLOAT))?;
        pairs.push((score, args.get(i + 1)));
    }
    let (db, key) = (ctx.session.db, args.get(1));
    let exists = zset_ref(&mut ctx.state.keyspace, db, key)?.is_some();
    let (mut added, mut updated, mut last) = (0i64, 0i64, None);
    let mut failure = None;
    if exists || !f.xx {
        let zset = zset_create(&mut ctx.state.keyspace, db, key)?;
        for (score, member) in pairs {
            match add_one(zset, &f, member, score) {
                Ok(AddOutcome::Added(s)) => (added, last) = (added + 1, Some(s)),
                Ok(AddOutcome::Updated(s)) => (updated, last) = (updated + 1, Some(s)),
                Ok(AddOutcome::Unchanged(s)) => last = s,
                Ok(AddOutcome::Skipped) => {}
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        ctx.state.keyspace.remove_if_empty(db, key);
    }
    if added + updated > 0 {
        ctx.propagate_args(args);
        ctx.notify(ZSET, if f.incr { "zincr" } else { "zadd" }, key);
    }
    if let Some(e) = failure {
        return Err(e);
    }
    if f.incr {
        match last {
            Some(score) => ctx.reply.double(score),
            None => ctx.reply.null(),
        }
    } else {
        ctx.reply.int(if f.ch { added + updated } else { added });
    }
    Ok(())
}

pub(super) fn zadd(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    zadd_generic(ctx, args, ZaddFlags::default())
}

/// ZINCRBY is ZADD INCR with one pair, options parsing included (as in
/// Redis, where both share one implementation).
pub(super) fn zincrby(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let preset = ZaddFlags {
        incr: true,
        ..ZaddFlags::default()
    };
    zadd_generic(ctx, args, preset)
}

pub(super) fn zrem(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (db, key) = (ctx.session.db, args.get(1));
    if zset_ref(&mut ctx.state.keyspace, db, key)?.is_none() {
        ctx.reply.int(0);
        return Ok(());
    }
    let mut removed = 0;
    if let Some(Value::ZSet(z)) = ctx.state.keyspace.get_mut(db, key) {
        removed = args.iter().skip(2).filter(|m| z.remove(m)).count();
    }
    ctx.state.keyspace.remove_if_empty(db, key);
    if removed > 0 {
        ctx.propagate_args(args);
        ctx.notify(ZSET, "zrem", key);
        ctx.notify_del_if_gone(key);
    }
    ctx.reply.int(removed as i64);
    Ok(())
}

pub(super) fn zscore(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let z = zset_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    match z.and_then(|z| z.score(args.get(2))) {
        Some(s) => ctx.reply.double(s),
        None => ctx.reply.null(),
    }
    Ok(())
}

pub(super) fn zmscore(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let z = zset_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    ctx.reply.array(args.len() - 2);
    for m in args.iter().skip(2) {
        match z.and_then(|z| z.score(m)) {
            Some(s) => ctx.reply.double(s),
            None => ctx.reply.null(),
        }
    }
    Ok(())
}

pub(super) fn zcard(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let z = zset_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    ctx.reply.int(z.map_or(0, ZSet::len) as i64);
    Ok(())
}

fn rank_generic(ctx: &mut Ctx<'_>, args: &Args<'_>, rev: bool) -> CmdResult {
    let z = zset_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    match z.and_then(|z| Some((z.rank(args.get(2))?, z.len()))) {
        Some((rank, len)) => ctx
            .reply
            .int(if rev { len - 1 - rank } else { rank } as i64),
        None => ctx.reply.null(),
    }
    Ok(())
}

pub(super) fn zrank(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    rank_generic(ctx, args, false)
}

pub(super) fn zrevrank(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    rank_generic(ctx, args, true)
}

/// Replies with members, and their scores if asked: a flat array in RESP2,
/// `[member, score]` pairs in RESP3.
fn reply_members(ctx: &mut Ctx<'_>, items: &[(Vec<u8>, f64)], withscores: bool) {
    if !withscores {
        ctx.reply.bulks(items.iter().map(|(m, _)| m.as_slice()));
        return;
    }
    let nested = ctx.reply.proto == Protocol::Resp3;
    ctx.reply
        .array(if nested { items.len() } else { items.len() * 2 });
    for (m, s) in items {
        if nested {
            ctx.reply.array(2);
        }
        ctx.reply.bulk(m);
        ctx.reply.double(*s);
    }
}

fn pop_generic(ctx: &mut Ctx<'_>, args: &Args<'_>, max: bool) -> CmdResult {
    if args.len() > 3 {
        return Err(Cow::Borrowed(errors::SYNTAX));
    }
    let count = if args.len() > 2 {
        // A count that is not a number gets the same error as a negative one.
        let n = int_arg(args, 2).unwrap_or(-1);
        if n < 0 {
            return Err(Cow::Borrowed(errors::NOT_POSITIVE));
        }
        Some(n as usize)
    } else {
        None
    };
    let (db, key) = (ctx.session.db, args.get(1));
    zset_ref(&mut ctx.state.keyspace, db, key)?;
    let mut popped = Vec::new();
    if let Some(Value::ZSet(z)) = ctx.state.keyspace.get_mut(db, key) {
        for _ in 0..count.unwrap_or(1) {
            match z.pop(max) {
                Some((m, s)) => popped.push((m.to_vec(), s)),
                None => break,
            }
        }
    }
    ctx.state.keyspace.remove_if_empty(db, key);
    if !popped.is_empty() {
        ctx.propagate_args(args);
        ctx.notify(ZSET, if max { "zpopmax" } else { "zpopmin" }, key);
        ctx.notify_del_if_gone(key);
    }
    if count.is_none() {
        // Without a count the reply is a flat [member, score] in both
        // protocols.
        ctx.reply.array(popped.len() * 2);
        for (m, s) in &popped {
            ctx.reply.bulk(m);
            ctx.reply.double(*s);
        }
    } else {
        reply_members(ctx, &popped, true);
    }
    Ok(())
}

pub(super) fn zpopmin(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    pop_generic(ctx, args, false)
}

pub(super) fn zpopmax(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    pop_generic(ctx, args, true)
}

/// ZSCAN returns the whole (matching) sorted set with cursor 0: a valid,
/// if unchunked, SCAN iteration.
pub(super) fn zscan(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (_, o) = scan_options(args, 2, false)?;
    let z = zset_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    let items: Vec<(Vec<u8>, f64)> = z
        .into_iter()
        .flat_map(ZSet::iter)
        .filter(|(m, _)| o.pattern.as_ref().is_none_or(|p| glob_match(p, m)))
        .map(|(m, s)| (m.to_vec(), s))
        .collect();
    ctx.reply.array(2);
    ctx.reply.bulk(b"0");
    ctx.reply.array(items.len() * 2);
    for (m, s) in &items {
        ctx.reply.bulk(m);
        ctx.reply.bulk(crate::resp::format_double(*s).as_bytes());
    }
    Ok(())
}

use algebra::{
    zdiff, zdiffstore, zinter, zintercard, zinterstore, zunion, zunionstore, ZREAD_KEYS,
    ZSTORE_KEYS,
};
use random::zrandmember;
pub(super) use random::{count_and_with, pick_indices, COUNT_RANGE, RANDOM_PICKS_MAX};
use range::{
    zcount, zlexcount, zrange, zrangebylex, zrangebyscore, zrangestore, zremrangebylex,
    zremrangebyrank, zremrangebyscore, zrevrange, zrevrangebylex, zrevrangebyscore,
};

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("zadd", -4, WF, K1, "sorted-set", "Adds members or updates scores.", zadd),
    cmd!("zincrby", 4, WF, K1, "sorted-set", "Increments a member's score.", zincrby),
    cmd!("zrem", -3, D, K1, "sorted-set", "Removes members.", zrem),
    cmd!("zscore", 3, RF, K1, "sorted-set", "Returns a member's score.", zscore),
    cmd!("zmscore", -3, RF, K1, "sorted-set", "Returns members' scores.", zmscore),
    cmd!("zcard", 2, RF, K1, "sorted-set", "Returns the number of members.", zcard),
    cmd!("zrank", 3, RF, K1, "sorted-set", "Returns a member's rank.", zrank),
    cmd!("zrevrank", 3, RF, K1, "sorted-set", "Returns a member's rank, highest first.", zrevrank),
    cmd!("zrange", -4, R, K1, "sorted-set", "Returns a range by rank, score or name.", zrange),
    cmd!("zrangestore", -5, W, (1, 2, 1), "sorted-set", "Stores a range by rank, score or name.", zrangestore),
    cmd!("zrevrange", -4, R, K1, "sorted-set", "Returns a range by rank, highest first.", zrevrange),
    cmd!("zrangebyscore", -4, R, K1, "sorted-set", "Returns a range by score.", zrangebyscore),
    cmd!("zrevrangebyscore", -4, R, K1, "sorted-set", "Returns a range by score, highest first.", zrevrangebyscore),
    cmd!("zrangebylex", -4, R, K1, "sorted-set", "Returns a range by name.", zrangebylex),
    cmd!("zrevrangebylex", -4, R, K1, "sorted-set", "Returns a range by name, highest first.", zrevrangebylex),
    cmd!("zcount", 4, RF, K1, "sorted-set", "Counts members in a score range.", zcount),
    cmd!("zlexcount", 4, RF, K1, "sorted-set", "Counts members in a name range.", zlexcount),
    cmd!("zremrangebyrank", 4, WRITE, K1, "sorted-set", "Removes members in a rank range.", zremrangebyrank),
    cmd!("zremrangebyscore", 4, WRITE, K1, "sorted-set", "Removes members in a score range.", zremrangebyscore),
    cmd!("zremrangebylex", 4, WRITE, K1, "sorted-set", "Removes members in a name range.", zremrangebylex),
    cmd!("zpopmin", -2, D, K1, "sorted-set", "Removes and returns the lowest members.", zpopmin),
    cmd!("zpopmax", -2, D, K1, "sorted-set", "Removes and returns the highest members.", zpopmax),
    cmd!("zrandmember", -2, READONLY | RANDOM, K1, "sorted-set", "Returns random members.", zrandmember).with_tips(&["nondeterministic_output"]),
    cmd!("zunion", -3, R, K0, "sorted-set", "Returns the union of sorted sets.", zunion).with_key_finder(ZREAD_KEYS).with_key_searches(&[keynum_at(1)]),
    cmd!("zinter", -3, R, K0, "sorted-set", "Returns the intersection of sorted sets.", zinter).with_key_finder(ZREAD_KEYS).with_key_searches(&[keynum_at(1)]),
    cmd!("zdiff", -3, R, K0, "sorted-set", "Returns the difference of sorted sets.", zdiff).with_key_finder(ZREAD_KEYS).with_key_searches(&[keynum_at(1)]),
    cmd!("zintercard", -3, R, K0, "sorted-set", "Counts the intersection of sorted sets.", zintercard).with_key_finder(ZREAD_KEYS).with_key_searches(&[keynum_at(1)]),
    cmd!("zunionstore", -4, W, K0, "sorted-set", "Stores the union of sorted sets.", zunionstore).with_key_finder_and_range(ZSTORE_KEYS, K1).with_key_searches(&[one_at(1), keynum_at(2)]),
    cmd!("zinterstore", -4, W, K0, "sorted-set", "Stores the intersection of sorted sets.", zinterstore).with_key_finder_and_range(ZSTORE_KEYS, K1).with_key_searches(&[one_at(1), keynum_at(2)]),
    cmd!("zdiffstore", -4, W, K0, "sorted-set", "Stores the difference of sorted sets.", zdiffstore).with_key_finder_and_range(ZSTORE_KEYS, K1).with_key_searches(&[one_at(1), keynum_at(2)]),
    cmd!("zscan", -3, READONLY, K1, "sorted-set", "Iterates over members.", zscan).with_tips(&["nondeterministic_output"]),
];
