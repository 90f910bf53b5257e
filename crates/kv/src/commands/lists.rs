//! List commands.

use std::borrow::Cow;

use super::table::*;
use super::{errors, int_arg, upper, CmdError, CmdResult, Ctx};
use crate::keyspace::events::LIST;
use crate::keyspace::Keyspace;
use crate::resp::Args;
use crate::types::number::normalize_range;
use crate::types::{ListValue, Str, Value};

fn list_ref<'k>(
    ks: &'k mut Keyspace,
    db: usize,
    key: &[u8],
) -> Result<Option<&'k ListValue>, CmdError> {
    match ks.get(db, key) {
        None => Ok(None),
        Some(Value::List(l)) => Ok(Some(l)),
        Some(_) => Err(Cow::Borrowed(errors::WRONGTYPE)),
    }
}

fn list_mut<'k>(
    ks: &'k mut Keyspace,
    db: usize,
    key: &[u8],
) -> Result<Option<&'k mut ListValue>, CmdError> {
    match ks.get_mut(db, key) {
        None => Ok(None),
        Some(Value::List(l)) => Ok(Some(l)),
        Some(_) => Err(Cow::Borrowed(errors::WRONGTYPE)),
    }
}

fn push_generic(ctx: &mut Ctx<'_>, args: &Args<'_>, left: bool, only_existing: bool) -> CmdResult {
    let (db, key) = (ctx.session.db, args.get(1));
    let ks = &mut ctx.state.keyspace;
    if list_ref(ks, db, key)?.is_none() && only_existing {
        ctx.reply.int(0);
        return Ok(());
    }
    let Value::List(list) = ks.get_or_insert(db, key, Value::new_list) else {
        return Err(Cow::Borrowed(errors::WRONGTYPE));
    };
    for item in args.iter().skip(2) {
        if left {
            list.push_front(item.into());
        } else {
            list.push_back(item.into());
        }
    }
    let len = list.len();
    ctx.propagate_args(args);
    ctx.notify(LIST, if left { "lpush" } else { "rpush" }, key);
    ctx.reply.int(len as i64);
    Ok(())
}

pub(super) fn lpush(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    push_generic(ctx, args, true, false)
}

pub(super) fn rpush(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    push_generic(ctx, args, false, false)
}

pub(super) fn lpushx(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    push_generic(ctx, args, true, true)
}

pub(super) fn rpushx(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    push_generic(ctx, args, false, true)
}

fn pop_generic(ctx: &mut Ctx<'_>, args: &Args<'_>, left: bool) -> CmdResult {
    if args.len() > 3 {
        let name = if left { "lpop" } else { "rpop" };
        return Err(Cow::Owned(format!(
            "ERR wrong number of arguments for '{name}' command"
        )));
    }
    let (db, key) = (ctx.session.db, args.get(1));
    let count = if args.len() > 2 {
        let n = int_arg(args, 2).map_err(|_| Cow::Borrowed(errors::NOT_POSITIVE))?;
        if n < 0 {
            return Err(Cow::Borrowed(errors::NOT_POSITIVE));
        }
        Some(n as usize)
    } else {
        None
    };
    let Some(list) = list_mut(&mut ctx.state.keyspace, db, key)? else {
        if count.is_some() {
            ctx.reply.null_array();
        } else {
            ctx.reply.null();
        }
        return Ok(());
    };
    let take = count.unwrap_or(1).min(list.len());
    let popped: Vec<_> = (0..take)
        .filter_map(|_| {
            if left {
                list.pop_front()
            } else {
                list.pop_back()
            }
        })
        .collect();
    ctx.state.keyspace.remove_if_empty(db, key);
    if !popped.is_empty() {
        ctx.propagate_args(args);
        ctx.notify(LIST, if left { "lpop" } else { "rpop" }, key);
        ctx.notify_del_if_gone(key);
    }
    match count {
        None => ctx.reply.bulk_opt(popped.first().map(|v| &v[..])),
        Some(_) => ctx.reply.bulks(popped.iter().map(|v| &v[..])),
    }
    Ok(())
}

pub(super) fn lpop(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    pop_generic(ctx, args, true)
}

pub(super) fn rpop(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    pop_generic(ctx, args, false)
}

pub(super) fn lrange(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let start = int_arg(args, 2)?;
    let stop = int_arg(args, 3)?;
    let list = list_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    let Some((from, to)) = list.and_then(|l| normalize_range(start, stop, l.len())) else {
        ctx.reply.array(0);
        return Ok(());
    };
    if let Some(list) = list {
        ctx.reply.bulks(list.range(from..=to).map(|v| &v[..]));
    }
    Ok(())
}

pub(super) fn llen(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let list = list_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    ctx.reply.int(list.map_or(0, |l| l.len()) as i64);
    Ok(())
}

fn resolve_index(index: i64, len: usize) -> Option<usize> {
    let index = if index < 0 { len as i64 + index } else { index };
    (0..len as i64).contains(&index).then_some(index as usize)
}

/// LINDEX: as Redis, the key is looked up (a missing one answers null,
/// another type WRONGTYPE) before the index is parsed.
pub(super) fn lindex(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let Some(list) = list_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))? else {
        ctx.reply.null();
        return Ok(());
    };
    let index = int_arg(args, 2)?;
    let item = resolve_index(index, list.len()).and_then(|at| list.get(at));
    ctx.reply.bulk_opt(item.map(|v| &v[..]));
    Ok(())
}

/// LSET: the key first (missing: no such key), then the index.
pub(super) fn lset(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    list_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?
        .ok_or(Cow::Borrowed(errors::NO_SUCH_KEY))?;
    let index = int_arg(args, 2)?;
    let list = list_mut(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?
        .ok_or(Cow::Borrowed(errors::NO_SUCH_KEY))?;
    let at = resolve_index(index, list.len()).ok_or(Cow::Borrowed("ERR index out of range"))?;
    list[at] = args.get(3).into();
    ctx.propagate_args(args);
    ctx.notify(LIST, "lset", args.get(1));
    ctx.reply.ok();
    Ok(())
}

pub(super) fn lrem(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let count = int_arg(args, 2)?;
    let (db, key, item) = (ctx.session.db, args.get(1), args.get(3));
    let Some(list) = list_mut(&mut ctx.state.keyspace, db, key)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    let limit = if count == 0 {
        usize::MAX
    } else {
        count.unsigned_abs() as usize
    };
    let mut removed = 0;
    let mut kept = ListValue::with_capacity(list.len());
    let mut consider = |v: Str, out: &mut ListValue, front: bool| {
        if removed < limit && &v[..] == item {
            removed += 1;
        } else if front {
            out.push_front(v);
        } else {
            out.push_back(v);
        }
    };
    if count >= 0 {
        while let Some(v) = list.pop_front() {
            consider(v, &mut kept, false);
        }
    } else {
        while let Some(v) = list.pop_back() {
            consider(v, &mut kept, true);
        }
    }
    *list = kept;
    ctx.state.keyspace.remove_if_empty(db, key);
    if removed > 0 {
        ctx.propagate_args(args);
        ctx.notify(LIST, "lrem", key);
        ctx.notify_del_if_gone(key);
    }
    ctx.reply.int(removed as i64);
    Ok(())
}

pub(super) fn ltrim(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let start = int_arg(args, 2)?;
    let stop = int_arg(args, 3)?;
    let (db, key) = (ctx.session.db, args.get(1));
    if let Some(list) = list_mut(&mut ctx.state.keyspace, db, key)? {
        match normalize_range(start, stop, list.len()) {
            Some((from, to)) => {
                list.truncate(to + 1);
                list.drain(..from);
            }
            None => list.clear(),
        }
        ctx.state.keyspace.remove_if_empty(db, key);
        ctx.propagate_args(args);
        ctx.notify(LIST, "ltrim", key);
        ctx.notify_del_if_gone(key);
    }
    ctx.reply.ok();
    Ok(())
}

pub(super) fn linsert(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let before = match upper(args, 2).as_slice() {
        b"BEFORE" => true,
        b"AFTER" => false,
        _ => return Err(Cow::Borrowed(errors::SYNTAX)),
    };
    let (db, key, pivot) = (ctx.session.db, args.get(1), args.get(3));
    let Some(list) = list_mut(&mut ctx.state.keyspace, db, key)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    let Some(at) = list.iter().position(|v| &v[..] == pivot) else {
        ctx.reply.int(-1);
        return Ok(());
    };
    list.insert(if before { at } else { at + 1 }, args.get(4).into());
    let len = list.len();
    ctx.propagate_args(args);
    ctx.notify(LIST, "linsert", key);
    ctx.reply.int(len as i64);
    Ok(())
}

/// LEFT or RIGHT (any case) as `true` for the head, `false` for the tail.
pub(super) fn side_arg(args: &Args<'_>, index: usize) -> Result<bool, CmdError> {
    match upper(args, index).as_slice() {
        b"LEFT" => Ok(true),
        b"RIGHT" => Ok(false),
        _ => Err(Cow::Borrowed(errors::SYNTAX)),
    }
}

/// The list at `key` when it holds at least one element; `Err` for a key
/// of another type.
pub(super) fn has_elements(ks: &mut Keyspace, db: usize, key: &[u8]) -> Result<bool, CmdError> {
    Ok(list_ref(ks, db, key)?.is_some_and(|l| !l.is_empty()))
}

/// Pops up to `count` elements from the head (`left`) or tail of the list
/// at `key`, deleting the key once it is empty.
pub(super) fn pop_elements(
    ks: &mut Keyspace,
    db: usize,
    key: &[u8],
    left: bool,
    count: usize,
) -> Vec<Str> {
    let mut popped = Vec::new();
    if let Some(Value::List(list)) = ks.get_mut(db, key) {
        let take = count.min(list.len());
        popped.reserve(take);
        for _ in 0..take {
            let item = if left {
                list.pop_front()
            } else {
                list.pop_back()
            };
            popped.extend(item);
        }
    }
    ks.remove_if_empty(db, key);
    popped
}

/// LMOVE's effect: moves one element from `src` to `dst`. `None` when the
/// source is missing; WRONGTYPE (and nothing moved) when either key holds
/// another type.
pub(super) fn move_element(
    ks: &mut Keyspace,
    db: usize,
    src: &[u8],
    dst: &[u8],
    from_left: bool,
    to_left: bool,
) -> Result<Option<Str>, CmdError> {
    if !has_elements(ks, db, src)? {
        return Ok(None);
    }
    list_ref(ks, db, dst)?;
    let Some(item) = pop_elements(ks, db, src, from_left, 1).pop() else {
        return Ok(None);
    };
    let Value::List(list) = ks.get_or_insert(db, dst, Value::new_list) else {
        return Err(Cow::Borrowed(errors::WRONGTYPE));
    };
    if to_left {
        list.push_front(item.clone());
    } else {
        list.push_back(item.clone());
    }
    Ok(Some(item))
}

/// The event a push at the head (`left`) or tail raises.
pub(super) fn push_event(left: bool) -> &'static str {
    if left {
        "lpush"
    } else {
        "rpush"
    }
}

/// The event a pop from the head (`left`) or tail raises.
pub(super) fn pop_event(left: bool) -> &'static str {
    if left {
        "lpop"
    } else {
        "rpop"
    }
}

fn side_name(left: bool) -> &'static [u8] {
    if left {
        b"LEFT"
    } else {
        b"RIGHT"
    }
}

/// LMOVE and RPOPLPUSH after their arguments are parsed; logs the move as
/// LMOVE (what BLMOVE logs too when served), or as RPOPLPUSH for RPOPLPUSH
/// and BRPOPLPUSH.
pub(super) fn lmove_generic(
    ctx: &mut Ctx<'_>,
    src: &[u8],
    dst: &[u8],
    from_left: bool,
    to_left: bool,
    rpoplpush: bool,
) -> CmdResult {
    let db = ctx.session.db;
    let moved = move_element(&mut ctx.state.keyspace, db, src, dst, from_left, to_left)?;
    if moved.is_some() {
        // Redis raises the push on the destination first, then the pop
        // (and `del` when it emptied the source).
        ctx.notify(LIST, push_event(to_left), dst);
        ctx.notify(LIST, pop_event(from_left), src);
        ctx.notify_del_if_gone(src);
        // RPOPLPUSH and BRPOPLPUSH log (and replicate) as RPOPLPUSH, as
        // Redis's do: a replica's command statistics show that name.
        if rpoplpush {
            ctx.propagate(&[b"RPOPLPUSH", src, dst]);
        } else {
            ctx.propagate(&[b"LMOVE", src, dst, side_name(from_left), side_name(to_left)]);
        }
    }
    ctx.reply.bulk_opt(moved.as_deref());
    Ok(())
}

pub(super) fn lmove(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let from_left = side_arg(args, 3)?;
    let to_left = side_arg(args, 4)?;
    lmove_generic(ctx, args.get(1), args.get(2), from_left, to_left, false)
}

pub(super) fn rpoplpush(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    lmove_generic(ctx, args.get(1), args.get(2), false, true, true)
}

/// A long option value in `1..=i64::MAX`, with Redis's own message for
/// anything else (not a number included).
fn positive_or(args: &Args<'_>, index: usize, message: &'static str) -> Result<i64, CmdError> {
    int_arg(args, index)
        .ok()
        .filter(|n| *n >= 1)
        .ok_or(Cow::Borrowed(message))
}

/// What LMPOP, BLMPOP, ZMPOP and BZMPOP share: the keys after `numkeys`
/// at `at`, the word after them (LEFT/RIGHT or MIN/MAX, as its index),
/// and COUNT (1 when absent).
pub(super) struct MultiPop {
    pub first_key: usize,
    pub numkeys: usize,
    pub side_at: usize,
    pub count: usize,
}

pub(super) fn parse_multi_pop(args: &Args<'_>, at: usize) -> Result<MultiPop, CmdError> {
    let numkeys = positive_or(args, at, "ERR numkeys should be greater than 0")?;
    let side_at = (at as i64).saturating_add(numkeys).saturating_add(1);
    if side_at >= args.len() as i64 {
        return Err(Cow::Borrowed(errors::SYNTAX));
    }
    let side_at = side_at as usize;
    let mut count = None;
    let mut i = side_at + 1;
    while i < args.len() {
        if count.is_none() && upper(args, i) == b"COUNT" && i + 1 < args.len() {
            count = Some(positive_or(
                args,
                i + 1,
                "ERR count should be greater than 0",
            )?);
            i += 2;
        } else {
            return Err(Cow::Borrowed(errors::SYNTAX));
        }
    }
    Ok(MultiPop {
        first_key: at + 1,
        numkeys: numkeys as usize,
        side_at,
        count: count.unwrap_or(1) as usize,
    })
}

/// Pops from the first of `keys` that holds elements, replies
/// `[key, [elements]]` and logs it as LPOP/RPOP with a count; `false`
/// (nothing replied) when every key is empty or missing.
pub(super) fn mpop_first<'a>(
    ctx: &mut Ctx<'_>,
    keys: impl Iterator<Item = &'a [u8]>,
    left: bool,
    count: usize,
) -> Result<bool, CmdError> {
    let db = ctx.session.db;
    for key in keys {
        if !has_elements(&mut ctx.state.keyspace, db, key)? {
            continue;
        }
        let popped = pop_elements(&mut ctx.state.keyspace, db, key, left, count);
        ctx.notify(LIST, pop_event(left), key);
        ctx.notify_del_if_gone(key);
        let n = popped.len().to_string();
        let name: &[u8] = if left { b"LPOP" } else { b"RPOP" };
        ctx.propagate(&[name, key, n.as_bytes()]);
        ctx.reply.array(2);
        ctx.reply.bulk(key);
        ctx.reply.bulks(popped.iter().map(|v| &v[..]));
        return Ok(true);
    }
    Ok(false)
}

pub(super) fn lmpop(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let m = parse_multi_pop(args, 1)?;
    let left = side_arg(args, m.side_at)?;
    let keys = (m.first_key..m.first_key + m.numkeys).map(|i| args.get(i));
    if !mpop_first(ctx, keys, left, m.count)? {
        ctx.reply.null_array();
    }
    Ok(())
}

/// LPOS's options.
struct PosOptions {
    rank: i64,
    count: Option<usize>,
    maxlen: usize,
}

fn pos_options(args: &Args<'_>) -> Result<PosOptions, CmdError> {
    let mut o = PosOptions {
        rank: 1,
        count: None,
        maxlen: 0,
    };
    let mut i = 3;
    while i < args.len() {
        let more = i + 1 < args.len();
        match upper(args, i).as_slice() {
            b"RANK" if more => {
                o.rank = int_arg(args, i + 1)?;
                if o.rank == 0 {
                    return Err(Cow::Borrowed("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"));
                }
            }
            b"COUNT" if more => {
                let n = int_arg(args, i + 1).ok().filter(|n| *n >= 0);
                o.count = Some(n.ok_or(Cow::Borrowed("ERR COUNT can't be negative"))? as usize);
            }
            b"MAXLEN" if more => {
                let n = int_arg(args, i + 1).ok().filter(|n| *n >= 0);
                o.maxlen = n.ok_or(Cow::Borrowed("ERR MAXLEN can't be negative"))? as usize;
            }
            _ => return Err(Cow::Borrowed(errors::SYNTAX)),
        }
        i += 2;
    }
    Ok(o)
}

pub(super) fn lpos(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let o = pos_options(args)?;
    let item = args.get(2);
    let Some(list) = list_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))? else {
        match o.count {
            Some(_) => ctx.reply.array(0),
            None => ctx.reply.null(),
        }
        return Ok(());
    };
    let len = list.len();
    let scan = if o.maxlen == 0 {
        len
    } else {
        o.maxlen.min(len)
    };
    // Redis negates the rank in a C long: the most negative one stays
    // negative and so matches from the first match on, from the tail.
    let skip = if o.rank == i64::MIN {
        0
    } else {
        (o.rank.unsigned_abs() - 1) as usize
    };
    let want = match o.count {
        Some(0) => usize::MAX,
        Some(n) => n,
        None => 1,
    };
    let matches = |i: usize| (&list[i][..] == item).then_some(i);
    let found: Vec<usize> = if o.rank > 0 {
        (0..scan)
            .filter_map(matches)
            .skip(skip)
            .take(want)
            .collect()
    } else {
        (0..scan)
            .map(|i| len - 1 - i)
            .filter_map(matches)
            .skip(skip)
            .take(want)
            .collect()
    };
    match o.count {
        Some(_) => {
            ctx.reply.array(found.len());
            for i in found {
                ctx.reply.int(i as i64);
            }
        }
        None => match found.first() {
            Some(&i) => ctx.reply.int(i as i64),
            None => ctx.reply.null(),
        },
    }
    Ok(())
}

/// LMPOP's and BLMPOP's keys: `numkeys` keys after the count at `at`.
pub(super) fn keys_after_numkeys(args: &Args<'_>, at: usize, out: &mut Vec<usize>) {
    let Some(n) = crate::types::number::parse_i64(args.get(at)) else {
        return;
    };
    let first = at + 1;
    let last = (first as i64).saturating_add(n).min(args.len() as i64);
    out.extend((first as i64..last).map(|i| i as usize));
}

fn lmpop_keys(args: &Args<'_>, out: &mut Vec<usize>) {
    keys_after_numkeys(args, 1, out);
}

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("lpush", -3, WF, K1, "list", "Prepends elements.", lpush),
    cmd!("rpush", -3, WF, K1, "list", "Appends elements.", rpush),
    cmd!("lpushx", -3, WF, K1, "list", "Prepends if the list exists.", lpushx),
    cmd!("rpushx", -3, WF, K1, "list", "Appends if the list exists.", rpushx),
    cmd!("lpop", -2, D, K1, "list", "Removes and returns the first elements.", lpop),
    cmd!("rpop", -2, D, K1, "list", "Removes and returns the last elements.", rpop),
    cmd!("lrange", 4, R, K1, "list", "Returns a range of elements.", lrange),
    cmd!("llen", 2, RF, K1, "list", "Returns the length.", llen),
    cmd!("lindex", 3, R, K1, "list", "Returns an element by index.", lindex),
    cmd!("lset", 4, W, K1, "list", "Sets an element by index.", lset),
    cmd!("lrem", 4, WRITE, K1, "list", "Removes elements equal to a value.", lrem),
    cmd!("ltrim", 4, WRITE, K1, "list", "Keeps only a range.", ltrim),
    cmd!("linsert", 5, W, K1, "list", "Inserts before or after an element.", linsert),
    cmd!("lmove", 5, W, (1, 2, 1), "list", "Moves an element between lists.", lmove),
    cmd!("rpoplpush", 3, W, (1, 2, 1), "list", "Moves the last element to the head of another list.", rpoplpush),
    cmd!("lpos", -3, R, K1, "list", "Returns the positions of matching elements.", lpos),
    cmd!("lmpop", -4, WRITE, K0, "list", "Pops elements from the first non-empty list.", lmpop).with_key_finder(lmpop_keys).with_key_searches(&[keynum_at(1)]),
];
