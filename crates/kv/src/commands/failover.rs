//! FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms]: a master hands
//! its role to one of its replicas without losing a write. The command
//! checks the request and pauses writes; the event loop carries it out
//! (`server/failover.rs`, where the protocol and its safety argument are).

use std::borrow::Cow;

use super::table::*;
use super::{errors, int_arg, upper, CmdResult, Ctx};
use crate::resp::Args;
use crate::server::failover;
use crate::server::repl::Failover;
use crate::state::unix_ms;

/// The parsed options.
struct Request {
    target: Option<(String, i64)>,
    timeout_ms: i64,
    force: bool,
}

fn parse(args: &Args<'_>) -> Result<Request, super::CmdError> {
    let mut r = Request {
        target: None,
        timeout_ms: 0,
        force: false,
    };
    let mut at = 1;
    while at < args.len() {
        match upper(args, at).as_slice() {
            b"TIMEOUT" if at + 1 < args.len() && r.timeout_ms == 0 => {
                r.timeout_ms = int_arg(args, at + 1)?;
                if r.timeout_ms <= 0 {
                    return Err(Cow::Borrowed("ERR FAILOVER timeout must be greater than 0"));
                }
                at += 2;
            }
            b"TO" if at + 2 < args.len() && r.target.is_none() => {
                let port = int_arg(args, at + 2)?;
                let host = String::from_utf8_lossy(args.get(at + 1)).into_owned();
                r.target = Some((host, port));
                at += 3;
            }
            b"FORCE" if !r.force => {
                r.force = true;
                at += 1;
            }
            _ => return Err(Cow::Borrowed(errors::SYNTAX)),
        }
    }
    Ok(r)
}

fn failover_cmd(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    if args.len() == 2 && upper(args, 1) == b"ABORT" {
        if ctx.state.repl.failover.is_none() {
            return Err(Cow::Borrowed("ERR No failover in progress."));
        }
        failover::abort(ctx.state, "Failover manually aborted");
        ctx.reply.ok();
        return Ok(());
    }
    let request = parse(args)?;
    let repl = &ctx.state.repl;
    if repl.failover.is_some() {
        return Err(Cow::Borrowed("ERR FAILOVER already in progress."));
    }
    if repl.is_replica() {
        return Err(Cow::Borrowed(
            "ERR FAILOVER is not valid when server is a replica.",
        ));
    }
    if repl.replicas.is_empty() && repl.pending.is_empty() {
        return Err(Cow::Borrowed("ERR FAILOVER requires connected replicas."));
    }
    if request.force && (request.timeout_ms == 0 || request.target.is_none()) {
        return Err(Cow::Borrowed(
            "ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
        ));
    }
    let target = match &request.target {
        Some((host, port)) => {
            let attached = repl
                .replicas
                .iter()
                .any(|r| r.ip.eq_ignore_ascii_case(host) && i64::from(r.port) == *port);
            if !attached {
                // A replica still in its full sync is not online yet.
                let text = if repl.pending.is_empty() {
                    "ERR FAILOVER target HOST and PORT is not a replica."
                } else {
                    "ERR FAILOVER target replica is not online."
                };
                return Err(Cow::Borrowed(text));
            }
            tracing::info!("FAILOVER requested to {host}:{port}.");
            Some((host.clone(), u16::try_from(*port).unwrap_or(0)))
        }
        None => {
            tracing::info!("FAILOVER requested to any replica.");
            None
        }
    };
    ctx.state.repl.failover = Some(Failover {
        target,
        end_ms: (request.timeout_ms > 0).then(|| unix_ms().saturating_add(request.timeout_ms)),
        force: request.force,
        in_progress: false,
    });
    ctx.state.blocking.failover_pause = true;
    ctx.reply.ok();
    Ok(())
}

/// The commands this file implements.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("failover", -1, ADMIN | NOSCRIPT | STALE, K0, "server", "Hands the master role to a replica without losing writes.", failover_cmd),
];
