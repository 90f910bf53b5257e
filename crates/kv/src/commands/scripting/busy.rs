//! What a script that runs past `busy-reply-threshold` lets other clients
//! do. The Lua hook (`run.rs`) calls back into the event loop through
//! [`Reenter`]; the loop reads, parses and answers other clients, and each
//! command it parses is decided here, from a [`BusyView`]. Only commands
//! with the `allow-busy` flag run, and none of them reads or changes data
//! the suspended script works on (see `docs/scripting.md`).

use std::time::Instant;

use super::super::accounting::stats_name;
use super::super::transactions::unwatch_all;
use super::super::{flags, resolve, Ctx, Propagation, Session};
use crate::resp::{Args, ReplyBuf};
use crate::state::State;

/// The BUSY refusal while an EVAL runs, as Redis words it.
pub const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// The BUSY refusal while an FCALL runs.
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
/// SCRIPT KILL and FUNCTION KILL when nothing runs.
pub const NOTBUSY: &str = "NOTBUSY No scripts in execution right now.";
const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";

/// The running script as SCRIPT KILL, FUNCTION KILL and FUNCTION STATS
/// see it.
#[derive(Debug)]
pub struct RunStatus {
    /// When the script started.
    pub started: Instant,
    /// `busy-reply-threshold` when it started (CONFIG SET is refused
    /// while it is busy, so this cannot change under it).
    pub threshold_ms: u64,
    /// EVAL (rather than FCALL): which KILL stops it, which BUSY text.
    pub eval: bool,
    /// The function's name, or `nil`-like empty for EVAL.
    pub name: String,
    /// The script's arguments, for FUNCTION STATS.
    pub command: Vec<Vec<u8>>,
    /// It ran a write command: it can no longer be killed.
    pub wrote: bool,
    /// It ran past the threshold: other clients are being served.
    pub timed_out: bool,
    /// SCRIPT KILL, FUNCTION KILL or SHUTDOWN NOSAVE asked it to stop.
    pub killed: bool,
    /// SHUTDOWN NOSAVE: the server stops once the script is unwound.
    pub shutdown: bool,
}

impl RunStatus {
    fn busy_text(&self) -> &'static str {
        if self.eval {
            BUSY_EVAL
        } else {
            BUSY_FUNCTION
        }
    }
}

/// What a busy re-entry may use: the server's state, of which it touches
/// only what holds no data (configuration, counters, the client table,
/// users, the watch table, Pub/Sub subscriptions), and the running
/// script. The keyspace's data, the log and Lua are not reached from
/// here (`docs/scripting.md`).
#[derive(Debug)]
pub struct BusyView<'a> {
    /// The server's state.
    pub state: &'a mut State,
    /// The running script.
    pub script: &'a mut RunStatus,
}

/// The event loop, re-entered from a busy script's hook.
pub trait Reenter: std::fmt::Debug {
    /// Accepts, reads, answers and writes whatever is ready now, deciding
    /// each command with [`busy_command`]; never waits.
    fn serve(&mut self, view: BusyView<'_>);

    /// Ends the socket of client `id` at once (CLIENT KILL): the event
    /// loop closes the connection itself once the running command is
    /// over, but its peer must see it gone now, as Redis frees a killed
    /// client before the command that killed it returns.
    fn shut_down(&mut self, _id: u64) {}
}

/// What became of a command sent while a script is busy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BusyOutcome {
    /// Answered (refused with BUSY, or run).
    Done,
    /// Allowed, but it needs state the re-entry does not have (the watch
    /// table, the Pub/Sub hub): it stays in the client's buffer, with
    /// everything after it, and runs once the script has ended.
    Wait,
}

/// Decides one command of another client while a script is busy, as
/// Redis's `processCommand` does then: unknown commands and bad arity
/// get their usual errors, commands without `allow-busy` get BUSY (and
/// spoil an open transaction; EXEC is aborted), and the few allowed ones
/// run here.
pub fn busy_command(
    view: &mut BusyView<'_>,
    session: &mut Session,
    reply: &mut ReplyBuf,
    args: &Args<'_>,
) -> BusyOutcome {
    if args.is_empty() {
        return BusyOutcome::Done;
    }
    let (container, spec) = match resolve(args) {
        Ok(found) => found,
        Err(e) => {
            session.multi_error |= session.multi.is_some();
            refuse(view, reply, None, &e);
            return BusyOutcome::Done;
        }
    };
    let name = Some(stats_name(container, spec));
    if !session.authenticated && !spec.has(flags::NOAUTH) {
        refuse(view, reply, name, "NOAUTH Authentication required.");
        return BusyOutcome::Done;
    }
    if !spec.arity_ok(args.len()) {
        session.multi_error |= session.multi.is_some();
        let text = format!(
            "ERR wrong number of arguments for '{}' command",
            super::super::full_name(container, spec)
        );
        refuse(view, reply, name, &text);
        return BusyOutcome::Done;
    }
    let busy = view.script.busy_text();
    if !spec.has(flags::ALLOW_BUSY) {
        if spec.name == "exec" && session.multi.is_some() {
            // The transaction is discarded, and with it the watches.
            unwatch_all(&mut view.state.keyspace, session);
            session.multi = None;
            let text = format!("EXECABORT Transaction discarded because of: {busy}");
            refuse(view, reply, name, &text);
            return BusyOutcome::Done;
        }
        session.multi_error |= session.multi.is_some();
        refuse(view, reply, name, busy);
        return BusyOutcome::Done;
    }
    let full = super::super::full_name(container, spec);
    let outcome = run_allowed(view, session, reply, args, &full);
    if outcome == BusyOutcome::Done {
        view.state.stats.commands_processed += 1;
        view.state
            .stats
            .commands
            .of(stats_name(container, spec))
            .calls += 1;
    }
    outcome
}

/// The `allow-busy` commands that need nothing but the session and the
/// running script's status.
fn run_allowed(
    view: &mut BusyView<'_>,
    session: &mut Session,
    reply: &mut ReplyBuf,
    args: &Args<'_>,
    full: &str,
) -> BusyOutcome {
    let busy = view.script.busy_text();
    match full {
        "multi" if session.multi.is_some() => {
            reply_error(view, reply, "ERR MULTI calls can not be nested")
        }
        "multi" => {
            session.multi = Some(Vec::new());
            session.multi_error = false;
            reply.ok();
        }
        "discard" if session.multi.take().is_none() => {
            reply_error(view, reply, "ERR DISCARD without MULTI")
        }
        "discard" => {
            unwatch_all(&mut view.state.keyspace, session);
            reply.ok();
        }
        "quit" => {
            unwatch_all(&mut view.state.keyspace, session);
            reply.ok();
            session.close_after_reply = true;
        }
        "watch" => watch(view, session, reply, args),
        "unwatch" | "auth" | "hello" | "reset" => run_handler(view, session, reply, args),
        "script|kill" => kill(view, reply, true),
        "function|kill" => kill(view, reply, false),
        "function|stats" if view.script.eval => reply_error(view, reply, busy),
        "function|stats" => stats_reply(reply, Some(view.script), &view.state.functions),
        "shutdown" => return shutdown(view, session, reply, args),
        _ => return BusyOutcome::Wait,
    }
    BusyOutcome::Done
}

/// WATCH while a script is busy. Unlike WATCH between commands, it does
/// not look the keys up (which could expire one, a change to the data the
/// suspended script works on): a key that expired before the WATCH and is
/// deleted after it counts as changed, so EXEC fails where Redis, which
/// notes the key as already expired, may let it run. Failing safe.
fn watch(view: &mut BusyView<'_>, session: &mut Session, reply: &mut ReplyBuf, args: &Args<'_>) {
    if session.multi.is_some() {
        return reply_error(view, reply, "ERR WATCH inside MULTI is not allowed");
    }
    let db = session.db;
    for key in args.iter().skip(1) {
        let version = view.state.keyspace.watch(db, key);
        session.watched.push((db, key.into(), version));
    }
    reply.ok();
}

/// UNWATCH, AUTH, HELLO and RESET while a script is busy: their own
/// handlers, which change only the calling client's session, the client
/// table, users' log and the watch and Pub/Sub tables, never data. They
/// log nothing (the propagation is dropped, and stays empty).
fn run_handler(
    view: &mut BusyView<'_>,
    session: &mut Session,
    reply: &mut ReplyBuf,
    args: &Args<'_>,
) {
    let Ok((_, spec)) = resolve(args) else {
        return;
    };
    let mut prop = Propagation::default();
    let mut ctx = Ctx {
        state: &mut *view.state,
        session: &mut *session,
        reply: &mut *reply,
        prop: &mut prop,
        busy: None,
    };
    let result = (spec.handler)(&mut ctx, args);
    session.redacted.clear();
    if let Err(text) = result {
        reply_error(view, reply, &text);
    }
    debug_assert!(prop.buf.is_empty(), "a busy-time command logged something");
}

/// SCRIPT KILL (`eval`) or FUNCTION KILL while a script is busy.
fn kill(view: &mut BusyView<'_>, reply: &mut ReplyBuf, eval: bool) {
    let script = &mut *view.script;
    if script.wrote {
        reply_error(view, reply, UNKILLABLE);
    } else if script.eval != eval {
        // Each KILL stops only its own kind, and answers with the other
        // kind's BUSY text otherwise.
        let text = script.busy_text();
        reply_error(view, reply, text);
    } else {
        script.killed = true;
        reply.ok();
    }
}

/// SHUTDOWN while a script is busy: only NOSAVE stops the server (the
/// script is unwound first, its effects not logged).
fn shutdown(
    view: &mut BusyView<'_>,
    session: &mut Session,
    reply: &mut ReplyBuf,
    args: &Args<'_>,
) -> BusyOutcome {
    let (mut nosave, mut save, mut abort) = (false, false, false);
    for arg in args.iter().skip(1) {
        match arg.to_ascii_uppercase().as_slice() {
            b"NOSAVE" => nosave = true,
            b"SAVE" => save = true,
            b"NOW" | b"FORCE" => {}
            b"ABORT" => abort = true,
            _ => {
                reply_error(view, reply, super::super::errors::SYNTAX);
                return BusyOutcome::Done;
            }
        }
    }
    if (abort && args.len() > 2) || (nosave && save) {
        reply_error(view, reply, super::super::errors::SYNTAX);
    } else if abort {
        reply_error(view, reply, "ERR No shutdown in progress.");
    } else if !nosave {
        let text = view.script.busy_text();
        reply_error(view, reply, text);
    } else {
        view.script.killed = true;
        view.script.shutdown = true;
        session.close_after_reply = true;
    }
    BusyOutcome::Done
}

/// An error reply, counted in the error statistics.
fn reply_error(view: &mut BusyView<'_>, reply: &mut ReplyBuf, text: &str) {
    reply.error(text);
    view.state.stats.commands.error(text);
}

/// A refusal: the error reply, counted as an error and a rejected call.
fn refuse(
    view: &mut BusyView<'_>,
    reply: &mut ReplyBuf,
    name: Option<crate::cmdstats::CommandName>,
    text: &str,
) {
    reply_error(view, reply, text);
    if let Some(name) = name {
        view.state.stats.commands.of(name).rejected_calls += 1;
    }
}

/// FUNCTION STATS: the running function (while one is busy) and the
/// engine's counts.
pub fn stats_reply(reply: &mut ReplyBuf, running: Option<&RunStatus>, libs: &super::Libraries) {
    reply.map(2);
    reply.bulk(b"running_script");
    match running {
        None => reply.null(),
        Some(script) => {
            reply.map(3);
            reply.bulk(b"name");
            reply.bulk(script.name.as_bytes());
            reply.bulk(b"command");
            reply.array(script.command.len());
            for arg in &script.command {
                reply.bulk(arg);
            }
            reply.bulk(b"duration_ms");
            reply.int(script.started.elapsed().as_millis() as i64);
        }
    }
    reply.bulk(b"engines");
    reply.map(1);
    reply.bulk(b"LUA");
    reply.map(2);
    reply.bulk(b"libraries_count");
    reply.int(libs.len() as i64);
    reply.bulk(b"functions_count");
    reply.int(libs.function_count() as i64);
}
