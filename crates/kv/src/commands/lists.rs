//! List commands.

use std::borrow::Cow;

use super::table::*;
use super::{errors, int_arg, upper, CmdError, CmdResult, Ctx};
use crate::keyspace::events::LIST;
use crate::keyspace::Keyspace;
use crate::resp::Args;
use crate::types::number::normalize_range;
use crate::types::{Bytes, ListValue, Value};

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

pub(super) fn lindex(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let index = int_arg(args, 2)?;
    let list = list_ref(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    let item = list.and_then(|l| l.get(resolve_index(index, l.len())?));
    ctx.reply.bulk_opt(item.map(|v| &v[..]));
    Ok(())
}

pub(super) fn lset(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
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
    let mut consider = |v: Bytes, out: &mut ListValue, front: bool| {
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
];
