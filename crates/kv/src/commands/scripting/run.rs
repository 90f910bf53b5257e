//! Running one script (EVAL's body or an FCALL'd function): `redis.call`
//! bound to the caller's context, and the instruction-count hook that
//! notices a script running past `busy-reply-threshold`, then re-enters
//! the event loop (restricted, `busy.rs`) every time it fires, and stops
//! the script once SCRIPT KILL, FUNCTION KILL or SHUTDOWN NOSAVE asks.

use std::cell::RefCell;
use std::time::Instant;

use mlua::{Function, HookTriggers, Lua, MultiValue, Value};

use super::busy::{BusyView, RunStatus};
use super::{api, convert, engine};
use crate::commands::flags::{MAY_REPLICATE, NOSCRIPT, WRITE};
use crate::commands::{resolve, run, Ctx};
use crate::resp::reply::{format_double, Protocol};
use crate::resp::{Args, ReplyBuf};

/// Registry name of the function the hook calls: serves other clients
/// once the script is busy; answers whether the script must stop.
const INTERRUPT: &str = "ferrite.interrupt";
/// VM instructions between two calls of the hook, as in Redis.
const HOOK_EVERY: u32 = 100_000;
/// The error a killed script ends with.
const KILLED: &str = "Script killed by user with SCRIPT KILL...";

/// What a script may do, as its flags and its caller decide.
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    /// EVAL_RO, FCALL_RO, or the `no-writes` flag: write commands (and
    /// those that may replicate) fail.
    pub read_only: bool,
    /// The `allow-oom` flag: commands run over `maxmemory`.
    pub allow_oom: bool,
}

/// The running script's side of the event loop.
struct Running<'c, 'a> {
    ctx: &'c mut Ctx<'a>,
    scratch: ReplyBuf,
    limits: Limits,
    status: RunStatus,
}

/// Runs `function` with `redis.call` bound to `ctx`, and writes its
/// result to the client's reply; `Err` is the error reply text.
pub fn run_script(
    lua: &Lua,
    ctx: &mut Ctx<'_>,
    function: Function<'_>,
    args: MultiValue<'_>,
    label: &str,
    limits: Limits,
    status: RunStatus,
) -> Result<(), String> {
    if !limits.read_only && ctx.state.keyspace.capturing() {
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
    super::RUNNING.with(|r| r.set(true));
    super::OOM_ALLOWED.with(|r| r.set(limits.allow_oom));
    api::reset_repl();
    let proto = ctx.reply.proto;
    let cell = RefCell::new(Running {
        ctx,
        scratch: ReplyBuf::new(Protocol::Resp2),
        limits,
        status,
    });
    let result = lua.scope(|scope| {
        let dispatch = scope.create_function(|lua, call_args: mlua::Table| {
            let mut running = cell
                .try_borrow_mut()
                .map_err(|_| mlua::Error::runtime("redis.call re-entered"))?;
            dispatch(lua, &mut running, call_args)
        })?;
        let interrupt = scope
            .create_function(|_, ()| Ok(cell.try_borrow_mut().is_ok_and(|mut r| r.interrupt())))?;
        lua.set_named_registry_value(api::DISPATCH, dispatch)?;
        lua.set_named_registry_value(INTERRUPT, interrupt)?;
        lua.set_hook(HookTriggers::new().every_nth_instruction(HOOK_EVERY), hook);
        let outcome = engine::call(lua, function, label, args);
        lua.remove_hook();
        lua.unset_named_registry_value(api::DISPATCH)?;
        lua.unset_named_registry_value(INTERRUPT)?;
        Ok(outcome.map(|value| {
            let mut out = ReplyBuf::new(proto);
            let mut errors = Vec::new();
            convert::lua_to_reply(&value, &mut out, 0, api::resp3(), &mut errors);
            (out.buf, errors)
        }))
    });
    let Running { ctx, status, .. } = cell.into_inner();
    ctx.session.in_exec = in_exec;
    super::RUNNING.with(|r| r.set(false));
    super::OOM_ALLOWED.with(|r| r.set(false));
    // A SELECT inside the script does not change the caller's database.
    ctx.session.db = db;
    if status.shutdown {
        // SHUTDOWN NOSAVE: as in Redis, which exits before propagating the
        // script, none of what it did reaches the log.
        ctx.prop.clear();
        ctx.state.shutdown_requested = true;
        ctx.session.close_after_reply = true;
    }
    match result {
        Ok(Ok((bytes, errors))) => {
            // Errors in the reply count in errorstats (once: not those a
            // command replied and counted), and make the call a failed one.
            for (text, counted) in &errors {
                if !counted {
                    ctx.state.stats.commands.error(text);
                }
            }
            ctx.session.failed_in_reply = !errors.is_empty();
            ctx.reply.buf.extend_from_slice(&bytes);
            Ok(())
        }
        Ok(Err(failure)) => {
            ctx.session.error_counted = failure.counted;
            Err(failure.text)
        }
        Err(e) => Err(format!("ERR {e}")),
    }
}

/// The count hook: once the script is busy, serves other clients; raises
/// the kill error when asked to stop, and from then on at every line, so
/// a `pcall` in the script cannot keep it alive.
fn hook(lua: &Lua, _: mlua::Debug) -> mlua::Result<()> {
    let interrupt: Function = lua.named_registry_value(INTERRUPT)?;
    if interrupt.call::<_, bool>(())? {
        tracing::warn!("Lua script killed by user with SCRIPT KILL.");
        lua.set_hook(HookTriggers::EVERY_LINE, |_, _| {
            Err(mlua::Error::runtime(KILLED))
        });
        return Err(mlua::Error::runtime(KILLED));
    }
    Ok(())
}

impl Running<'_, '_> {
    /// Past the threshold, lets the event loop serve others; answers
    /// whether the script must stop.
    fn interrupt(&mut self) -> bool {
        let status = &mut self.status;
        if !status.timed_out {
            let elapsed = status.started.elapsed().as_millis() as u64;
            if elapsed < status.threshold_ms {
                return false;
            }
            status.timed_out = true;
            let kill = if status.eval {
                "SCRIPT KILL"
            } else {
                "FUNCTION KILL"
            };
            tracing::warn!(
                "Slow script detected: still in execution after {elapsed} milliseconds. You can try killing the script using the {kill} command. Script name is: {}.",
                status.name
            );
        }
        let ctx = &mut *self.ctx;
        if let Some(busy) = ctx.busy.as_deref_mut() {
            let state = &mut *ctx.state;
            state.keyspace.now_ms = crate::state::unix_ms();
            busy.serve(BusyView {
                config: &state.config,
                stats: &mut state.stats,
                clients: &mut state.clients,
                blocking: &state.blocking,
                script: status,
                functions: &state.functions,
                acl: &state.acl,
            });
        }
        status.killed
    }
}

/// `redis.call` / `redis.pcall`: runs one command, answers `(true,
/// value)` or `(false, {err=...})`.
fn dispatch<'lua>(
    lua: &'lua Lua,
    running: &mut Running<'_, '_>,
    call_args: mlua::Table<'lua>,
) -> mlua::Result<(bool, Value<'lua>)> {
    let failed = |text: &str| -> mlua::Result<(bool, Value<'lua>)> {
        let t = lua.create_table()?;
        t.raw_set("err", text)?;
        Ok((false, Value::Table(t)))
    };
    let count: usize = call_args.raw_get("n")?;
    if count == 0 {
        return failed("ERR Please specify at least one argument for this redis lib call");
    }
    let mut owned: Vec<Vec<u8>> = Vec::with_capacity(count);
    for i in 1..=count {
        let value: Value = call_args.raw_get(i)?;
        match value {
            Value::String(s) => owned.push(s.as_bytes().to_vec()),
            // Numbers as C's `%.17g`, as Redis converts them.
            Value::Integer(n) => owned.push(format_double(n as f64).into_bytes()),
            Value::Number(n) => owned.push(format_double(n).into_bytes()),
            _ => return failed(ARG_TYPES),
        }
    }
    let (buf, ranges) = crate::commands::flatten(&owned);
    let args = Args::new(&buf, &ranges);
    // `redis.acl_check_cmd` asks the same dispatcher, marking its table.
    let acl_only: bool = call_args.raw_get("acl_check").unwrap_or(false);
    // A command refused here is counted as Redis counts it: one error
    // reply and, for a known command, a rejected call; the table says so,
    // so that the script's failure does not count it again.
    let refused = |running: &mut Running<'_, '_>,
                   name: Option<crate::cmdstats::CommandName>,
                   text: &str|
     -> mlua::Result<(bool, Value<'lua>)> {
        if !running.ctx.session.is_replay {
            let table = &mut running.ctx.state.stats.commands;
            table.error(text);
            if let Some(name) = name {
                table.of(name).rejected_calls += 1;
            }
        }
        let t = lua.create_table()?;
        t.raw_set("err", text)?;
        t.raw_set(convert::COUNTED, true)?;
        Ok((false, Value::Table(t)))
    };
    let (container, spec) = match resolve(&args) {
        Ok(found) => found,
        Err(_) if acl_only => return failed(ACL_CHECK_UNKNOWN),
        Err(_) => {
            return refused(
                running,
                None,
                "ERR Unknown Redis command called from script",
            )
        }
    };
    let name = crate::commands::stats_name(container, spec);
    if acl_only {
        let allowed = crate::commands::acl_permitted(running.ctx, container, spec, &args);
        return Ok((true, Value::Boolean(allowed)));
    }
    if !spec.arity_ok(args.len()) {
        let text = "ERR Wrong number of args calling Redis command from script";
        return refused(running, Some(name), text);
    }
    let noscript = spec.has(NOSCRIPT) || container.is_some_and(|c| c.has(NOSCRIPT));
    if noscript && !super::deny_disabled() {
        let text = "ERR This Redis command is not allowed from script";
        return refused(running, Some(name), text);
    }
    if let Err(text) = crate::commands::acl_script_check(running.ctx, container, spec, &args) {
        return refused(running, Some(name), &text);
    }
    // A write needs good replicas, and a writable master, as outside.
    if let Some(text) = crate::commands::replication::refusal(running.ctx, spec.flags) {
        return refused(running, Some(name), text);
    }
    if running.limits.read_only && spec.has(WRITE | MAY_REPLICATE) {
        let text = "ERR Write commands are not allowed from read-only scripts.";
        return refused(running, Some(name), text);
    }
    let Running { ctx, scratch, .. } = running;
    scratch.buf.clear();
    scratch.proto = if api::resp3() {
        Protocol::Resp3
    } else {
        Protocol::Resp2
    };
    let mut inner = Ctx {
        state: &mut *ctx.state,
        session: &mut *ctx.session,
        reply: scratch,
        prop: &mut *ctx.prop,
        busy: None,
    };
    let before = (
        inner.prop.buf.len(),
        inner.prop.commands,
        inner.prop.first_db,
        inner.prop.last_db,
    );
    run(&mut inner, container, spec, &args);
    if !api::logging() {
        // `redis.set_repl` without REPL_AOF: the command is not logged.
        let prop = &mut *inner.prop;
        prop.buf.truncate(before.0);
        (prop.commands, prop.first_db, prop.last_db) = (before.1, before.2, before.3);
    }
    if spec.has(WRITE) {
        // Once it wrote, a script can neither be killed nor refused for
        // memory: stopping it half-way would leave half its effects.
        running.status.wrote = true;
        super::OOM_ALLOWED.with(|r| r.set(true));
    }
    let mut at = 0;
    let value = convert::resp_to_lua(lua, &scratch.buf, &mut at)?;
    let is_error = matches!(scratch.buf.first(), Some(b'-'));
    Ok((!is_error, value))
}

/// `redis.acl_check_cmd` of a command that does not exist.
pub(super) const ACL_CHECK_UNKNOWN: &str = "ERR Invalid command passed to redis.acl_check_cmd()";

const ARG_TYPES: &str = "ERR Lua redis lib command arguments must be strings or integers";

/// A fresh status for a script starting now.
pub fn status(ctx: &Ctx<'_>, eval: bool, name: &str, args: &Args<'_>) -> RunStatus {
    let threshold = ctx.state.config.busy_reply_threshold_ms;
    RunStatus {
        started: Instant::now(),
        threshold_ms: threshold,
        eval,
        name: name.to_string(),
        command: args.iter().map(<[u8]>::to_vec).collect(),
        wrote: false,
        timed_out: false,
        killed: false,
        shutdown: false,
    }
}
