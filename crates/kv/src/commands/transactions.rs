//! MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! EXEC runs the queued commands back to back in the single-threaded event
//! loop, so no other client interleaves; everything they log goes into one
//! log record, wrapped in MULTI/EXEC, so a crash keeps all or none of it.

use std::borrow::Cow;

use super::flags::{STALE, WRITE};
use super::table::*;
use super::{resolve, run, CmdResult, Ctx, QueuedCommand, SegmentWalk, Session};
use crate::keyspace::Keyspace;
use crate::resp::Args;

pub(super) fn multi(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    if ctx.session.multi.is_some() {
        return Err(Cow::Borrowed("ERR MULTI calls can not be nested"));
    }
    ctx.session.multi = Some(Vec::new());
    ctx.session.multi_error = false;
    ctx.reply.ok();
    Ok(())
}

/// Forgets every key `session` watches.
pub fn unwatch_all(ks: &mut Keyspace, session: &mut Session) {
    for (db, key, _) in session.watched.drain(..) {
        ks.unwatch(db, &key);
    }
}

pub(super) fn discard(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    if ctx.session.multi.take().is_none() {
        return Err(Cow::Borrowed("ERR DISCARD without MULTI"));
    }
    unwatch_all(&mut ctx.state.keyspace, ctx.session);
    ctx.reply.ok();
    Ok(())
}

/// Lays owned arguments out in one buffer so they can be viewed as [`Args`].
pub fn flatten(command: &[Vec<u8>]) -> (Vec<u8>, Vec<(usize, usize)>) {
    let mut buf = Vec::with_capacity(command.iter().map(Vec::len).sum());
    let mut ranges = Vec::with_capacity(command.len());
    for arg in command {
        ranges.push((buf.len(), buf.len() + arg.len()));
        buf.extend_from_slice(arg);
    }
    (buf, ranges)
}

pub(super) fn exec(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let Some(queue) = ctx.session.multi.take() else {
        return Err(Cow::Borrowed("ERR EXEC without MULTI"));
    };
    if ctx.session.multi_error {
        unwatch_all(&mut ctx.state.keyspace, ctx.session);
        return Err(Cow::Borrowed(
            "EXECABORT Transaction discarded because of previous errors.",
        ));
    }
    if let Some(why) = refused_as_a_whole(ctx, &queue) {
        unwatch_all(&mut ctx.state.keyspace, ctx.session);
        return Err(Cow::Owned(format!(
            "EXECABORT Transaction discarded because of: {why}"
        )));
    }
    let touched = ctx.session.watched.iter().any(|(db, key, seen)| {
        // A key that expired since the WATCH changed, even if nothing
        // has removed it yet.
        let ks = &ctx.state.keyspace;
        ks.watch_version(*db, key) != *seen || ks.is_stale(*db, key)
    });
    unwatch_all(&mut ctx.state.keyspace, ctx.session);
    if touched {
        ctx.reply.null_array();
        return Ok(());
    }
    if ctx.state.keyspace.capturing() {
        capture_before_exec(ctx, &queue);
    }
    ctx.reply.array(queue.len());
    ctx.session.in_exec = true;
    for command in &queue {
        let (buf, ranges) = flatten(command);
        let args = Args::new(&buf, &ranges);
        match resolve(&args) {
            Ok((container, spec)) => match super::acl_check::at_exec(ctx, container, spec, &args) {
                Some(text) => ctx.reply.error(&text),
                None => run(ctx, container, spec, &args),
            },
            Err(e) => ctx.reply.error(&e),
        }
    }
    ctx.session.in_exec = false;
    Ok(())
}

/// Why EXEC must refuse the whole transaction, as Redis checks it for the
/// union of the queued commands' flags: a command that may grow memory
/// while memory is over `maxmemory`, or a write while the log has failed.
fn refused_as_a_whole(ctx: &Ctx<'_>, queue: &[QueuedCommand]) -> Option<String> {
    if ctx.session.is_replay {
        return None;
    }
    let mut flags = 0;
    let mut all_stale = true;
    for command in queue {
        let (buf, ranges) = flatten(command);
        if let Ok((_, spec)) = resolve(&Args::new(&buf, &ranges)) {
            flags |= spec.flags;
            all_stale &= spec.flags & STALE != 0;
        }
    }
    // A stale replica refuses EXEC if any queued command needs fresh data.
    let as_whole = (flags & !STALE) | if all_stale { STALE } else { 0 };
    if let Some(why) = super::replication::refusal(ctx, as_whole) {
        return Some(why.to_string());
    }
    if flags & WRITE != 0 {
        if let Some(why) = &ctx.state.log_failure {
            return Some(format!("MISCONF Errors writing to the AOF file: {why}"));
        }
    }
    if flags & super::flags::DENYOOM != 0 && ctx.state.out_of_memory {
        return Some("OOM command not allowed when used memory > 'maxmemory'.".into());
    }
    None
}

/// Rule C1 for a transaction (`keyspace/capture.rs`): the segments of all
/// its write commands are captured together before the first runs, so a
/// capture never falls inside the transaction's record.
fn capture_before_exec(ctx: &mut Ctx<'_>, queue: &[QueuedCommand]) {
    let mut walk = SegmentWalk::new(ctx.session.db, ctx.state.keyspace.databases());
    let mut segments = Vec::new();
    for command in queue {
        let (buf, ranges) = flatten(command);
        let args = Args::new(&buf, &ranges);
        match resolve(&args) {
            Ok((_, spec)) if spec.flags & WRITE != 0 || spec.name == "select" => {
                walk.step(spec, &args, &mut segments)
            }
            _ => {}
        }
    }
    segments.sort_unstable();
    segments.dedup();
    ctx.state.keyspace.capture_before(&segments);
}

pub(super) fn watch(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    if ctx.session.multi.is_some() {
        return Err(Cow::Borrowed("ERR WATCH inside MULTI is not allowed"));
    }
    let db = ctx.session.db;
    for key in args.iter().skip(1) {
        // Touching an expired key here makes the expiry count as a change
        // before the WATCH, not after it.
        ctx.state.keyspace.contains(db, key);
        let version = ctx.state.keyspace.watch(db, key);
        ctx.session.watched.push((db, key.into(), version));
    }
    ctx.reply.ok();
    Ok(())
}

pub(super) fn unwatch(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    unwatch_all(&mut ctx.state.keyspace, ctx.session);
    ctx.reply.ok();
    Ok(())
}

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("multi", 1, C | NOQUEUE | ALLOW_BUSY | LOADING | NOSCRIPT | STALE, K0, "transactions", "Starts a transaction.", multi),
    cmd!("exec", 1, NOQUEUE | NOSCRIPT | LOADING | STALE | SKIP_SLOWLOG, K0, "transactions", "Runs a transaction.", exec),
    cmd!("discard", 1, C | NOQUEUE | ALLOW_BUSY | LOADING | NOSCRIPT | STALE, K0, "transactions", "Discards a transaction.", discard),
    cmd!("watch", -2, C | NOQUEUE | ALLOW_BUSY | LOADING | NOSCRIPT | STALE, KALL, "transactions", "Watches keys for EXEC.", watch),
    cmd!("unwatch", 1, C | NOQUEUE | ALLOW_BUSY | LOADING | NOSCRIPT | STALE, K0, "transactions", "Forgets watched keys.", unwatch),
];
