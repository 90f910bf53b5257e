//! FUNCTION (LOAD, DELETE, LIST, DUMP, RESTORE, FLUSH, STATS, KILL,
//! HELP), FCALL and FCALL_RO, as Redis 7.0. Libraries are part of the
//! dataset: LOAD, DELETE, RESTORE and FLUSH log themselves as sent
//! (replaying them rebuilds the same libraries), and a log rewrite
//! writes the libraries at the head of its new log (`docs/scripting.md`).

use std::borrow::Cow;

use super::introspect::help_reply;
use super::scripting::flags;
use super::scripting::library::{self, Library};
use super::scripting::run::{self, Limits};
use super::scripting::{busy_stats_reply, eval_keys, Libraries, NOTBUSY};
use super::table::*;
use super::{CmdResult, Ctx};
use crate::resp::Args;

fn err(text: impl Into<String>) -> super::CmdError {
    Cow::Owned(format!("ERR {}", text.into()))
}

fn function_load(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let mut replace = false;
    let mut at = 2;
    while at < args.len() - 1 {
        if !args.get(at).eq_ignore_ascii_case(b"replace") {
            let given = String::from_utf8_lossy(args.get(at));
            return Err(err(format!("Unknown option given: {given}")));
        }
        replace = true;
        at += 1;
    }
    let code = args.get(at);
    let (name, _) = library::parse_header(code).map_err(err)?;
    if !replace && ctx.state.functions.get(&name).is_some() {
        return Err(err(format!("Library '{name}' already exists")));
    }
    let (name, lib) = library::compile(code, !ctx.session.is_replay).map_err(err)?;
    check_library(&ctx.state.functions, &lib, Some(&name))?;
    library::commit(&name, code).map_err(|e| err(e.to_string()))?;
    ctx.state.functions.insert(name.clone(), lib);
    ctx.propagate_args(args);
    ctx.reply.bulk(name.as_bytes());
    Ok(())
}

/// What Redis checks of a library once its code ran: it registered
/// something, and no other library (than `replacing`) has its functions.
fn check_library(libs: &Libraries, lib: &Library, replacing: Option<&str>) -> CmdResult {
    if lib.functions.is_empty() {
        return Err(err("No functions registered"));
    }
    if let Some(function) = libs.collision(lib, replacing) {
        return Err(err(format!("Function {function} already exists")));
    }
    Ok(())
}

fn function_delete(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let name = String::from_utf8_lossy(args.get(2)).into_owned();
    if !ctx.state.functions.remove(&name) {
        return Err(err("Library not found"));
    }
    ctx.propagate_args(args);
    ctx.reply.ok();
    Ok(())
}

fn function_list(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (mut with_code, mut pattern) = (false, None);
    let mut i = 2;
    while i < args.len() {
        let arg = args.get(i);
        if !with_code && arg.eq_ignore_ascii_case(b"withcode") {
            with_code = true;
        } else if pattern.is_none() && arg.eq_ignore_ascii_case(b"libraryname") {
            if i + 1 >= args.len() {
                return Err(err("library name argument was not given"));
            }
            i += 1;
            pattern = Some(args.get(i));
        } else {
            let given = String::from_utf8_lossy(arg);
            return Err(err(format!("Unknown argument {given}")));
        }
        i += 1;
    }
    let matching: Vec<(&String, &Library)> = ctx
        .state
        .functions
        .iter()
        .filter(|(name, _)| {
            pattern.is_none_or(|p| crate::keyspace::glob::glob_match(p, name.as_bytes()))
        })
        .collect();
    let r = &mut *ctx.reply;
    r.array(matching.len());
    for (name, lib) in matching {
        r.map(if with_code { 4 } else { 3 });
        r.bulk(b"library_name");
        r.bulk(name.as_bytes());
        r.bulk(b"engine");
        r.bulk(b"LUA");
        r.bulk(b"functions");
        r.array(lib.functions.len());
        for (fname, meta) in &lib.functions {
            r.map(3);
            r.bulk(b"name");
            r.bulk(fname.as_bytes());
            r.bulk(b"description");
            r.bulk_opt(meta.description.as_deref());
            r.bulk(b"flags");
            let shown: Vec<&str> = flags::NAMES
                .iter()
                .filter(|(flag, _)| meta.flags & flag != 0)
                .map(|&(_, n)| n)
                .collect();
            r.set(shown.len());
            for flag in shown {
                r.simple(flag);
            }
        }
        if with_code {
            r.bulk(b"library_code");
            r.bulk(&lib.code);
        }
    }
    Ok(())
}

fn function_dump(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let libs = &ctx.state.functions;
    let payload = crate::rdb::dump_functions(libs.iter().map(|(_, lib)| lib.code.as_slice()));
    ctx.reply.bulk(&payload);
    Ok(())
}

/// FUNCTION RESTORE's policies.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Policy {
    Append,
    Replace,
    Flush,
}

fn function_restore(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    if args.len() > 4 {
        return Err(syntax_subcommand(args));
    }
    let policy =
        match args.len() {
            4 => match args.get(3).to_ascii_lowercase().as_slice() {
                b"append" => Policy::Append,
                b"replace" => Policy::Replace,
                b"flush" => Policy::Flush,
                _ => return Err(err(
                    "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
                )),
            },
            _ => Policy::Append,
        };
    let codes =
        match crate::rdb::restore_functions(args.get(2), !ctx.state.skip_checksum_validation) {
            Ok(codes) => codes,
            Err(crate::rdb::FunctionsError::VersionOrChecksum) => {
                return Err(err("DUMP payload version or checksum are wrong"))
            }
            Err(crate::rdb::FunctionsError::NoType) => return Err(err("can not read data type")),
            Err(crate::rdb::FunctionsError::NotFunction) => {
                return Err(err("given type is not a function"))
            }
            Err(crate::rdb::FunctionsError::BadCode) => {
                return Err(err("failed loading the given functions payload"))
            }
        };
    let mut restored = Libraries::default();
    for code in &codes {
        let (name, _) = library::parse_header(code).map_err(err)?;
        if restored.get(&name).is_some() {
            return Err(err(format!("Library '{name}' already exists")));
        }
        let (name, lib) = library::compile(code, !ctx.session.is_replay).map_err(err)?;
        check_library(&restored, &lib, None)?;
        restored.insert(name, lib);
    }
    let mut merged = match policy {
        Policy::Flush => Libraries::default(),
        _ => ctx.state.functions.clone(),
    };
    for (name, _) in restored.iter() {
        if merged.get(name).is_some() {
            if policy == Policy::Append {
                return Err(err(format!("Library {name} already exists")));
            }
            merged.remove(name);
        }
    }
    for (name, lib) in restored.iter() {
        check_library(&merged, lib, None)?;
        merged.insert(name.clone(), lib.clone());
    }
    ctx.state.functions = merged;
    ctx.propagate_args(args);
    ctx.reply.ok();
    Ok(())
}

fn syntax_subcommand(args: &Args<'_>) -> super::CmdError {
    let sub = String::from_utf8_lossy(args.get(1));
    Cow::Owned(format!(
        "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try FUNCTION HELP."
    ))
}

fn function_flush(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    if args.len() > 3 {
        return Err(syntax_subcommand(args));
    }
    if args.len() == 3
        && !args.get(2).eq_ignore_ascii_case(b"sync")
        && !args.get(2).eq_ignore_ascii_case(b"async")
    {
        return Err(err("FUNCTION FLUSH only supports SYNC|ASYNC option"));
    }
    ctx.state.functions = Libraries::default();
    library::reset();
    ctx.propagate_args(args);
    ctx.reply.ok();
    Ok(())
}

fn function_stats(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    // A running script is answered by the busy re-entry (`busy.rs`).
    busy_stats_reply(ctx.reply, None, &ctx.state.functions);
    Ok(())
}

fn function_kill(_ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    Err(Cow::Borrowed(NOTBUSY))
}

fn function_help(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    help_reply(
        ctx.reply,
        "FUNCTION",
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Loads a library (its header names it); REPLACE replaces one of that name.",
            "DELETE <LIBRARY NAME>",
            "    Deletes a library and its functions.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Each library matching the pattern (all without one): its name, engine,",
            "    functions with their descriptions and flags, and its code with WITHCODE.",
            "STATS",
            "    The running function (name, command, milliseconds so far, or nil),",
            "    and per engine the number of libraries and functions.",
            "KILL",
            "    Stops the running function if it has not written.",
            "FLUSH [ASYNC|SYNC]",
            "    Deletes every library.",
            "DUMP",
            "    Every library as one payload for FUNCTION RESTORE.",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Loads the libraries of a payload: FLUSH deletes the existing ones first,",
            "    APPEND (the default) fails on a name already loaded, REPLACE replaces it.",
        ],
    );
    Ok(())
}

fn fcall(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    fcall_generic(ctx, args, false)
}

fn fcall_ro(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    fcall_generic(ctx, args, true)
}

fn fcall_generic(ctx: &mut Ctx<'_>, args: &Args<'_>, ro: bool) -> CmdResult {
    // FCALL is skip-monitor: shown here, before the function's commands.
    super::notify::feed_monitors(ctx, args);
    let name = String::from_utf8_lossy(args.get(1)).into_owned();
    let Some((lib, library, registered, meta)) = ctx.state.functions.function(&name) else {
        return Err(err("Function not found"));
    };
    let (lib, code, fflags) = (lib.to_string(), library.code.clone(), meta.flags);
    let name = registered.to_string();
    let numkeys = crate::types::number::parse_i64(args.get(2))
        .ok_or_else(|| err("Bad number of keys provided"))?;
    if numkeys > args.len() as i64 - 3 {
        return Err(err("Number of keys can't be greater than number of args"));
    }
    if numkeys < 0 {
        return Err(err("Number of keys can't be negative"));
    }
    flags::check_start(ctx, fflags, ro).map_err(Cow::Owned)?;
    let split = 3 + numkeys as usize;
    let outcome = library::with_lua(|lua| {
        let function = match library::compiled(lua, &lib, &code, &name)? {
            Ok(f) => f,
            Err(text) => return Ok(Err(text)),
        };
        let keys = lua.create_sequence_from(
            (3..split)
                .map(|i| lua.create_string(args.get(i)))
                .collect::<mlua::Result<Vec<_>>>()?,
        )?;
        let argv = lua.create_sequence_from(
            (split..args.len())
                .map(|i| lua.create_string(args.get(i)))
                .collect::<mlua::Result<Vec<_>>>()?,
        )?;
        let call_args =
            mlua::MultiValue::from_vec(vec![mlua::Value::Table(keys), mlua::Value::Table(argv)]);
        let limits = Limits {
            read_only: flags::read_only(fflags, ro),
            allow_oom: fflags & flags::ALLOW_OOM != 0,
            cross_slot: fflags & flags::ALLOW_CROSS_SLOT != 0,
            slot: (split > 3).then(|| crate::cluster::key_slot(args.get(3))),
        };
        let status = run::status(ctx, false, &name);
        Ok(run::run_script(
            lua, ctx, function, call_args, &name, limits, status, args,
        ))
    });
    match outcome {
        Ok(Ok(())) => Ok(()),
        Ok(Err(text)) => Err(Cow::Owned(text)),
        Err(e) => Err(err(e.to_string())),
    }
}

/// What a log rewrite writes first in its new log so the libraries
/// survive it: `FUNCTION RESTORE <dump> FLUSH`, which sets exactly the
/// libraries there were at the switch, whether the older logs are
/// replayed before it (a crash before the rewrite completes) or not
/// (after). `None` without libraries: then the older logs end with none
/// either, and nothing needs restoring.
pub fn functions_record(libs: &Libraries) -> Option<super::Propagation> {
    if libs.is_empty() {
        return None;
    }
    let payload = crate::rdb::dump_functions(libs.iter().map(|(_, lib)| lib.code.as_slice()));
    let mut record = super::Propagation::default();
    record.push(0, &[b"FUNCTION", b"RESTORE", &payload, b"FLUSH"]);
    Some(record)
}

/// FUNCTION's subcommands.
#[rustfmt::skip]
static FUNCTION: &[CommandSpec] = &[
    cmd!("delete", 3, NOSCRIPT | WRITE, K0, "scripting", "Deletes a library.", function_delete).with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
    cmd!("dump", 2, NOSCRIPT, K0, "scripting", "Dumps every library.", function_dump),
    cmd!("flush", -2, NOSCRIPT | WRITE, K0, "scripting", "Deletes every library.", function_flush).with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
    cmd!("help", 2, LOADING | STALE, K0, "scripting", "Explains FUNCTION's subcommands.", function_help),
    cmd!("kill", 2, NOSCRIPT | ALLOW_BUSY, K0, "scripting", "Stops the running function.", function_kill).with_tips(&["request_policy:all_shards", "response_policy:one_succeeded"]),
    cmd!("list", -2, NOSCRIPT, K0, "scripting", "Lists the libraries.", function_list).with_tips(&["nondeterministic_output_order"]),
    cmd!("load", -3, NOSCRIPT | WRITE | DENYOOM, K0, "scripting", "Loads a library.", function_load).with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
    cmd!("restore", -3, NOSCRIPT | WRITE | DENYOOM, K0, "scripting", "Restores libraries from a dump.", function_restore).with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
    cmd!("stats", 2, NOSCRIPT | ALLOW_BUSY, K0, "scripting", "Shows the running function and the engines.", function_stats).with_tips(&["nondeterministic_output", "request_policy:all_shards", "response_policy:special"]),
];

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("fcall", -3, NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | NO_MANDATORY_KEYS | STALE, K0, "scripting", "Runs a function.", fcall).with_key_finder(eval_keys),
    cmd!("fcall_ro", -3, NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE | READONLY, K0, "scripting", "Runs a read-only function.", fcall_ro).with_key_finder(eval_keys),
    cmd!("function", -2, 0, K0, "scripting", "Manages function libraries.", function_help).with_subcommands(FUNCTION),
];
