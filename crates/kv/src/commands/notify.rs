//! What runs around every command for Pub/Sub, keyspace notifications,
//! client-side caching and MONITOR: the API commands call to raise a
//! keyspace event ([`Ctx::notify`]), the RESP2 Pub/Sub mode's refusal,
//! and the hooks [`super::execute`] and [`super::run`] call.

use super::pubsub::flush_inline;
use super::{full_name, CmdError, CommandSpec, Ctx};
use crate::keyspace::events::{KEYEVENT, KEYSPACE};
use crate::resp::{Args, Protocol};
use crate::server::notify::{prepare, settle};
use crate::server::pubsub::{proto_of, ReplyMode, When};

/// Commands a RESP2 client may send while subscribed to something.
const ALLOWED_WHILE_SUBSCRIBED: &[&str] = &[
    "ping",
    "subscribe",
    "ssubscribe",
    "unsubscribe",
    "sunsubscribe",
    "psubscribe",
    "punsubscribe",
    "quit",
    "reset",
];

impl Ctx<'_> {
    /// Raises keyspace event `event` of class `class`
    /// (`keyspace::events`) for `key` in the client's database: Redis's
    /// `notifyKeyspaceEvent`. Call it where Redis does, after the change.
    pub fn notify(&mut self, class: u32, event: &'static str, key: &[u8]) {
        let db = self.session.db;
        self.notify_db(class, event, db, key);
    }

    /// Raises `del` (generic) if `key` no longer exists: after a command
    /// removed the last element of a collection, which removes the key.
    pub fn notify_del_if_gone(&mut self, key: &[u8]) {
        let db = self.session.db;
        if self.state.config.notify_keyspace_events & crate::keyspace::events::GENERIC != 0
            && !self.state.keyspace.contains(db, key)
        {
            self.notify(crate::keyspace::events::GENERIC, "del", key);
        }
    }

    /// [`Ctx::notify`] for a key of database `db` (MOVE, COPY ... DB).
    pub fn notify_db(&mut self, class: u32, event: &'static str, db: usize, key: &[u8]) {
        let flags = self.state.config.notify_keyspace_events;
        if flags & class == 0 || flags & (KEYSPACE | KEYEVENT) == 0 {
            return;
        }
        self.state.keyspace.queue_event(class, event, db, key);
        settle(self.state);
        flush_inline(self);
    }
}

/// The refusal of a command a RESP2 client in Pub/Sub mode may not run.
pub(super) fn subscribed_refusal(
    ctx: &Ctx<'_>,
    container: Option<&CommandSpec>,
    spec: &CommandSpec,
) -> Option<CmdError> {
    if ctx.reply.proto != Protocol::Resp2 || !ctx.state.pubsub.is_subscribed(ctx.session.id) {
        return None;
    }
    if container.is_none() && ALLOWED_WHILE_SUBSCRIBED.contains(&spec.name) {
        return None;
    }
    Some(format!(
        "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
        full_name(container, spec)
    ).into())
}

/// Before a client's command: it is the running client.
pub(super) fn begin(ctx: &mut Ctx<'_>) {
    ctx.state.pubsub.current = ctx.session.id;
    ctx.state.pubsub.reply_start = ctx.reply.buf.len();
    prepare(ctx.state);
    // Invalidations of keys over the tracking table's limit precede the
    // command's reply, as Redis sends them.
    flush_inline(ctx);
}

/// After a command's handler (each command of an EXEC too): publishes
/// what the keyspace recorded, records the keys a tracking client read,
/// and shows the command to MONITOR clients. What the running client
/// received meanwhile (messages about keys it changed or expired while
/// reading) goes before the command's reply, which began at
/// `reply_start`, as Redis writes it at the time of the change.
pub(super) fn after_handler(
    ctx: &mut Ctx<'_>,
    spec: &CommandSpec,
    args: &Args<'_>,
    reply_start: usize,
) {
    settle(ctx.state);
    let hub = &mut ctx.state.pubsub;
    if !hub.inline.is_empty() {
        if hub.silenced() || reply_start > ctx.reply.buf.len() {
            flush_inline(ctx);
        } else {
            let inline = std::mem::take(&mut hub.inline);
            ctx.reply.buf.splice(reply_start..reply_start, inline);
        }
    }
    let id = ctx.session.id;
    if spec.has(super::flags::READONLY)
        && !spec.has(super::flags::PUBSUB)
        && !matches!(spec.name, "eval_ro" | "evalsha_ro")
        && ctx.state.pubsub.tracking.clients.contains_key(&id)
    {
        // As Redis: a read inside a script makes the caller track the
        // keys the script declared, not the ones the read named.
        if let Some(keys) = super::scripting::declared_keys() {
            ctx.state.pubsub.tracking.remember(id, keys.into_iter());
        } else {
            let mut positions = Vec::new();
            spec.keys.positions(args, &mut positions);
            let keys = positions.into_iter().map(|at| args.get(at).into());
            ctx.state.pubsub.tracking.remember(id, keys);
        }
    }
    if !ctx.state.pubsub.monitors.is_empty()
        && !ctx.session.is_replay
        && !spec.has(super::flags::SKIP_MONITOR | super::flags::ADMIN)
    {
        feed_monitors(ctx, args);
    }
}

/// After a client's command, EXEC included: what it caused for itself to
/// follow the reply (invalidations of keys it changed), then it is no
/// longer the running client. CLIENT CACHING holds for one command.
pub(super) fn end(ctx: &mut Ctx<'_>) {
    settle(ctx.state);
    flush_inline(ctx);
    let hub = &mut ctx.state.pubsub;
    hub.current = 0;
    if !hub.reply_modes.is_empty() {
        end_reply_mode(ctx);
    }
    let hub = &mut ctx.state.pubsub;
    if !hub.after.is_empty() {
        ctx.reply.buf.append(&mut hub.after);
    }
    if !hub.tracking.clients.is_empty() {
        let by_client = ctx
            .session
            .last_cmd
            .as_deref()
            .is_some_and(|c| c.starts_with("client"));
        if ctx.session.multi.is_none() && !by_client {
            if let Some(t) = hub.tracking.clients.get_mut(&ctx.session.id) {
                t.caching = false;
            }
        }
    }
}

/// CLIENT REPLY OFF / SKIP at the end of a command: drops its reply but
/// keeps its pushes, then moves SKIP on to the next command.
fn end_reply_mode(ctx: &mut Ctx<'_>) {
    let id = ctx.session.id;
    let hub = &mut ctx.state.pubsub;
    let Some(mode) = hub.reply_modes.get_mut(&id) else {
        return;
    };
    if mode.off || mode.skip {
        ctx.reply.buf.truncate(hub.reply_start);
        ctx.reply.buf.append(&mut hub.kept);
    }
    mode.skip = std::mem::take(&mut mode.skip_next);
    if *mode == ReplyMode::default() {
        hub.reply_modes.remove(&id);
    }
}

/// Appends `arg` quoted as Redis's `sdscatrepr` quotes it.
fn push_repr(out: &mut Vec<u8>, arg: &[u8]) {
    out.push(b'"');
    for &b in arg {
        match b {
            b'\\' | b'"' => out.extend([b'\\', b]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

/// Sends one MONITOR line for the running command to every monitor:
/// `+<unix seconds>.<micros> [<db> <addr>] "arg" ...`; a command a
/// script runs shows `lua` as its address, as in Redis.
pub(super) fn feed_monitors(ctx: &mut Ctx<'_>, args: &Args<'_>) {
    if ctx.state.pubsub.monitors.is_empty() || ctx.session.is_replay {
        return;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let addr = if super::scripting::running() {
        "lua"
    } else {
        ctx.state
            .clients
            .get(&ctx.session.id)
            .map_or("", |c| c.addr.as_str())
    };
    let mut line = format!(
        "+{}.{:06} [{} {}] ",
        now.as_secs(),
        now.subsec_micros(),
        ctx.session.db,
        addr
    )
    .into_bytes();
    // The secrets the command's handler marked (`Ctx::redact`: AUTH's
    // and HELLO AUTH's passwords), as SLOWLOG hides them too.
    let hidden = ctx.session.redacted.clone();
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            line.push(b' ');
        }
        if hidden.contains(&i) {
            push_repr(&mut line, b"(redacted)");
        } else {
            push_repr(&mut line, arg);
        }
    }
    line.extend_from_slice(b"\r\n");
    let state = &mut *ctx.state;
    for id in state.pubsub.monitors.clone() {
        let proto = proto_of(&state.clients, id);
        state.pubsub.send(id, proto, When::AfterReply, |r| {
            r.buf.extend_from_slice(&line)
        });
    }
}

/// CLIENT REPLY ON|OFF|SKIP: whether the server replies to this client's
/// commands (pushes always go out).
pub(super) fn client_reply(ctx: &mut Ctx<'_>, args: &Args<'_>) -> super::CmdResult {
    let id = ctx.session.id;
    let modes = &mut ctx.state.pubsub.reply_modes;
    match super::upper(args, 2).as_slice() {
        b"ON" => {
            modes.remove(&id);
            ctx.reply.ok();
        }
        b"OFF" => modes.entry(id).or_default().off = true,
        b"SKIP" => {
            let mode = modes.entry(id).or_default();
            if !mode.off {
                mode.skip_next = true;
            }
        }
        _ => return Err(super::errors::SYNTAX.into()),
    }
    Ok(())
}
