//! SAVE, BGSAVE and LASTSAVE on Ferrite's persistence, which is its log.
//!
//! Every write is already in the log, so the dataset on disk is always
//! whole; what Redis's snapshots add is durability (SAVE) and a compact
//! copy (BGSAVE). SAVE makes every record appended so far durable before
//! it replies (the event loop syncs the log right after the command:
//! `server/mod.rs`). BGSAVE starts a log rewrite, Ferrite's snapshot: new
//! base parts holding the dataset, after which the older logs go.
//! LASTSAVE reports the last time either completed (or the start).

use std::borrow::Cow;

use super::acl;
use super::table::*;
use super::{errors, upper, CmdResult, Ctx};
use crate::resp::Args;

/// Refusal when there is no log to save to.
const NO_LOG: &str =
    "ERR Ferrite persists only through its log, and appendonly is no: nothing to save to";

fn save(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    if !ctx.state.config.appendonly {
        return Err(Cow::Borrowed(NO_LOG));
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
        return Err(Cow::Borrowed(NO_LOG));
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
