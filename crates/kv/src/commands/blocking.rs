//! Blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN,
//! BZPOPMAX, BZMPOP, WAIT), the non-blocking ZMPOP they share code with,
//! and the CLIENT subcommands that act on blocked or paused clients.
//!
//! A blocking command that finds data serves itself at once, as its
//! non-blocking twin, and logs that effect (LPOP, LMOVE, ZPOPMIN...). When
//! it finds nothing it leaves a [`BlockRequest`] in the session and replies
//! nothing; the event loop (`server/blocking.rs`) parks the client and,
//! when a write makes one of its keys hold data again, runs the same
//! command once more with [`Session::serving`] naming that key. Inside
//! MULTI (and while replaying the log) these commands never block: they
//! answer as a timeout would, at once.

use std::borrow::Cow;

use super::lists::{keys_after_numkeys, lmove_generic, mpop_first, parse_multi_pop, side_arg};
use super::table::*;
use super::{errors, int_arg, upper, CmdError, CmdResult, Ctx, Session};
use crate::keyspace::events::{LIST, ZSET};
use crate::keyspace::Keyspace;
use crate::resp::Args;
use crate::types::number::parse_f64;
use crate::types::{Bytes, Value};

/// What a client blocks for: decides which keys can serve it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKind {
    /// A list pop or move: served by a key holding a list.
    List,
    /// A sorted-set pop: served by a key holding a sorted set.
    ZSet,
    /// XREAD or XREADGROUP: served by a key holding a stream.
    Stream,
    /// WAIT: served by nothing but its timeout.
    Wait,
}

/// Left in [`Session::block`] by a blocking command that found nothing.
#[derive(Clone, Debug)]
pub struct BlockRequest {
    /// The keys, in the client's database, whose change may serve it.
    pub keys: Vec<Bytes>,
    /// Unix ms at which it times out; `None` waits forever.
    pub deadline_ms: Option<i64>,
    /// What serves it, and what its timeout replies.
    pub kind: BlockKind,
    /// The command to run when a key is ready, if not the one sent (XREAD
    /// runs with its `$` IDs replaced by what they stood for).
    pub command: Option<super::QueuedCommand>,
}

/// CLIENT PAUSE's mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PauseMode {
    /// Only commands that write (or may be replicated) wait.
    Write,
    /// Every command waits.
    All,
}

/// A CLIENT PAUSE in force.
#[derive(Clone, Copy, Debug)]
pub struct Pause {
    /// Which commands wait.
    pub mode: PauseMode,
    /// Unix ms at which it ends by itself.
    pub until_ms: i64,
}

/// Whether `session` may block now: never inside a transaction or while
/// the log is replayed.
pub(super) fn may_block(session: &Session) -> bool {
    !session.in_exec && !session.is_replay
}

/// Parses a timeout in seconds (a float) into an absolute deadline in Unix
/// ms, rounding up to whole milliseconds as Redis does; `None` for 0.
fn timeout_seconds(ctx: &Ctx<'_>, text: &[u8]) -> Result<Option<i64>, CmdError> {
    let seconds = parse_f64(text)
        .filter(|v| !v.is_nan())
        .ok_or(Cow::Borrowed("ERR timeout is not a float or out of range"))?;
    let ms = (seconds * 1000.0).ceil();
    // C converts an out-of-range double to the most negative long long.
    let ms = if ms.is_finite() && ms.abs() < 9.2e18 {
        ms as i64
    } else {
        i64::MIN
    };
    deadline(ctx, ms)
}

/// Parses a timeout in milliseconds (an integer) into a deadline.
pub(super) fn timeout_millis(ctx: &Ctx<'_>, text: &[u8]) -> Result<Option<i64>, CmdError> {
    let ms = crate::types::number::parse_i64(text).ok_or(Cow::Borrowed(
        "ERR timeout is not an integer or out of range",
    ))?;
    deadline(ctx, ms)
}

fn deadline(ctx: &Ctx<'_>, ms: i64) -> Result<Option<i64>, CmdError> {
    if ms < 0 {
        return Err(Cow::Borrowed("ERR timeout is negative"));
    }
    Ok((ms > 0).then(|| ms.saturating_add(ctx.state.keyspace.now_ms)))
}

/// The keys a blocked client may look at now: all of them, or only the
/// one the event loop serves it for.
fn candidates<'a>(session: &Session, keys: impl Iterator<Item = &'a [u8]>) -> Vec<&'a [u8]> {
    match &session.serving {
        Some(ready) => keys.filter(|k| *k == &ready[..]).take(1).collect(),
        None => keys.collect(),
    }
}

/// Nothing to serve: block, or answer as a timeout when blocking is not
/// allowed (`null` is that answer).
fn block_or(
    ctx: &mut Ctx<'_>,
    keys: Vec<Bytes>,
    deadline_ms: Option<i64>,
    kind: BlockKind,
    null: fn(&mut crate::resp::ReplyBuf),
) {
    if may_block(ctx.session) {
        ctx.session.block = Some(BlockRequest {
            keys,
            deadline_ms,
            kind,
            command: None,
        });
    } else {
        null(ctx.reply);
    }
}

fn owned_keys<'a>(keys: impl Iterator<Item = &'a [u8]>) -> Vec<Bytes> {
    keys.map(Bytes::from).collect()
}

fn list_has_elements(ks: &mut Keyspace, db: usize, key: &[u8]) -> Result<bool, CmdError> {
    match ks.get(db, key) {
        None => Ok(false),
        Some(Value::List(l)) => Ok(!l.is_empty()),
        Some(_) => Err(Cow::Borrowed(errors::WRONGTYPE)),
    }
}

/// BLPOP and BRPOP: `key... timeout`.
fn blocking_pop(ctx: &mut Ctx<'_>, args: &Args<'_>, left: bool) -> CmdResult {
    let deadline = timeout_seconds(ctx, args.get(args.len() - 1))?;
    let all = (1..args.len() - 1).map(|i| args.get(i));
    let db = ctx.session.db;
    for key in candidates(ctx.session, all.clone()) {
        if !list_has_elements(&mut ctx.state.keyspace, db, key)? {
            continue;
        }
        let popped = super::lists::pop_elements(&mut ctx.state.keyspace, db, key, left, 1);
        ctx.notify(LIST, super::lists::pop_event(left), key);
        ctx.notify_del_if_gone(key);
        let name: &[u8] = if left { b"LPOP" } else { b"RPOP" };
        ctx.propagate(&[name, key]);
        ctx.reply.array(2);
        ctx.reply.bulk(key);
        ctx.reply.bulk(popped.first().map_or(&[][..], |v| &v[..]));
        return Ok(());
    }
    block_or(ctx, owned_keys(all), deadline, BlockKind::List, |r| {
        r.null_array()
    });
    Ok(())
}

pub(super) fn blpop(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    blocking_pop(ctx, args, true)
}

pub(super) fn brpop(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    blocking_pop(ctx, args, false)
}

/// BLMOVE and BRPOPLPUSH once their arguments are parsed.
fn blocking_move(
    ctx: &mut Ctx<'_>,
    args: &Args<'_>,
    sides: (bool, bool),
    deadline: Option<i64>,
) -> CmdResult {
    let (src, dst) = (args.get(1), args.get(2));
    let db = ctx.session.db;
    let ready = !candidates(ctx.session, std::iter::once(src)).is_empty();
    if ready && list_has_elements(&mut ctx.state.keyspace, db, src)? {
        let rpoplpush = args.get(0).eq_ignore_ascii_case(b"brpoplpush");
        return lmove_generic(ctx, src, dst, sides.0, sides.1, rpoplpush);
    }
    block_or(
        ctx,
        vec![Bytes::from(src)],
        deadline,
        BlockKind::List,
        |r| r.null(),
    );
    Ok(())
}

pub(super) fn blmove(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let from_left = side_arg(args, 3)?;
    let to_left = side_arg(args, 4)?;
    let deadline = timeout_seconds(ctx, args.get(5))?;
    blocking_move(ctx, args, (from_left, to_left), deadline)
}

pub(super) fn brpoplpush(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let deadline = timeout_seconds(ctx, args.get(3))?;
    blocking_move(ctx, args, (false, true), deadline)
}

pub(super) fn blmpop(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let m = parse_multi_pop(args, 2)?;
    let left = side_arg(args, m.side_at)?;
    let deadline = timeout_seconds(ctx, args.get(1))?;
    let all = (m.first_key..m.first_key + m.numkeys).map(|i| args.get(i));
    let keys = candidates(ctx.session, all.clone());
    if !mpop_first(ctx, keys.into_iter(), left, m.count)? {
        block_or(ctx, owned_keys(all), deadline, BlockKind::List, |r| {
            r.null_array()
        });
    }
    Ok(())
}

fn zset_has_members(ks: &mut Keyspace, db: usize, key: &[u8]) -> Result<bool, CmdError> {
    match ks.get(db, key) {
        None => Ok(false),
        Some(Value::ZSet(z)) => Ok(!z.is_empty()),
        Some(_) => Err(Cow::Borrowed(errors::WRONGTYPE)),
    }
}

/// Pops up to `count` members, lowest first (highest with `max`), and
/// deletes the key once empty.
fn zpop_members(
    ks: &mut Keyspace,
    db: usize,
    key: &[u8],
    max: bool,
    count: usize,
) -> Vec<(Bytes, f64)> {
    let mut popped = Vec::new();
    if let Some(Value::ZSet(z)) = ks.get_mut(db, key) {
        while popped.len() < count {
            match z.pop(max) {
                Some(item) => popped.push(item),
                None => break,
            }
        }
    }
    ks.remove_if_empty(db, key);
    popped
}

/// The event a pop of the lowest (highest with `max`) members raises.
fn zpop_event(max: bool) -> &'static str {
    if max {
        "zpopmax"
    } else {
        "zpopmin"
    }
}

fn zpop_name(max: bool) -> &'static [u8] {
    if max {
        b"ZPOPMAX"
    } else {
        b"ZPOPMIN"
    }
}

/// BZPOPMIN and BZPOPMAX: `key... timeout`, replying `[key, member, score]`.
fn blocking_zpop(ctx: &mut Ctx<'_>, args: &Args<'_>, max: bool) -> CmdResult {
    let deadline = timeout_seconds(ctx, args.get(args.len() - 1))?;
    let all = (1..args.len() - 1).map(|i| args.get(i));
    let db = ctx.session.db;
    for key in candidates(ctx.session, all.clone()) {
        if !zset_has_members(&mut ctx.state.keyspace, db, key)? {
            continue;
        }
        let popped = zpop_members(&mut ctx.state.keyspace, db, key, max, 1);
        let Some((member, score)) = popped.first() else {
            continue;
        };
        ctx.notify(ZSET, zpop_event(max), key);
        ctx.notify_del_if_gone(key);
        ctx.propagate(&[zpop_name(max), key]);
        ctx.reply.array(3);
        ctx.reply.bulk(key);
        ctx.reply.bulk(member);
        ctx.reply.double(*score);
        return Ok(());
    }
    block_or(ctx, owned_keys(all), deadline, BlockKind::ZSet, |r| {
        r.null_array()
    });
    Ok(())
}

pub(super) fn bzpopmin(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    blocking_zpop(ctx, args, false)
}

pub(super) fn bzpopmax(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    blocking_zpop(ctx, args, true)
}

/// MIN or MAX (any case) as `true` for MAX.
fn min_max_arg(args: &Args<'_>, index: usize) -> Result<bool, CmdError> {
    match upper(args, index).as_slice() {
        b"MIN" => Ok(false),
        b"MAX" => Ok(true),
        _ => Err(Cow::Borrowed(errors::SYNTAX)),
    }
}

/// ZMPOP's and BZMPOP's pop from the first of `keys` holding members:
/// replies `[key, [[member, score]...]]`, logs ZPOPMIN/ZPOPMAX with a
/// count; `false` (nothing replied) when none holds members.
fn zmpop_first<'a>(
    ctx: &mut Ctx<'_>,
    keys: impl Iterator<Item = &'a [u8]>,
    max: bool,
    count: usize,
) -> Result<bool, CmdError> {
    let db = ctx.session.db;
    for key in keys {
        if !zset_has_members(&mut ctx.state.keyspace, db, key)? {
            continue;
        }
        let popped = zpop_members(&mut ctx.state.keyspace, db, key, max, count);
        ctx.notify(ZSET, zpop_event(max), key);
        ctx.notify_del_if_gone(key);
        let n = popped.len().to_string();
        ctx.propagate(&[zpop_name(max), key, n.as_bytes()]);
        ctx.reply.array(2);
        ctx.reply.bulk(key);
        ctx.reply.array(popped.len());
        for (member, score) in &popped {
            ctx.reply.array(2);
            ctx.reply.bulk(member);
            ctx.reply.double(*score);
        }
        return Ok(true);
    }
    Ok(false)
}

pub(super) fn zmpop(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let m = parse_multi_pop(args, 1)?;
    let max = min_max_arg(args, m.side_at)?;
    let keys = (m.first_key..m.first_key + m.numkeys).map(|i| args.get(i));
    if !zmpop_first(ctx, keys, max, m.count)? {
        ctx.reply.null_array();
    }
    Ok(())
}

pub(super) fn bzmpop(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let m = parse_multi_pop(args, 2)?;
    let max = min_max_arg(args, m.side_at)?;
    let deadline = timeout_seconds(ctx, args.get(1))?;
    let all = (m.first_key..m.first_key + m.numkeys).map(|i| args.get(i));
    let keys = candidates(ctx.session, all.clone());
    if !zmpop_first(ctx, keys.into_iter(), max, m.count)? {
        block_or(ctx, owned_keys(all), deadline, BlockKind::ZSet, |r| {
            r.null_array()
        });
    }
    Ok(())
}

/// WAIT numreplicas timeout: answers at once when enough replicas have
/// acknowledged the stream up to now (or the client may not block),
/// else blocks until they have (the server wakes it on their ACKs, and
/// asks them for one before it sleeps) or the timeout passes; either way
/// the reply is how many acknowledged.
pub(super) fn wait(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    if ctx.state.repl.is_replica() {
        return Err(Cow::Borrowed("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated."));
    }
    let wanted = int_arg(args, 1)?;
    let deadline = timeout_millis(ctx, args.get(2))?;
    let target = ctx.state.repl.offset;
    let acked = ctx.state.repl.acked(target);
    if wanted <= acked as i64 || !may_block(ctx.session) {
        ctx.reply.int(acked as i64);
        return Ok(());
    }
    let repl = &mut ctx.state.repl;
    repl.waiters.push(crate::server::repl::Waiter {
        id: ctx.session.id,
        target,
        wanted: wanted as usize,
    });
    repl.getack = true;
    block_or(ctx, Vec::new(), deadline, BlockKind::Wait, |r| r.int(0));
    Ok(())
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR].
pub(super) fn client_unblock(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    if args.len() > 4 {
        return Err(Cow::Borrowed(errors::SYNTAX));
    }
    let error = match args.len() {
        4 => match upper(args, 3).as_slice() {
            b"TIMEOUT" => false,
            b"ERROR" => true,
            _ => {
                return Err(Cow::Borrowed(
                    "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
                ))
            }
        },
        _ => false,
    };
    let id = int_arg(args, 2)?;
    let state = &mut *ctx.state;
    let done =
        u64::try_from(id).is_ok_and(|id| state.blocking.unblock(&mut state.keyspace, id, error));
    ctx.reply.int(i64::from(done));
    Ok(())
}

/// CLIENT PAUSE timeout [WRITE|ALL].
pub(super) fn client_pause(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    if args.len() > 4 {
        return Err(Cow::Borrowed(errors::SYNTAX));
    }
    let mode = match args.len() {
        4 => match upper(args, 3).as_slice() {
            b"WRITE" => PauseMode::Write,
            b"ALL" => PauseMode::All,
            _ => return Err(Cow::Borrowed("ERR CLIENT PAUSE mode must be WRITE or ALL")),
        },
        _ => PauseMode::All,
    };
    let until_ms = timeout_millis(ctx, args.get(2))?.unwrap_or(0);
    ctx.state.blocking.pause(Pause { mode, until_ms });
    // Keys stop expiring from the next command on (the loop keeps this
    // in step with the pause from then on).
    let now = ctx.state.keyspace.now_ms;
    ctx.state.keyspace.expiry_paused =
        ctx.state.blocking.pause_mode(now).is_some() || ctx.state.repl.is_replica();
    ctx.reply.ok();
    Ok(())
}

/// CLIENT UNPAUSE.
pub(super) fn client_unpause(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    ctx.state.blocking.unpause();
    ctx.state.keyspace.expiry_paused = ctx.state.repl.is_replica();
    ctx.reply.ok();
    Ok(())
}

/// Whether CLIENT PAUSE holds back command `spec` from `session` now: in
/// ALL mode every command, in WRITE mode those that write or may be
/// replicated, EXEC included when its queue holds one.
pub(super) fn paused(ctx: &mut Ctx<'_>, spec: &CommandSpec, args: &Args<'_>) -> bool {
    if ctx.session.is_replay || ctx.session.in_exec {
        return false;
    }
    let now = ctx.state.keyspace.now_ms;
    let Some(mode) = ctx.state.blocking.pause_mode(now) else {
        return false;
    };
    if mode == PauseMode::All {
        return true;
    }
    let replicated = WRITE | MAY_REPLICATE;
    // A script's declared flags stand for EVAL's and FCALL's own.
    let state = &*ctx.state;
    if super::scripting::command_flags(state, spec, args) & replicated != 0 {
        return true;
    }
    spec.name == "exec"
        && ctx.session.multi.iter().flatten().any(|queued| {
            let (buf, ranges) = super::flatten(queued);
            let args = Args::new(&buf, &ranges);
            super::resolve(&args).is_ok_and(|(_, s)| {
                super::scripting::command_flags(state, s, &args) & replicated != 0
            })
        })
}

/// Runs a blocked client's command again for the event loop, once a key
/// it waits on is ready ([`Session::serving`] names it). As [`super::run`]
/// minus the refusals and the call counting: Redis counts a blocking
/// command once, when it first runs, and serves it whatever happened
/// since; the rewrite's capture and pinning rules apply as to any write.
pub fn serve(ctx: &mut Ctx<'_>, args: &Args<'_>) {
    let Ok((container, spec)) = super::resolve(args) else {
        return;
    };
    let ks = &mut ctx.state.keyspace;
    if spec.has(WRITE) && ks.capturing() && super::spans_segments(spec) {
        let mut segments = Vec::new();
        let (db, databases) = (ctx.session.db, ks.databases());
        super::touched_segments(spec, args, db, databases, &mut segments);
        ctx.state.keyspace.capture_before(&segments);
    }
    if spec.has(WRITE) && ctx.state.keyspace.superseding() {
        super::before_write_during_rewrite(ctx, spec, args);
    }
    let started = std::time::Instant::now();
    let result = (spec.handler)(ctx, args);
    // Served, the command enters the slow log and the latency monitor as
    // sent (BLPOP, not the LPOP it logged), as Redis enters it on unblock.
    super::diagnostics::record(ctx, spec, args, started.elapsed().as_micros() as u64);
    if let Err(e) = result {
        // The call was counted when it blocked; its failure counts now,
        // as Redis counts an error a blocked client is served.
        let name = super::stats_name(container, spec);
        let table = &mut ctx.state.stats.commands;
        table.error(&e);
        table.of(name).failed_calls += 1;
        ctx.reply.error(&e);
    }
}

fn blmpop_keys(args: &Args<'_>, out: &mut Vec<usize>) {
    keys_after_numkeys(args, 2, out);
}

fn zmpop_keys(args: &Args<'_>, out: &mut Vec<usize>) {
    keys_after_numkeys(args, 1, out);
}

/// Blocking writes: `@blocking`, refused in scripts.
const BW: u32 = WRITE | NOSCRIPT | BLOCKING;

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("blpop", -3, BW, (1, -2, 1), "list", "Pops the first element of the first non-empty list, or blocks.", blpop),
    cmd!("brpop", -3, BW, (1, -2, 1), "list", "Pops the last element of the first non-empty list, or blocks.", brpop),
    cmd!("blmove", 6, BW | DENYOOM, (1, 2, 1), "list", "Moves an element between lists, or blocks.", blmove),
    cmd!("brpoplpush", 4, BW | DENYOOM, (1, 2, 1), "list", "Moves the last element to another list's head, or blocks.", brpoplpush),
    cmd!("blmpop", -5, WRITE | BLOCKING, K0, "list", "Pops elements from the first non-empty list, or blocks.", blmpop).with_key_finder(blmpop_keys).with_key_searches(&[keynum_at(2)]),
    cmd!("bzpopmin", -3, BW | FAST, (1, -2, 1), "sorted-set", "Pops the lowest member of the first non-empty sorted set, or blocks.", bzpopmin),
    cmd!("bzpopmax", -3, BW | FAST, (1, -2, 1), "sorted-set", "Pops the highest member of the first non-empty sorted set, or blocks.", bzpopmax),
    cmd!("bzmpop", -5, WRITE | BLOCKING, K0, "sorted-set", "Pops members from the first non-empty sorted set, or blocks.", bzmpop).with_key_finder(blmpop_keys).with_key_searches(&[keynum_at(2)]),
    cmd!("zmpop", -4, WRITE, K0, "sorted-set", "Pops members from the first non-empty sorted set.", zmpop).with_key_finder(zmpop_keys).with_key_searches(&[keynum_at(1)]),
    cmd!("wait", 3, NOSCRIPT, K0, "generic", "Waits for replicas to acknowledge writes.", wait).with_tips(&["request_policy:all_shards", "response_policy:agg_min"]).with_acl(super::acl::CONNECTION),
];
