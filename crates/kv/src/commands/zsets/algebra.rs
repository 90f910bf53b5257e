//! ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD: sorted sets
//! (and plain sets, whose members score 1) combined, with weights and an
//! aggregate.

use std::borrow::Cow;
use std::collections::HashMap;

use super::{reply_members, store_result, CmdError, CmdResult, Ctx};
use crate::commands::errors;
use crate::resp::Args;
use crate::types::number::{parse_f64, parse_i64};
use crate::types::{Bytes, Value, ZSet};

/// Key finder of ZUNION, ZINTER, ZDIFF and ZINTERCARD: `numkeys` at 1, the
/// keys after it.
pub(super) const ZREAD_KEYS: crate::commands::table::KeyFinder = read_keys;
/// Key finder of the STORE forms: the destination at 1, `numkeys` at 2,
/// the keys after it.
pub(super) const ZSTORE_KEYS: crate::commands::table::KeyFinder = store_keys;

fn read_keys(args: &Args<'_>, out: &mut Vec<usize>) {
    numkeys_positions(args, 1, out);
}

fn store_keys(args: &Args<'_>, out: &mut Vec<usize>) {
    if args.len() > 1 {
        out.push(1);
    }
    numkeys_positions(args, 2, out);
}

/// The positions of the `numkeys` keys following argument `at`, as far as
/// there are arguments.
fn numkeys_positions(args: &Args<'_>, at: usize, out: &mut Vec<usize>) {
    let Some(n) = parse_i64(args.get(at)).filter(|&n| n > 0) else {
        return;
    };
    let end = (at as u64 + 1)
        .saturating_add(n as u64)
        .min(args.len() as u64) as usize;
    out.extend(at + 1..end);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    /// Combines `value` into `acc`; a sum that is NaN (`inf` + `-inf`)
    /// becomes 0, as Redis makes it.
    fn apply(self, acc: &mut f64, value: f64) {
        match self {
            Aggregate::Sum => {
                *acc += value;
                if acc.is_nan() {
                    *acc = 0.0;
                }
            }
            Aggregate::Min => *acc = acc.min(value),
            Aggregate::Max => *acc = acc.max(value),
        }
    }
}

/// One input: its members with scores (a set's score 1), and its weight.
struct Source {
    members: Vec<(Bytes, f64)>,
    index: Option<HashMap<Bytes, f64>>,
    weight: f64,
}

impl Source {
    fn find(&mut self, member: &[u8]) -> Option<f64> {
        let members = &self.members;
        let index = self
            .index
            .get_or_insert_with(|| members.iter().cloned().collect());
        index.get(member).copied()
    }
}

/// A parsed request.
struct Request {
    sources: Vec<Source>,
    aggregate: Aggregate,
    withscores: bool,
    limit: usize,
}

/// What the command is: its operation, where `numkeys` is, whether it
/// stores, whether it only counts (ZINTERCARD).
#[derive(Clone, Copy)]
struct Shape {
    op: Op,
    numkeys_at: usize,
    store: bool,
    cardinality: bool,
    name: &'static str,
}

/// Reads the input keys: sorted sets, or sets (score 1); missing is empty.
fn read_sources(
    ctx: &mut Ctx<'_>,
    args: &Args<'_>,
    first: usize,
    n: usize,
) -> Result<Vec<Source>, CmdError> {
    let db = ctx.session.db;
    let mut sources = Vec::with_capacity(n);
    for at in first..first + n {
        let members = match ctx.state.keyspace.get(db, args.get(at)) {
            None => Vec::new(),
            Some(Value::ZSet(z)) => z.iter().map(|(m, s)| (Bytes::from(m), s)).collect(),
            Some(Value::Set(s)) => s.iter().map(|m| (Bytes::from(&m[..]), 1.0)).collect(),
            Some(_) => return Err(Cow::Borrowed(errors::WRONGTYPE)),
        };
        sources.push(Source {
            members,
            index: None,
            weight: 1.0,
        });
    }
    Ok(sources)
}

/// Parses `numkeys`, reads the keys, then the options, in Redis's order
/// (so a wrong type is reported before a bad option).
fn parse(ctx: &mut Ctx<'_>, args: &Args<'_>, shape: Shape) -> Result<Request, CmdError> {
    let at = shape.numkeys_at;
    let n = parse_i64(args.get(at)).ok_or(Cow::Borrowed(errors::NOT_INTEGER))?;
    if n < 1 {
        return Err(Cow::Owned(format!(
            "ERR at least 1 input key is needed for '{}' command",
            shape.name
        )));
    }
    if n as u64 > (args.len() - at - 1) as u64 {
        return Err(Cow::Borrowed(errors::SYNTAX));
    }
    let n = n as usize;
    let mut req = Request {
        sources: read_sources(ctx, args, at + 1, n)?,
        aggregate: Aggregate::Sum,
        withscores: false,
        limit: 0,
    };
    parse_options(args, at + 1 + n, shape, &mut req)?;
    Ok(req)
}

fn parse_options(args: &Args<'_>, mut i: usize, shape: Shape, req: &mut Request) -> CmdResult {
    let weighted = shape.op != Op::Diff && !shape.cardinality;
    let n = req.sources.len();
    while i < args.len() {
        let remaining = args.len() - i;
        let word = args.get(i).to_ascii_uppercase();
        if weighted && remaining > n && word == b"WEIGHTS" {
            for (k, source) in req.sources.iter_mut().enumerate() {
                source.weight = parse_f64(args.get(i + 1 + k))
                    .ok_or(Cow::Borrowed("ERR weight value is not a float"))?;
            }
            i += 1 + n;
        } else if weighted && remaining >= 2 && word == b"AGGREGATE" {
            req.aggregate = match args.get(i + 1).to_ascii_uppercase().as_slice() {
                b"SUM" => Aggregate::Sum,
                b"MIN" => Aggregate::Min,
                b"MAX" => Aggregate::Max,
                _ => return Err(Cow::Borrowed(errors::SYNTAX)),
            };
            i += 2;
        } else if !shape.store && !shape.cardinality && word == b"WITHSCORES" {
            req.withscores = true;
            i += 1;
        } else if shape.cardinality && remaining >= 2 && word == b"LIMIT" {
            // As in Redis, a limit that is not a number gets this message too.
            let limit = parse_i64(args.get(i + 1)).unwrap_or(-1);
            if limit < 0 {
                return Err(Cow::Borrowed("ERR LIMIT can't be negative"));
            }
            req.limit = usize::try_from(limit).unwrap_or(usize::MAX);
            i += 2;
        } else {
            return Err(Cow::Borrowed(errors::SYNTAX));
        }
    }
    Ok(())
}

/// A weighted score; NaN (0 × inf) counts as 0, as in Redis.
fn weighted(score: f64, weight: f64) -> f64 {
    let value = score * weight;
    if value.is_nan() {
        0.0
    } else {
        value
    }
}

/// The intersection: the members of the smallest input present in every
/// other, aggregated. With `count_only`, stops at `limit` (0: no limit)
/// and returns only how many.
fn intersect(req: &mut Request, count_only: bool) -> (ZSet, usize) {
    // Smallest first, as Redis orders them (stable, so equal sizes keep
    // their order and sums add in the same order).
    req.sources.sort_by_key(|s| s.members.len());
    let mut out = ZSet::default();
    let mut count = 0usize;
    let Some((first, rest)) = req.sources.split_first_mut() else {
        return (out, 0);
    };
    for (member, score) in &first.members {
        let mut acc = weighted(*score, first.weight);
        let mut everywhere = true;
        for other in rest.iter_mut() {
            match other.find(member) {
                Some(s) => req.aggregate.apply(&mut acc, s * other.weight),
                None => {
                    everywhere = false;
                    break;
                }
            }
        }
        if !everywhere {
            continue;
        }
        count += 1;
        if count_only {
            if req.limit != 0 && count >= req.limit {
                break;
            }
        } else {
            out.insert(member, acc);
        }
    }
    (out, count)
}

fn unite(req: &Request) -> ZSet {
    let mut acc: HashMap<Bytes, f64> = HashMap::new();
    for source in &req.sources {
        for (member, score) in &source.members {
            let value = weighted(*score, source.weight);
            match acc.get_mut(member) {
                Some(slot) => req.aggregate.apply(slot, value),
                None => {
                    acc.insert(member.clone(), value);
                }
            }
        }
    }
    let mut out = ZSet::default();
    for (member, score) in acc {
        out.insert(&member, score);
    }
    out
}

/// The members of the first input in no other, with their first scores.
fn subtract(req: &mut Request) -> ZSet {
    let mut out = ZSet::default();
    let Some((first, rest)) = req.sources.split_first_mut() else {
        return out;
    };
    for (member, score) in &first.members {
        if rest.iter_mut().all(|other| other.find(member).is_none()) {
            out.insert(member, *score);
        }
    }
    out
}

fn run(ctx: &mut Ctx<'_>, args: &Args<'_>, shape: Shape) -> CmdResult {
    let mut req = parse(ctx, args, shape)?;
    let result = match shape.op {
        Op::Inter => {
            let (set, count) = intersect(&mut req, shape.cardinality);
            if shape.cardinality {
                ctx.reply.int(count as i64);
                return Ok(());
            }
            set
        }
        Op::Union => unite(&req),
        Op::Diff => subtract(&mut req),
    };
    if shape.store {
        let (len, changed) = store_result(ctx, args.get(1), result, shape.name);
        if changed {
            ctx.propagate_args(args);
        }
        ctx.reply.int(len as i64);
    } else {
        let items: Vec<(Vec<u8>, f64)> = result.iter().map(|(m, s)| (m.to_vec(), s)).collect();
        reply_members(ctx, &items, req.withscores);
    }
    Ok(())
}

const fn shape(op: Op, store: bool, name: &'static str) -> Shape {
    Shape {
        op,
        numkeys_at: if store { 2 } else { 1 },
        store,
        cardinality: false,
        name,
    }
}

pub(super) fn zunion(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    run(ctx, args, shape(Op::Union, false, "zunion"))
}

pub(super) fn zinter(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    run(ctx, args, shape(Op::Inter, false, "zinter"))
}

pub(super) fn zdiff(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    run(ctx, args, shape(Op::Diff, false, "zdiff"))
}

pub(super) fn zunionstore(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    run(ctx, args, shape(Op::Union, true, "zunionstore"))
}

pub(super) fn zinterstore(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    run(ctx, args, shape(Op::Inter, true, "zinterstore"))
}

pub(super) fn zdiffstore(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    run(ctx, args, shape(Op::Diff, true, "zdiffstore"))
}

pub(super) fn zintercard(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let shape = Shape {
        cardinality: true,
        ..shape(Op::Inter, false, "zintercard")
    };
    run(ctx, args, shape)
}
