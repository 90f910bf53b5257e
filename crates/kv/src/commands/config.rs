//! CONFIG (GET, SET, RESETSTAT, REWRITE) and INFO. The directives and
//! their syntax are `config::table`; the INFO sections are `crate::info`.

use std::borrow::Cow;

use super::table::*;
use super::{upper, CmdResult, Ctx};
use crate::config::Config;
use crate::resp::Args;
use crate::server::Planned;

/// Whether the calling client is connected over loopback (for
/// `enable-protected-configs local`).
pub(super) fn client_is_local(ctx: &Ctx<'_>) -> bool {
    ctx.state
        .clients
        .get(&ctx.session.id)
        .and_then(|c| c.addr.parse::<std::net::SocketAddr>().ok())
        .is_none_or(|a| a.ip().is_loopback())
}

fn config_get(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let mut found: Vec<(String, String)> = Vec::new();
    for pattern in args.iter().skip(2) {
        let pattern = String::from_utf8_lossy(pattern);
        for entry in ctx.state.config.get_matching(&pattern) {
            if !found.iter().any(|(k, _)| *k == entry.0) {
                found.push(entry);
            }
        }
    }
    ctx.reply.map(found.len());
    for (k, v) in found {
        ctx.reply.bulk(k.as_bytes());
        ctx.reply.bulk(v.as_bytes());
    }
    Ok(())
}

fn config_set(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    if !args.len().is_multiple_of(2) {
        return Err(Cow::Borrowed(super::errors::SYNTAX));
    }
    // As Redis, the values of secret directives (passwords) are hidden
    // from SLOWLOG and MONITOR.
    for at in (2..args.len()).step_by(2) {
        let name = String::from_utf8_lossy(args.get(at)).to_ascii_lowercase();
        let secret = crate::config::table::lookup(&name)
            .is_some_and(|d| d.has(crate::config::table::SENSITIVE));
        if secret {
            ctx.redact(at + 1);
        }
    }
    let text = |i: usize| String::from_utf8_lossy(args.get(i)).into_owned();
    let pairs: Vec<(String, String)> = (2..args.len())
        .step_by(2)
        .map(|i| (text(i), text(i + 1)))
        .collect();
    // As Redis, these cannot change while a full sync loads.
    let deny_loading = ["appendonly", "dir", "repl-diskless-load"];
    let loading = ctx.state.repl.loading != crate::server::repl::Loading::Off;
    if loading
        && pairs.iter().any(|(name, _)| {
            crate::config::table::lookup(&name.to_ascii_lowercase())
                .is_some_and(|d| deny_loading.contains(&d.name))
        })
    {
        return Err(Cow::Borrowed(super::replication::LOADING_ERR));
    }
    let local = client_is_local(ctx);
    let mut next = ctx.state.config.clone();
    next.set_at_runtime(&pairs, local).map_err(Cow::Owned)?;
    // New ports and addresses are bound now, before anything changes, so
    // one that cannot be bound refuses the whole CONFIG SET (Redis's
    // "apply" step) and the old listeners stay.
    let (tcp, mut tls_plan) = rebind(ctx.state, &next)?;
    let names: Vec<&str> = pairs.iter().map(|(n, _)| n.as_str()).collect();
    let tls = crate::tls::reconfigure(&mut next, &ctx.state.config, &names).map_err(Cow::Owned)?;
    if let Some(listeners) = tls.listeners {
        tls_plan = Some(
            listeners
                .into_iter()
                .map(crate::server::Planned::Fresh)
                .collect(),
        );
    }
    let replica = ctx.state.repl.is_replica();
    let oom = (next.oom_score_adj, crate::oom::role_value(&next, replica));
    if oom
        != (
            ctx.state.config.oom_score_adj,
            crate::oom::role_value(&ctx.state.config, replica),
        )
    {
        if let Err(e) = ctx.state.oom.apply(oom.0, oom.1) {
            tracing::warn!("cannot set the OOM score: {e}");
            let name = if pairs
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("oom-score-adj"))
            {
                "oom-score-adj"
            } else {
                "oom-score-adj-values"
            };
            return Err(Cow::Owned(format!("ERR CONFIG SET failed (possibly related to argument '{name}') - Failed to set current oom_score_adj. Check server logs.")));
        }
    }
    let appendonly = (next.appendonly != ctx.state.config.appendonly).then_some(next.appendonly);
    let password_changed = next.requirepass != ctx.state.config.requirepass;
    if tcp.is_some() {
        if next.port == 0 && ctx.state.config.port != 0 {
            // Nothing listens any more: a later `bind` opens nothing.
            ctx.state.port = 0;
        }
        ctx.state.new_listeners = tcp;
    }
    if tls_plan.is_some() {
        ctx.state.new_tls_listeners = tls_plan;
    }
    ctx.state.config = next;
    if password_changed {
        let password = ctx.state.config.requirepass.clone();
        ctx.state
            .acl
            .set_default_password(password.as_deref().map(str::as_bytes));
    }
    // A new maxmemory applies to the very next command, as in Redis: the
    // memory figure is otherwise refreshed only by the timer.
    if pairs
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("maxmemory"))
    {
        ctx.state.refresh_used_memory();
    }
    // A lower maxmemory evicts at once, as Redis's eviction timer starts
    // right after CONFIG SET (the `evicted` events go out without waiting
    // for another command); inside a transaction or script that timer
    // would only run after it, so the keys stay until the next command.
    if !ctx.session.is_replay && !ctx.session.in_exec && ctx.state.over_maxmemory() {
        super::memory::perform_evictions(ctx);
    }
    if let Some(on) = appendonly {
        // Outside a transaction the event loop opens the log right after
        // this command and replies (an error if it cannot); inside one,
        // as Redis, the reply is +OK and the log starts after EXEC.
        let reply = on && !ctx.session.in_exec;
        if on && ctx.session.in_exec {
            tracing::warn!("AOF was enabled during a transaction. An AOF background was scheduled to start when possible.");
        }
        ctx.state.appendonly_change = Some(crate::state::AppendonlyChange { on, reply });
        if reply {
            return Ok(());
        }
    }
    ctx.reply.ok();
    Ok(())
}

/// Forgets every statistic INFO reports as counted since start.
fn config_resetstat(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    ctx.state.stats = Default::default();
    let ks = &mut ctx.state.keyspace;
    ks.hits = 0;
    ks.misses = 0;
    ks.expired_total = 0;
    ctx.state.lazyfree.reset_stats();
    // Redis resets its sync and save counters with the rest.
    let repl = &mut ctx.state.repl;
    repl.sync_full = 0;
    repl.sync_partial_ok = 0;
    repl.sync_partial_err = 0;
    ctx.state.rdb.saves = 0;
    ctx.reply.ok();
    Ok(())
}

fn config_rewrite(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let aclfile = &ctx.state.config.aclfile;
    let users: Vec<String> = ctx
        .state
        .acl
        .users
        .iter()
        .map(|(name, user)| format!("{} {}", String::from_utf8_lossy(name), user.describe()))
        .collect();
    let users = aclfile.is_empty().then_some(users.as_slice());
    match ctx.state.config.rewrite_file_users(false, users) {
        Ok(()) => {
            tracing::warn!("CONFIG REWRITE executed with success.");
            ctx.reply.ok();
            Ok(())
        }
        Err(e) => {
            tracing::warn!("CONFIG REWRITE failed: {e}");
            Err(Cow::Owned(e))
        }
    }
}

fn config(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    match upper(args, 1).as_slice() {
        b"GET" => config_get(ctx, args),
        b"SET" => config_set(ctx, args),
        b"RESETSTAT" => config_resetstat(ctx, args),
        b"REWRITE" => config_rewrite(ctx, args),
        b"HELP" => {
            super::introspect::help_reply(
                ctx.reply,
                "CONFIG",
                &[
                    "GET <pattern>",
                    "    Return parameters matching the glob-like <pattern> and their values.",
                    "SET <directive> <value>",
                    "    Set the configuration <directive> to <value>.",
                    "RESETSTAT",
                    "    Reset statistics reported by the INFO command.",
                    "REWRITE",
                    "    Rewrite the configuration file.",
                ],
            );
            Ok(())
        }
        _ => Err(Cow::Owned(format!(
            "ERR unknown subcommand '{}'. Try CONFIG HELP.",
            String::from_utf8_lossy(args.get(1))
        ))),
    }
}

fn info(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let wanted: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let text = crate::info::text(ctx.state, &wanted);
    ctx.reply.verbatim(&text);
    Ok(())
}

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("info", -1, LOADING | STALE, K0, "server", "Returns information and statistics about the server.", info).with_tips(&["nondeterministic_output", "request_policy:all_shards", "response_policy:special"]).with_acl(super::acl::DANGEROUS),
    cmd!("config", -2, 0, K0, "server", "Reads or changes the configuration.", config).with_subcommands(CONFIG),
];

/// CONFIG's subcommands.
#[rustfmt::skip]
static CONFIG: &[CommandSpec] = &[
    cmd!("help", 2, LOADING | STALE, K0, "server", "Describes CONFIG's subcommands.", config),
    cmd!("get", -3, ADMIN | NOSCRIPT | LOADING | STALE, K0, "server", "Returns the effective values of configuration parameters.", config),
    cmd!("set", -4, ADMIN | NOSCRIPT | LOADING | STALE, K0, "server", "Sets configuration parameters in-flight.", config).with_tips(&["request_policy:all_nodes", "response_policy:all_succeeded"]),
    cmd!("resetstat", 2, ADMIN | NOSCRIPT | LOADING | STALE, K0, "server", "Resets the server's statistics.", config),
    cmd!("rewrite", 2, ADMIN | NOSCRIPT | LOADING | STALE, K0, "server", "Persists the effective configuration to file.", config),
];

/// A new TCP and TLS listener set, each `None` when unchanged.
type Rebound = (Option<Vec<Planned>>, Option<Vec<Planned>>);

/// New TCP and TLS listener sets for a CONFIG SET that moves the port or
/// the bind addresses (`None`: unchanged). Addresses kept keep their
/// listeners; the TLS set follows a new `bind` on an unchanged
/// `tls-port` (a new `tls-port` is bound by `tls::reconfigure`).
fn rebind(state: &crate::state::State, next: &Config) -> Result<Rebound, Cow<'static, str>> {
    let current = &state.config;
    let bind_moved = next.bind != current.bind;
    let tcp = if next.port != current.port {
        Some(if next.port == 0 {
            // As Redis: port 0 closes the TCP listeners.
            Vec::new()
        } else {
            crate::server::plan(&next.bind, next.port, &[]).map_err(|e| {
                tracing::warn!("CONFIG SET port {}: {e}", next.port);
                Cow::Borrowed("ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs.")
            })?
        })
    } else if bind_moved && state.port != 0 {
        // The port a start-up `port 0` picked stays.
        Some(crate::server::plan(&next.bind, state.port, &state.bound).map_err(bind_failed)?)
    } else {
        None
    };
    let tls = if bind_moved && next.tls.port == current.tls.port && current.tls.port != 0 {
        Some(
            crate::server::plan(&next.bind, current.tls.port, &state.tls_bound)
                .map_err(bind_failed)?,
        )
    } else {
        None
    };
    Ok((tcp, tls))
}

/// Redis's error when the new `bind` addresses cannot all be bound.
fn bind_failed(e: crate::error::Error) -> Cow<'static, str> {
    tracing::warn!("CONFIG SET bind: {e}");
    Cow::Borrowed(
        "ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses.",
    )
}
