//! SLOWLOG and LATENCY: what [`record`] notes after every command.
//!
//! The slow log keeps the last `slowlog-max-len` commands slower than
//! `slowlog-log-slower-than` microseconds; the latency monitor keeps, per
//! event (`command`, `fast-command`), up to [`HISTORY_LEN`] one-second
//! samples at or above `latency-monitor-threshold` milliseconds; and every
//! command's duration goes into a per-command histogram of powers of two
//! microseconds (LATENCY HISTOGRAM), kept with the statistics so CONFIG
//! RESETSTAT clears it.

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};

use super::accounting::stats_name;
use super::introspect::help_reply;
use super::table::*;
use super::{all_commands, errors, int_arg, CmdResult, Ctx};
use crate::cmdstats::CommandName;
use crate::resp::Args;
use crate::state::State;

/// Arguments a slow-log entry keeps; the last slot then says how many
/// more there were.
const ENTRY_ARGS_MAX: usize = 32;
/// Bytes kept of each argument.
const ENTRY_ARG_BYTES_MAX: usize = 128;
/// Samples kept per latency event.
pub const HISTORY_LEN: usize = 160;

/// One slow-log entry.
#[derive(Clone, Debug)]
pub struct SlowEntry {
    id: u64,
    unix_s: i64,
    duration_us: u64,
    args: Vec<Vec<u8>>,
    addr: String,
    name: String,
}

/// The slow log.
#[derive(Clone, Debug, Default)]
pub struct SlowLog {
    entries: VecDeque<SlowEntry>,
    next_id: u64,
}

/// One latency event's samples: `(unix seconds, milliseconds)`, and the
/// largest ever seen.
#[derive(Clone, Debug, Default)]
pub struct LatencyEvent {
    samples: VecDeque<(i64, u64)>,
    max_ms: u64,
}

/// The latency monitor's events by name.
#[derive(Clone, Debug, Default)]
pub struct LatencyMonitor {
    events: BTreeMap<&'static str, LatencyEvent>,
}

/// Notes a command that took `duration_us` in the slow log and the latency
/// monitor when it was slow enough (its latency histogram is in
/// `cmdstats`, which LATENCY HISTOGRAM reads too).
pub(super) fn record(
    ctx: &mut Ctx<'_>,
    spec: &'static CommandSpec,
    args: &Args<'_>,
    duration_us: u64,
) {
    let config = &ctx.state.config;
    let threshold = config.slowlog_log_slower_than_us;
    if threshold >= 0 && duration_us >= threshold as u64 && !spec.has(SKIP_SLOWLOG) {
        push_slow(ctx, args, duration_us);
    }
    let event = if spec.has(FAST) {
        "fast-command"
    } else {
        "command"
    };
    latency_event(ctx.state, event, duration_us / 1000);
}

/// Records `event` in the latency monitor if it took at least
/// `latency-monitor-threshold` milliseconds (0 turns the monitor off).
pub fn latency_event(state: &mut State, event: &'static str, duration_ms: u64) {
    let threshold_ms = state.config.latency_monitor_threshold_ms;
    if threshold_ms > 0 && duration_ms >= threshold_ms {
        let now_s = state.keyspace.now_ms / 1000;
        add_sample(&mut state.latency, event, now_s, duration_ms);
    }
}

fn push_slow(ctx: &mut Ctx<'_>, args: &Args<'_>, duration_us: u64) {
    let kept = args.len().min(ENTRY_ARGS_MAX);
    let mut saved: Vec<Vec<u8>> = Vec::with_capacity(kept);
    for (at, arg) in args.iter().take(kept).enumerate() {
        if ctx.session.redacted.contains(&at) {
            saved.push(b"(redacted)".to_vec());
        } else if at == kept - 1 && args.len() > kept {
            let more = args.len() - kept + 1;
            saved.push(format!("... ({more} more arguments)").into_bytes());
        } else if arg.len() > ENTRY_ARG_BYTES_MAX {
            let mut cut = arg[..ENTRY_ARG_BYTES_MAX].to_vec();
            let more = arg.len() - ENTRY_ARG_BYTES_MAX;
            cut.extend_from_slice(format!("... ({more} more bytes)").as_bytes());
            saved.push(cut);
        } else {
            saved.push(arg.to_vec());
        }
    }
    let client = ctx.state.clients.get(&ctx.session.id);
    let (addr, name) = client.map_or_else(Default::default, |c| (c.addr.clone(), c.name.clone()));
    let log = &mut ctx.state.slowlog;
    log.entries.push_front(SlowEntry {
        id: log.next_id,
        unix_s: ctx.state.keyspace.now_ms / 1000,
        duration_us,
        args: saved,
        addr,
        name,
    });
    log.next_id += 1;
    log.entries.truncate(ctx.state.config.slowlog_max_len);
}

fn add_sample(monitor: &mut LatencyMonitor, event: &'static str, now_s: i64, ms: u64) {
    let event = monitor.events.entry(event).or_default();
    event.max_ms = event.max_ms.max(ms);
    // Samples within one second merge, keeping the largest.
    match event.samples.back_mut() {
        Some(last) if last.0 == now_s => last.1 = last.1.max(ms),
        _ => {
            event.samples.push_back((now_s, ms));
            if event.samples.len() > HISTORY_LEN {
                event.samples.pop_front();
            }
        }
    }
}

fn slowlog_get(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let count = if args.len() == 3 {
        int_arg(args, 2)
            .ok()
            .filter(|&n| n >= -1)
            .ok_or(Cow::Borrowed(
                "ERR count should be greater than or equal to -1",
            ))?
    } else {
        10
    };
    let log = &ctx.state.slowlog;
    let shown = if count == -1 {
        log.entries.len()
    } else {
        (count as usize).min(log.entries.len())
    };
    let r = &mut *ctx.reply;
    r.array(shown);
    for entry in log.entries.iter().take(shown) {
        r.array(6);
        r.int(entry.id as i64);
        r.int(entry.unix_s);
        r.int(entry.duration_us as i64);
        r.array(entry.args.len());
        for arg in &entry.args {
            r.bulk(arg);
        }
        r.bulk(entry.addr.as_bytes());
        r.bulk(entry.name.as_bytes());
    }
    Ok(())
}

fn slowlog_len(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    ctx.reply.int(ctx.state.slowlog.entries.len() as i64);
    Ok(())
}

fn slowlog_reset(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    ctx.state.slowlog.entries.clear();
    ctx.reply.ok();
    Ok(())
}

fn slowlog_help(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    help_reply(
        ctx.reply,
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Returns the <count> newest entries (10 by default, -1 for all). Each is",
            "    an id, a Unix time, a duration in microseconds, the arguments, the",
            "    client's address and the client's name.",
            "LEN",
            "    Counts the entries.",
            "RESET",
            "    Empties the slow log.",
        ],
    );
    Ok(())
}

fn latency_latest(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let events = &ctx.state.latency.events;
    let r = &mut *ctx.reply;
    r.array(events.len());
    for (name, event) in events {
        let (time, ms) = event.samples.back().copied().unwrap_or((0, 0));
        r.array(4);
        r.bulk(name.as_bytes());
        r.int(time);
        r.int(ms as i64);
        r.int(event.max_ms as i64);
    }
    Ok(())
}

fn latency_history(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let name = String::from_utf8_lossy(args.get(2));
    let r = &mut *ctx.reply;
    match ctx.state.latency.events.get(name.as_ref()) {
        None => r.array(0),
        Some(event) => {
            r.array(event.samples.len());
            for (time, ms) in &event.samples {
                r.array(2);
                r.int(*time);
                r.int(*ms as i64);
            }
        }
    }
    Ok(())
}

fn latency_reset(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let events = &mut ctx.state.latency.events;
    let reset = if args.len() == 2 {
        let n = events.len();
        events.clear();
        n
    } else {
        args.iter()
            .skip(2)
            .filter(|name| {
                let name = String::from_utf8_lossy(name);
                events.remove(name.as_ref()).is_some()
            })
            .count()
    };
    ctx.reply.int(reset as i64);
    Ok(())
}

/// LATENCY GRAPH: the event's samples as rows of `#`, one per sample,
/// scaled to the largest, under a line naming the event and its range.
fn latency_graph(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let name = String::from_utf8_lossy(args.get(2)).into_owned();
    let Some(event) = ctx.state.latency.events.get(name.as_str()) else {
        return Err(Cow::Owned(format!(
            "ERR No samples available for event '{name}'"
        )));
    };
    let low = event.samples.iter().map(|s| s.1).min().unwrap_or(0);
    let high = event.samples.iter().map(|s| s.1).max().unwrap_or(0);
    let now = ctx.state.keyspace.now_ms / 1000;
    let mut text = format!(
        "{name} - high {high} ms, low {low} ms (all time high {} ms)\n",
        event.max_ms
    );
    for (time, ms) in &event.samples {
        let width = (ms * 60).checked_div(high).unwrap_or(0).max(1) as usize;
        text.push_str(&format!(
            "{:>6}s ago {:>6} ms |{}\n",
            now - time,
            ms,
            "#".repeat(width)
        ));
    }
    ctx.reply.verbatim(&text);
    Ok(())
}

/// LATENCY DOCTOR: a plain report of each event's figures.
fn latency_doctor(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let events = &ctx.state.latency.events;
    let mut text = String::new();
    if events.is_empty() {
        text.push_str("No latency spikes were observed. ");
        if ctx.state.config.latency_monitor_threshold_ms == 0 {
            text.push_str("The latency monitor is disabled: set latency-monitor-threshold to a number of milliseconds to enable it.\n");
        } else {
            text.push_str("Nothing to report.\n");
        }
    }
    for (name, event) in events {
        let count = event.samples.len() as u64;
        let sum: u64 = event.samples.iter().map(|s| s.1).sum();
        let average = sum.checked_div(count).unwrap_or(0);
        text.push_str(&format!(
            "{name}: {count} latency spikes (average {average}ms, worst {}ms). Commands slower than the threshold run in the single event loop; look for slow commands with SLOWLOG GET.\n",
            event.max_ms
        ));
    }
    ctx.reply.verbatim(&text);
    Ok(())
}

/// LATENCY HISTOGRAM [command ...]: calls and cumulative counts per
/// power-of-two bucket, for the named commands (a container names all
/// its subcommands) or for every command called.
fn latency_histogram(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let mut chosen: Vec<CommandName> = Vec::new();
    let mut add = |key: CommandName| {
        if !chosen.contains(&key) {
            chosen.push(key);
        }
    };
    let mut add_all = |container: Option<&'static CommandSpec>, spec: &'static CommandSpec| {
        add(stats_name(container, spec));
        if container.is_none() {
            for sub in spec.subcommands {
                add((spec.name, sub.name));
            }
        }
    };
    if args.len() == 2 {
        for spec in all_commands() {
            add_all(None, spec);
        }
    } else {
        for name in args.iter().skip(2) {
            if let Some((container, spec)) = super::introspect::lookup_full(name) {
                add_all(container, spec);
            }
        }
    }
    let table = &ctx.state.stats.commands;
    let found: Vec<(String, &crate::cmdstats::Histogram)> = chosen
        .into_iter()
        .filter_map(|key| {
            let stats = table.get(key).filter(|s| s.latency.count() > 0)?;
            let name = match key {
                (own, "") => own.to_string(),
                (container, own) => format!("{container}|{own}"),
            };
            Some((name, &stats.latency))
        })
        .collect();
    let r = &mut *ctx.reply;
    r.map(found.len());
    for (name, histogram) in found {
        let cdf = histogram.power_of_two_cdf();
        r.bulk(name.as_bytes());
        r.map(2);
        r.bulk(b"calls");
        r.int(histogram.count() as i64);
        r.bulk(b"histogram_usec");
        r.map(cdf.len());
        for (usec, cumulative) in cdf {
            r.int(usec as i64);
            r.int(cumulative as i64);
        }
    }
    Ok(())
}

fn latency_help(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    help_reply(
        ctx.reply,
        "LATENCY",
        &[
            "DOCTOR",
            "    Reports on the latency events seen.",
            "GRAPH <event>",
            "    Draws the samples of <event> as text.",
            "HISTORY <event>",
            "    Returns the samples of <event>: Unix time and milliseconds.",
            "LATEST",
            "    Returns each event's latest sample and its maximum.",
            "RESET [<event> ...]",
            "    Forgets the samples of the named events (all without names).",
            "HISTOGRAM [<command> ...]",
            "    Returns the calls and latency histogram of the named commands (all without names).",
        ],
    );
    Ok(())
}

/// Unused arguments are checked by the table's arity.
fn unreachable_container(_ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    Err(Cow::Borrowed(errors::SYNTAX))
}

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("slowlog", -2, 0, K0, "server", "Reads or resets the slow log.", unreachable_container).with_subcommands(SLOWLOG),
    cmd!("latency", -2, 0, K0, "server", "Reads or resets the latency monitor.", unreachable_container).with_subcommands(LATENCY),
];

/// The subcommands' flags, as Redis's.
const ADM: u32 = ADMIN | LOADING | STALE;

/// SLOWLOG's subcommands.
#[rustfmt::skip]
static SLOWLOG: &[CommandSpec] = &[
    cmd!("get", -2, ADM, K0, "server", "Returns the newest slow-log entries.", slowlog_get).with_tips(&["request_policy:all_nodes", "nondeterministic_output"]),
    cmd!("len", 2, ADM, K0, "server", "Counts the slow-log entries.", slowlog_len).with_tips(&["request_policy:all_nodes", "response_policy:agg_sum", "nondeterministic_output"]),
    cmd!("reset", 2, ADM, K0, "server", "Empties the slow log.", slowlog_reset).with_tips(&["request_policy:all_nodes", "response_policy:all_succeeded"]),
    cmd!("help", 2, LOADING | STALE, K0, "server", "Explains SLOWLOG's subcommands.", slowlog_help),
];

/// LATENCY's subcommands.
#[rustfmt::skip]
static LATENCY: &[CommandSpec] = &[
    cmd!("latest", 2, ADM | NOSCRIPT, K0, "server", "Returns each event's latest sample.", latency_latest).with_tips(&["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"]),
    cmd!("history", 3, ADM | NOSCRIPT, K0, "server", "Returns an event's samples.", latency_history).with_tips(&["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"]),
    cmd!("reset", -2, ADM | NOSCRIPT, K0, "server", "Forgets latency samples.", latency_reset).with_tips(&["request_policy:all_nodes", "response_policy:all_succeeded"]),
    cmd!("graph", 3, ADM | NOSCRIPT, K0, "server", "Draws an event's samples.", latency_graph).with_tips(&["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"]),
    cmd!("doctor", 2, ADM | NOSCRIPT, K0, "server", "Reports on latency events.", latency_doctor).with_tips(&["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"]),
    cmd!("histogram", -2, ADM | NOSCRIPT, K0, "server", "Returns per-command latency histograms.", latency_histogram).with_tips(&["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"]),
    cmd!("help", 2, LOADING | STALE, K0, "server", "Explains LATENCY's subcommands.", latency_help),
];
