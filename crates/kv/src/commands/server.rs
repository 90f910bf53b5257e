//! Server commands: FLUSHDB, FLUSHALL, TIME, SHUTDOWN (COMMAND is in
//! `introspect.rs`, CONFIG and INFO in `config.rs`, LASTSAVE, SAVE and
//! BGSAVE in `persistence.rs`).

use std::borrow::Cow;

use super::acl;
use super::table::*;
use super::{errors, upper, CmdResult, Ctx};
use crate::resp::Args;

/// Whether FLUSHDB/FLUSHALL frees on the lazyfree thread: ASYNC, or no
/// option under `lazyfree-lazy-user-flush`.
fn flush_async(ctx: &Ctx<'_>, args: &Args<'_>) -> Result<bool, super::CmdError> {
    match args.len() {
        1 => Ok(ctx.state.config.lazyfree_lazy_user_flush),
        2 if upper(args, 1) == b"ASYNC" => Ok(true),
        2 if upper(args, 1) == b"SYNC" => Ok(false),
        _ => Err(Cow::Borrowed(errors::SYNTAX)),
    }
}

/// Empties database `db`, freeing its contents on the lazyfree thread
/// when `lazy`.
fn flush(ctx: &mut Ctx<'_>, db: usize, lazy: bool) {
    let keys = ctx.state.keyspace.db(db).len() as u64;
    let old = ctx.state.keyspace.flush_db(db);
    if lazy {
        ctx.state.lazyfree.free_many(old, keys);
    }
}

pub(super) fn flushdb(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let lazy = flush_async(ctx, args)?;
    let db = ctx.session.db;
    flush(ctx, db, lazy);
    ctx.propagate(&[b"FLUSHDB"]);
    ctx.reply.ok();
    Ok(())
}

pub(super) fn flushall(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let lazy = flush_async(ctx, args)?;
    for db in 0..ctx.state.keyspace.databases() {
        flush(ctx, db, lazy);
    }
    crate::rdb::persist::stop_bgsave(ctx.state);
    ctx.propagate(&[b"FLUSHALL"]);
    ctx.reply.ok();
    Ok(())
}

pub(super) fn time(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    ctx.reply.array(2);
    ctx.reply.bulk(now.as_secs().to_string().as_bytes());
    ctx.reply.bulk(now.subsec_micros().to_string().as_bytes());
    Ok(())
}

pub(super) fn shutdown(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    use crate::server::shutdown;
    let mut flags = shutdown::Flags::default();
    let (mut abort, mut now) = (false, false);
    for i in 1..args.len() {
        match upper(args, i).as_slice() {
            b"NOSAVE" => flags.nosave = true,
            b"SAVE" => flags.save = true,
            b"FORCE" => flags.force = true,
            b"NOW" => now = true,
            b"ABORT" => abort = true,
            _ => return Err(Cow::Borrowed(errors::SYNTAX)),
        }
    }
    // ABORT takes no other option; SAVE and NOSAVE exclude each other.
    let any = flags.save || flags.nosave || flags.force || now;
    if (flags.save && flags.nosave) || (abort && any) {
        return Err(Cow::Borrowed(errors::SYNTAX));
    }
    if abort {
        if !shutdown::abort(ctx.state) {
            return Err(Cow::Borrowed("ERR No shutdown in progress."));
        }
        ctx.reply.simple("OK");
        return Ok(());
    }
    if !shutdown::prepare(ctx.state, flags) {
        return Err(Cow::Borrowed("ERR Errors trying to SHUTDOWN. Check logs."));
    }
    // No reply: like Redis, the server closes every connection as it exits,
    // after the log is flushed and synced.
    ctx.session.close_after_reply = true;
    Ok(())
}

/// Schedules a rewrite; the event loop starts it after this iteration's
/// commands, at a point where every command run so far is in the log (or,
/// with `appendonly no`, in the base parts it writes).
pub(super) fn bgrewriteaof(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    // With `appendonly no` too, as Redis: the rewrite writes the dataset
    // as base parts (`server/aof_switch.rs`).
    let rewrite = &mut ctx.state.rewrite;
    if rewrite.running_since.is_some() || rewrite.scheduled {
        return Err(Cow::Borrowed(
            "ERR Background append only file rewriting already in progress",
        ));
    }
    rewrite.scheduled = true;
    // Inside a transaction the rewrite starts after EXEC: Redis says so.
    ctx.reply.simple(if ctx.session.in_exec {
        "Background append only file rewriting scheduled"
    } else {
        "Background append only file rewriting started"
    });
    Ok(())
}

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("flushdb", -1, WRITE | WHOLE_DB, K0, "server", "Deletes every key of the database.", flushdb).with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]).with_acl(acl::DANGEROUS | acl::KEYSPACE),
    cmd!("flushall", -1, WRITE | WHOLE_DB, K0, "server", "Deletes every key.", flushall).with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]).with_acl(acl::DANGEROUS | acl::KEYSPACE),
    cmd!("time", 1, C | RANDOM | LOADING | STALE, K0, "server", "Returns the server time.", time).with_tips(&["nondeterministic_output"]),
    cmd!("shutdown", -1, ADMIN | NO_MULTI | NOSCRIPT | LOADING | STALE | ALLOW_BUSY, K0, "server", "Flushes the log and stops.", shutdown),
    cmd!("bgrewriteaof", 1, ADMIN | NO_ASYNC_LOADING | NOSCRIPT, K0, "server", "Rewrites the log (issue #5).", bgrewriteaof),
];
