//! Connection commands: PING, ECHO, SELECT, AUTH, HELLO, QUIT, RESET,
//! (CLIENT is in `client.rs`.)

use std::borrow::Cow;

use super::table::*;
use super::{acl, acl_check};
use super::{errors, int_arg, upper, CmdResult, Ctx};
use crate::resp::{Args, Protocol};

/// The Redis version reported to clients. Tools pick features by version;
/// Ferrite implements Redis 7.0's commands and replies.
pub const REDIS_VERSION: &str = "7.0.15";

pub(super) fn ping(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    // A RESP2 client in Pub/Sub mode reads only arrays: PING answers as a
    // message would, `["pong", argument or ""]`.
    if args.len() <= 2
        && ctx.reply.proto == Protocol::Resp2
        && ctx.state.pubsub.is_subscribed(ctx.session.id)
    {
        ctx.reply.array(2);
        ctx.reply.bulk(b"pong");
        ctx.reply
            .bulk(if args.len() == 2 { args.get(1) } else { b"" });
        return Ok(());
    }
    match args.len() {
        1 => ctx.reply.simple("PONG"),
        2 => ctx.reply.bulk(args.get(1)),
        _ => {
            return Err(Cow::Borrowed(
                "ERR wrong number of arguments for 'ping' command",
            ))
        }
    }
    Ok(())
}

pub(super) fn echo(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    ctx.reply.bulk(args.get(1));
    Ok(())
}

fn db_index(
    ctx: &Ctx<'_>,
    args: &Args<'_>,
    index: usize,
    name: &'static str,
) -> Result<usize, Cow<'static, str>> {
    let n = int_arg(args, index).map_err(|_| Cow::Borrowed(name))?;
    if n < 0 || n as usize >= ctx.state.keyspace.databases() {
        return Err(Cow::Borrowed("ERR DB index is out of range"));
    }
    Ok(n as usize)
}

pub(super) fn select(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    // As Redis: in cluster mode only database 0 exists.
    if ctx.state.cluster.is_some() && super::int_arg(args, 1)? != 0 {
        return Err(Cow::Borrowed("ERR SELECT is not allowed in cluster mode"));
    }
    let db = db_index(ctx, args, 1, errors::NOT_INTEGER)?;
    ctx.session.db = db;
    if let Some(info) = ctx.state.clients.get_mut(&ctx.session.id) {
        info.db = db;
    }
    ctx.reply.ok();
    Ok(())
}

pub(super) fn swapdb(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let a = db_index(ctx, args, 1, "ERR invalid first DB index")?;
    let b = db_index(ctx, args, 2, "ERR invalid second DB index")?;
    ctx.state.keyspace.swap_db(a, b);
    ctx.propagate_args(args);
    ctx.reply.ok();
    Ok(())
}

/// The refusal of `AUTH <password>` while `default` needs no password.
const AUTH_WITHOUT_PASSWORD: &str = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?";

pub(super) fn auth(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    // As Redis: the password (and user) are hidden from SLOWLOG, unless
    // the form is wrong anyway.
    if args.len() <= 3 {
        for at in 1..args.len() {
            ctx.redact(at);
        }
    }
    let (user, password) = match args.len() {
        2 => {
            if ctx.state.acl.default_user().is_some_and(|u| u.nopass) {
                return Err(Cow::Borrowed(AUTH_WITHOUT_PASSWORD));
            }
            (crate::users::DEFAULT_USER, args.get(1))
        }
        3 => (args.get(1), args.get(2)),
        _ => return Err(Cow::Borrowed(errors::SYNTAX)),
    };
    acl_check::authenticate(ctx, args.get(0), user, password).map_err(Cow::Borrowed)?;
    ctx.reply.ok();
    Ok(())
}

pub(super) fn hello(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let mut proto = ctx.reply.proto;
    let mut i = 1;
    if args.len() > 1 {
        let version = int_arg(args, 1)
            .map_err(|_| Cow::Borrowed("ERR Protocol version is not an integer or out of range"))?;
        proto = match version {
            2 => Protocol::Resp2,
            3 => Protocol::Resp3,
            _ => return Err(Cow::Borrowed("NOPROTO unsupported protocol version")),
        };
        i = 2;
    }
    let mut name = None;
    while i < args.len() {
        match upper(args, i).as_slice() {
            b"AUTH" if i + 2 < args.len() => {
                ctx.redact(i + 1);
                ctx.redact(i + 2);
                acl_check::authenticate(ctx, args.get(0), args.get(i + 1), args.get(i + 2))
                    .map_err(Cow::Borrowed)?;
                i += 3;
            }
            b"SETNAME" if i + 1 < args.len() => {
                name = Some(args.get(i + 1).to_vec());
                i += 2;
            }
            _ => {
                return Err(Cow::Owned(format!(
                    "ERR Syntax error in HELLO option '{}'",
                    String::from_utf8_lossy(args.get(i))
                )))
            }
        }
    }
    if !ctx.session.authenticated {
        return Err(Cow::Borrowed("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"));
    }
    if let Some(name) = name {
        set_name(ctx, &name)?;
    }
    ctx.reply.proto = proto;
    if let Some(info) = ctx.state.clients.get_mut(&ctx.session.id) {
        info.resp = proto.version();
    }
    ctx.reply.map(7);
    ctx.reply.bulk(b"server");
    ctx.reply.bulk(b"redis");
    ctx.reply.bulk(b"version");
    ctx.reply.bulk(REDIS_VERSION.as_bytes());
    ctx.reply.bulk(b"proto");
    ctx.reply.int(proto.version());
    ctx.reply.bulk(b"id");
    ctx.reply.int(ctx.session.id as i64);
    // As Redis: the mode says whether cluster mode is on, the role
    // whether this server follows a primary.
    ctx.reply.bulk(b"mode");
    let mode: &[u8] = if ctx.state.cluster.is_some() {
        b"cluster"
    } else {
        b"standalone"
    };
    ctx.reply.bulk(mode);
    ctx.reply.bulk(b"role");
    let role: &[u8] = if ctx.state.repl.master.is_some() {
        b"replica"
    } else {
        b"master"
    };
    ctx.reply.bulk(role);
    ctx.reply.bulk(b"modules");
    ctx.reply.array(0);
    Ok(())
}

pub(super) fn quit(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    ctx.session.close_after_reply = true;
    ctx.reply.ok();
    Ok(())
}

pub(super) fn reset(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    ctx.state.pubsub.forget_client(ctx.session.id);
    ctx.session.multi = None;
    super::transactions::unwatch_all(&mut ctx.state.keyspace, ctx.session);
    ctx.session.db = 0;
    ctx.session.name = None;
    ctx.session.authenticated = ctx.state.acl.default_open();
    ctx.session.user = None;
    ctx.reply.proto = Protocol::Resp2;
    if let Some(info) = ctx.state.clients.get_mut(&ctx.session.id) {
        info.db = 0;
        info.name.clear();
        info.user.clear();
        info.resp = 2;
    }
    ctx.reply.simple("RESET");
    Ok(())
}

pub(super) fn set_name(ctx: &mut Ctx<'_>, name: &[u8]) -> CmdResult {
    if name.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        return Err(Cow::Borrowed(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    ctx.session.name = (!name.is_empty()).then(|| name.into());
    if let Some(info) = ctx.state.clients.get_mut(&ctx.session.id) {
        info.name = String::from_utf8_lossy(name).into_owned();
    }
    Ok(())
}

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("ping", -1, C, K0, "connection", "Returns PONG.", ping).with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
    cmd!("echo", 2, C | LOADING | STALE, K0, "connection", "Returns its argument.", echo),
    cmd!("select", 2, C | LOADING | STALE, K0, "connection", "Selects a database.", select),
    cmd!("swapdb", 3, WRITE | FAST | WHOLE_DB, K0, "server", "Swaps two databases.", swapdb).with_acl(acl::DANGEROUS | acl::KEYSPACE),
    cmd!("auth", -2, C | NOAUTH | ALLOW_BUSY | LOADING | NOSCRIPT | STALE, K0, "connection", "Authenticates.", auth),
    cmd!("hello", -1, C | NOAUTH | ALLOW_BUSY | LOADING | NOSCRIPT | STALE, K0, "connection", "Handshakes and picks RESP2 or RESP3.", hello),
    cmd!("quit", -1, C | NOAUTH | NOQUEUE | ALLOW_BUSY | LOADING | NOSCRIPT | STALE, K0, "connection", "Closes the connection.", quit),
    cmd!("readonly", 1, C | LOADING | STALE, K0, "cluster", "Enables read queries for a connection to a cluster replica node.", super::cluster_topology::readonly).with_acl(acl::CONNECTION),
    cmd!("readwrite", 1, C | LOADING | STALE, K0, "cluster", "Disables read queries for a connection to a cluster replica node.", super::cluster_topology::readwrite).with_acl(acl::CONNECTION),
    cmd!("reset", 1, C | NOAUTH | NOQUEUE | ALLOW_BUSY | LOADING | NOSCRIPT | STALE, K0, "connection", "Resets the connection.", reset),
];
