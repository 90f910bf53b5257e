//! MEMORY: USAGE, STATS, DOCTOR, MALLOC-STATS, PURGE, HELP.
//!
//! Ferrite uses the system allocator and counts no allocations itself,
//! so the process's figures come from the resident set size (INFO's
//! `used_memory`), and a value's bytes are estimated from its layout: the
//! keyspace slot, the key, and the value's elements with the per-element
//! overhead of the collection that holds them. USAGE samples collections
//! as Redis does (`SAMPLES`, default 5, 0 for all) and scales up.

use std::borrow::Cow;

use super::introspect::help_reply;
use super::table::*;
use super::{errors, int_arg, upper, CmdResult, Ctx};
use crate::keyspace::map::{ENTRY_BYTES_ESTIMATE, KEY_INLINE_MAX};
use crate::resp::Args;
use crate::types::Value;

/// Elements MEMORY USAGE looks at by default.
const SAMPLES_DEFAULT: usize = 5;
/// Per-allocation overhead of the system allocator (glibc: a header
/// word, and sizes rounded to 16 bytes).
const ALLOC_OVERHEAD: usize = 16;
/// Bytes a hash-table slot of a collection costs beyond its elements
/// (pointers, control byte, load factor).
const SLOT_BYTES: usize = 24;

fn alloc(bytes: usize) -> usize {
    bytes.div_ceil(16) * 16 + ALLOC_OVERHEAD
}

/// The estimated bytes of `count` elements from the sizes of a sample.
fn scaled(count: usize, sample: impl Iterator<Item = usize>, samples: usize) -> usize {
    let limit = if samples == 0 { usize::MAX } else { samples };
    let (mut seen, mut bytes) = (0usize, 0usize);
    for size in sample.take(limit) {
        seen += 1;
        bytes += size;
    }
    match seen {
        0 => 0,
        _ => bytes / seen * count,
    }
}

/// Estimated heap bytes of `value` (its elements sampled by `samples`).
pub(crate) fn value_bytes(value: &Value, samples: usize) -> usize {
    match value {
        Value::Str(s) => alloc(s.len() + 16),
        Value::List(l) => {
            alloc(l.len() * 16) + scaled(l.len(), l.iter().map(|e| alloc(e.len() + 16)), samples)
        }
        Value::Set(s) => {
            let each = s.iter().map(|e| alloc(e.len() + 16) + SLOT_BYTES);
            alloc(48) + scaled(s.len(), each, samples)
        }
        Value::Hash(h) => {
            let each = h
                .iter()
                .map(|(f, v)| alloc(f.len() + 16) + alloc(v.len() + 16) + SLOT_BYTES);
            alloc(48) + scaled(h.len(), each, samples)
        }
        Value::ZSet(z) => {
            let each = z
                .iter()
                .map(|(m, _)| alloc(m.len() + 16) + 2 * SLOT_BYTES + 8);
            alloc(64) + scaled(z.len(), each, samples)
        }
        Value::Stream(s) => {
            let blocks = s.blocks().map(|(_, b)| alloc(b.bytes()) + 64);
            alloc(160) + blocks.sum::<usize>()
        }
    }
}

/// Keys one command may evict before giving up (Redis bounds its loop by
/// time instead; the effect is the same: a command never stalls long).
const EVICTIONS_PER_COMMAND_MAX: usize = 1024;

/// Evicts keys under `maxmemory-policy` until the estimated memory freed
/// brings `used_memory` under `maxmemory`; returns whether it did. The
/// estimate is subtracted from `used_memory` at once, so the next command
/// does not evict for the same excess before the timer measures again.
/// Evicted keys are logged as `DEL`, so replay ends with the same data.
pub(crate) fn perform_evictions(ctx: &mut Ctx<'_>) -> bool {
    use crate::config::MaxmemoryPolicy as P;
    use crate::keyspace::evict::{Pool, Rank};
    let config = &ctx.state.config;
    let (pool, rank) = match config.maxmemory_policy {
        P::NoEviction => return false,
        P::AllKeysLru => (Pool::AllKeys, Rank::Lru),
        P::AllKeysLfu => (Pool::AllKeys, Rank::Lfu),
        P::AllKeysRandom => (Pool::AllKeys, Rank::Random),
        P::VolatileLru => (Pool::Volatile, Rank::Lru),
        P::VolatileLfu => (Pool::Volatile, Rank::Lfu),
        P::VolatileRandom => (Pool::Volatile, Rank::Random),
        P::VolatileTtl => (Pool::Volatile, Rank::Ttl),
    };
    let samples = config.maxmemory_samples as usize;
    let limit = config.maxmemory_bytes;
    for _ in 0..EVICTIONS_PER_COMMAND_MAX {
        if ctx.state.used_memory_bytes <= limit {
            return true;
        }
        let state = &mut *ctx.state;
        let rng = &mut state.rng;
        let victim = state
            .keyspace
            .eviction_victim(pool, rank, samples, |n| rng.below(n as u64) as usize);
        let Some((db, key)) = victim else {
            return false;
        };
        let freed = match state.keyspace.evict(db, &key) {
            Some(value) => {
                ENTRY_BYTES_ESTIMATE as usize + key.len() + value_bytes(&value, SAMPLES_DEFAULT)
            }
            None => 0,
        };
        state.stats.evicted_keys += 1;
        state.used_memory_bytes = state.used_memory_bytes.saturating_sub(freed as u64);
    }
    ctx.state.used_memory_bytes <= limit
}

fn usage(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let samples = match args.len() {
        3 => SAMPLES_DEFAULT,
        5 if upper(args, 3) == b"SAMPLES" => {
            let n = int_arg(args, 4)?;
            if n < 0 {
                return Err(Cow::Borrowed(errors::SYNTAX));
            }
            n as usize
        }
        _ => return Err(Cow::Borrowed(errors::SYNTAX)),
    };
    let key = args.get(2);
    let Some(value) = ctx.state.keyspace.peek(ctx.session.db, key) else {
        ctx.reply.null();
        return Ok(());
    };
    let key_bytes = if key.len() > KEY_INLINE_MAX {
        alloc(key.len())
    } else {
        0
    };
    let total = ENTRY_BYTES_ESTIMATE as usize + key_bytes + value_bytes(value, samples);
    ctx.reply.int(total as i64);
    Ok(())
}

/// The bytes of every key and value, and how many keys, per database.
fn dataset(ctx: &Ctx<'_>) -> Vec<(usize, usize, usize, usize)> {
    let ks = &ctx.state.keyspace;
    (0..ks.databases())
        .filter(|&db| !ks.db(db).is_empty())
        .map(|db| {
            let d = ks.db(db);
            let bytes: usize = d
                .segments()
                .iter()
                .flat_map(|s| s.map.iter())
                .map(|(k, v)| k.len() + value_bytes(v, SAMPLES_DEFAULT))
                .sum();
            (db, d.len(), d.expires_len(), bytes)
        })
        .collect()
}

fn stats(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let used = ctx.state.used_memory_bytes as usize;
    let peak = ctx.state.used_memory_peak_bytes.max(used as u64) as usize;
    let clients: usize = ctx
        .state
        .clients
        .values()
        .map(|c| c.qbuf + c.qbuf_free + c.omem)
        .sum();
    let dbs = dataset(ctx);
    let keys: usize = dbs.iter().map(|d| d.1).sum();
    let data: usize = dbs.iter().map(|d| d.3).sum();
    let slots = |n: usize| n * ENTRY_BYTES_ESTIMATE as usize;
    let overhead = used.saturating_sub(data);
    let percent = |part: usize, whole: usize| {
        if whole == 0 {
            0.0
        } else {
            part as f64 * 100.0 / whole as f64
        }
    };
    let r = &mut *ctx.reply;
    r.map(17 + dbs.len());
    for (name, value) in [
        ("peak.allocated", peak),
        ("total.allocated", used),
        ("startup.allocated", ctx.state.startup_memory_bytes as usize),
        ("replication.backlog", 0),
        ("clients.slaves", 0),
        ("clients.normal", clients),
        ("cluster.links", 0),
        ("aof.buffer", 0),
        ("lua.caches", 0),
        ("functions.caches", 0),
    ] {
        r.bulk(name.as_bytes());
        r.int(value as i64);
    }
    for (db, count, expires, _) in &dbs {
        r.bulk(format!("db.{db}").as_bytes());
        r.map(2);
        r.bulk(b"overhead.hashtable.main");
        r.int(slots(*count) as i64);
        r.bulk(b"overhead.hashtable.expires");
        r.int(slots(*expires) as i64);
    }
    for (name, value) in [
        ("overhead.total", overhead),
        ("keys.count", keys),
        (
            "keys.bytes-per-key",
            (used - overhead.min(used)).checked_div(keys).unwrap_or(0),
        ),
        ("dataset.bytes", data),
    ] {
        r.bulk(name.as_bytes());
        r.int(value as i64);
    }
    r.bulk(b"dataset.percentage");
    r.double(percent(data, used));
    r.bulk(b"peak.percentage");
    r.double(percent(used, peak));
    r.bulk(b"fragmentation");
    r.double(1.0);
    Ok(())
}

fn doctor(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let used = ctx.state.used_memory_bytes;
    let peak = ctx.state.used_memory_peak_bytes.max(used);
    let mut text = format!(
        "Ferrite uses {:.2} MB (resident set), {:.2} MB at its peak.",
        used as f64 / 1048576.0,
        peak as f64 / 1048576.0
    );
    if peak > used.saturating_mul(2) && peak > 64 << 20 {
        text.push_str(" The peak is more than twice the current use: memory freed since is kept by the allocator; MEMORY PURGE cannot return it with the system allocator.");
    } else {
        text.push_str(" No memory problem detected.");
    }
    text.push('\n');
    ctx.reply.verbatim(&text);
    Ok(())
}

fn malloc_stats(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    ctx.reply
        .verbatim("Stats not supported for the current allocator");
    Ok(())
}

/// The system allocator has nothing to purge on request, as Redis with
/// libc malloc.
fn purge(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    ctx.reply.ok();
    Ok(())
}

fn help(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    help_reply(
        ctx.reply,
        "MEMORY",
        &[
            "DOCTOR",
            "    Reports on the server's memory use.",
            "MALLOC-STATS",
            "    Reports the allocator's internal statistics.",
            "PURGE",
            "    Asks the allocator to release memory.",
            "STATS",
            "    Returns the server's memory figures.",
            "USAGE <key> [SAMPLES <count>]",
            "    Estimates the bytes a key and its value use, sampling <count> elements",
            "    of a collection (5 by default, 0 for all).",
        ],
    );
    Ok(())
}

/// The key of MEMORY USAGE, after the subcommand name.
const K2: (i32, i32, i32) = (2, 2, 1);

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("memory", -2, 0, K0, "server", "Reports on memory use.", help).with_subcommands(MEMORY),
];

/// MEMORY's subcommands.
#[rustfmt::skip]
static MEMORY: &[CommandSpec] = &[
    cmd!("usage", -3, READONLY, K2, "server", "Estimates the memory of a key and its value.", usage),
    cmd!("stats", 2, 0, K0, "server", "Returns the server's memory figures.", stats).with_tips(&["nondeterministic_output", "request_policy:all_shards", "response_policy:special"]),
    cmd!("doctor", 2, 0, K0, "server", "Reports on the server's memory use.", doctor).with_tips(&["nondeterministic_output", "request_policy:all_shards", "response_policy:special"]),
    cmd!("malloc-stats", 2, 0, K0, "server", "Reports the allocator's statistics.", malloc_stats).with_tips(&["nondeterministic_output", "request_policy:all_shards", "response_policy:special"]),
    cmd!("purge", 2, 0, K0, "server", "Asks the allocator to release memory.", purge).with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
    cmd!("help", 2, LOADING | STALE, K0, "server", "Explains MEMORY's subcommands.", help),
];
