//! MEMORY: USAGE, STATS, DOCTOR, MALLOC-STATS, PURGE, HELP.
//!
//! The process's figures come from the allocator probe the host installed
//! (`crate::memory`, docs/memory.md). A key's bytes (USAGE) are computed
//! from the layout of its value, each allocation rounded up to the
//! allocator's size class as Redis rounds through `zmalloc_size`: the
//! keyspace slot, the key, the value and its elements. USAGE samples
//! collections as Redis does (`SAMPLES`, default 5, 0 for all) and
//! scales up.

use std::borrow::Cow;
use std::mem::size_of;

use super::introspect::help_reply;
use super::table::*;
use super::{errors, int_arg, upper, CmdResult, Ctx};
use crate::keyspace::map::{ENTRY_BYTES_ESTIMATE, KEY_INLINE_MAX};
use crate::memory::usable_size;
use crate::resp::Args;
use crate::types::{Bytes, HashValue, ListValue, SetValue, Value, ZSet};

/// Elements MEMORY USAGE looks at by default.
const SAMPLES_DEFAULT: usize = 5;
/// Reference counts ahead of an `Arc`'s contents (strong and weak).
const ARC_HEADER: usize = 16;

/// The block holding one `Arc` of `bytes` bytes.
fn arc(bytes: usize) -> usize {
    usable_size(ARC_HEADER + bytes)
}

/// The block of a hash table with room for `capacity` entries of
/// `slot` bytes (hashbrown: a power-of-two bucket count at a load of
/// 7/8, one control byte per bucket and a group's worth more).
fn table(capacity: usize, slot: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let buckets = match capacity {
        0..=3 => 4,
        4..=7 => 8,
        _ => (capacity * 8 / 7).next_power_of_two(),
    };
    usable_size(buckets * (slot + 1) + 16)
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

/// DRAM bytes of a string: its block or blocks (for one on the PM tier,
/// its handle).
fn str_bytes(s: &crate::types::Str) -> usize {
    s.block_requests()
        .into_iter()
        .filter(|&b| b > 0)
        .map(usable_size)
        .sum()
}

/// Bytes `value` keeps on the PM tier: a string's, or its collection's
/// members' (sampled by `samples`). MEMORY USAGE adds them to the
/// DRAM figure, counting a value wherever it is, as `maxmemory` does.
fn pm_bytes(value: &Value, samples: usize) -> usize {
    let on_pm = |s: &crate::types::Str| if s.is_pm() { s.len() } else { 0 };
    match value {
        Value::Str(s) => on_pm(s),
        Value::Hash(h) => scaled(h.len(), h.values().map(on_pm), samples),
        Value::List(l) => scaled(l.len(), l.iter().map(on_pm), samples),
        Value::Set(s) => scaled(s.len(), s.iter().map(on_pm), samples),
        Value::ZSet(z) => scaled(z.len(), z.members().map(on_pm), samples),
        _ => 0,
    }
}

/// Heap bytes of `value` (its elements sampled by `samples`).
pub(crate) fn value_bytes(value: &Value, samples: usize) -> usize {
    let element = |e: &Bytes| arc(e.len());
    match value {
        // One block (counts, length, bytes) or two (counts and pointer;
        // the bytes), whichever the string was laid out in.
        Value::Str(s) => str_bytes(s),
        Value::List(l) => {
            arc(size_of::<ListValue>())
                + usable_size(l.capacity() * size_of::<crate::types::Str>())
                + scaled(l.len(), l.iter().map(str_bytes), samples)
        }
        Value::Set(s) => {
            arc(size_of::<SetValue>())
                + table(s.capacity(), size_of::<crate::types::Str>())
                + scaled(s.len(), s.iter().map(str_bytes), samples)
        }
        Value::Hash(h) => {
            let each = h.iter().map(|(f, v)| element(f) + str_bytes(v));
            arc(size_of::<HashValue>())
                + table(
                    h.capacity(),
                    size_of::<Bytes>() + size_of::<crate::types::Str>(),
                )
                + scaled(h.len(), each, samples)
        }
        Value::ZSet(z) => {
            // Each member is in the score table and in the order's chunks
            // (its pointer and score).
            let slot = size_of::<Bytes>() + size_of::<f64>();
            let each = z.members().map(|m| str_bytes(m) + slot);
            arc(size_of::<ZSet>()) + table(z.len(), slot) + scaled(z.len(), each, samples)
        }
        Value::Stream(s) => {
            let blocks = s.blocks().map(|(_, b)| usable_size(b.bytes()) + 64);
            usable_size(160) + blocks.sum::<usize>()
        }
    }
}

/// The bytes of a keyspace entry for `key` beyond its value: its slot,
/// and the key's own block when it is too long to sit in the slot.
pub(crate) fn entry_bytes(key: &[u8]) -> usize {
    let boxed = if key.len() > KEY_INLINE_MAX {
        usable_size(key.len())
    } else {
        0
    };
    ENTRY_BYTES_ESTIMATE as usize + boxed
}

/// Keys one command may evict before the rest waits for the next command
/// (Redis bounds its loop by time instead; the effect is the same: a
/// command never stalls long).
const EVICTIONS_PER_COMMAND_MAX: usize = 4096;

/// Evicts keys under `maxmemory-policy` until the memory freed covers
/// what `used_memory` exceeded `maxmemory` by when it started; returns
/// false when it could not (Redis's `EVICT_FAIL`: nothing to evict), and
/// then commands that may grow memory are refused. As in Redis, the
/// memory freed is measured around each key's removal alone (on the
/// probe's counter; without one, the key's estimated bytes): the log
/// record, notification and invalidation each eviction sends are not
/// held against it, or evicting keys with long names could feed itself
/// until the keyspace is empty. Evicted keys are logged as `DEL`, so
/// replay ends with the same data.
pub(crate) fn perform_evictions(ctx: &mut Ctx<'_>) -> bool {
    use crate::config::MaxmemoryPolicy as P;
    use crate::keyspace::evict::{Pool, Rank};
    let limit = ctx.state.config.maxmemory_bytes;
    let used = ctx.state.dataset_memory();
    if limit == 0 || used <= limit {
        return true;
    }
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
    let counter = crate::memory::probe().map(|p| p.allocated);
    let to_free = used - limit;
    let mut freed = 0u64;
    for _ in 0..EVICTIONS_PER_COMMAND_MAX {
        if freed >= to_free {
            return true;
        }
        let state = &mut *ctx.state;
        let rng = &mut state.rng;
        let victim = state.keyspace.eviction_victim(pool, rank, samples, |n| {
            rng.u64(..(n as u64).max(1)) as usize
        });
        let Some((db, key)) = victim else {
            return false;
        };
        // DRAM and the PM tier together, as `maxmemory` counts them.
        let heap = state.tier.as_ref().map(|tier| &tier.heap);
        let read = || counter.map_or(0, |read| read()) + heap.map_or(0, |h| h.stats().slot_bytes);
        let before = read();
        let (mut estimate, mut after) = (0u64, before);
        let evicted = state.keyspace.evict(db, &key, |value| {
            estimate = (entry_bytes(&key) + value_bytes(&value, SAMPLES_DEFAULT)) as u64;
            drop(value);
            after = read();
        });
        if !evicted {
            continue;
        }
        freed += match counter {
            Some(_) => before.saturating_sub(after),
            None => {
                state.used_memory_bytes = state.used_memory_bytes.saturating_sub(estimate);
                estimate
            }
        };
        state.stats.evicted_keys += 1;
    }
    // Out of time rather than out of keys: Redis goes on at its next
    // command and does not refuse this one.
    true
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
    let total = entry_bytes(key) + value_bytes(value, samples) + pm_bytes(value, samples);
    ctx.reply.int(total as i64);
    Ok(())
}

fn stats(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let f = crate::memory::Figures::of(ctx.state);
    let r = &mut *ctx.reply;
    r.map(27 + f.dbs.len());
    for (name, value) in [
        ("peak.allocated", f.peak),
        ("total.allocated", f.used),
        ("startup.allocated", f.startup),
        ("replication.backlog", f.repl_backlog),
        ("clients.slaves", f.clients_slaves),
        ("clients.normal", f.clients_normal),
        ("cluster.links", 0),
        ("aof.buffer", 0),
        ("lua.caches", 0),
        ("functions.caches", 0),
    ] {
        r.bulk(name.as_bytes());
        r.int(value as i64);
    }
    for db in &f.dbs {
        r.bulk(format!("db.{}", db.index).as_bytes());
        r.map(3);
        for (name, value) in [
            ("overhead.hashtable.main", db.main),
            ("overhead.hashtable.expires", db.expires),
            ("overhead.hashtable.slot-to-keys", 0),
        ] {
            r.bulk(name.as_bytes());
            r.int(value as i64);
        }
    }
    for (name, value) in [
        ("overhead.total", f.overhead),
        ("keys.count", f.keys),
        ("keys.bytes-per-key", f.bytes_per_key()),
        ("dataset.bytes", f.dataset()),
    ] {
        r.bulk(name.as_bytes());
        r.int(value as i64);
    }
    // Redis keeps these ratios as single-precision floats.
    let ratio = |r: &mut crate::resp::ReplyBuf, name: &str, value: f64| {
        r.bulk(name.as_bytes());
        r.double(value as f32 as f64);
    };
    ratio(r, "dataset.percentage", f.dataset_perc());
    ratio(r, "peak.percentage", f.peak_perc());
    let a = f.allocator;
    let pairs: [(&str, &str, u64, u64); 3] = [
        (
            "allocator-fragmentation.ratio",
            "allocator-fragmentation.bytes",
            a.active,
            a.allocated,
        ),
        (
            "allocator-rss.ratio",
            "allocator-rss.bytes",
            a.resident,
            a.active,
        ),
        (
            "rss-overhead.ratio",
            "rss-overhead.bytes",
            f.rss,
            a.resident,
        ),
    ];
    for (name, value) in [
        ("allocator.allocated", a.allocated),
        ("allocator.active", a.active),
        ("allocator.resident", a.resident),
    ] {
        r.bulk(name.as_bytes());
        r.int(value as i64);
    }
    for (ratio_name, bytes_name, part, whole) in pairs {
        ratio(r, ratio_name, crate::memory::ratio(part, whole));
        r.bulk(bytes_name.as_bytes());
        r.int(part as i64 - whole as i64);
    }
    ratio(r, "fragmentation", crate::memory::ratio(f.rss, f.used));
    r.bulk(b"fragmentation.bytes");
    r.int(f.rss as i64 - f.used as i64);
    Ok(())
}

fn doctor(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let f = crate::memory::Figures::of(ctx.state);
    let mb = |bytes: u64| bytes as f64 / 1048576.0;
    let mut text = format!(
        "Ferrite has {:.2} MB allocated ({:.2} MB at its peak), {:.2} MB resident.",
        mb(f.used),
        mb(f.peak),
        mb(f.rss)
    );
    let mut problems = 0;
    if f.peak > f.used.saturating_mul(3) / 2 && f.peak > 64 << 20 {
        problems += 1;
        text.push_str(" The peak is more than 150% of the current use: memory freed since may still be held by the allocator (MEMORY PURGE returns what it can).");
    }
    if crate::memory::ratio(f.rss, f.used) > 1.4 && f.rss > 64 << 20 {
        problems += 1;
        text.push_str(" The resident set is more than 1.4 times the allocated memory: the heap is fragmented.");
    }
    if f.clients_normal > 200 << 20 {
        problems += 1;
        text.push_str(" Client buffers hold more than 200 MB: some clients read their replies slowly or send very large commands.");
    }
    if problems == 0 {
        text.push_str(" No memory problem detected.");
    }
    text.push('\n');
    ctx.reply.verbatim(&text);
    Ok(())
}

fn malloc_stats(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    match crate::memory::probe().and_then(|p| p.report) {
        Some(report) => ctx.reply.verbatim(&report()),
        None => ctx
            .reply
            .verbatim("Stats not supported for the current allocator"),
    }
    Ok(())
}

/// Asks the allocator to return its dirty pages; with an allocator that
/// cannot (the system's), nothing to do, as Redis with libc malloc.
fn purge(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    if let Some(purge) = crate::memory::probe().and_then(|p| p.purge) {
        if !purge() {
            return Err(Cow::Borrowed("ERR Error purging dirty pages"));
        }
    }
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
