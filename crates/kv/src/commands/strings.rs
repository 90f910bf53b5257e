//! String commands.

mod lcs;

use std::borrow::Cow;

use super::table::*;
use super::{errors, int_arg, upper, CmdError, CmdResult, Ctx};
use crate::keyspace::events::{GENERIC, STRING};
use crate::keyspace::Keyspace;
use crate::resp::Args;
use crate::types::long_double::LongDouble;
use crate::types::number::value_as_i64;
use crate::types::Value;

/// The string at `key`: `Ok(None)` if missing, WRONGTYPE if not a string.
pub(crate) fn get_str<'k>(
    ks: &'k mut Keyspace,
    db: usize,
    key: &[u8],
) -> Result<Option<&'k [u8]>, CmdError> {
    match ks.get(db, key) {
        None => Ok(None),
        Some(Value::Str(s)) => Ok(Some(s)),
        Some(_) => Err(Cow::Borrowed(errors::WRONGTYPE)),
    }
}

pub(super) fn get(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let value = get_str(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    ctx.reply.bulk_opt(value);
    Ok(())
}

/// The expiry options shared by SET and GETEX.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expiry {
    None,
    /// `EX`, `PX`, `EXAT` or `PXAT`: the option's index in the arguments
    /// (its value follows it), checked only once the syntax is known good.
    Option(usize),
    KeepTtl,
    Persist,
}

/// Turns `EX 10` style options into an absolute time, refusing values
/// Redis refuses (zero, negative, overflowing).
fn expiry_option(option: &[u8], value: &[u8], now_ms: i64, command: &str) -> Result<i64, CmdError> {
    let n = crate::types::number::parse_i64(value).ok_or(Cow::Borrowed(errors::NOT_INTEGER))?;
    let invalid = || Cow::Owned(format!("ERR invalid expire time in '{command}' command"));
    if n <= 0 {
        return Err(invalid());
    }
    let at = match option {
        b"EX" => n.checked_mul(1000).and_then(|ms| ms.checked_add(now_ms)),
        b"PX" => n.checked_add(now_ms),
        b"EXAT" => n.checked_mul(1000),
        _ => Some(n),
    };
    at.ok_or_else(invalid)
}

/// The absolute time an [`Expiry::Option`] names, if it is one.
fn expiry_at(
    ctx: &Ctx<'_>,
    args: &Args<'_>,
    expiry: Expiry,
    command: &str,
) -> Result<Option<i64>, CmdError> {
    let Expiry::Option(at) = expiry else {
        return Ok(None);
    };
    let option = upper(args, at);
    let now = ctx.state.keyspace.now_ms;
    expiry_option(&option, args.get(at + 1), now, command).map(Some)
}

/// Parses the expiry options from argument `first` on, with `extra`
/// deciding the command's own flags (NX, XX, GET): Redis allows an option
/// twice, but not two kinds of expiry, nor KEEPTTL or PERSIST with one.
fn parse_expiry_options(
    args: &Args<'_>,
    first: usize,
    keep_ttl_allowed: bool,
    mut extra: impl FnMut(&[u8]) -> bool,
) -> Result<Expiry, CmdError> {
    let mut expiry = Expiry::None;
    let mut i = first;
    while i < args.len() {
        let opt = upper(args, i);
        let has_value = i + 1 < args.len();
        let same_kind = |e: Expiry| match e {
            Expiry::Option(at) => args.get(at).eq_ignore_ascii_case(&opt),
            _ => false,
        };
        match opt.as_slice() {
            b"KEEPTTL" if keep_ttl_allowed && matches!(expiry, Expiry::None | Expiry::KeepTtl) => {
                expiry = Expiry::KeepTtl;
            }
            b"PERSIST" if !keep_ttl_allowed && matches!(expiry, Expiry::None | Expiry::Persist) => {
                expiry = Expiry::Persist;
            }
            b"EX" | b"PX" | b"EXAT" | b"PXAT"
                if has_value && (expiry == Expiry::None || same_kind(expiry)) =>
            {
                expiry = Expiry::Option(i);
                i += 1;
            }
            _ if extra(&opt) => {}
            _ => return Err(Cow::Borrowed(errors::SYNTAX)),
        }
        i += 1;
    }
    Ok(expiry)
}

struct SetOptions {
    nx: bool,
    xx: bool,
    get: bool,
    expiry: Expiry,
}

fn parse_set_options(args: &Args<'_>) -> Result<SetOptions, CmdError> {
    let (mut nx, mut xx, mut get) = (false, false, false);
    let expiry = parse_expiry_options(args, 3, true, |opt| match opt {
        b"NX" if !xx => {
            nx = true;
            true
        }
        b"XX" if !nx => {
            xx = true;
            true
        }
        b"GET" => {
            get = true;
            true
        }
        _ => false,
    })?;
    Ok(SetOptions {
        nx,
        xx,
        get,
        expiry,
    })
}

pub(super) fn set(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let o = parse_set_options(args)?;
    let at = expiry_at(ctx, args, o.expiry, "set")?;
    let (db, key, value) = (ctx.session.db, args.get(1), args.get(2));
    let ks = &mut ctx.state.keyspace;
    let old: Option<Vec<u8>> = if o.get {
        get_str(ks, db, key)?.map(<[u8]>::to_vec)
    } else {
        None
    };
    let exists = ks.contains(db, key);
    if (o.nx && exists) || (o.xx && !exists) {
        if o.get {
            ctx.reply.bulk_opt(old.as_deref());
        } else {
            ctx.reply.null();
        }
        return Ok(());
    }
    let keep_ttl = o.expiry == Expiry::KeepTtl;
    ks.set(db, key, Value::Str(value.into()), keep_ttl);
    ctx.notify(STRING, "set", key);
    let ks = &mut ctx.state.keyspace;
    match at {
        Some(at) => {
            ks.set_expire(db, key, at);
            ctx.notify(GENERIC, "expire", key);
            let at = at.to_string();
            ctx.propagate(&[b"SET", key, value, b"PXAT", at.as_bytes()]);
        }
        None if keep_ttl => ctx.propagate(&[b"SET", key, value, b"KEEPTTL"]),
        None => ctx.propagate(&[b"SET", key, value]),
    }
    // Logged as SET without KEEPTTL, the record alone decides the key.
    if !keep_ttl {
        ctx.state.keyspace.supersede(db, key);
    }
    if o.get {
        ctx.reply.bulk_opt(old.as_deref());
    } else {
        ctx.reply.ok();
    }
    Ok(())
}

pub(super) fn setnx(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (db, key) = (ctx.session.db, args.get(1));
    if ctx.state.keyspace.contains(db, key) {
        ctx.reply.int(0);
        return Ok(());
    }
    ctx.state
        .keyspace
        .set(db, key, Value::Str(args.get(2).into()), false);
    ctx.state.keyspace.supersede(db, key);
    ctx.propagate(&[b"SET", key, args.get(2)]);
    ctx.notify(STRING, "set", key);
    ctx.reply.int(1);
    Ok(())
}

fn set_with_expiry(ctx: &mut Ctx<'_>, args: &Args<'_>, unit: &[u8], name: &str) -> CmdResult {
    let now = ctx.state.keyspace.now_ms;
    let at = expiry_option(unit, args.get(2), now, name)?;
    let (db, key, value) = (ctx.session.db, args.get(1), args.get(3));
    ctx.state
        .keyspace
        .set(db, key, Value::Str(value.into()), false);
    ctx.state.keyspace.set_expire(db, key, at);
    ctx.state.keyspace.supersede(db, key);
    ctx.notify(STRING, "set", key);
    ctx.notify(GENERIC, "expire", key);
    let at = at.to_string();
    ctx.propagate(&[b"SET", key, value, b"PXAT", at.as_bytes()]);
    ctx.reply.ok();
    Ok(())
}

pub(super) fn setex(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    set_with_expiry(ctx, args, b"EX", "setex")
}

pub(super) fn psetex(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    set_with_expiry(ctx, args, b"PX", "psetex")
}

pub(super) fn getset(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (db, key, value) = (ctx.session.db, args.get(1), args.get(2));
    let old = get_str(&mut ctx.state.keyspace, db, key)?.map(<[u8]>::to_vec);
    ctx.state
        .keyspace
        .set(db, key, Value::Str(value.into()), false);
    ctx.state.keyspace.supersede(db, key);
    ctx.propagate(&[b"SET", key, value]);
    ctx.notify(STRING, "set", key);
    ctx.reply.bulk_opt(old.as_deref());
    Ok(())
}

pub(super) fn getdel(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (db, key) = (ctx.session.db, args.get(1));
    let old = get_str(&mut ctx.state.keyspace, db, key)?.map(<[u8]>::to_vec);
    if old.is_some() {
        ctx.state.keyspace.remove(db, key);
        ctx.state.keyspace.supersede(db, key);
        ctx.propagate(&[b"DEL", key]);
        ctx.notify(GENERIC, "del", key);
    }
    ctx.reply.bulk_opt(old.as_deref());
    Ok(())
}

pub(super) fn getex(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (db, key) = (ctx.session.db, args.get(1));
    let expiry = parse_expiry_options(args, 2, false, |_| false)?;
    // A missing key answers nil before the expiry is checked.
    let Some(value) = get_str(&mut ctx.state.keyspace, db, key)?.map(<[u8]>::to_vec) else {
        ctx.reply.null();
        return Ok(());
    };
    let at = expiry_at(ctx, args, expiry, "getex")?;
    let absolute = matches!(expiry, Expiry::Option(i) if upper(args, i).ends_with(b"AT"));
    let now = ctx.state.keyspace.now_ms;
    match at {
        // An absolute time already past deletes the key, as Redis does.
        Some(at) if absolute && at <= now => {
            ctx.state.keyspace.remove(db, key);
            ctx.state.keyspace.supersede(db, key);
            ctx.propagate(&[b"DEL", key]);
            ctx.notify(GENERIC, "del", key);
        }
        Some(at) => {
            ctx.state.keyspace.set_expire(db, key, at);
            let at = at.to_string();
            ctx.propagate(&[b"PEXPIREAT", key, at.as_bytes()]);
            ctx.notify(GENERIC, "expire", key);
        }
        None if expiry == Expiry::Persist && ctx.state.keyspace.persist(db, key) => {
            ctx.propagate(&[b"PERSIST", key]);
            ctx.notify(GENERIC, "persist", key);
        }
        None => {}
    }
    ctx.reply.bulk(&value);
    Ok(())
}

pub(super) fn mget(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let db = ctx.session.db;
    ctx.reply.array(args.len() - 1);
    for key in args.iter().skip(1) {
        match ctx.state.keyspace.get(db, key) {
            Some(Value::Str(s)) => ctx.reply.bulk(s),
            _ => ctx.reply.null(),
        }
    }
    Ok(())
}

fn check_pairs(args: &Args<'_>, name: &str) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(Cow::Owned(format!(
            "ERR wrong number of arguments for '{name}' command"
        )));
    }
    Ok(())
}

pub(super) fn mset(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    check_pairs(args, "mset")?;
    let db = ctx.session.db;
    for pair in (1..args.len()).step_by(2) {
        let value = Value::Str(args.get(pair + 1).into());
        ctx.state.keyspace.set(db, args.get(pair), value, false);
        ctx.state.keyspace.supersede(db, args.get(pair));
        ctx.notify(STRING, "set", args.get(pair));
    }
    ctx.propagate_args(args);
    ctx.reply.ok();
    Ok(())
}

pub(super) fn msetnx(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    check_pairs(args, "msetnx")?;
    let db = ctx.session.db;
    let any_exists = (1..args.len())
        .step_by(2)
        .any(|i| ctx.state.keyspace.contains(db, args.get(i)));
    if any_exists {
        ctx.reply.int(0);
        return Ok(());
    }
    for pair in (1..args.len()).step_by(2) {
        let value = Value::Str(args.get(pair + 1).into());
        ctx.state.keyspace.set(db, args.get(pair), value, false);
        ctx.notify(STRING, "set", args.get(pair));
    }
    ctx.propagate_args(args);
    ctx.reply.int(1);
    Ok(())
}

/// Adds `delta` to the integer at `key`, keeping its TTL.
fn incr_by(ctx: &mut Ctx<'_>, args: &Args<'_>, delta: i64) -> CmdResult {
    let (db, key) = (ctx.session.db, args.get(1));
    // The counter is read, checked and rewritten in place in one search
    // of the keyspace (it keeps its TTL); a missing key is set anew.
    let mut next = delta;
    let found = ctx.state.keyspace.get_mut_checked(db, key, None, |v| {
        let Value::Str(text) = v else {
            return Err(Cow::Borrowed(errors::WRONGTYPE));
        };
        let current = value_as_i64(text).ok_or(Cow::Borrowed(errors::NOT_INTEGER))?;
        next = current
            .checked_add(delta)
            .ok_or(Cow::Borrowed(errors::OVERFLOW))?;
        Ok(())
    })?;
    let mut text = Vec::with_capacity(20);
    crate::resp::reply::push_i64(&mut text, next);
    let value = Value::Str(text.as_slice().into());
    match found {
        Some(slot) => *slot = value,
        None => ctx.state.keyspace.set(db, key, value, true),
    }
    ctx.propagate_args(args);
    ctx.notify(STRING, "incrby", key);
    ctx.reply.int(next);
    Ok(())
}

pub(super) fn incr(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    incr_by(ctx, args, 1)
}

pub(super) fn decr(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    incr_by(ctx, args, -1)
}

pub(super) fn incrby(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let delta = int_arg(args, 2)?;
    incr_by(ctx, args, delta)
}

pub(super) fn decrby(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let delta = int_arg(args, 2)?;
    let delta = delta
        .checked_neg()
        .ok_or(Cow::Borrowed("ERR decrement would overflow"))?;
    incr_by(ctx, args, delta)
}

pub(super) fn incrbyfloat(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (db, key) = (ctx.session.db, args.get(1));
    let not_float = || Cow::Borrowed(errors::NOT_FLOAT);
    // Redis reads the key (type, then value) before the increment.
    let current = match get_str(&mut ctx.state.keyspace, db, key)? {
        None => LongDouble::ZERO,
        Some(text) => LongDouble::parse(text).ok_or_else(not_float)?,
    };
    let delta = LongDouble::parse(args.get(2)).ok_or_else(not_float)?;
    let next = current
        .checked_add(&delta)
        .filter(|v| !v.is_infinite())
        .ok_or(Cow::Borrowed("ERR increment would produce NaN or Infinity"))?;
    let text = next.to_human();
    ctx.state
        .keyspace
        .set(db, key, Value::Str(text.as_bytes().into()), true);
    // The float arithmetic is replayed as its result, so a different
    // rounding at replay cannot change the value.
    ctx.propagate(&[b"SET", key, text.as_bytes(), b"KEEPTTL"]);
    ctx.notify(STRING, "incrbyfloat", key);
    ctx.reply.bulk(text.as_bytes());
    Ok(())
}

/// The longest string a client may build (`proto-max-bulk-len`); replay
/// is not limited, so a string grown under a larger setting still loads.
fn string_len_max(ctx: &Ctx<'_>) -> usize {
    if ctx.session.is_replay {
        usize::MAX
    } else {
        ctx.state.config.proto_max_bulk_len_bytes
    }
}

pub(super) fn append(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (db, key, tail) = (ctx.session.db, args.get(1), args.get(2));
    let limit = string_len_max(ctx);
    let current = get_str(&mut ctx.state.keyspace, db, key)?.unwrap_or_default();
    if current.len() + tail.len() > limit {
        return Err(Cow::Borrowed(errors::STRING_TOO_LONG));
    }
    let mut joined = Vec::with_capacity(current.len() + tail.len());
    joined.extend_from_slice(current);
    joined.extend_from_slice(tail);
    let len = joined.len();
    ctx.state
        .keyspace
        .set(db, key, Value::Str(joined.into()), true);
    ctx.propagate_args(args);
    ctx.notify(STRING, "append", key);
    ctx.reply.int(len as i64);
    Ok(())
}

pub(super) fn strlen(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let len = get_str(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?.map_or(0, <[u8]>::len);
    ctx.reply.int(len as i64);
    Ok(())
}

pub(super) fn getrange(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let start = int_arg(args, 2)?;
    let end = int_arg(args, 3)?;
    let value = get_str(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?.unwrap_or_default();
    let len = value.len() as i64;
    if len == 0 || (start < 0 && end < 0 && start > end) {
        ctx.reply.bulk(b"");
        return Ok(());
    }
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 {
        (len + end).max(0)
    } else {
        end.min(len - 1)
    };
    if start > end || start >= len {
        ctx.reply.bulk(b"");
    } else {
        ctx.reply.bulk(&value[start as usize..=end as usize]);
    }
    Ok(())
}

pub(super) fn setrange(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (db, key, patch) = (ctx.session.db, args.get(1), args.get(3));
    let offset = int_arg(args, 2)?;
    if offset < 0 {
        return Err(Cow::Borrowed("ERR offset is out of range"));
    }
    let offset = offset as usize;
    let limit = string_len_max(ctx);
    let current = get_str(&mut ctx.state.keyspace, db, key)?;
    if patch.is_empty() {
        let len = current.map_or(0, <[u8]>::len);
        ctx.reply.int(len as i64);
        return Ok(());
    }
    let end = offset.saturating_add(patch.len());
    if end > limit {
        return Err(Cow::Borrowed(errors::STRING_TOO_LONG));
    }
    // Within the string, the bytes change in place unless a rewrite
    // snapshot shares them.
    let len_now = current.map_or(0, <[u8]>::len);
    if end <= len_now {
        let written = match ctx.state.keyspace.get_mut(db, key) {
            Some(Value::Str(s)) => s.change_in_place(|bytes| {
                if let Some(range) = bytes.get_mut(offset..end) {
                    range.copy_from_slice(patch);
                }
            }),
            _ => false,
        };
        if written {
            ctx.propagate_args(args);
            ctx.notify(STRING, "setrange", key);
            ctx.reply.int(len_now as i64);
            return Ok(());
        }
    }
    let current = get_str(&mut ctx.state.keyspace, db, key)?;
    let mut bytes = current.map(<[u8]>::to_vec).unwrap_or_default();
    if bytes.len() < offset + patch.len() {
        bytes.resize(offset + patch.len(), 0);
    }
    bytes[offset..offset + patch.len()].copy_from_slice(patch);
    let len = bytes.len();
    ctx.state
        .keyspace
        .set(db, key, Value::Str(bytes.into()), true);
    ctx.propagate_args(args);
    ctx.notify(STRING, "setrange", key);
    ctx.reply.int(len as i64);
    Ok(())
}

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("get", 2, RF, K1, "string", "Returns the string value of a key.", get),
    cmd!("set", -3, W, K1, "string", "Sets the string value of a key, with options.", set),
    cmd!("setnx", 3, WF, K1, "string", "Sets a key only if it does not exist.", setnx),
    cmd!("setex", 4, W, K1, "string", "Sets a key with an expiry in seconds.", setex),
    cmd!("psetex", 4, W, K1, "string", "Sets a key with an expiry in milliseconds.", psetex),
    cmd!("getset", 3, WF, K1, "string", "Sets a key and returns its old value.", getset),
    cmd!("getdel", 2, D, K1, "string", "Returns a key's value and deletes it.", getdel),
    cmd!("getex", -2, D, K1, "string", "Returns a key's value and changes its expiry.", getex),
    cmd!("mget", -2, RF, KALL, "string", "Returns the values of keys.", mget).with_tips(&["request_policy:multi_shard"]),
    cmd!("mset", -3, W | SUPERSEDES, (1, -1, 2), "string", "Sets several keys.", mset).with_tips(&["request_policy:multi_shard", "response_policy:all_succeeded"]),
    cmd!("msetnx", -3, W, (1, -1, 2), "string", "Sets several keys only if none exists.", msetnx).with_tips(&["request_policy:multi_shard", "response_policy:agg_min"]),
    cmd!("incr", 2, WF, K1, "string", "Increments an integer by one.", incr),
    cmd!("decr", 2, WF, K1, "string", "Decrements an integer by one.", decr),
    cmd!("incrby", 3, WF, K1, "string", "Increments an integer.", incrby),
    cmd!("decrby", 3, WF, K1, "string", "Decrements an integer.", decrby),
    cmd!("incrbyfloat", 3, WF, K1, "string", "Increments a float.", incrbyfloat),
    cmd!("append", 3, WF, K1, "string", "Appends to a string.", append),
    cmd!("strlen", 2, RF, K1, "string", "Returns a string's length.", strlen),
    cmd!("getrange", 4, R, K1, "string", "Returns a substring.", getrange),
    cmd!("substr", 4, R, K1, "string", "Returns a substring (old name).", getrange),
    cmd!("setrange", 4, W, K1, "string", "Overwrites part of a string.", setrange),
    cmd!("lcs", -3, R, (1, 2, 1), "string", "Finds the longest common subsequence of two strings.", lcs::lcs),
];
