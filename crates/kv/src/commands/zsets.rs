//! Sorted-set commands.

use std::borrow::Cow;

use super::keys::scan_options;
use super::table::*;
use super::{errors, int_arg, upper, CmdError, CmdResult, Ctx};
use crate::keyspace::events::ZSET;
use crate::keyspace::glob::glob_match;
use crate::keyspace::Keyspace;
use crate::resp::{Args, Protocol};
use crate::types::number::{normalize_range, parse_f64};
use crate::types::{LexBound, ScoreBound, Value, ZSet};

fn zset_ref<'k>(ks: &'k mut Keyspace, db: usize, key: &[u8]) -> Result<Option<&'k ZSet>, CmdError> {
    match ks.get(db, key) {
        None => Ok(None),
        Some(Value::ZSet(z)) => Ok(Some(z)),
        Some(_) => Err(Cow::Borrowed(errors::WRONGTYPE)),
    }
}

fn zset_create<'k>(ks: &'k mut Keyspace, db: usize, key: &[u8]) -> Result<&'k mut ZSet, CmdError> {
    zset_ref(ks, db, key)?;
    match ks.get_or_insert(db, key, Value::new_zset) {
        Value::ZSet(z) => Ok(z),
        _ => Err(Cow::Borrowed(errors::WRONGTYPE)),
    }
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

fn zadd_flags(args: &Args<'_>) -> Result<(ZaddFlags, usize), CmdError> {
    let mut f = ZaddFlags::default();
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
    let pairs = args.len() - i;
    if pairs == 0 || !pairs.is_multiple_of(2) {
        return Err(Cow::Borrowed(errors::SYNTAX));
    }
    if f.incr && pairs != 2 {
        return Err(Cow::Borrowed(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    Ok((f, i))
}

pub(super) fn zadd(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (f, first) = zadd_flags(args)?;
    let mut scores = Vec::with_capacity((args.len() - first) / 2);
    for i in (first..args.len()).step_by(2) {
        scores.push((
            parse_f64(args.get(i)).ok_or(Cow::Borrowed(errors::NOT_FLOAT))?,
            args.get(i + 1),
        ));
    }
    let (db, key) = (ctx.session.db, args.get(1));
    if f.xx && zset_ref(&mut ctx.state.keyspace, db, key)?.is_none() {
        if f.incr {
            ctx.reply.null()
        } else {
            ctx.reply.int(0)
        }
        return Ok(());
    }
    let zset = zset_create(&mut ctx.state.keyspace, db, key)?;
    let (mut added, mut changed, mut last) = (0, 0, None);
    for (score, member) in scores {
        let current = zset.score(member);
        let mut next = score;
        if f.incr {
            next = current.unwrap_or(0.0) + score;
            if next.is_nan() {
                ctx.state.keyspace.remove_if_empty(db, key);
                return Err(Cow::Borrowed("ERR resulting score is not a number (NaN)"));
            }
        }
        let allowed = match current {
            Some(cur) => !f.nx && (!f.gt || next > cur) && (!f.lt || next < cur),
            None => !f.xx,
        };
        if !allowed {
            continue;
        }
        if zset.insert(member, next) {
            added += 1;
        } else if current != Some(next) {
            changed += 1;
        }
        last = Some(next);
    }
    ctx.state.keyspace.remove_if_empty(db, key);
    if added + changed > 0 {
        ctx.propagate_args(args);
        ctx.notify(ZSET, if f.incr { "zincr" } else { "zadd" }, key);
    }
    if f.incr {
        match last {
            Some(score) => ctx.reply.double(score),
            None => ctx.reply.null(),
        }
    } else {
        ctx.reply.int(if f.ch { added + changed } else { added });
    }
    Ok(())
}

pub(super) fn zincrby(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let delta = parse_f64(args.get(2)).ok_or(Cow::Borrowed(errors::NOT_FLOAT))?;
    let (db, key, member) = (ctx.session.db, args.get(1), args.get(3));
    let zset = zset_create(&mut ctx.state.keyspace, db, key)?;
    let next = zset.score(member).unwrap_or(0.0) + delta;
    if next.is_nan() {
        ctx.state.keyspace.remove_if_empty(db, key);
        return Err(Cow::Borrowed("ERR resulting score is not a number (NaN)"));
    }
    zset.insert(member, next);
    ctx.propagate_args(args);
    ctx.notify(ZSET, "zincr", key);
    ctx.reply.double(next);
    Ok(())
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

fn score_bound(text: &[u8]) -> Result<ScoreBound, CmdError> {
    let (exclusive, number) = match text.split_first() {
        Some((b'(', rest)) => (true, rest),
        _ => (false, text),
    };
    let value = parse_f64(number).ok_or(Cow::Borrowed(errors::MIN_MAX_FLOAT))?;
    Ok(ScoreBound { value, exclusive })
}

fn lex_bound(text: &[u8]) -> Result<LexBound, CmdError> {
    match text {
        b"-" => Ok(LexBound::Min),
        b"+" => Ok(LexBound::Max),
        [b'[', rest @ ..] => Ok(LexBound::Value {
            member: rest.to_vec(),
            exclusive: false,
        }),
        [b'(', rest @ ..] => Ok(LexBound::Value {
            member: rest.to_vec(),
            exclusive: true,
        }),
        _ => Err(Cow::Borrowed("ERR min or max not valid string range item")),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum RangeBy {
    Rank,
    Score,
    Lex,
}

struct RangeRequest {
    by: RangeBy,
    rev: bool,
    limit: Option<(i64, i64)>,
    withscores: bool,
}

/// Parses the options after `key start stop` from index `first`.
fn range_options(
    args: &Args<'_>,
    first: usize,
    mut req: RangeRequest,
    modern: bool,
) -> Result<RangeRequest, CmdError> {
    let mut i = first;
    while i < args.len() {
        match upper(args, i).as_slice() {
            b"WITHSCORES" => req.withscores = true,
            b"LIMIT" if i + 2 < args.len() => {
                req.limit = Some((int_arg(args, i + 1)?, int_arg(args, i + 2)?));
                i += 2;
            }
            b"BYSCORE" if modern && req.by == RangeBy::Rank => req.by = RangeBy::Score,
            b"BYLEX" if modern && req.by == RangeBy::Rank => req.by = RangeBy::Lex,
            b"REV" if modern => req.rev = true,
            _ => return Err(Cow::Borrowed(errors::SYNTAX)),
        }
        i += 1;
    }
    if req.limit.is_some() && req.by == RangeBy::Rank {
        return Err(Cow::Borrowed(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if req.withscores && req.by == RangeBy::Lex {
        return Err(Cow::Borrowed(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    Ok(req)
}

/// Selects the members a range request names, in reply order.
fn select(
    z: &ZSet,
    req: &RangeRequest,
    a: &[u8],
    b: &[u8],
) -> Result<Vec<(Vec<u8>, f64)>, CmdError> {
    let own = |(m, s): (&[u8], f64)| (m.to_vec(), s);
    let mut items: Vec<(Vec<u8>, f64)> = match req.by {
        RangeBy::Rank => {
            let start =
                crate::types::number::parse_i64(a).ok_or(Cow::Borrowed(errors::NOT_INTEGER))?;
            let stop =
                crate::types::number::parse_i64(b).ok_or(Cow::Borrowed(errors::NOT_INTEGER))?;
            let Some((from, to)) = normalize_range(start, stop, z.len()) else {
                return Ok(Vec::new());
            };
            return Ok(if req.rev {
                z.iter()
                    .rev()
                    .skip(from)
                    .take(to - from + 1)
                    .map(own)
                    .collect()
            } else {
                z.iter().skip(from).take(to - from + 1).map(own).collect()
            });
        }
        RangeBy::Score => {
            let (min, max) = if req.rev { (b, a) } else { (a, b) };
            let (min, max) = (score_bound(min)?, score_bound(max)?);
            z.range_by_score(min, max).map(own).collect()
        }
        RangeBy::Lex => {
            let (min, max) = if req.rev { (b, a) } else { (a, b) };
            let (min, max) = (lex_bound(min)?, lex_bound(max)?);
            z.range_by_lex(&min, &max).map(own).collect()
        }
    };
    if req.rev {
        items.reverse();
    }
    if let Some((offset, count)) = req.limit {
        if offset < 0 {
            return Ok(Vec::new());
        }
        let count = if count < 0 {
            usize::MAX
        } else {
            count as usize
        };
        items = items
            .into_iter()
            .skip(offset as usize)
            .take(count)
            .collect();
    }
    Ok(items)
}

fn reply_members(ctx: &mut Ctx<'_>, items: &[(Vec<u8>, f64)], withscores: bool) {
    if !withscores {
        ctx.reply.bulks(items.iter().map(|(m, _)| m.as_slice()));
        return;
    }
    if ctx.reply.proto == Protocol::Resp3 {
        ctx.reply.array(items.len());
        for (m, s) in items {
            ctx.reply.array(2);
            ctx.reply.bulk(m);
            ctx.reply.double(*s);
        }
    } else {
        ctx.reply.array(items.len() * 2);
        for (m, s) in items {
            ctx.reply.bulk(m);
            ctx.reply.double(*s);
        }
    }
}

fn range_generic(
    ctx: &mut Ctx<'_>,
    args: &Args<'_>,
    base: RangeRequest,
    modern: bool,
) -> CmdResult {
    let req = range_options(args, 4, base, modern)?;
    let z = zset_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    let items = match z {
        Some(z) => select(z, &req, args.get(2), args.get(3))?,
        None => {
            // Bounds are still validated for a missing key, as Redis does.
            select(&ZSet::default(), &req, args.get(2), args.get(3))?
        }
    };
    reply_members(ctx, &items, req.withscores);
    Ok(())
}

fn request(by: RangeBy, rev: bool) -> RangeRequest {
    RangeRequest {
        by,
        rev,
        limit: None,
        withscores: false,
    }
}

pub(super) fn zrange(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    range_generic(ctx, args, request(RangeBy::Rank, false), true)
}

pub(super) fn zrevrange(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    range_generic(ctx, args, request(RangeBy::Rank, true), false)
}

pub(super) fn zrangebyscore(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    range_generic(ctx, args, request(RangeBy::Score, false), false)
}

pub(super) fn zrevrangebyscore(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    range_generic(ctx, args, request(RangeBy::Score, true), false)
}

pub(super) fn zrangebylex(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    range_generic(ctx, args, request(RangeBy::Lex, false), false)
}

pub(super) fn zcount(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (min, max) = (score_bound(args.get(2))?, score_bound(args.get(3))?);
    let z = zset_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    let n = z.map_or(0, |z| z.range_by_score(min, max).count());
    ctx.reply.int(n as i64);
    Ok(())
}

pub(super) fn zlexcount(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (min, max) = (lex_bound(args.get(2))?, lex_bound(args.get(3))?);
    let z = zset_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    let n = z.map_or(0, |z| z.range_by_lex(&min, &max).count());
    ctx.reply.int(n as i64);
    Ok(())
}

fn pop_generic(ctx: &mut Ctx<'_>, args: &Args<'_>, max: bool) -> CmdResult {
    let count = if args.len() > 2 {
        let n = int_arg(args, 2)?;
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

/// ZSCAN returns the whole (matching) sorted set with cursor 0.
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
    cmd!("zrevrange", -4, R, K1, "sorted-set", "Returns a range by rank, highest first.", zrevrange),
    cmd!("zrangebyscore", -4, R, K1, "sorted-set", "Returns a range by score.", zrangebyscore),
    cmd!("zrevrangebyscore", -4, R, K1, "sorted-set", "Returns a range by score, highest first.", zrevrangebyscore),
    cmd!("zrangebylex", -4, R, K1, "sorted-set", "Returns a range by name.", zrangebylex),
    cmd!("zcount", 4, RF, K1, "sorted-set", "Counts members in a score range.", zcount),
    cmd!("zlexcount", 4, RF, K1, "sorted-set", "Counts members in a name range.", zlexcount),
    cmd!("zpopmin", -2, D, K1, "sorted-set", "Removes and returns the lowest members.", zpopmin),
    cmd!("zpopmax", -2, D, K1, "sorted-set", "Removes and returns the highest members.", zpopmax),
    cmd!("zscan", -3, READONLY, K1, "sorted-set", "Iterates over members.", zscan),
];
