//! Running one script (EVAL's body or an FCALL'd function): `redis.call`
//! and `redis.pcall` reaching the caller's context, and the
//! instruction-count hook that notices a script running past
//! `busy-reply-threshold`, then re-enters the event loop (restricted,
//! `busy.rs`) every time it fires, and stops the script once SCRIPT KILL,
//! FUNCTION KILL or SHUTDOWN NOSAVE asks.
//!
//! As in Redis, `redis.call` and `redis.pcall` are two C functions made
//! once per interpreter (`api.rs`); nothing is created or registered per
//! script. The caller's context is borrowed (`Ctx`), and Lua keeps only
//! values that live as long as the interpreter, so the context reaches
//! them through a scoped thread-local slot ([`RUN`], the `scoped-tls-hkt`
//! crate): set for the length of the run, empty before and after it, and
//! empty while one call holds it, so a call made outside a script, or
//! one nested in another, finds no context and fails instead of aliasing
//! it. The count hook and `redis.acl_check_cmd` reach it the same way.

use std::borrow::Cow;
use std::cell::Cell;
use std::time::Instant;

use mlua::{Function, HookTriggers, Lua, MultiValue, Value};
use scoped_tls_hkt::{scoped_thread_local, ReborrowMut};

use super::api::CallFailure;
use super::busy::{BusyView, RunStatus};
use super::{api, convert, engine};
use crate::commands::flags::{MAY_REPLICATE, NOSCRIPT, STALE, WRITE};
use crate::commands::{resolve, run, Ctx};
use crate::resp::reply::{format_double, Protocol};
use crate::resp::{Args, ReplyBuf};

/// VM instructions between two calls of the hook, as in Redis.
const HOOK_EVERY: u32 = 100_000;
/// The error a killed script ends with.
const KILLED: &str = "Script killed by user with SCRIPT KILL...";
/// Scripts between two garbage collection steps, and the step's size,
/// as Redis paces its interpreter's collector after scripts.
const GC_PERIOD: u32 = 50;

/// What a script may do, as its flags and its caller decide.
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    /// EVAL_RO, FCALL_RO, or the `no-writes` flag: write commands (and
    /// those that may replicate) fail.
    pub read_only: bool,
    /// The `allow-oom` flag: commands run over `maxmemory`.
    pub allow_oom: bool,
    /// In cluster mode, keys of any slot of this node may be called: the
    /// `allow-cross-slot-keys` flag, or an EVAL without flags.
    pub cross_slot: bool,
    /// In cluster mode, the slot the script's keys are in so far: that
    /// of its declared keys, else of the first key a call named.
    pub slot: Option<u16>,
}

thread_local! {
    /// Buffers every run reuses: a command's request and reply.
    static SCRATCH: Cell<Scratch> = Cell::new(Scratch::default());
    /// Scripts run since the last garbage collection step.
    static SINCE_GC: Cell<u32> = const { Cell::new(0) };
}

/// A command's request (arguments laid out in one buffer) and its reply.
#[derive(Default)]
struct Scratch {
    request: Vec<u8>,
    ranges: Vec<(usize, usize)>,
    reply: Vec<u8>,
}

/// What the running script owns for its length.
struct RunData {
    scratch: Scratch,
    limits: Limits,
    status: RunStatus,
}

/// The running script's side of the event loop: the caller's context
/// (reborrowed for the run), the run's own data, and the EVAL or FCALL
/// (copied into the status once the script is busy).
struct Bound<'a> {
    ctx: Ctx<'a>,
    run: &'a mut RunData,
    caller: &'a Args<'a>,
}

/// A context reborrowed for a shorter lifetime.
fn reborrow<'b>(ctx: &'b mut Ctx<'_>) -> Ctx<'b> {
    let busy: Option<&'b mut dyn super::Reenter> = match &mut ctx.busy {
        Some(busy) => Some(&mut **busy),
        None => None,
    };
    Ctx {
        state: &mut *ctx.state,
        session: &mut *ctx.session,
        reply: &mut *ctx.reply,
        prop: &mut *ctx.prop,
        busy,
    }
}

impl<'b, 'a> ReborrowMut<'b> for Bound<'a> {
    type Result = Bound<'b>;
    fn reborrow_mut(&'b mut self) -> Bound<'b> {
        Bound {
            ctx: reborrow(&mut self.ctx),
            run: &mut *self.run,
            caller: self.caller,
        }
    }
}

scoped_thread_local!(
    /// The running script's [`Bound`], set by [`run_script`] for the
    /// length of the script.
    static mut RUN: for<'a> Bound<'a>
);

/// Runs `f` with the running script's side, or fails as a call outside
/// a script does (a call nested in another finds the slot empty too).
fn with_bound<R>(f: impl FnOnce(Bound<'_>) -> R) -> mlua::Result<R> {
    if !RUN.is_set() {
        return Err(mlua::Error::external(CallFailure(
            "ERR redis.call can only be called inside a script invocation".into(),
            false,
        )));
    }
    Ok(RUN.with(f))
}

/// Runs `function` with `redis.call` reaching `ctx`, and writes its
/// result to the client's reply; `Err` is the error reply text.
/// `caller` is the EVAL or FCALL (FUNCTION STATS shows it while busy).
#[allow(clippy::too_many_arguments)]
pub fn run_script(
    lua: &Lua,
    ctx: &mut Ctx<'_>,
    function: Function<'_>,
    args: MultiValue<'_>,
    label: &str,
    limits: Limits,
    status: RunStatus,
    caller: &Args<'_>,
) -> Result<(), String> {
    if !limits.read_only {
        // Rule C1 (`keyspace/capture.rs`): a script may write any key, so
        // every segment is captured before it runs, never inside it.
        ctx.state.keyspace.capture_all_before();
    }
    let db = ctx.session.db;
    let in_exec = ctx.session.in_exec;
    // Blocking commands answer at once inside a script, as inside EXEC.
    ctx.session.in_exec = true;
    super::RUNNING.with(|r| r.set(true));
    super::OOM_ALLOWED.with(|r| r.set(limits.allow_oom));
    api::reset_repl();
    let mut data = RunData {
        scratch: SCRATCH.with(Cell::take),
        limits,
        status,
    };
    let bound = Bound {
        ctx: reborrow(ctx),
        run: &mut data,
        caller,
    };
    let result = RUN.set(bound, || {
        lua.set_hook(HookTriggers::new().every_nth_instruction(HOOK_EVERY), hook);
        let outcome = engine::call(lua, function, label, args);
        lua.remove_hook();
        outcome
    });
    let RunData {
        status, scratch, ..
    } = data;
    SCRATCH.with(|s| s.set(scratch));
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
    let outcome = match result {
        Ok(value) => {
            let mut errors = Vec::new();
            convert::lua_to_reply(&value, ctx.reply, 0, api::resp3(), &mut errors);
            // Errors in the reply count in errorstats (once: not those a
            // command replied and counted), and make the call a failed one.
            for (text, counted) in &errors {
                if !counted {
                    ctx.state.stats.commands.error(text);
                }
            }
            ctx.session.failed_in_reply = !errors.is_empty();
            Ok(())
        }
        Err(failure) => {
            ctx.session.error_counted = failure.counted;
            Err(failure.text)
        }
    };
    collect_garbage(lua);
    outcome
}

/// `redis.call`: runs the command; its error is raised.
pub(super) fn call<'lua>(lua: &'lua Lua, args: MultiValue<'lua>) -> mlua::Result<Value<'lua>> {
    raise(with_bound(|mut bound| bound.command(lua, args))??)
}

/// `redis.pcall`: runs the command; its error is returned as a table.
pub(super) fn pcall<'lua>(lua: &'lua Lua, args: MultiValue<'lua>) -> mlua::Result<Value<'lua>> {
    with_bound(|mut bound| bound.command(lua, args))??.into_value(lua)
}

/// Redis's pacing of the collector: a step of [`GC_PERIOD`] every
/// [`GC_PERIOD`] scripts, on top of the steps Lua takes as it allocates.
fn collect_garbage(lua: &Lua) {
    let due = SINCE_GC.with(|n| {
        let next = n.get() + 1;
        n.set(if next >= GC_PERIOD { 0 } else { next });
        next >= GC_PERIOD
    });
    if due {
        // A step only fails for an error in a finalizer, which scripts
        // cannot set (no `__gc` for tables in Lua 5.1).
        let _ = lua.gc_step_kbytes(GC_PERIOD as i32);
    }
}

/// `redis.acl_check_cmd`: whether the user may run the command.
pub fn acl_check<'lua>(lua: &'lua Lua, args: MultiValue<'lua>) -> mlua::Result<Value<'lua>> {
    match with_bound(|mut bound| bound.acl_check(lua, args))?? {
        Answer::Value(value) => Ok(value),
        Answer::Error(text, _) => Err(mlua::Error::external(CallFailure(text.into_owned(), false))),
    }
}

/// What a dispatched command answers, before Lua sees it.
enum Answer<'lua> {
    /// The command's reply (not an error).
    Value(Value<'lua>),
    /// An error: the command's error reply, or the reason it was refused
    /// before it ran; and whether errorstats counted it already.
    Error(Cow<'static, str>, bool),
}

impl<'lua> Answer<'lua> {
    /// As `redis.pcall` gives it: the value, or an error table.
    fn into_value(self, lua: &'lua Lua) -> mlua::Result<Value<'lua>> {
        match self {
            Answer::Value(value) => Ok(value),
            Answer::Error(text, counted) => {
                let t = lua.create_table()?;
                t.raw_set("err", text.as_ref())?;
                if counted {
                    t.raw_set(convert::COUNTED, true)?;
                }
                Ok(Value::Table(t))
            }
        }
    }
}

/// As `redis.call` gives it: the value, or the error raised.
fn raise(answer: Answer<'_>) -> mlua::Result<Value<'_>> {
    match answer {
        Answer::Value(value) => Ok(value),
        Answer::Error(text, counted) => Err(mlua::Error::external(CallFailure(
            text.into_owned(),
            counted,
        ))),
    }
}

/// The count hook: once the script is busy, serves other clients; raises
/// the kill error when asked to stop, and from then on at every line, so
/// a `pcall` in the script cannot keep it alive.
fn hook(lua: &Lua, _: mlua::Debug) -> mlua::Result<()> {
    // The slot is set for the whole run and no call holds it while Lua
    // instructions run, so the hook finds it.
    let stop = RUN.is_set() && RUN.with(|mut bound| bound.interrupt());
    if stop {
        tracing::warn!("Lua script killed by user with SCRIPT KILL.");
        lua.set_hook(HookTriggers::EVERY_LINE, |_, _| {
            Err(mlua::Error::runtime(KILLED))
        });
        return Err(mlua::Error::runtime(KILLED));
    }
    Ok(())
}

impl Bound<'_> {
    /// Past the threshold, lets the event loop serve others; answers
    /// whether the script must stop.
    fn interrupt(&mut self) -> bool {
        let status = &mut self.run.status;
        if !status.timed_out {
            let elapsed = status.started.elapsed().as_millis() as u64;
            if elapsed < status.threshold_ms {
                return false;
            }
            status.timed_out = true;
            status.command = self.caller.iter().map(<[u8]>::to_vec).collect();
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
        let ctx = &mut self.ctx;
        if let Some(busy) = ctx.busy.as_deref_mut() {
            let state = &mut *ctx.state;
            state.keyspace.now_ms = crate::state::unix_ms();
            busy.serve(BusyView {
                state,
                script: status,
            });
        }
        status.killed
    }

    /// Lays a call's arguments out in the request buffer, or the error
    /// Redis answers when there are none or one is neither a string nor
    /// a number (shared by `redis.call` and `redis.acl_check_cmd`).
    fn lay_out<'lua>(&mut self, args: &MultiValue<'lua>) -> Option<Answer<'lua>> {
        if args.is_empty() {
            return Some(Answer::Error(Cow::Borrowed(NO_ARGUMENTS), false));
        }
        if !self.take_arguments(args) {
            return Some(Answer::Error(Cow::Borrowed(ARG_TYPES), false));
        }
        None
    }

    /// Lays the call's arguments out in the request buffer; `false` if
    /// one is neither a string nor a number.
    fn take_arguments(&mut self, args: &MultiValue<'_>) -> bool {
        let Scratch {
            request, ranges, ..
        } = &mut self.run.scratch;
        request.clear();
        ranges.clear();
        for value in args.iter() {
            let start = request.len();
            match value {
                Value::String(s) => request.extend_from_slice(s.as_bytes()),
                // Numbers as C's `%.17g`, as Redis converts them.
                Value::Integer(n) => request.extend_from_slice(format_double(*n as f64).as_bytes()),
                Value::Number(n) => request.extend_from_slice(format_double(*n).as_bytes()),
                _ => return false,
            }
            ranges.push((start, request.len()));
        }
        true
    }

    /// `redis.acl_check_cmd`: whether the user may run the command.
    fn acl_check<'lua>(
        &mut self,
        _: &'lua Lua,
        args: MultiValue<'lua>,
    ) -> mlua::Result<Answer<'lua>> {
        if let Some(refusal) = self.lay_out(&args) {
            return Ok(refusal);
        }
        let args = Args::new(&self.run.scratch.request, &self.run.scratch.ranges);
        let Ok((container, spec)) = resolve(&args) else {
            return Ok(Answer::Error(Cow::Borrowed(ACL_CHECK_UNKNOWN), false));
        };
        let allowed = crate::commands::acl_permitted(&self.ctx, container, spec, &args);
        Ok(Answer::Value(Value::Boolean(allowed)))
    }

    /// `redis.call` / `redis.pcall`: runs one command.
    fn command<'lua>(
        &mut self,
        lua: &'lua Lua,
        args: MultiValue<'lua>,
    ) -> mlua::Result<Answer<'lua>> {
        if let Some(refusal) = self.lay_out(&args) {
            return Ok(refusal);
        }
        drop(args);
        let Bound { ctx, run, .. } = self;
        let RunData {
            scratch,
            limits,
            status,
        } = &mut **run;
        let args = Args::new(&scratch.request, &scratch.ranges);
        let (container, spec) = match refusal(ctx, limits, &args) {
            Ok(found) => found,
            Err((name, text)) => {
                // A command refused here is counted as Redis counts it:
                // one error reply and, for a known command, a rejected
                // call; the answer says so, so that the script's failure
                // does not count it again.
                if !ctx.session.is_replay {
                    let table = &mut ctx.state.stats.commands;
                    table.error(&text);
                    if let Some(name) = name {
                        table.of(name).rejected_calls += 1;
                    }
                }
                return Ok(Answer::Error(text, true));
            }
        };
        let mut reply = ReplyBuf {
            buf: std::mem::take(&mut scratch.reply),
            proto: if api::resp3() {
                Protocol::Resp3
            } else {
                Protocol::Resp2
            },
        };
        reply.buf.clear();
        run_inner(ctx, &mut reply, container, spec, &args);
        scratch.reply = reply.buf;
        if spec.has(WRITE) {
            // Once it wrote, a script can neither be killed nor refused for
            // memory: stopping it half-way would leave half its effects.
            status.wrote = true;
            super::OOM_ALLOWED.with(|r| r.set(true));
        }
        let reply = &scratch.reply;
        if let Some(line) = reply.strip_prefix(b"-") {
            // The command that replied the error has counted it already.
            let end = line
                .windows(2)
                .position(|w| w == b"\r\n")
                .unwrap_or(line.len());
            let text = String::from_utf8_lossy(line.get(..end).unwrap_or_default());
            return Ok(Answer::Error(Cow::Owned(text.into_owned()), true));
        }
        let mut at = 0;
        Ok(Answer::Value(convert::resp_to_lua(lua, reply, &mut at)?))
    }
}

/// A resolved command, or why a script may not run it (the command's
/// name for its stats when it is known).
type Checked = Result<
    (
        Option<&'static crate::commands::table::CommandSpec>,
        &'static crate::commands::table::CommandSpec,
    ),
    (Option<crate::cmdstats::CommandName>, Cow<'static, str>),
>;

/// Resolves the command and checks what a script's call must pass:
/// arity, `noscript`, ACL, a writable master, a read-only script.
fn refusal(ctx: &mut Ctx<'_>, limits: &mut Limits, args: &Args<'_>) -> Checked {
    let Ok((container, spec)) = resolve(args) else {
        return Err((
            None,
            Cow::Borrowed("ERR Unknown Redis command called from script"),
        ));
    };
    let name = crate::commands::stats_name(container, spec);
    let refuse = |text: &'static str| Err((Some(name), Cow::Borrowed(text)));
    if !spec.arity_ok(args.len()) {
        return refuse("ERR Wrong number of args calling Redis command from script");
    }
    let noscript = spec.has(NOSCRIPT) || container.is_some_and(|c| c.has(NOSCRIPT));
    if noscript && !super::deny_disabled() {
        return refuse("ERR This Redis command is not allowed from script");
    }
    // A script allowed to start on a stale replica (`allow-stale`) may
    // still only call commands that serve stale data.
    let obeyed = ctx.session.is_master || ctx.session.is_replay;
    if !spec.has(STALE) && !obeyed && crate::commands::replication::running_stale(ctx) {
        return refuse("ERR Can not execute the command on a stale replica");
    }
    if let Err(text) = crate::commands::acl_script_check(ctx, container, spec, args) {
        return Err((Some(name), Cow::Owned(text)));
    }
    // A write needs good replicas, and a writable master, as outside.
    if let Some(text) = crate::commands::replication::refusal(ctx, spec.flags) {
        return refuse(text);
    }
    if limits.read_only && spec.has(WRITE | MAY_REPLICATE) {
        return refuse("ERR Write commands are not allowed from read-only scripts.");
    }
    if let Some(text) = super::cluster_check::refusal(ctx, limits, spec, args) {
        return refuse(text);
    }
    Ok((container, spec))
}

/// Runs the command with its reply going to `reply`; what it logs is
/// dropped again if the script turned logging off (`redis.set_repl`).
fn run_inner(
    ctx: &mut Ctx<'_>,
    reply: &mut ReplyBuf,
    container: Option<&'static crate::commands::table::CommandSpec>,
    spec: &'static crate::commands::table::CommandSpec,
    args: &Args<'_>,
) {
    let mut inner = Ctx {
        state: &mut *ctx.state,
        session: &mut *ctx.session,
        reply,
        prop: &mut *ctx.prop,
        busy: None,
    };
    let before = (
        inner.prop.buf.len(),
        inner.prop.commands,
        inner.prop.first_db,
        inner.prop.last_db,
    );
    run(&mut inner, container, spec, args);
    if !api::logging() {
        // `redis.set_repl` without REPL_AOF: the command is not logged.
        let prop = &mut *inner.prop;
        prop.buf.truncate(before.0);
        (prop.commands, prop.first_db, prop.last_db) = (before.1, before.2, before.3);
    }
}

const NO_ARGUMENTS: &str = "ERR Please specify at least one argument for this redis lib call";

/// `redis.acl_check_cmd` of a command that does not exist.
pub(super) const ACL_CHECK_UNKNOWN: &str = "ERR Invalid command passed to redis.acl_check_cmd()";

const ARG_TYPES: &str = "ERR Lua redis lib command arguments must be strings or integers";

/// A fresh status for a script starting now.
pub fn status(ctx: &Ctx<'_>, eval: bool, name: &str) -> RunStatus {
    let threshold = ctx.state.config.busy_reply_threshold_ms;
    RunStatus {
        started: Instant::now(),
        threshold_ms: threshold,
        eval,
        name: name.to_string(),
        // Filled from the caller once the script is busy (`interrupt`).
        command: Vec::new(),
        wrote: false,
        timed_out: false,
        killed: false,
        shutdown: false,
    }
}
