//! EVAL, EVALSHA, their read-only forms, and SCRIPT LOAD / EXISTS / FLUSH /
//! HELP: Lua 5.1 scripts run in the event loop, so nothing interleaves
//! with one. A script's commands go through the same dispatch as a
//! client's, and each write logs itself as it runs: the log holds the
//! script's effects (wrapped in MULTI/EXEC when there are several, as
//! any record with several commands is), never the EVAL, so replaying the
//! log needs no interpreter and gives the same data.
//!
//!
//! A script that runs past `busy-reply-threshold` lets the event loop
//! serve other clients from its instruction hook (`run.rs`, `busy.rs`):
//! they get BUSY, except SCRIPT KILL, FUNCTION KILL, SHUTDOWN NOSAVE and
//! the other `allow-busy` commands.

mod api;
mod busy;
mod cluster_check;
mod convert;
mod engine;
pub(super) mod flags;
pub(super) mod library;
mod libs;
pub(super) mod run;

pub use busy::{
    busy_command, stats_reply as busy_stats_reply, BusyOutcome, BusyView, Reenter, NOTBUSY,
};
pub use engine::cache_figures as script_cache_figures;
pub use library::Libraries;

use std::borrow::Cow;

use super::introspect::help_reply;
use super::table::*;
use super::{int_arg, CmdError, CmdResult, Ctx};
use crate::resp::Args;
use crate::types::Bytes;

/// The key finder for EVAL and friends: `numkeys` keys after it.
pub(super) fn eval_keys(args: &Args<'_>, out: &mut Vec<usize>) {
    let Some(n) = crate::types::number::parse_i64(args.get(2)) else {
        return;
    };
    if n <= 0 || n > args.len().saturating_sub(3) as i64 {
        return;
    }
    out.extend(3..3 + n as usize);
}

/// A script's KEYS and ARGV.
type Split<'a> = (Vec<&'a [u8]>, Vec<&'a [u8]>);

/// Checks `numkeys` and splits the arguments into KEYS and ARGV.
fn split_arguments<'a>(args: &Args<'a>) -> Result<Split<'a>, CmdError> {
    let n = int_arg(args, 2)?;
    if n < 0 {
        return Err(Cow::Borrowed("ERR Number of keys can't be negative"));
    }
    if n > args.len().saturating_sub(3) as i64 {
        return Err(Cow::Borrowed(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let all: Vec<&[u8]> = args.iter().skip(3).collect();
    let (keys, argv) = all.split_at(n as usize);
    Ok((keys.to_vec(), argv.to_vec()))
}

fn eval(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    eval_generic(ctx, args, Source::Body, false)
}

fn eval_ro(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    eval_generic(ctx, args, Source::Body, true)
}

fn evalsha(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    eval_generic(ctx, args, Source::Sha, false)
}

fn evalsha_ro(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    eval_generic(ctx, args, Source::Sha, true)
}

/// Whether the script is given by its body or by its SHA1.
#[derive(Clone, Copy)]
enum Source {
    Body,
    Sha,
}

thread_local! {
    /// Set while a script runs: MONITOR shows its commands as from `lua`.
    static RUNNING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The running script's KEYS, which client-side caching tracks for
    /// the caller when the script reads.
    static DECLARED: std::cell::RefCell<Vec<Bytes>> = const { std::cell::RefCell::new(Vec::new()) };
    /// The running script may run commands over `maxmemory`: it has the
    /// `allow-oom` flag, or it already wrote.
    static OOM_ALLOWED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

thread_local! {
    /// DEBUG SET-DISABLE-DENY-SCRIPTS: scripts may call `noscript`
    /// commands (Redis's suite uses it to call DEBUG from scripts).
    static DENY_DISABLED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// DEBUG SET-DISABLE-DENY-SCRIPTS.
pub(super) fn set_deny_disabled(on: bool) {
    DENY_DISABLED.with(|d| d.set(on));
}

/// Whether scripts may call `noscript` commands now.
fn deny_disabled() -> bool {
    DENY_DISABLED.with(std::cell::Cell::get)
}

/// The flags command `args` of `spec` runs with: a script's declared
/// flags replace EVAL's and FCALL's own, as Redis's `getCommandFlags`
/// (a script not cached, or without a shebang, keeps the command's).
pub(super) fn command_flags(
    state: &crate::state::State,
    spec: &CommandSpec,
    args: &Args<'_>,
) -> u32 {
    let script_flags = match spec.name {
        "eval" | "eval_ro" => {
            let sha = engine::sha1_hex(args.get(1));
            engine::with_lua(|lua| Ok(engine::cached_flags_opt(lua, &sha)))
                .ok()
                .flatten()
                .or_else(|| flags::shebang(args.get(1)).ok().map(|(f, _)| f))
        }
        "evalsha" | "evalsha_ro" if args.get(1).len() == 40 => {
            let sha = lowercase_sha(args.get(1));
            engine::with_lua(|lua| Ok(engine::cached_flags_opt(lua, &sha)))
                .ok()
                .flatten()
        }
        "fcall" | "fcall_ro" => {
            let name = String::from_utf8_lossy(args.get(1));
            state
                .functions
                .function(&name)
                .map(|(_, _, _, meta)| meta.flags)
        }
        _ => None,
    };
    match script_flags {
        Some(f) if f & flags::COMPAT == 0 => flags::command_flags(spec.flags, f),
        _ => spec.flags,
    }
}

/// Whether the running script (if any) may run `denyoom` commands over
/// `maxmemory`.
pub(super) fn oom_allowed() -> bool {
    OOM_ALLOWED.with(std::cell::Cell::get)
}

/// Whether a script is running on this thread.
pub(super) fn running() -> bool {
    RUNNING.with(std::cell::Cell::get)
}

/// The running script's KEYS, if a script is running.
pub(super) fn declared_keys() -> Option<Vec<Bytes>> {
    if !running() {
        return None;
    }
    Some(DECLARED.with(|d| d.borrow().clone()))
}

const NOSCRIPT_TEXT: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// A SHA1 as the cache names it (lowercase), borrowed when it already is.
fn lowercase_sha(given: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(given) {
        Ok(text) if !text.bytes().any(|b| b.is_ascii_uppercase()) => Cow::Borrowed(text),
        _ => Cow::Owned(String::from_utf8_lossy(given).to_ascii_lowercase()),
    }
}

fn eval_generic(ctx: &mut Ctx<'_>, args: &Args<'_>, source: Source, read_only: bool) -> CmdResult {
    // EVAL is marked skip-monitor so that it is shown here, before the
    // commands the script runs, as Redis shows it.
    super::notify::feed_monitors(ctx, args);
    let (keys, argv) = split_arguments(args)?;
    let outcome = engine::with_lua(|lua| {
        let sha = match source {
            Source::Body => match engine::load(lua, args.get(1)) {
                Ok(sha) => Cow::Owned(sha),
                Err(text) => return Ok(Err(text)),
            },
            Source::Sha => lowercase_sha(args.get(1)),
        };
        let Some((function, script_flags)) = engine::cached(lua, &sha)? else {
            return Ok(Err(NOSCRIPT_TEXT.to_string()));
        };
        if let Err(text) = flags::check_start(ctx, script_flags, read_only) {
            return Ok(Err(text));
        }
        engine::set_arguments(lua, &keys, &argv)?;
        // Only a tracking client's reads need the declared keys (`notify.rs`).
        let tracking = (ctx.state.pubsub.tracking.clients).contains_key(&ctx.session.id);
        DECLARED.with(|d| {
            let mut declared = d.borrow_mut();
            declared.clear();
            if tracking {
                declared.extend(keys.iter().map(|&k| Bytes::from(k)));
            }
        });
        let limits = run::Limits {
            read_only: flags::read_only(script_flags, read_only),
            allow_oom: script_flags & (flags::COMPAT | flags::ALLOW_OOM) == flags::ALLOW_OOM,
            cross_slot: script_flags & (flags::COMPAT | flags::ALLOW_CROSS_SLOT) != 0,
            slot: keys.first().map(|k| crate::cluster::key_slot(k)),
        };
        let status = run::status(ctx, true, &sha);
        let none = mlua::MultiValue::new();
        Ok(run::run_script(
            lua, ctx, function, none, &sha, limits, status, args,
        ))
    });
    match outcome {
        Ok(Ok(())) => Ok(()),
        Ok(Err(text)) => Err(Cow::Owned(text)),
        Err(e) => Err(Cow::Owned(format!("ERR {e}"))),
    }
}

fn script_load(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let loaded = engine::with_lua(|lua| Ok(engine::load(lua, args.get(2))));
    match loaded {
        Ok(Ok(sha)) => {
            ctx.reply.bulk(sha.as_bytes());
            Ok(())
        }
        Ok(Err(text)) => Err(Cow::Owned(text)),
        Err(e) => Err(Cow::Owned(format!("ERR {e}"))),
    }
}

fn script_exists(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let shas: Vec<String> = args
        .iter()
        .skip(2)
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
        .collect();
    let found = engine::with_lua(|lua| {
        Ok(shas
            .iter()
            .map(|sha| engine::exists(lua, sha))
            .collect::<Vec<bool>>())
    })
    .map_err(|e| Cow::Owned(format!("ERR {e}")))?;
    ctx.reply.array(found.len());
    for f in found {
        ctx.reply.int(i64::from(f));
    }
    Ok(())
}

fn script_flush(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let mode_ok = args.len() == 2
        || (args.len() == 3
            && (args.get(2).eq_ignore_ascii_case(b"async")
                || args.get(2).eq_ignore_ascii_case(b"sync")));
    if !mode_ok {
        return Err(Cow::Borrowed(
            "ERR SCRIPT FLUSH only support SYNC|ASYNC option",
        ));
    }
    engine::reset();
    ctx.reply.ok();
    Ok(())
}

/// SCRIPT KILL outside a busy script (a busy one is answered by
/// `busy.rs`): nothing runs.
fn script_kill(_ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    Err(Cow::Borrowed(busy::NOTBUSY))
}

fn script_help(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    help_reply(
        ctx.reply,
        "SCRIPT",
        &[
            "EXISTS <sha1> [<sha1> ...]",
            "    For each SHA1, 1 if a script with that digest is cached, else 0.",
            "FLUSH [ASYNC|SYNC]",
            "    Empties the script cache.",
            "KILL",
            "    Stops the running script if it has not written.",
            "LOAD <script>",
            "    Caches a script and returns its SHA1 digest for EVALSHA.",
        ],
    );
    Ok(())
}

/// SCRIPT's subcommands.
#[rustfmt::skip]
static SCRIPT: &[CommandSpec] = &[
    cmd!("exists", -3, NOSCRIPT, K0, "scripting", "Checks which scripts are cached.", script_exists).with_tips(&["request_policy:all_shards", "response_policy:agg_logical_and"]),
    cmd!("flush", -2, NOSCRIPT, K0, "scripting", "Empties the script cache.", script_flush).with_tips(&["request_policy:all_nodes", "response_policy:all_succeeded"]),
    cmd!("help", 2, LOADING | STALE, K0, "scripting", "Explains SCRIPT's subcommands.", script_help),
    cmd!("kill", 2, NOSCRIPT | ALLOW_BUSY, K0, "scripting", "Stops the running script.", script_kill).with_tips(&["request_policy:all_shards", "response_policy:one_succeeded"]),
    cmd!("load", 3, NOSCRIPT | STALE, K0, "scripting", "Caches a script.", script_load).with_tips(&["request_policy:all_nodes", "response_policy:all_succeeded"]),
];

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("eval", -3, NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | NO_MANDATORY_KEYS | STALE, K0, "scripting", "Runs a Lua script.", eval).with_key_finder(eval_keys),
    cmd!("eval_ro", -3, NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE | READONLY, K0, "scripting", "Runs a read-only Lua script.", eval_ro).with_key_finder(eval_keys),
    cmd!("evalsha", -3, NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | NO_MANDATORY_KEYS | STALE, K0, "scripting", "Runs a cached Lua script.", evalsha).with_key_finder(eval_keys),
    cmd!("evalsha_ro", -3, NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE | READONLY, K0, "scripting", "Runs a cached read-only Lua script.", evalsha_ro).with_key_finder(eval_keys),
    cmd!("script", -2, 0, K0, "scripting", "Manages the script cache.", script_load).with_subcommands(SCRIPT),
];
