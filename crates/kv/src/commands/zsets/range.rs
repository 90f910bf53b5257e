//! Ranges of a sorted set by rank, score or name: ZRANGE in all its forms,
//! ZRANGESTORE, ZCOUNT, ZLEXCOUNT and the ZREMRANGEBY* removals.

use std::borrow::Cow;

use super::{reply_members, store_result, zset_ref, CmdError, CmdResult, Ctx};
use crate::commands::{errors, int_arg, upper};
use crate::keyspace::events::ZSET;
use crate::resp::Args;
use crate::types::number::{normalize_range, parse_f64, parse_i64};
use crate::types::{LexBound, ScoreBound, Value, ZSet};

/// Parses a score range end: `1.5`, `(1.5` (exclusive), `-inf`, `+inf`.
pub(super) fn score_bound(text: &[u8]) -> Result<ScoreBound, CmdError> {
    let (exclusive, number) = match text.split_first() {
        Some((b'(', rest)) => (true, rest),
        _ => (false, text),
    };
    let value = parse_f64(number).ok_or(Cow::Borrowed(errors::MIN_MAX_FLOAT))?;
    Ok(ScoreBound { value, exclusive })
}

/// Parses a name range end: `-`, `+`, `[a` (inclusive), `(a` (exclusive).
pub(super) fn lex_bound(text: &[u8]) -> Result<LexBound, CmdError> {
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

/// A parsed range: what it selects and how it replies.
struct Request {
    by: Option<RangeBy>,
    rev: Option<bool>,
    /// LIMIT offset count (count negative: no limit).
    limit: Option<(i64, i64)>,
    withscores: bool,
}

/// The ends of a range, parsed.
enum Ends {
    Rank(i64, i64),
    Score(ScoreBound, ScoreBound),
    Lex(LexBound, LexBound),
}

/// Parses the options from argument `first`, then the ends at `first - 2`
/// and `first - 1` (swapped for a reversed score or name range), in
/// Redis's order: option errors first, then conflicts, then the ends.
fn parse(
    args: &Args<'_>,
    first: usize,
    mut req: Request,
    store: bool,
) -> Result<(Request, Ends), CmdError> {
    let mut i = first;
    while i < args.len() {
        let left = args.len() - i - 1;
        match upper(args, i).as_slice() {
            b"WITHSCORES" if !store => req.withscores = true,
            b"LIMIT" if left >= 2 => {
                req.limit = Some((int_arg(args, i + 1)?, int_arg(args, i + 2)?));
                i += 2;
            }
            b"REV" if req.rev.is_none() => req.rev = Some(true),
            b"BYLEX" if req.by.is_none() => req.by = Some(RangeBy::Lex),
            b"BYSCORE" if req.by.is_none() => req.by = Some(RangeBy::Score),
            _ => return Err(Cow::Borrowed(errors::SYNTAX)),
        }
        i += 1;
    }
    let by = *req.by.get_or_insert(RangeBy::Rank);
    let rev = *req.rev.get_or_insert(false);
    // A count of -1 is Redis's "no LIMIT", so `LIMIT x -1` passes here.
    if req.limit.is_some_and(|(_, count)| count != -1) && by == RangeBy::Rank {
        return Err(Cow::Borrowed(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if req.withscores && by == RangeBy::Lex {
        return Err(Cow::Borrowed(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    let (mut a, mut b) = (args.get(first - 2), args.get(first - 1));
    if rev && by != RangeBy::Rank {
        std::mem::swap(&mut a, &mut b);
    }
    let ends = match by {
        RangeBy::Rank => Ends::Rank(
            parse_i64(a).ok_or(Cow::Borrowed(errors::NOT_INTEGER))?,
            parse_i64(b).ok_or(Cow::Borrowed(errors::NOT_INTEGER))?,
        ),
        RangeBy::Score => Ends::Score(score_bound(a)?, score_bound(b)?),
        RangeBy::Lex => Ends::Lex(lex_bound(a)?, lex_bound(b)?),
    };
    Ok((req, ends))
}

/// The ranks `lo..hi` a LIMIT keeps of the ranks `lo..hi` a bound
/// selected: skips `offset` (negative: keeps nothing) from the low end, or
/// from the high end when reversed, then keeps `count` (negative: all).
fn limit_ranks(lo: usize, hi: usize, rev: bool, limit: Option<(i64, i64)>) -> (usize, usize) {
    let Some((offset, count)) = limit else {
        return (lo, hi);
    };
    if offset < 0 {
        return (lo, lo);
    }
    let available = hi - lo;
    let skip = usize::try_from(offset).unwrap_or(usize::MAX).min(available);
    let keep = usize::try_from(count)
        .unwrap_or(usize::MAX)
        .min(available - skip);
    if rev {
        (hi - skip - keep, hi - skip)
    } else {
        (lo + skip, lo + skip + keep)
    }
}

/// The members of ranks `lo..hi`, ascending or reversed.
fn by_ranks(z: &ZSet, lo: usize, hi: usize, rev: bool) -> Vec<(Vec<u8>, f64)> {
    if lo >= hi {
        return Vec::new();
    }
    let items = z.range_by_rank(lo, hi - 1).map(|(m, s)| (m.to_vec(), s));
    if rev {
        items.rev().collect()
    } else {
        items.collect()
    }
}

/// The members a range selects, in reply order, in O(log n) plus the
/// members returned.
fn select(z: &ZSet, ends: &Ends, rev: bool, limit: Option<(i64, i64)>) -> Vec<(Vec<u8>, f64)> {
    let (lo, hi) = match ends {
        Ends::Rank(start, stop) => {
            let Some((from, to)) = normalize_range(*start, *stop, z.len()) else {
                return Vec::new();
            };
            // Reversed ranks count from the highest member.
            let (from, to) = if rev {
                (z.len() - 1 - to, z.len() - 1 - from)
            } else {
                (from, to)
            };
            return by_ranks(z, from, to + 1, rev);
        }
        Ends::Score(min, max) => z.score_ranks(*min, *max),
        Ends::Lex(min, max) => z.lex_ranks(min, max, rev),
    };
    let (lo, hi) = limit_ranks(lo, hi, rev, limit);
    by_ranks(z, lo, hi, rev)
}

fn request(by: Option<RangeBy>, rev: Option<bool>) -> Request {
    Request {
        by,
        rev,
        limit: None,
        withscores: false,
    }
}

fn range_generic(ctx: &mut Ctx<'_>, args: &Args<'_>, base: Request) -> CmdResult {
    let (req, ends) = parse(args, 4, base, false)?;
    let z = zset_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    let rev = req.rev == Some(true);
    let items = z.map_or_else(Vec::new, |z| select(z, &ends, rev, req.limit));
    reply_members(ctx, &items, req.withscores);
    Ok(())
}

pub(super) fn zrange(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    range_generic(ctx, args, request(None, None))
}

pub(super) fn zrevrange(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    range_generic(ctx, args, request(Some(RangeBy::Rank), Some(true)))
}

pub(super) fn zrangebyscore(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    range_generic(ctx, args, request(Some(RangeBy::Score), Some(false)))
}

pub(super) fn zrevrangebyscore(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    range_generic(ctx, args, request(Some(RangeBy::Score), Some(true)))
}

pub(super) fn zrangebylex(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    range_generic(ctx, args, request(Some(RangeBy::Lex), Some(false)))
}

pub(super) fn zrevrangebylex(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    range_generic(ctx, args, request(Some(RangeBy::Lex), Some(true)))
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count].
pub(super) fn zrangestore(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (req, ends) = parse(args, 5, request(None, None), true)?;
    let z = zset_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(2))?;
    let rev = req.rev == Some(true);
    let items = z.map_or_else(Vec::new, |z| select(z, &ends, rev, req.limit));
    let mut result = ZSet::default();
    for (m, s) in &items {
        result.insert(m, *s);
    }
    let (len, changed) = store_result(ctx, args.get(1), result, "zrangestore");
    if changed {
        ctx.propagate_args(args);
    }
    ctx.reply.int(len as i64);
    Ok(())
}

pub(super) fn zcount(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (min, max) = (score_bound(args.get(2))?, score_bound(args.get(3))?);
    let z = zset_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    let n = z.map_or(0, |z| z.count_by_score(min, max));
    ctx.reply.int(n as i64);
    Ok(())
}

pub(super) fn zlexcount(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (min, max) = (lex_bound(args.get(2))?, lex_bound(args.get(3))?);
    let z = zset_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    let n = z.map_or(0, |z| {
        let (lo, hi) = z.lex_ranks(&min, &max, false);
        hi - lo
    });
    ctx.reply.int(n as i64);
    Ok(())
}

/// Removes the members `ends` selects; replies with how many.
fn remove_range(ctx: &mut Ctx<'_>, args: &Args<'_>, ends: Ends, event: &'static str) -> CmdResult {
    let (db, key) = (ctx.session.db, args.get(1));
    let Some(z) = zset_ref(&mut ctx.state.keyspace, db, key)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    let doomed = select(z, &ends, false, None);
    if let Some(Value::ZSet(z)) = ctx.state.keyspace.get_mut(db, key) {
        for (m, _) in &doomed {
            z.remove(m);
        }
    }
    ctx.state.keyspace.remove_if_empty(db, key);
    if !doomed.is_empty() {
        ctx.notify(ZSET, event, key);
        ctx.notify_del_if_gone(key);
        ctx.propagate_args(args);
    }
    ctx.reply.int(doomed.len() as i64);
    Ok(())
}

pub(super) fn zremrangebyrank(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let ends = Ends::Rank(int_arg(args, 2)?, int_arg(args, 3)?);
    remove_range(ctx, args, ends, "zremrangebyrank")
}

pub(super) fn zremrangebyscore(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let ends = Ends::Score(score_bound(args.get(2))?, score_bound(args.get(3))?);
    remove_range(ctx, args, ends, "zremrangebyscore")
}

pub(super) fn zremrangebylex(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let ends = Ends::Lex(lex_bound(args.get(2))?, lex_bound(args.get(3))?);
    remove_range(ctx, args, ends, "zremrangebylex")
}
