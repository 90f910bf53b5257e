//! CLIENT: the connection's name and id, the list of connections, KILL,
//! REPLY and NO-EVICT.
//!
//! A command runs with only its own connection at hand, so KILL of
//! another connection queues the id in `State::killed_clients`; the event
//! loop closes those connections right after the command.

use std::borrow::Cow;

use super::connection::set_name;
use super::introspect::help_reply;
use super::table::*;
use super::{errors, int_arg, upper, CmdResult, Ctx};
use crate::client_memory::{multi_bytes, pubsub_bytes, transaction_bytes, Footprint};
use crate::resp::Args;

/// One CLIENT LIST line. `idle` and `cmd` are as of the connection's last
/// read or write (the caller's own: now, and this command). `argv-mem` is
/// 0: a command's arguments are parsed in place once it is complete,
/// never extracted ahead; `oll` is 0: replies go to one growable buffer,
/// not a list of blocks, whose capacity `omem` reports.
pub(super) fn client_line(ctx: &Ctx<'_>, id: u64) -> String {
    let now = crate::state::unix_ms();
    let info = ctx.state.clients.get(&id).cloned().unwrap_or_default();
    let own = id == ctx.session.id;
    let hub = &ctx.state.pubsub;
    let (idle, cmd, multi, qbuf, qbuf_free, obl, omem, multi_mem, tot_mem) = if own {
        // The caller's reply is being built: nothing of it is pending yet.
        let multi = ctx.session.multi.as_ref().map(Vec::len);
        let (qbuf, free) = ctx.session.query_buffer;
        let footprint = Footprint {
            query: (qbuf + free) as u64,
            output: 0,
            multi: transaction_bytes(ctx.session),
            pubsub: pubsub_bytes(hub, id),
        };
        let last = ctx.session.last_cmd.as_deref();
        let (multi_mem, total) = (multi_bytes(ctx.session), footprint.total());
        (0, last, multi, qbuf, free, 0, 0, multi_mem, total)
    } else {
        let idle = (now - info.last_ms).max(0) / 1000;
        // The ledger's figure is current; the rest is as of the
        // connection's last read or write.
        let total = ctx.state.client_memory.bytes_of(id).unwrap_or(0);
        (
            idle,
            info.cmd.as_deref(),
            info.multi,
            info.qbuf,
            info.qbuf_free,
            info.obl,
            info.omem,
            info.multi_mem,
            total,
        )
    };
    // Redis's flags, in its order: `O` MONITOR, `S` replica, `M` master,
    // `P` Pub/Sub, `x` MULTI, `b` blocked, `t` tracking, `R` broken
    // redirect, `B` BCAST, `U` Unix socket, `e` no-evict; `N` for none.
    let tracking = hub.tracking.clients.get(&id);
    let (sub, psub, ssub) = hub.counts(id);
    let repl = &ctx.state.repl;
    let mut flags = String::new();
    for (on, letter) in [
        (hub.monitors.contains(&id), 'O'),
        (repl.replicas.iter().any(|r| r.id == id), 'S'),
        (repl.link_client == Some(id), 'M'),
        (sub + psub + ssub > 0, 'P'),
        (multi.is_some(), 'x'),
        (ctx.state.blocking.is_blocked(id), 'b'),
        (tracking.is_some(), 't'),
        (tracking.is_some_and(|t| t.broken_redirect), 'R'),
        (tracking.is_some_and(|t| t.bcast), 'B'),
        (info.unix, 'U'),
        (ctx.state.client_memory.no_evict(id), 'e'),
    ] {
        if on {
            flags.push(letter);
        }
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let redir = tracking.map_or(-1, |t| t.redirect as i64);
    let multi = multi.map_or(-1, |queued| queued as i64);
    format!(
        "id={id} addr={} laddr={} fd=0 name={} age={} idle={idle} flags={flags} db={} sub={sub} psub={psub} ssub={ssub} multi={multi} qbuf={qbuf} qbuf-free={qbuf_free} argv-mem=0 multi-mem={multi_mem} rbs=0 rbp=0 obl={obl} oll=0 omem={omem} tot-mem={tot_mem} events=r cmd={} user={} redir={redir} resp={}\n",
        info.addr,
        info.laddr,
        info.name,
        (now - info.created_ms).max(0) / 1000,
        info.db,
        cmd.unwrap_or("NULL"),
        String::from_utf8_lossy(super::acl_check::client_user(&info)),
        info.resp
    )
}

/// The connection types CLIENT LIST TYPE and CLIENT KILL TYPE accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClientType {
    Normal,
    Replica,
    Master,
    PubSub,
}

fn client_type(name: &[u8]) -> Result<ClientType, CmdError> {
    match name.to_ascii_lowercase().as_slice() {
        b"normal" => Ok(ClientType::Normal),
        b"slave" | b"replica" => Ok(ClientType::Replica),
        b"master" => Ok(ClientType::Master),
        b"pubsub" => Ok(ClientType::PubSub),
        _ => Err(Cow::Owned(format!(
            "ERR Unknown client type '{}'",
            String::from_utf8_lossy(name)
        ))),
    }
}

use super::CmdError;

/// A connection's type: the link to this server's master, an attached
/// replica, `pubsub` while it has subscriptions, else normal.
fn type_of(ctx: &Ctx<'_>, id: u64) -> ClientType {
    let (sub, psub, ssub) = ctx.state.pubsub.counts(id);
    let repl = &ctx.state.repl;
    if repl.link_client == Some(id) {
        ClientType::Master
    } else if repl.replicas.iter().any(|r| r.id == id) {
        ClientType::Replica
    } else if sub + psub + ssub > 0 {
        ClientType::PubSub
    } else {
        ClientType::Normal
    }
}

fn list(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let ids: Vec<u64> = if args.len() == 4 && upper(args, 2) == b"TYPE" {
        let wanted = client_type(args.get(3))?;
        let ids: Vec<u64> = ctx.state.clients.keys().copied().collect();
        ids.into_iter()
            .filter(|id| type_of(ctx, *id) == wanted)
            .collect()
    } else if args.len() > 3 && upper(args, 2) == b"ID" {
        let mut ids = Vec::new();
        for at in 3..args.len() {
            let id = int_arg(args, at).map_err(|_| Cow::Borrowed("ERR Invalid client ID"))?;
            if let Ok(id) = u64::try_from(id) {
                if ctx.state.clients.contains_key(&id) {
                    ids.push(id);
                }
            }
        }
        ids
    } else if args.len() == 2 {
        ctx.state.clients.keys().copied().collect()
    } else {
        return Err(Cow::Borrowed(errors::SYNTAX));
    };
    let text: String = ids.into_iter().map(|id| client_line(ctx, id)).collect();
    ctx.reply.verbatim(&text);
    Ok(())
}

fn info(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let line = client_line(ctx, ctx.session.id);
    ctx.reply.verbatim(&line);
    Ok(())
}

/// What CLIENT KILL matches connections by.
#[derive(Default)]
struct KillFilter {
    addr: Option<String>,
    laddr: Option<String>,
    kind: Option<ClientType>,
    id: Option<u64>,
    user: Option<Vec<u8>>,
    skip_me: bool,
}

fn kill_filter(args: &Args<'_>) -> Result<KillFilter, CmdError> {
    if args.len() == 3 {
        // The old form names an address, and may name the caller.
        return Ok(KillFilter {
            addr: Some(String::from_utf8_lossy(args.get(2)).into_owned()),
            ..KillFilter::default()
        });
    }
    let mut filter = KillFilter {
        skip_me: true,
        ..KillFilter::default()
    };
    let mut at = 2;
    while at < args.len() {
        if at + 1 >= args.len() {
            return Err(Cow::Borrowed(errors::SYNTAX));
        }
        let value = args.get(at + 1);
        match upper(args, at).as_slice() {
            b"ID" => {
                let id = int_arg(args, at + 1)
                    .ok()
                    .filter(|&n| n >= 1)
                    .ok_or(Cow::Borrowed("ERR client-id should be greater than 0"))?;
                filter.id = Some(id as u64);
            }
            b"TYPE" => filter.kind = Some(client_type(value)?),
            b"ADDR" => filter.addr = Some(String::from_utf8_lossy(value).into_owned()),
            b"LADDR" => filter.laddr = Some(String::from_utf8_lossy(value).into_owned()),
            b"USER" => filter.user = Some(value.to_vec()),
            b"SKIPME" => match value.to_ascii_lowercase().as_slice() {
                b"yes" => filter.skip_me = true,
                b"no" => filter.skip_me = false,
                _ => return Err(Cow::Borrowed(errors::SYNTAX)),
            },
            _ => return Err(Cow::Borrowed(errors::SYNTAX)),
        }
        at += 2;
    }
    Ok(filter)
}

fn kill(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let filter = kill_filter(args)?;
    if let Some(user) = filter
        .user
        .as_ref()
        .filter(|u| !ctx.state.acl.users.contains_key(*u))
    {
        return Err(Cow::Owned(format!(
            "ERR No such user '{}'",
            String::from_utf8_lossy(user)
        )));
    }
    let me = ctx.session.id;
    let victims: Vec<u64> = ctx
        .state
        .clients
        .iter()
        .filter(|(id, info)| {
            filter.addr.as_ref().is_none_or(|a| *a == info.addr)
                && filter.laddr.as_ref().is_none_or(|a| *a == info.laddr)
                && filter.kind.is_none_or(|k| k == type_of(ctx, **id))
                && filter.id.is_none_or(|want| want == **id)
                && filter
                    .user
                    .as_ref()
                    .is_none_or(|u| u.as_slice() == super::acl_check::client_user(info))
                && !(filter.skip_me && **id == me)
        })
        .map(|(id, _)| *id)
        .collect();
    let killed = victims.len();
    for id in victims {
        if id == me {
            // Closed once this reply is written, as Redis does.
            ctx.session.close_after_reply = true;
        } else {
            kill_now(ctx, id);
        }
    }
    if args.len() == 3 {
        if killed == 0 {
            return Err(Cow::Borrowed("ERR No such client"));
        }
        ctx.reply.ok();
    } else {
        ctx.reply.int(killed as i64);
    }
    Ok(())
}

/// Queues client `id` for the event loop to close after this command and
/// ends its socket now, so its peer sees the connection gone even while
/// this command's transaction (a DEBUG SLEEP after the kill) still runs.
pub(super) fn kill_now(ctx: &mut Ctx<'_>, id: u64) {
    ctx.state.killed_clients.push(id);
    if let Some(busy) = ctx.busy.as_deref_mut() {
        busy.shut_down(id);
    }
}

fn setname(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    set_name(ctx, args.get(2))?;
    ctx.reply.ok();
    Ok(())
}

fn getname(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let name = ctx.session.name.clone();
    ctx.reply.bulk_opt(name.as_deref());
    Ok(())
}

fn id(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    ctx.reply.int(ctx.session.id as i64);
    Ok(())
}

/// Exempts the caller from client eviction (`maxmemory-clients`), or
/// makes it evictable again; its memory counts either way.
fn no_evict(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let on = match upper(args, 2).as_slice() {
        b"ON" => true,
        b"OFF" => false,
        _ => return Err(Cow::Borrowed(errors::SYNTAX)),
    };
    ctx.state.client_memory.set_no_evict(ctx.session.id, on);
    ctx.reply.ok();
    Ok(())
}

fn help(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    help_reply(
        ctx.reply,
        "CLIENT",
        &[
            "GETNAME",
            "    Returns the name of this connection.",
            "ID",
            "    Returns the id of this connection.",
            "INFO",
            "    Describes this connection as CLIENT LIST does.",
            "KILL <ip:port>",
            "    Closes the connection from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Closes the connections matching every option: ID <id>, TYPE <type>,",
            "    ADDR <ip:port>, LADDR <ip:port>, USER <name>, SKIPME (YES|NO).",
            "LIST [TYPE <type>] [ID <id> [<id> ...]]",
            "    Describes the open connections, all or those of a type or ids.",
            "NO-EVICT (ON|OFF)",
            "    Protects this connection from client eviction.",
            "REPLY (ON|OFF|SKIP)",
            "    Sends replies, stops sending them, or skips the next one.",
            "SETNAME <name>",
            "    Names this connection.",
        ],
    );
    Ok(())
}

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("client", -2, 0, K0, "connection", "Manages connections.", setname).with_subcommands(CLIENT),
];

/// The subcommands' flags, as Redis's.
const SUB: u32 = NOSCRIPT | LOADING | STALE;

/// CLIENT's subcommands.
#[rustfmt::skip]
static CLIENT: &[CommandSpec] = &[
    cmd!("setname", 3, SUB, K0, "connection", "Names the connection.", setname),
    cmd!("getname", 2, SUB, K0, "connection", "Returns the connection's name.", getname),
    cmd!("id", 2, SUB, K0, "connection", "Returns the connection's id.", id),
    cmd!("info", 2, SUB, K0, "connection", "Describes this connection.", info).with_tips(&["nondeterministic_output"]),
    cmd!("list", -2, ADMIN | SUB, K0, "connection", "Describes open connections.", list).with_tips(&["nondeterministic_output"]),
    cmd!("kill", -3, ADMIN | SUB, K0, "connection", "Closes connections.", kill),
    cmd!("reply", 3, SUB, K0, "connection", "Turns this connection's replies on or off.", super::notify::client_reply),
    // Client-side caching (`tracking.rs`).
    cmd!("tracking", -3, SUB, K0, "connection", "Controls server-assisted client-side caching for the connection.", super::tracking::client_tracking),
    cmd!("caching", 3, SUB, K0, "connection", "Instructs the server whether to track the keys in the next request.", super::tracking::client_caching),
    cmd!("getredir", 2, SUB, K0, "connection", "Returns the client ID to which the connection's tracking notifications are redirected.", super::tracking::client_getredir),
    cmd!("trackinginfo", 2, SUB, K0, "connection", "Returns information about server-assisted client-side caching for the connection.", super::tracking::client_trackinginfo),
    // Blocking and pausing (`blocking.rs`).
    cmd!("unblock", -3, ADMIN | SUB, K0, "connection", "Unblocks a client blocked by a blocking command.", super::blocking::client_unblock),
    cmd!("pause", -3, ADMIN | SUB, K0, "connection", "Suspends commands of clients.", super::blocking::client_pause),
    cmd!("unpause", 2, ADMIN | SUB, K0, "connection", "Resumes paused clients.", super::blocking::client_unpause),
    cmd!("no-evict", 3, ADMIN | SUB, K0, "connection", "Sets the client eviction mode.", no_evict),
    cmd!("help", 2, LOADING | STALE, K0, "connection", "Explains CLIENT's subcommands.", help),
];
