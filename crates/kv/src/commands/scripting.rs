//! EVAL, EVALSHA, their read-only forms, and SCRIPT LOAD / EXISTS / FLUSH /
//! HELP: Lua 5.1 scripts run in the event loop, so nothing interleaves
//! with one. A script's commands go through the same dispatch as a
//! client's, and each write logs itself as it runs: the log holds the
//! script's effects (wrapped in MULTI/EXEC when there are several, as
//! any record with several commands is), never the EVAL, so replaying the
//! log needs no interpreter and gives the same data.
//!
//! Not done: SCRIPT KILL and the `busy-reply-threshold` BUSY replies (a
//! script that never ends holds the server), `#!lua` shebang flags,
//! `redis.setresp`, and the
//! `cjson`, `cmsgpack`, `bit` and `struct` libraries.

mod api;
mod convert;
mod engine;
mod libs;

use std::borrow::Cow;

use mlua::{Lua, MultiValue, Value};

use super::introspect::help_reply;
use super::table::*;
use super::{int_arg, resolve, run, CmdError, CmdResult, Ctx};
use crate::resp::reply::Protocol;
use crate::resp::{Args, ReplyBuf};
use crate::types::Bytes;

/// The key finder for EVAL and friends: `numkeys` keys after it.
fn eval_keys(args: &Args<'_>, out: &mut Vec<usize>) {
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

fn eval_generic(ctx: &mut Ctx<'_>, args: &Args<'_>, source: Source, read_only: bool) -> CmdResult {
    // EVAL is marked skip-monitor so that it is shown here, before the
    // commands the script runs, as Redis shows it.
    super::notify::feed_monitors(ctx, args);
    let (keys, argv) = split_arguments(args)?;
    let outcome = engine::with_lua(|lua| {
        let sha = match source {
            Source::Body => match engine::load(lua, args.get(1)) {
                Ok(sha) => sha,
                Err(text) => return Ok(Err(text)),
            },
            Source::Sha => String::from_utf8_lossy(args.get(1)).to_ascii_lowercase(),
        };
        let Some(function) = engine::cached(lua, &sha)? else {
            return Ok(Err(NOSCRIPT_TEXT.to_string()));
        };
        engine::set_arguments(lua, &keys, &argv)?;
        DECLARED.with(|d| *d.borrow_mut() = keys.iter().map(|&k| k.into()).collect());
        Ok(run_script(lua, ctx, function, &sha, read_only))
    });
    match outcome {
        Ok(Ok(())) => Ok(()),
        Ok(Err(text)) => Err(Cow::Owned(text)),
        Err(e) => Err(Cow::Owned(format!("ERR {e}"))),
    }
}

/// Runs a compiled script with `redis.call` bound to `ctx`, and writes
/// its result to the client's reply. `Err` is the error reply text.
fn run_script(
    lua: &Lua,
    ctx: &mut Ctx<'_>,
    function: mlua::Function<'_>,
    sha: &str,
    read_only: bool,
) -> Result<(), String> {
    if !read_only && ctx.state.keyspace.capturing() {
        // Rule C1 (`keyspace/capture.rs`): a script may write any key, so
        // every segment is captured before it runs, never inside it.
        let all = (ctx.state.keyspace.databases() * crate::keyspace::SEGMENTS_PER_DB) as u32;
        let segments: Vec<u32> = (0..all).collect();
        ctx.state.keyspace.capture_before(&segments);
    }
    let db = ctx.session.db;
    let in_exec = ctx.session.in_exec;
    // Blocking commands answer at once inside a script, as inside EXEC.
    ctx.session.in_exec = true;
    RUNNING.with(|r| r.set(true));
    let mut scratch = ReplyBuf::new(Protocol::Resp2);
    let proto = ctx.reply.proto;
    let result = lua.scope(|scope| {
        let dispatch = scope.create_function_mut(|lua, call_args: MultiValue| {
            dispatch(lua, ctx, &mut scratch, call_args, read_only)
        })?;
        lua.set_named_registry_value(api::DISPATCH, dispatch)?;
        let outcome = engine::call(lua, function, sha);
        lua.unset_named_registry_value(api::DISPATCH)?;
        Ok(outcome.map(|value| {
            let mut out = ReplyBuf::new(proto);
            convert::lua_to_reply(&value, &mut out, 0);
            out.buf
        }))
    });
    ctx.session.in_exec = in_exec;
    RUNNING.with(|r| r.set(false));
    // A SELECT inside the script does not change the caller's database.
    ctx.session.db = db;
    match result {
        Ok(Ok(bytes)) => {
            ctx.reply.buf.extend_from_slice(&bytes);
            Ok(())
        }
        Ok(Err(text)) => Err(text),
        Err(e) => Err(format!("ERR {e}")),
    }
}

/// `redis.call` / `redis.pcall`: runs one command, answers `(true,
/// value)` or `(false, {err=...})`.
fn dispatch<'lua>(
    lua: &'lua Lua,
    ctx: &mut Ctx<'_>,
    scratch: &mut ReplyBuf,
    call_args: MultiValue<'lua>,
    read_only: bool,
) -> mlua::Result<(bool, Value<'lua>)> {
    let failed = |text: &str| -> mlua::Result<(bool, Value<'lua>)> {
        let t = lua.create_table()?;
        t.raw_set("err", text)?;
        Ok((false, Value::Table(t)))
    };
    if call_args.is_empty() {
        return failed("ERR Please specify at least one argument for this redis lib call");
    }
    let mut owned: Vec<Vec<u8>> = Vec::with_capacity(call_args.len());
    for value in call_args {
        match value {
            Value::String(s) => owned.push(s.as_bytes().to_vec()),
            Value::Integer(_) | Value::Number(_) => match lua.coerce_string(value)? {
                Some(s) => owned.push(s.as_bytes().to_vec()),
                None => return failed(ARG_TYPES),
            },
            _ => return failed(ARG_TYPES),
        }
    }
    let (buf, ranges) = super::flatten(&owned);
    let args = Args::new(&buf, &ranges);
    let (container, spec) = match resolve(&args) {
        Ok(found) => found,
        Err(_) => return failed("ERR Unknown Redis command called from script"),
    };
    if !spec.arity_ok(args.len()) {
        return failed("ERR Wrong number of args calling Redis command from script");
    }
    if spec.has(NOSCRIPT) || container.is_some_and(|c| c.has(NOSCRIPT)) {
        return failed("ERR This Redis command is not allowed from script");
    }
    if let Err(text) = super::acl_script_check(ctx, container, spec, &args) {
        return failed(&text);
    }
    if read_only && spec.has(WRITE) {
        return failed("ERR Write commands are not allowed from read-only scripts.");
    }
    scratch.buf.clear();
    let mut inner = Ctx {
        state: &mut *ctx.state,
        session: &mut *ctx.session,
        reply: scratch,
        prop: &mut *ctx.prop,
    };
    run(&mut inner, container, spec, &args);
    let mut at = 0;
    let value = convert::resp_to_lua(lua, &scratch.buf, &mut at)?;
    let is_error = matches!(scratch.buf.first(), Some(b'-'));
    Ok((!is_error, value))
}

const ARG_TYPES: &str = "ERR Lua redis lib command arguments must be strings or integers";

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
        shas.iter()
            .map(|sha| engine::exists(lua, sha))
            .collect::<mlua::Result<Vec<bool>>>()
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

fn script_help(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    help_reply(
        ctx.reply,
        "SCRIPT",
        &[
            "EXISTS <sha1> [<sha1> ...]",
            "    For each SHA1, 1 if a script with that digest is cached, else 0.",
            "FLUSH [ASYNC|SYNC]",
            "    Empties the script cache.",
            "LOAD <script>",
            "    Caches a script and returns its SHA1 digest for EVALSHA.",
        ],
    );
    Ok(())
}

/// SCRIPT's subcommands.
#[rustfmt::skip]
static SCRIPT: &[CommandSpec] = &[
    cmd!("exists", -3, NOSCRIPT, K0, "scripting", "Checks which scripts are cached.", script_exists),
    cmd!("flush", -2, NOSCRIPT, K0, "scripting", "Empties the script cache.", script_flush),
    cmd!("help", 2, LOADING | STALE, K0, "scripting", "Explains SCRIPT's subcommands.", script_help),
    cmd!("load", 3, NOSCRIPT | STALE, K0, "scripting", "Caches a script.", script_load),
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
