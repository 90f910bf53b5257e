//! XADD, XTRIM, XDEL, XSETID, XLEN, XRANGE and XREVRANGE.

use std::borrow::Cow;

use super::{
    node_limits, parse_id_full, range_end, range_start, reply_entry, stream_mut, stream_ref,
    strict_id, ParsedId,
};
use crate::commands::{errors, CmdError, CmdResult, Ctx};
use crate::keyspace::events::STREAM;
use crate::resp::Args;
use crate::types::number::parse_i64;
use crate::types::stream::{StreamId, TrimBy, BLOCK_BYTES_MAX};
use crate::types::Value;

/// XADD and XTRIM's options, parsed.
#[derive(Debug, Default)]
struct TrimArgs {
    /// MAXLEN or MINID, if given.
    by: Option<TrimBy>,
    /// `~`: only whole blocks.
    approx: bool,
    /// Most entries to remove; 0: no limit.
    limit: u64,
    /// Where the MAXLEN/MINID value is (rewritten when logged).
    value_at: usize,
    /// NOMKSTREAM (XADD).
    no_mkstream: bool,
    /// XADD's ID argument: where it is and what it says (`None` for `*`).
    id_at: usize,
    id: Option<ParsedId>,
}

fn int(args: &Args<'_>, at: usize) -> Result<i64, CmdError> {
    parse_i64(args.get(at)).ok_or(Cow::Borrowed(errors::NOT_INTEGER))
}

const BOTH: &str = "ERR syntax error, MAXLEN and MINID options at the same time are not compatible";

/// Parses the options from argument 2 on, as Redis's
/// `streamParseAddOrTrimArgsOrReply`.
fn parse_trim(ctx: &Ctx<'_>, args: &Args<'_>, xadd: bool) -> Result<TrimArgs, CmdError> {
    let mut t = TrimArgs::default();
    let mut limit_given = false;
    let mut i = 2;
    t.id_at = args.len();
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = args.get(i);
        let lower = opt.to_ascii_lowercase();
        if xadd && opt == b"*" {
            t.id_at = i;
            break;
        } else if (lower == b"maxlen" || lower == b"minid") && more > 0 {
            if t.by.is_some() {
                return Err(Cow::Borrowed(BOTH));
            }
            t.approx = false;
            let next = args.get(i + 1);
            if more >= 2 && (next == b"~" || next == b"=") {
                t.approx = next == b"~";
                i += 1;
            }
            t.by = Some(if lower == b"maxlen" {
                let n = int(args, i + 1)?;
                let n = u64::try_from(n)
                    .map_err(|_| Cow::Borrowed("ERR The MAXLEN argument must be >= 0."))?;
                TrimBy::MaxLen(n)
            } else {
                TrimBy::MinId(strict_id(args.get(i + 1))?)
            });
            i += 1;
            t.value_at = i;
        } else if lower == b"limit" && more > 0 {
            let n = int(args, i + 1)?;
            t.limit = u64::try_from(n)
                .map_err(|_| Cow::Borrowed("ERR The LIMIT argument must be >= 0."))?;
            limit_given = true;
            i += 1;
        } else if xadd && lower == b"nomkstream" {
            t.no_mkstream = true;
        } else if xadd {
            t.id = Some(parse_id_full(opt, 0, true, true)?);
            t.id_at = i;
            break;
        } else {
            return Err(Cow::Borrowed(errors::SYNTAX));
        }
        i += 1;
    }
    check_trim(ctx, &mut t, limit_given, xadd)?;
    Ok(t)
}

/// The checks after parsing, and the default LIMIT of a `~` trim.
fn check_trim(
    ctx: &Ctx<'_>,
    t: &mut TrimArgs,
    limit_given: bool,
    xadd: bool,
) -> Result<(), CmdError> {
    if t.limit != 0 && t.by.is_none() {
        return Err(Cow::Borrowed(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && t.by.is_none() {
        return Err(Cow::Borrowed(
            "ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if ctx.session.is_replay {
        // The log holds the exact trim done; replay never limits it.
        t.limit = 0;
    } else if limit_given {
        if !t.approx {
            return Err(Cow::Borrowed(
                "ERR syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
    } else if t.approx {
        let per_node = node_limits(ctx).max_entries;
        t.limit = match per_node.saturating_mul(100) {
            0 => 10_000,
            n => n.min(1_000_000),
        };
    } else {
        t.limit = 0;
    }
    Ok(())
}

/// Logs the command as the client sent it, except that a trim that was
/// approximate logs `=` and the exact length or first ID it left, so
/// replay trims the same entries, and XADD logs the ID it added in place
/// of `*` or `ms-*` (`id`: where and what). The logged command borrows
/// the client's arguments: only the replaced ones are new text, kept on
/// the stack.
fn propagate_exact(
    ctx: &mut Ctx<'_>,
    args: &Args<'_>,
    t: &TrimArgs,
    length: u64,
    first: StreamId,
    id: Option<(usize, &[u8])>,
) {
    let mut parts: Vec<&[u8]> = args.iter().collect();
    let exact_first;
    let exact_length;
    if t.approx {
        let exact: &[u8] = match t.by {
            Some(TrimBy::MinId(_)) => {
                exact_first = first.text_bytes();
                exact_first.as_bytes()
            }
            _ => {
                exact_length = length.to_string();
                exact_length.as_bytes()
            }
        };
        if let Some(op) = t.value_at.checked_sub(1).and_then(|at| parts.get_mut(at)) {
            *op = b"=";
        }
        if let Some(value) = parts.get_mut(t.value_at) {
            *value = exact;
        }
    }
    if let Some((at, text)) = id {
        if let Some(slot) = parts.get_mut(at) {
            *slot = text;
        }
    }
    ctx.propagate(&parts);
}

pub(in crate::commands) fn xadd(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let t = parse_trim(ctx, args, true)?;
    let field_at = t.id_at + 1;
    let nfields = args.len().saturating_sub(field_at);
    if nfields < 2 || nfields % 2 == 1 {
        return Err(Cow::Borrowed(
            "ERR wrong number of arguments for 'xadd' command",
        ));
    }
    if t.id.is_some_and(|p| p.seq_given && p.id.is_zero()) {
        return Err(Cow::Borrowed(
            "ERR The ID specified in XADD must be greater than 0-0",
        ));
    }
    let (db, key) = (ctx.session.db, args.get(1));
    let limits = node_limits(ctx);
    let now = ctx.state.keyspace.now_ms;
    let fields: Vec<(&[u8], &[u8])> = (field_at..args.len())
        .step_by(2)
        .map(|i| (args.get(i), args.get(i + 1)))
        .collect();
    // One search finds the stream, or creates it unless NOMKSTREAM.
    let make: Option<fn() -> Value> = (!t.no_mkstream).then_some(Value::new_stream);
    let found = ctx
        .state
        .keyspace
        .get_mut_checked(db, key, make, |v| match v {
            Value::Stream(_) => Ok(()),
            _ => Err(Cow::Borrowed(errors::WRONGTYPE)),
        })?;
    let s: &mut crate::types::stream::Stream = match found {
        Some(Value::Stream(s)) => s,
        Some(_) => return Err(Cow::Borrowed(errors::WRONGTYPE)),
        None => {
            ctx.reply.null();
            return Ok(());
        }
    };
    if s.last_id == StreamId::MAX {
        return Err(Cow::Borrowed(
            "ERR The stream has exhausted the last possible ID, unable to add more items",
        ));
    }
    let id = next_id(s.last_id, t.id, now)?;
    let bytes: u64 = fields.iter().map(|(f, v)| (f.len() + v.len()) as u64).sum();
    if bytes > BLOCK_BYTES_MAX {
        return Err(Cow::Borrowed("ERR Elements are too large to be stored"));
    }
    s.append(id, &fields, limits);
    let trimmed = t.by.map_or(0, |by| s.trim(by, t.approx, t.limit));
    let (length, first) = (s.length, s.first_id);
    let text = id.text_bytes();
    ctx.reply.bulk(text.as_bytes());
    ctx.notify(STREAM, "xadd", key);
    if trimmed > 0 {
        ctx.notify(STREAM, "xtrim", key);
    }
    propagate_exact(
        ctx,
        args,
        &t,
        length,
        first,
        Some((t.id_at, text.as_bytes())),
    );
    Ok(())
}

/// The ID XADD adds: the time (or the last ID's successor), an explicit
/// ID, or `ms-*`'s next sequence; checked greater than `last`.
fn next_id(last: StreamId, given: Option<ParsedId>, now_ms: i64) -> Result<StreamId, CmdError> {
    let smaller = || {
        Cow::Borrowed(
            "ERR The ID specified in XADD is equal or smaller than the target stream top item",
        )
    };
    let id = match given {
        Some(p) if p.seq_given => p.id,
        Some(p) if p.id.ms == last.ms => {
            if last.seq == u64::MAX {
                return Err(smaller());
            }
            StreamId {
                ms: last.ms,
                seq: last.seq + 1,
            }
        }
        Some(p) => p.id,
        None => {
            let ms = u64::try_from(now_ms).unwrap_or(0);
            if ms > last.ms {
                StreamId { ms, seq: 0 }
            } else {
                last.next().unwrap_or(StreamId::MIN)
            }
        }
    };
    if id <= last {
        return Err(smaller());
    }
    Ok(id)
}

pub(in crate::commands) fn xtrim(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let t = parse_trim(ctx, args, false)?;
    let (db, key) = (ctx.session.db, args.get(1));
    if stream_ref(&mut ctx.state.keyspace, db, key)?.is_none() {
        ctx.reply.int(0);
        return Ok(());
    }
    // Peek first: a trim that removes nothing changes nothing.
    let Some(by) = t.by else {
        return Err(Cow::Borrowed(errors::SYNTAX));
    };
    let s = stream_mut(&mut ctx.state.keyspace, db, key).ok_or(Cow::Borrowed(errors::WRONGTYPE))?;
    let deleted = s.trim(by, t.approx, t.limit);
    let (length, first) = (s.length, s.first_id);
    if deleted > 0 {
        ctx.notify(STREAM, "xtrim", key);
        propagate_exact(ctx, args, &t, length, first, None);
    }
    ctx.reply.int(deleted as i64);
    Ok(())
}

pub(in crate::commands) fn xdel(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (db, key) = (ctx.session.db, args.get(1));
    if stream_ref(&mut ctx.state.keyspace, db, key)?.is_none() {
        ctx.reply.int(0);
        return Ok(());
    }
    let ids = (2..args.len())
        .map(|i| strict_id(args.get(i)))
        .collect::<Result<Vec<_>, _>>()?;
    let present = match stream_ref(&mut ctx.state.keyspace, db, key)? {
        Some(s) => ids.iter().any(|id| s.get(*id).is_some()),
        None => false,
    };
    let mut deleted = 0;
    if present {
        if let Some(s) = stream_mut(&mut ctx.state.keyspace, db, key) {
            deleted = ids.iter().filter(|id| s.delete(**id)).count();
        }
    }
    if deleted > 0 {
        ctx.notify(STREAM, "xdel", key);
        ctx.propagate_args(args);
    }
    ctx.reply.int(deleted as i64);
    Ok(())
}

pub(in crate::commands) fn xsetid(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let id = strict_id(args.get(2))?;
    let (mut added, mut max_deleted) = (None, StreamId::MIN);
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = args.get(i).to_ascii_lowercase();
        if opt == b"entriesadded" && more > 0 {
            let n = int(args, i + 1)?;
            added = Some(
                u64::try_from(n)
                    .map_err(|_| Cow::Borrowed("ERR entries_added must be positive"))?,
            );
        } else if opt == b"maxdeletedid" && more > 0 {
            max_deleted = strict_id(args.get(i + 1))?;
            if id < max_deleted {
                return Err(Cow::Borrowed(
                    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
        } else {
            return Err(Cow::Borrowed(errors::SYNTAX));
        }
        i += 2;
    }
    let (db, key) = (ctx.session.db, args.get(1));
    let Some(s) = stream_ref(&mut ctx.state.keyspace, db, key)? else {
        return Err(Cow::Borrowed(errors::NO_SUCH_KEY));
    };
    if s.length > 0 {
        if id < s.last_valid_id() {
            return Err(Cow::Borrowed(
                "ERR The ID specified in XSETID is smaller than the target stream top item",
            ));
        }
        if added.is_some_and(|a| s.length > a) {
            return Err(Cow::Borrowed(
                "ERR The entries_added specified in XSETID is smaller than the target stream length",
            ));
        }
    }
    if let Some(s) = stream_mut(&mut ctx.state.keyspace, db, key) {
        s.last_id = id;
        if let Some(a) = added {
            s.entries_added = a;
        }
        if !max_deleted.is_zero() {
            s.max_deleted_id = max_deleted;
        }
    }
    ctx.reply.ok();
    ctx.notify(STREAM, "xsetid", key);
    ctx.propagate_args(args);
    Ok(())
}

pub(in crate::commands) fn xlen(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let len =
        stream_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?.map_or(0, |s| s.length);
    ctx.reply.int(len as i64);
    Ok(())
}

fn range_generic(ctx: &mut Ctx<'_>, args: &Args<'_>, rev: bool) -> CmdResult {
    let (start_at, end_at) = if rev { (3, 2) } else { (2, 3) };
    let start = range_start(args.get(start_at))?;
    let end = range_end(args.get(end_at))?;
    let mut count: i64 = -1;
    let mut j = 4;
    while j < args.len() {
        if args.get(j).eq_ignore_ascii_case(b"COUNT") && j + 1 < args.len() {
            count = int(args, j + 1)?.max(0);
            j += 2;
        } else {
            return Err(Cow::Borrowed(errors::SYNTAX));
        }
    }
    let Some(s) = stream_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))? else {
        ctx.reply.array(0);
        return Ok(());
    };
    if count == 0 {
        ctx.reply.null_array();
        return Ok(());
    }
    let limit = if count < 0 {
        usize::MAX
    } else {
        count as usize
    };
    let entries: Vec<_> = s.range(start, end, rev).take(limit).collect();
    ctx.reply.array(entries.len());
    entries.iter().for_each(|e| reply_entry(ctx.reply, e));
    Ok(())
}

pub(in crate::commands) fn xrange(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    range_generic(ctx, args, false)
}

pub(in crate::commands) fn xrevrange(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    range_generic(ctx, args, true)
}
