//! SAVE, BGSAVE and LASTSAVE.
//!
//! With `appendonly no` they act on `dump.rdb` as Redis's do
//! (`rdb::persist`, `docs/rdb.md`): SAVE writes it on the event loop,
//! BGSAVE on a worker thread from a snapshot.
//!
//! With `appendonly yes` Ferrite's persistence is its log. Every write is already in the log, so the dataset on disk is always
//! whole; what Redis's snapshots add is durability (SAVE) and a compact
//! copy (BGSAVE). SAVE makes every record appended so far durable before
//! it replies (the event loop syncs the log right after the command:
//! `server/mod.rs`). BGSAVE starts a log rewrite, Ferrite's snapshot: new
//! base parts holding the dataset, after which the older logs go.
//! LASTSAVE reports the last time either completed (or the start).

use std::borrow::Cow;

use super::acl;
use super::scripting::library;
use super::table::*;
use super::{errors, upper, CmdResult, Ctx};
use crate::rdb::persist;
use crate::resp::Args;

const IN_PROGRESS: &str = "ERR Background save already in progress";

fn save(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    if !ctx.state.config.appendonly {
        if ctx.state.rdb.job.is_some() {
            return Err(Cow::Borrowed(IN_PROGRESS));
        }
        return match persist::save_now(ctx.state) {
            Ok(_) => {
                ctx.reply.ok();
                Ok(())
            }
            Err(e) => {
                tracing::warn!("SAVE failed: {e}");
                Err(Cow::Borrowed("ERR"))
            }
        };
    }
    // The reply (OK, or the failure) comes from the event loop once the
    // log is durable.
    ctx.state.save_requested = true;
    Ok(())
}

fn bgsave(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let schedule = match args.len() {
        1 => false,
        2 if upper(args, 1) == b"SCHEDULE" => true,
        _ => return Err(Cow::Borrowed(errors::SYNTAX)),
    };
    if !ctx.state.config.appendonly {
        return bgsave_rdb(ctx, schedule);
    }
    let rewrite = &mut ctx.state.rewrite;
    if rewrite.scheduled {
        return Err(Cow::Borrowed("ERR Background save already in progress"));
    }
    if rewrite.running_since.is_some() {
        if !schedule {
            return Err(Cow::Borrowed("ERR Background save already in progress"));
        }
        rewrite.scheduled = true;
        ctx.reply.simple("Background saving scheduled");
        return Ok(());
    }
    rewrite.scheduled = true;
    ctx.reply.simple("Background saving started");
    Ok(())
}

/// BGSAVE with `appendonly no`: the producer writes `dump.rdb`; with
/// SCHEDULE while another production runs, it starts after it.
fn bgsave_rdb(ctx: &mut Ctx<'_>, schedule: bool) -> CmdResult {
    if ctx.state.rdb.job.is_some() {
        if !schedule || ctx.state.rdb.scheduled {
            return Err(Cow::Borrowed(IN_PROGRESS));
        }
        ctx.state.rdb.scheduled = true;
        ctx.reply.simple("Background saving scheduled");
        return Ok(());
    }
    persist::start_bgsave(ctx.state).map_err(|e| Cow::Owned(format!("ERR {e}")))?;
    ctx.reply.simple("Background saving started");
    Ok(())
}

/// Loads function libraries read from `dump.rdb` at start-up, as FUNCTION
/// LOAD REPLACE would; a library that fails is an error naming it.
pub(crate) fn load_libraries(
    state: &mut crate::state::State,
    codes: &[Vec<u8>],
) -> Result<(), String> {
    for code in codes {
        let (name, lib) = library::compile(code, false)?;
        library::commit(&name, code).map_err(|e| e.to_string())?;
        state.functions.insert(name, lib);
    }
    Ok(())
}

fn lastsave(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    ctx.reply.int(ctx.state.start_unix_s);
    Ok(())
}

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("save", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, K0, "server", "Makes every write so far durable.", save),
    cmd!("bgsave", -1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING, K0, "server", "Starts a snapshot (a log rewrite).", bgsave),
    cmd!("lastsave", 1, LOADING | STALE | FAST | RANDOM, K0, "server", "Returns when the data was last saved as a whole.", lastsave).with_tips(&["nondeterministic_output"]).with_acl(acl::bit("admin") | acl::DANGEROUS),
];
