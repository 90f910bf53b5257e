//! MODULE: Ferrite loads no Redis modules (they are shared objects written
//! against Redis's C module API, which Ferrite does not provide). The
//! command exists so clients and tools that probe it get Redis's answers:
//! refused unless `enable-module-command` allows it (the check is in
//! `accounting.rs`, as for DEBUG); when allowed, LIST is empty, LOAD and
//! LOADEX fail as Redis does for a library it cannot load (with the reason
//! in the server log), and UNLOAD finds no module of that name.

use std::borrow::Cow;

use super::introspect::help_reply;
use super::table::*;
use super::{CmdResult, Ctx};
use crate::resp::Args;

fn list(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    ctx.reply.array(0);
    Ok(())
}

fn load(_ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    tracing::warn!(
        "Module {} failed to load: Ferrite does not load Redis modules",
        String::from_utf8_lossy(args.get(2))
    );
    Err(Cow::Borrowed(
        "ERR Error loading the extension. Please check the server logs.",
    ))
}

fn unload(_ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    Err(Cow::Borrowed(
        "ERR Error unloading module: no such module with that name",
    ))
}

fn help(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    help_reply(
        ctx.reply,
        "MODULE",
        &[
            "LIST",
            "    Return a list of loaded modules.",
            "LOAD <path> [<arg> ...]",
            "    Load a module library from <path>, passing to it any optional arguments.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    Load a module library from <path>, while passing it module configurations and optional arguments.",
            "UNLOAD <name>",
            "    Unload a module.",
        ],
    );
    Ok(())
}

/// The commands this file implements.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("module", -2, 0, K0, "server", "Manages Redis modules (Ferrite loads none).", list).with_subcommands(MODULE),
];

/// MODULE's subcommands.
#[rustfmt::skip]
static MODULE: &[CommandSpec] = &[
    cmd!("help", 2, LOADING | STALE, K0, "server", "Describes MODULE's subcommands.", help),
    cmd!("list", 2, ADMIN | NOSCRIPT, K0, "server", "Lists the loaded modules (none).", list).with_tips(&["nondeterministic_output_order"]),
    cmd!("load", -3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING, K0, "server", "Loads a module: always fails, Ferrite has no module API.", load),
    cmd!("loadex", -3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING, K0, "server", "Loads a module with configurations: always fails, Ferrite has no module API.", load),
    cmd!("unload", 3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING, K0, "server", "Unloads a module: there is none.", unload),
];
