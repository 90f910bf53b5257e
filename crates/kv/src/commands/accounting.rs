//! What INFO commandstats, errorstats and latencystats count, recorded
//! where commands run ([`super::execute`], [`super::run`]): a refusal
//! before a command runs is a rejected call, an error the command itself
//! replies is a failed call; both count in errorstats by error code. Replay
//! of the log is not counted, as Redis does not count loading its AOF.
//! Also the refusal of protected commands (DEBUG, MODULE) per
//! `enable-debug-command` and `enable-module-command`.

use crate::cmdstats::CommandName;

use super::{config, CmdError, CommandSpec, Ctx};

/// Why DEBUG or MODULE may not run for this client, if they may not
/// (`enable-debug-command`, `enable-module-command`: no, yes or local).
pub(super) fn protected_refusal(
    ctx: &Ctx<'_>,
    container: Option<&CommandSpec>,
    spec: &CommandSpec,
) -> Option<String> {
    let (command, directive) = match container.unwrap_or(spec).name {
        "debug" => ("DEBUG", "enable-debug-command"),
        "module" => ("MODULE", "enable-module-command"),
        _ => return None,
    };
    let allowed = if command == "DEBUG" {
        ctx.state.config.enable_debug_command
    } else {
        ctx.state.config.enable_module_command
    };
    if ctx.session.is_replay || allowed.allows(config::client_is_local(ctx)) {
        return None;
    }
    Some(format!(
        "ERR {command} command not allowed. If the {directive} option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server."
    ))
}

/// The name INFO commandstats counts a command under.
pub(crate) fn stats_name(
    container: Option<&'static CommandSpec>,
    spec: &'static CommandSpec,
) -> CommandName {
    match container {
        Some(c) => (c.name, spec.name),
        None => (spec.name, ""),
    }
}

/// Replies error `text` to a command refused before it ran (`name`, or
/// `None` for an unknown command).
pub(super) fn reject(ctx: &mut Ctx<'_>, name: Option<CommandName>, text: &str) {
    ctx.reply.error(text);
    if ctx.session.is_replay {
        return;
    }
    let table = &mut ctx.state.stats.commands;
    table.error(text);
    if let Some(name) = name {
        table.of(name).rejected_calls += 1;
    }
}

/// Counts one call of `name` that took `elapsed` and failed with `error`.
pub(super) fn record_call(
    ctx: &mut Ctx<'_>,
    name: CommandName,
    elapsed: std::time::Duration,
    error: Option<&CmdError>,
) {
    let counted = std::mem::take(&mut ctx.session.error_counted);
    let failed = std::mem::take(&mut ctx.session.failed_in_reply) || error.is_some();
    if ctx.session.is_replay {
        return;
    }
    let tracking = ctx.state.config.latency_tracking;
    let table = &mut ctx.state.stats.commands;
    if let Some(e) = error.filter(|_| !counted) {
        table.error(e);
    }
    let stats = table.of(name);
    stats.calls += 1;
    stats.usec += elapsed.as_micros() as u64;
    stats.failed_calls += u64::from(failed);
    if tracking {
        stats.latency.record(elapsed);
    }
}
