//! SYNC: turns the connection into a replica. The server answers with
//! the dataset as an RDB file, then streams every write the log receives
//! (`server/replicas.rs`).

use super::table::*;
use super::{CmdResult, Ctx};
use crate::resp::Args;

pub(super) fn sync(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    // The server sends the payload once the command returns, so the
    // snapshot and the stream meet exactly between two commands.
    ctx.session.sync_requested = true;
    Ok(())
}

/// The commands this file implements.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("sync", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, K0, "server", "Attaches a replica: the dataset, then every write.", sync),
];
