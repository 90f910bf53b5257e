//! DUMP and RESTORE: a value in Redis's own serialisation (`crate::rdb`),
//! so values move between Ferrite and Redis in both directions.
//!
//! RESTORE with a relative TTL is logged with the absolute time and
//! `ABSTTL`, so replaying it gives the key the same expiry; IDLETIME and
//! FREQ change no data and are not logged.

use std::borrow::Cow;

use super::table::*;
use super::{acl, errors, upper, CmdError, CmdResult, Ctx};
use crate::keyspace::events::GENERIC;
use crate::rdb::{self, RestoreError};
use crate::resp::Args;

pub(super) fn dump(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let payload = ctx
        .state
        .keyspace
        .get(ctx.session.db, args.get(1))
        .map(rdb::dump);
    ctx.reply.bulk_opt(payload.as_deref());
    Ok(())
}

/// The options of RESTORE after its three arguments.
#[derive(Default)]
struct RestoreOptions {
    replace: bool,
    absolute: bool,
    /// Whether `ABSTTL` was given (so the log needs no extra one).
    given_absttl: bool,
    /// IDLETIME's seconds.
    idle: Option<u64>,
    /// FREQ's counter.
    freq: Option<u8>,
}

fn long_arg(args: &Args<'_>, at: usize) -> Result<i64, CmdError> {
    crate::types::number::parse_i64(args.get(at)).ok_or(Cow::Borrowed(errors::NOT_INTEGER))
}

fn restore_options(args: &Args<'_>) -> Result<RestoreOptions, CmdError> {
    let mut o = RestoreOptions::default();
    let mut j = 4;
    while j < args.len() {
        let more = args.len() - j - 1;
        match upper(args, j).as_slice() {
            b"REPLACE" => o.replace = true,
            b"ABSTTL" => {
                o.absolute = true;
                o.given_absttl = true;
            }
            b"IDLETIME" if more >= 1 && o.freq.is_none() => {
                let idle = long_arg(args, j + 1)?;
                if idle < 0 {
                    return Err(Cow::Borrowed("ERR Invalid IDLETIME value, must be >= 0"));
                }
                o.idle = Some(idle as u64);
                j += 1;
            }
            b"FREQ" if more >= 1 && o.idle.is_none() => {
                let freq = long_arg(args, j + 1)?;
                let Ok(freq) = u8::try_from(freq) else {
                    return Err(Cow::Borrowed(
                        "ERR Invalid FREQ value, must be >= 0 and <= 255",
                    ));
                };
                o.freq = Some(freq);
                j += 1;
            }
            _ => return Err(Cow::Borrowed(errors::SYNTAX)),
        }
        j += 1;
    }
    Ok(o)
}

pub(super) fn restore(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let o = restore_options(args)?;
    let (db, key) = (ctx.session.db, args.get(1));
    if !o.replace && ctx.state.keyspace.contains(db, key) {
        return Err(Cow::Borrowed("BUSYKEY Target key name already exists."));
    }
    let ttl = long_arg(args, 2)?;
    if ttl < 0 {
        return Err(Cow::Borrowed("ERR Invalid TTL value, must be >= 0"));
    }
    let value = rdb::restore_checked(args.get(3), !ctx.state.skip_checksum_validation).map_err(
        |e| match e {
            RestoreError::VersionOrChecksum => {
                Cow::Borrowed("ERR DUMP payload version or checksum are wrong")
            }
            RestoreError::BadFormat => Cow::Borrowed("ERR Bad data format"),
        },
    )?;
    let ks = &mut ctx.state.keyspace;
    let deleted = o.replace && ks.remove(db, key).is_some();
    let at = match ttl {
        0 => None,
        t if o.absolute => Some(t),
        t => Some(t.saturating_add(ks.now_ms)),
    };
    // An expiry already past: nothing is created (while loading the log,
    // keys are kept and the log's own DEL removes them).
    if at.is_some_and(|at| at <= ks.now_ms) && !ks.loading {
        if deleted {
            ctx.notify(GENERIC, "del", key);
            ctx.propagate(&[b"DEL", key]);
        }
        ctx.reply.ok();
        return Ok(());
    }
    ks.set(db, key, value, false);
    if let Some(at) = at {
        ks.set_expire(db, key, at);
    }
    // As Redis, IDLETIME counts only under an LRU (or no) policy and FREQ
    // only under an LFU one; the other is ignored.
    if ctx.state.config.maxmemory_policy.is_lfu() {
        ctx.state.keyspace.set_access(db, key, None, o.freq);
    } else {
        ctx.state.keyspace.set_access(db, key, o.idle, None);
    }
    ctx.notify(GENERIC, "restore", key);
    log_restore(ctx, args, &o, at);
    ctx.reply.ok();
    Ok(())
}

/// Logs RESTORE as sent, but with a relative TTL made absolute (and
/// `ABSTTL` added), and without IDLETIME and FREQ.
fn log_restore(ctx: &mut Ctx<'_>, args: &Args<'_>, o: &RestoreOptions, at: Option<i64>) {
    let ttl = at.map_or_else(|| b"0".to_vec(), |t| t.to_string().into_bytes());
    let mut parts: Vec<&[u8]> = vec![b"RESTORE", args.get(1), &ttl, args.get(3)];
    if o.replace {
        parts.push(b"REPLACE");
    }
    if at.is_some() {
        parts.push(if o.given_absttl { b"absttl" } else { b"ABSTTL" });
    }
    ctx.propagate(&parts);
}

/// The commands this file implements.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("dump", 2, R, K1, "generic", "Serialises a key's value as Redis does.", dump).with_tips(&["nondeterministic_output"]).with_acl(acl::KEYSPACE),
    cmd!("restore", -4, W, K1, "generic", "Creates a key from a DUMP payload.", restore).with_acl(acl::KEYSPACE)
        .with_acl(acl::DANGEROUS),
    cmd!("restore-asking", -4, W | ASKING, K1, "server", "RESTORE as sent by MIGRATE to a cluster node importing the key's slot.", restore).with_acl(acl::KEYSPACE)
        .with_acl(acl::DANGEROUS),
];
