//! OBJECT: a key's encoding as Redis 7.0 would name it, its reference
//! count, idle time and access frequency (`keyspace/access.rs`).
//!
//! Ferrite keeps one representation per type, so ENCODING reports the one
//! Redis 7.0 would use for a value of this size under the configured
//! thresholds: strings `int`, `embstr` (up to 44 bytes) or `raw`; lists
//! `quicklist` (7.0 keeps every list in one); sets `intset` while all
//! members are integers and few enough, else `hashtable`; hashes and
//! sorted sets `listpack` while small, else `hashtable` / `skiplist`.

use std::borrow::Cow;

use super::acl;
use super::introspect::help_reply;
use super::table::*;
use super::{CmdResult, Ctx};
use crate::config::Config;
use crate::keyspace::access;
use crate::resp::Args;
use crate::types::number::parse_i64;
use crate::types::Value;

/// Longest string Redis keeps in one allocation with its header.
const EMBSTR_LEN_MAX: usize = 44;
/// The reference count Redis reports for its shared integer objects.
const SHARED_REFCOUNT: i64 = i32::MAX as i64;
/// Integers below this are shared objects in Redis (`OBJ_SHARED_INTEGERS`).
const SHARED_INTEGERS: i64 = 10_000;

/// A size threshold from the configuration, or Redis's default.
fn threshold(config: &Config, name: &str, default: usize) -> usize {
    config
        .get(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn small(config: &Config, kind: &str, len: usize, longest: usize) -> bool {
    len <= threshold(config, &format!("{kind}-max-listpack-entries"), 128)
        && longest <= threshold(config, &format!("{kind}-max-listpack-value"), 64)
}

/// The encoding Redis 7.0 would report for `value`.
pub(crate) fn encoding(value: &Value, config: &Config) -> &'static str {
    match value {
        Value::Str(s) => {
            if s.len() <= 20 && parse_i64(s).is_some() {
                "int"
            } else if s.len() <= EMBSTR_LEN_MAX {
                "embstr"
            } else {
                "raw"
            }
        }
        Value::List(_) => "quicklist",
        Value::Set(set) => {
            let ints = set.iter().all(|m| m.len() <= 20 && parse_i64(m).is_some());
            if ints && set.len() <= threshold(config, "set-max-intset-entries", 512) {
                "intset"
            } else {
                "hashtable"
            }
        }
        Value::Hash(hash) => {
            let longest = hash
                .iter()
                .map(|(f, v)| f.len().max(v.len()))
                .max()
                .unwrap_or(0);
            if small(config, "hash", hash.len(), longest) {
                "listpack"
            } else {
                "hashtable"
            }
        }
        Value::ZSet(zset) => {
            let longest = zset.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
            if small(config, "zset", zset.len(), longest) {
                "listpack"
            } else {
                "skiplist"
            }
        }
        Value::Stream(_) => "stream",
    }
}

fn refcount(value: &Value, config: &Config) -> i64 {
    // Redis shares small integers unless a policy needs per-key clocks.
    let lru_or_lfu = !matches!(
        config.maxmemory_policy,
        crate::config::MaxmemoryPolicy::NoEviction
            | crate::config::MaxmemoryPolicy::AllKeysRandom
            | crate::config::MaxmemoryPolicy::VolatileRandom
            | crate::config::MaxmemoryPolicy::VolatileTtl
    );
    match value {
        Value::Str(s) if !lru_or_lfu => match parse_i64(s) {
            Some(n) if (0..SHARED_INTEGERS).contains(&n) && s.len() <= 20 => SHARED_REFCOUNT,
            _ => 1,
        },
        _ => 1,
    }
}

const LFU_SELECTED: &str = "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
const LFU_NOT_SELECTED: &str = "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";

fn object(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let sub = args.get(1).to_ascii_lowercase();
    let (db, key) = (ctx.session.db, args.get(2));
    let state = &mut *ctx.state;
    let Some(value) = state.keyspace.peek(db, key) else {
        ctx.reply.null();
        return Ok(());
    };
    let config = &state.config;
    match sub.as_slice() {
        b"encoding" => {
            let name = encoding(value, config);
            ctx.reply.bulk(name.as_bytes());
        }
        b"refcount" => ctx.reply.int(refcount(value, config)),
        b"idletime" => {
            if config.maxmemory_policy.is_lfu() {
                return Err(Cow::Borrowed(LFU_SELECTED));
            }
            let clock = state.keyspace.access_clock(db, key).unwrap_or(0);
            let idle = access::idle_ms(clock, state.keyspace.now_ms) / 1000;
            ctx.reply.int(idle as i64);
        }
        _ => {
            if !config.maxmemory_policy.is_lfu() {
                return Err(Cow::Borrowed(LFU_NOT_SELECTED));
            }
            let clock = state.keyspace.access_clock(db, key).unwrap_or(0);
            let policy = state.keyspace.access;
            let freq = access::lfu_counter(clock, state.keyspace.now_ms, &policy);
            ctx.reply.int(i64::from(freq));
        }
    }
    Ok(())
}

fn help(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    help_reply(
        ctx.reply,
        "OBJECT",
        &[
            "ENCODING <key>",
            "    The encoding Redis 7.0 would use for the value at <key>.",
            "FREQ <key>",
            "    The access frequency counter of <key> (LFU policies only).",
            "IDLETIME <key>",
            "    Seconds since <key> was last accessed (not under LFU policies).",
            "REFCOUNT <key>",
            "    The reference count of the value at <key>.",
        ],
    );
    Ok(())
}

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("object", -2, 0, K0, "generic", "Inspects a key's value.", object).with_subcommands(OBJECT),
];

/// OBJECT's key subcommands are in the `@keyspace` category.
const KEYSPACE: u64 = super::acl::bit("keyspace");

/// Key argument after the subcommand name.
const K2: (i32, i32, i32) = (2, 2, 1);

/// OBJECT's subcommands.
#[rustfmt::skip]
static OBJECT: &[CommandSpec] = &[
    cmd!("encoding", 3, READONLY, K2, "generic", "Names the encoding of a key's value.", object).with_tips(&["nondeterministic_output"]).with_acl(KEYSPACE),
    cmd!("freq", 3, READONLY, K2, "generic", "Returns a key's access frequency counter.", object).with_tips(&["nondeterministic_output"]).with_acl(KEYSPACE),
    cmd!("idletime", 3, READONLY, K2, "generic", "Returns the seconds since a key was accessed.", object).with_tips(&["nondeterministic_output"]).with_acl(KEYSPACE),
    cmd!("refcount", 3, READONLY, K2, "generic", "Returns the reference count of a key's value.", object).with_tips(&["nondeterministic_output"]).with_acl(KEYSPACE),
    cmd!("help", 2, LOADING | STALE, K0, "generic", "Explains OBJECT's subcommands.", help).with_acl(acl::KEYSPACE),
];
