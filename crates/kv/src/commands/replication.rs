//! Replication commands. SYNC and PSYNC turn the connection into a
//! replica: the server answers with the dataset as an RDB file (or, for a
//! PSYNC the backlog can serve, the missing part of the stream), then
//! streams every write (`server/replicas.rs`). REPLCONF carries the
//! replica's details and acknowledgements; REPLICAOF makes this server a
//! replica of another, or a master again (`server/master_link.rs`); ROLE
//! reports which. `docs/replication.md` has the design.

use std::borrow::Cow;

use super::acl::{bit, DANGEROUS};
use super::table::*;
use super::{int_arg, upper, CmdResult, Ctx};
use crate::resp::Args;
use crate::server::repl::{Link, Master};
use crate::state::unix_ms;

/// Why a command with `flags` may not run now for this client: too few
/// good replicas for a write (`min-replicas-to-write`), a write on a
/// Whether `min-replicas-to-write` refuses writes on this master now.
pub(crate) fn too_few_good_replicas(ctx: &Ctx<'_>) -> bool {
    let (repl, c) = (&ctx.state.repl, &ctx.state.config);
    !repl.is_replica()
        && c.min_replicas_to_write > 0
        && c.min_replicas_max_lag_s > 0
        && (repl.good_replicas(c.min_replicas_max_lag_s, unix_ms()) as i64)
            < c.min_replicas_to_write
}

/// The refusal of a write for lack of good replicas.
pub(crate) const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";

/// read-only replica, or a command that needs fresh data on a replica
/// whose link is down (`replica-serve-stale-data no`). The master's own
/// stream is never refused.
pub(super) fn refusal(ctx: &Ctx<'_>, flags: u32) -> Option<&'static str> {
    use super::flags::{STALE, WRITE};
    if ctx.session.is_master || ctx.session.is_replay {
        return None;
    }
    let (repl, c) = (&ctx.state.repl, &ctx.state.config);
    let write = flags & WRITE != 0;
    if write && too_few_good_replicas(ctx) {
        return Some(NOREPLICAS);
    }
    if write && repl.is_replica() && c.replica_read_only {
        return Some("READONLY You can't write against a read only replica.");
    }
    if running_stale(ctx) && flags & STALE == 0 {
        return Some(MASTERDOWN);
    }
    loading_refusal(repl, flags)
}

/// Redis's refusal of a command that needs fresh data on a stale replica.
pub(crate) const MASTERDOWN: &str =
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

/// Whether this server is a replica whose link is down and which may not
/// serve its (stale) data: `replica-serve-stale-data no`.
pub(crate) fn running_stale(ctx: &Ctx<'_>) -> bool {
    let repl = &ctx.state.repl;
    repl.is_replica() && !repl.link_up() && !ctx.state.config.replica_serve_stale_data
}

/// The flags [`refusal`] checks for command `args` of `spec` at dispatch:
/// as Redis's `getCommandFlags`, a script's declared flags replace
/// EVAL's and FCALL's own (a script without `no-writes` is a write, one
/// without `allow-stale` is refused on a stale replica). The script is
/// looked up only where a refusal is possible: on a replica, or with
/// `min-replicas-to-write` set.
pub(super) fn dispatch_flags(ctx: &Ctx<'_>, spec: &CommandSpec, args: &Args<'_>) -> u32 {
    if ctx.state.repl.is_replica() || ctx.state.config.min_replicas_to_write > 0 {
        super::scripting::command_flags(ctx.state, spec, args)
    } else {
        spec.flags
    }
}

/// Redis's reply to a command refused while a diskless load runs.
pub(super) const LOADING_ERR: &str = "LOADING Redis is loading the dataset in memory";

/// While a full sync loads from the socket, as Redis: commands without
/// the `loading` flag wait for it to end, and while the old dataset is
/// served (`async_loading`) those flagged `no-async-loading`.
fn loading_refusal(repl: &crate::server::repl::Repl, flags: u32) -> Option<&'static str> {
    use super::flags::{LOADING, NO_ASYNC_LOADING};
    use crate::server::repl::Loading;
    let refused = match repl.loading {
        Loading::Off => false,
        Loading::Blocking { .. } => flags & LOADING == 0,
        Loading::Async { .. } => flags & NO_ASYNC_LOADING != 0,
    };
    refused.then_some(LOADING_ERR)
}

/// Refuses SYNC and PSYNC during a FAILOVER, and on a replica whose link
/// is down, as Redis does.
fn sync_refusal(ctx: &Ctx<'_>) -> Option<&'static str> {
    if ctx.state.repl.failover.is_some() {
        return Some("NOMASTERLINK Can't SYNC while failing over");
    }
    (ctx.state.repl.is_replica() && !ctx.state.repl.link_up())
        .then_some("NOMASTERLINK Can't SYNC while not connected with my master")
}

/// `PSYNC id offset FAILOVER` on a replica whose master hands over: it
/// becomes a master, if `id` is its history's ID (the master's).
fn take_over(ctx: &mut Ctx<'_>, replid: &[u8]) -> Result<(), super::CmdError> {
    let replid = String::from_utf8_lossy(replid);
    tracing::warn!("Failover request received for replid {replid}.");
    let repl = &mut ctx.state.repl;
    if !repl.is_replica() {
        return Err(Cow::Borrowed(
            "ERR PSYNC FAILOVER can't be sent to a master.",
        ));
    }
    if replid != repl.replid {
        return Err(Cow::Borrowed(
            "ERR PSYNC FAILOVER replid must match my replid.",
        ));
    }
    repl.promote();
    let addr = ctx
        .state
        .clients
        .get(&ctx.session.id)
        .map(|c| c.addr.clone());
    tracing::info!(
        "MASTER MODE enabled (failover request from 'addr={}')",
        addr.unwrap_or_default()
    );
    Ok(())
}

pub(super) fn sync(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    if let Some(e) = sync_refusal(ctx) {
        return Err(Cow::Borrowed(e));
    }
    // The server sends the payload once the command returns, so the
    // snapshot and the stream meet exactly between two commands.
    ctx.session.sync_requested = true;
    Ok(())
}

/// PSYNC replid offset [FAILOVER]: the server answers +CONTINUE or
/// +FULLRESYNC. With FAILOVER (sent by a master handing over to this
/// replica), this server first becomes a master, if the ID is its own.
pub(super) fn psync(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    if args.len() > 3 && args.get(3).eq_ignore_ascii_case(b"failover") {
        take_over(ctx, args.get(1))?;
    }
    if let Some(e) = sync_refusal(ctx) {
        return Err(Cow::Borrowed(e));
    }
    let Ok(offset) = int_arg(args, 2) else {
        let addr = ctx
            .state
            .clients
            .get(&ctx.session.id)
            .map(|c| c.addr.clone());
        tracing::warn!(
            "Replica {} asks for synchronization but with a wrong offset",
            addr.unwrap_or_default()
        );
        return Err(Cow::Borrowed(super::errors::NOT_INTEGER));
    };
    let replid = String::from_utf8_lossy(args.get(1)).into_owned();
    ctx.session.psync = Some((replid, offset));
    ctx.session.sync_requested = true;
    Ok(())
}

/// REPLCONF option value ...: a replica's listening port, address and
/// capabilities before PSYNC; its ACKs once attached (the server reads
/// those itself); GETACK from a master (the link answers it).
pub(super) fn replconf(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(Cow::Borrowed(super::errors::SYNTAX));
    }
    let mut at = 1;
    while at + 1 < args.len() {
        match upper(args, at).as_slice() {
            b"LISTENING-PORT" => {
                let port = int_arg(args, at + 1)?;
                ctx.session.replica_port = u16::try_from(port).unwrap_or(0);
            }
            b"IP-ADDRESS" => {
                let ip = String::from_utf8_lossy(args.get(at + 1)).into_owned();
                ctx.session.replica_ip = Some(ip);
            }
            b"CAPA" => {
                if args.get(at + 1).eq_ignore_ascii_case(b"eof") {
                    ctx.session.capa_eof = true;
                }
            }
            // Ferrite's payload never has more than the RDB file.
            b"RDB-ONLY" => {}
            // Acknowledgements and requests for them get no reply.
            b"ACK" | b"GETACK" => return Ok(()),
            _ => {
                return Err(Cow::Owned(format!(
                    "ERR Unrecognized REPLCONF option: {}",
                    String::from_utf8_lossy(args.get(at))
                )))
            }
        }
        at += 2;
    }
    ctx.reply.ok();
    Ok(())
}

/// REPLICAOF host port | NO ONE (and its old name SLAVEOF).
pub(super) fn replicaof(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let repl = &mut ctx.state.repl;
    if repl.failover.is_some() {
        return Err(Cow::Borrowed(
            "ERR REPLICAOF not allowed while failing over.",
        ));
    }
    if upper(args, 1) == b"NO" && upper(args, 2) == b"ONE" {
        if repl.promote() {
            tracing::info!("MASTER MODE enabled (user request)");
        }
        // CONFIG REWRITE writes the role as it is now, as Redis's does.
        ctx.state.config.replicaof.clear();
        crate::oom::follow_role(ctx.state);
        ctx.reply.ok();
        return Ok(());
    }
    let port = super::int_arg(args, 2)
        .ok()
        .and_then(|p| u16::try_from(p).ok())
        .ok_or(Cow::Borrowed("ERR Invalid master port"))?;
    let host = String::from_utf8_lossy(args.get(1)).into_owned();
    if let Some(m) = &repl.master {
        if m.host.eq_ignore_ascii_case(&host) && m.port == port {
            ctx.reply.simple("OK Already connected to specified master");
            return Ok(());
        }
    }
    tracing::info!("REPLICAOF {host}:{port} enabled (user request)");
    // Clients blocked on this server as a master must not wait for the
    // master's stream to serve them.
    let state = &mut *ctx.state;
    state
        .blocking
        .unblock_all_for_role_change(&mut state.keyspace);
    let repl = &mut state.repl;
    if repl.master.is_none() {
        // A master continuing as a replica: its history is its own stream.
        repl.stream_db = repl.seldb.unwrap_or(0);
    }
    state.config.replicaof = format!("{host} {port}");
    repl.master = Some(Master::new(host, port));
    repl.changed = true;
    crate::oom::follow_role(state);
    ctx.reply.ok();
    Ok(())
}

/// ROLE: `master`, its offset and its replicas; or `slave`, the master,
/// the link's state and the offset.
pub(super) fn role(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let repl = &ctx.state.repl;
    match &repl.master {
        None => {
            ctx.reply.array(3);
            ctx.reply.bulk(b"master");
            ctx.reply.int(repl.offset);
            ctx.reply.array(repl.replicas.len());
            for r in &repl.replicas {
                ctx.reply.array(3);
                ctx.reply.bulk(r.ip.as_bytes());
                ctx.reply.bulk(r.port.to_string().as_bytes());
                ctx.reply.bulk(r.ack.to_string().as_bytes());
            }
        }
        Some(m) => {
            ctx.reply.array(5);
            ctx.reply.bulk(b"slave");
            ctx.reply.bulk(m.host.as_bytes());
            ctx.reply.int(i64::from(m.port));
            ctx.reply.bulk(m.link.name().as_bytes());
            let offset = if m.link == Link::Connected {
                repl.offset
            } else {
                -1
            };
            ctx.reply.int(offset);
        }
    }
    Ok(())
}

/// The commands this file implements.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("sync", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, K0, "server", "Attaches a replica: the dataset, then every write.", sync),
    cmd!("psync", -3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, K0, "server", "Attaches a replica, continuing from an offset when the backlog holds it.", psync),
    cmd!("replconf", -1, ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY, K0, "server", "A replica's details and acknowledgements.", replconf),
    cmd!("replicaof", 3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | STALE, K0, "server", "Replicates another server, or stops replicating.", replicaof),
    cmd!("slaveof", 3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | STALE, K0, "server", "Replicates another server, or stops replicating (old name of REPLICAOF).", replicaof),
    cmd!("role", 1, NOSCRIPT | LOADING | STALE | FAST, K0, "server", "This server's role in replication.", role).with_acl(bit("admin") | DANGEROUS),
];
