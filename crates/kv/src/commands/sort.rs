//! SORT and SORT_RO: sorting a list, set or sorted set by its elements or
//! by weights read from other keys (`BY`), returning or storing the
//! elements or values read through patterns (`GET`).
//!
//! SORT with STORE is a write whose result depends on keys it does not
//! name (the `BY` and `GET` patterns), so it is logged as its effect: the
//! stored list as `DEL` then `RPUSH`, or a `DEL` when the result is empty.

use std::borrow::Cow;
use std::cmp::Ordering;

use super::table::*;
use super::{acl, errors, upper, CmdError, CmdResult, Ctx};
use crate::keyspace::Keyspace;
use crate::resp::Args;
use crate::types::{Bytes, ListValue, Shared, Str, Value};

/// Elements per logged `RPUSH` of a stored result, so one record command
/// stays a bounded size however long the list.
const STORE_PUSH_CHUNK: usize = 1024;

/// The parsed options of one SORT call.
struct SortOptions<'a> {
    desc: bool,
    alpha: bool,
    limit_start: i64,
    limit_count: i64,
    /// The last `BY` pattern.
    by: Option<&'a [u8]>,
    /// Some `BY` named a constant: keep the container's own order.
    dont_sort: bool,
    /// Argument index of the last `STORE` key.
    store: Option<usize>,
    gets: Vec<&'a [u8]>,
}

fn parse_long(args: &Args<'_>, at: usize) -> Result<i64, CmdError> {
    crate::types::number::parse_i64(args.get(at)).ok_or(Cow::Borrowed(errors::NOT_INTEGER))
}

/// `full_access`: the user may read every key, which the `BY` and `GET`
/// patterns need (ACL).
fn parse_options<'a>(
    args: &'a Args<'_>,
    readonly: bool,
    full_access: bool,
) -> Result<SortOptions<'a>, CmdError> {
    let mut o = SortOptions {
        desc: false,
        alpha: false,
        limit_start: 0,
        limit_count: -1,
        by: None,
        dont_sort: false,
        store: None,
        gets: Vec::new(),
    };
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        match upper(args, j).as_slice() {
            b"ASC" => o.desc = false,
            b"DESC" => o.desc = true,
            b"ALPHA" => o.alpha = true,
            b"LIMIT" if left >= 2 => {
                o.limit_start = parse_long(args, j + 1)?;
                o.limit_count = parse_long(args, j + 2)?;
                j += 2;
            }
            b"STORE" if !readonly && left >= 1 => {
                o.store = Some(j + 1);
                j += 1;
            }
            b"BY" if left >= 1 => {
                // The last BY is the pattern; but one without `*` (one key
                // for every element: nothing to sort by) anywhere in the
                // call turns sorting off, as in Redis.
                let pattern = args.get(j + 1);
                if pattern.contains(&b'*') && !full_access {
                    return Err(Cow::Borrowed(
                        "ERR BY option of SORT denied due to insufficient ACL permissions.",
                    ));
                }
                o.by = Some(pattern);
                o.dont_sort |= !pattern.contains(&b'*');
                j += 1;
            }
            b"GET" if left >= 1 => {
                if !full_access {
                    return Err(Cow::Borrowed(
                        "ERR GET option of SORT denied due to insufficient ACL permissions.",
                    ));
                }
                o.gets.push(args.get(j + 1));
                j += 1;
            }
            _ => return Err(Cow::Borrowed(errors::SYNTAX)),
        }
        j += 1;
    }
    Ok(o)
}

/// The value `pattern` names for element `subst`: `#` is the element
/// itself; otherwise the first `*` is replaced by the element and the key
/// read as a string, or with `key->field` as a hash field. `None` when the
/// pattern has no `*` or the key, type or field is missing.
fn lookup_by_pattern(ks: &mut Keyspace, db: usize, pattern: &[u8], subst: &[u8]) -> Option<Bytes> {
    if pattern == b"#" {
        return Some(subst.into());
    }
    let star = pattern.iter().position(|&b| b == b'*')?;
    let after = &pattern[star + 1..];
    let arrow = after.windows(2).position(|w| w == b"->");
    let (postfix, field) = match arrow {
        Some(at) if at + 2 < after.len() => (&after[..at], Some(&after[at + 2..])),
        _ => (after, None),
    };
    let mut key = Vec::with_capacity(star + subst.len() + postfix.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(subst);
    key.extend_from_slice(postfix);
    match (ks.get(db, &key)?, field) {
        (Value::Hash(h), Some(f)) => h.get(f).map(|v| Bytes::from(&v[..])),
        (Value::Str(s), None) => Some(Bytes::from(&s[..])),
        _ => None,
    }
}

/// Reads a weight as C's `strtod` would for SORT: the whole text must be
/// consumed (leading blanks allowed), and neither NaN nor a value out of
/// `f64`'s range is accepted. The empty string reads as 0, as in Redis.
fn parse_weight(text: &[u8]) -> Option<f64> {
    // C stops at a NUL byte.
    let text = match text.iter().position(|&b| b == 0) {
        Some(at) => &text[..at],
        None => text,
    };
    if text.is_empty() {
        return Some(0.0);
    }
    let trimmed = match text.iter().position(|b| !b" \t\n\r\x0b\x0c".contains(b)) {
        Some(at) => &text[at..],
        None => return None,
    };
    let s = std::str::from_utf8(trimmed).ok()?;
    let unsigned = s.trim_start_matches(['+', '-']);
    if s.len() - unsigned.len() > 1 {
        return None;
    }
    let lower = unsigned.to_ascii_lowercase();
    if let Some(hex) = lower.strip_prefix("0x") {
        let value = parse_hex_float(hex)?;
        return Some(if s.starts_with('-') { -value } else { value });
    }
    if lower == "inf" || lower == "infinity" {
        return Some(if s.starts_with('-') {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        });
    }
    let plain = lower
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'+' | b'-'));
    if !plain
        || !lower
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_digit() || b == b'.')
    {
        return None;
    }
    let value: f64 = s.parse().ok()?;
    // strtod reports ERANGE on overflow and on underflow to zero.
    let mantissa = lower.split('e').next().unwrap_or("");
    let nonzero = mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b));
    if value.is_infinite() || (value == 0.0 && nonzero) {
        return None;
    }
    Some(value)
}

/// The digits after `0x` of a C hexadecimal float: hex digits with an
/// optional point, then an optional binary exponent `p[+-]digits`. At
/// least one digit; the result must be finite and not underflow.
fn parse_hex_float(text: &str) -> Option<f64> {
    let (mantissa, exponent) = match text.split_once('p') {
        Some((m, e)) => (m, e.parse::<i32>().ok()?),
        None => (text, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let mut value = 0.0f64;
    for digit in int_part.chars().chain(frac_part.chars()) {
        value = value * 16.0 + f64::from(digit.to_digit(16)?);
    }
    let shift = exponent.checked_sub(4 * i32::try_from(frac_part.len()).ok()?)?;
    let value = value * 2f64.powi(shift);
    let nonzero = int_part.chars().chain(frac_part.chars()).any(|c| c != '0');
    (value.is_finite() && (value != 0.0 || !nonzero)).then_some(value)
}

/// One element to sort and what it sorts by.
struct Item {
    element: Bytes,
    score: f64,
    by_value: Option<Bytes>,
}

fn item(element: Bytes) -> Item {
    Item {
        element,
        score: 0.0,
        by_value: None,
    }
}

/// The elements of `value` to sort, as SORT loads them: for a list or a
/// sorted set not sorted, only the `start..=end` range in the requested
/// direction (and then the range is the whole vector).
fn load(value: &Value, o: &SortOptions<'_>, start: &mut i64, end: &mut i64) -> Vec<Item> {
    let ranged = o.dont_sort && matches!(value, Value::List(_) | Value::ZSet(_));
    let take = |iter: &mut dyn Iterator<Item = Bytes>, start: i64, end: i64| -> Vec<Item> {
        if end < start {
            return Vec::new();
        }
        iter.skip(start as usize)
            .take((end - start + 1) as usize)
            .map(item)
            .collect()
    };
    let items = match value {
        Value::List(l) if ranged => {
            let mut iter: Box<dyn Iterator<Item = Bytes>> = if o.desc {
                Box::new(l.iter().rev().map(|e| Bytes::from(&e[..])))
            } else {
                Box::new(l.iter().map(|e| Bytes::from(&e[..])))
            };
            take(&mut iter, *start, *end)
        }
        Value::ZSet(z) if ranged => {
            let mut iter: Box<dyn Iterator<Item = Bytes>> = if o.desc {
                Box::new(z.iter().rev().map(|(m, _)| Bytes::from(m)))
            } else {
                Box::new(z.iter().map(|(m, _)| Bytes::from(m)))
            };
            take(&mut iter, *start, *end)
        }
        Value::List(l) => l.iter().map(|e| item(Bytes::from(&e[..]))).collect(),
        Value::Set(s) => s.iter().map(|m| item(Bytes::from(&m[..]))).collect(),
        Value::ZSet(z) => z.iter().map(|(m, _)| item(m.into())).collect(),
        _ => Vec::new(),
    };
    if ranged && *end >= *start {
        *end -= *start;
        *start = 0;
    }
    items
}

fn value_len(value: &Value) -> usize {
    match value {
        Value::List(l) => l.len(),
        Value::Set(s) => s.len(),
        Value::ZSet(z) => z.len(),
        _ => 0,
    }
}

/// Reads each item's weight; `Err` when one is not a number (the sort
/// still completes in Redis, but only the error is replied).
fn load_weights(
    ks: &mut Keyspace,
    db: usize,
    o: &SortOptions<'_>,
    items: &mut [Item],
) -> Result<(), ()> {
    let mut bad = false;
    for it in items.iter_mut() {
        let by_value = match o.by {
            Some(pattern) => match lookup_by_pattern(ks, db, pattern, &it.element) {
                Some(v) => v,
                None => continue,
            },
            None => it.element.clone(),
        };
        if o.alpha {
            if o.by.is_some() {
                it.by_value = Some(by_value);
            }
        } else {
            match parse_weight(&by_value) {
                Some(score) => it.score = score,
                None => bad = true,
            }
        }
    }
    if bad {
        Err(())
    } else {
        Ok(())
    }
}

fn compare(o: &SortOptions<'_>, a: &Item, b: &Item) -> Ordering {
    let ord = if !o.alpha {
        a.score
            .partial_cmp(&b.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.element.cmp(&b.element))
    } else if o.by.is_some() {
        // A missing weight sorts first.
        match (&a.by_value, &b.by_value) {
            (Some(x), Some(y)) => x.cmp(y),
            (x, y) => x.is_some().cmp(&y.is_some()),
        }
    } else {
        a.element.cmp(&b.element)
    };
    if o.desc {
        ord.reverse()
    } else {
        ord
    }
}

/// The `start..=end` window of a vector of `len` items, as SORT clamps
/// LIMIT (an empty window is `end < start`).
fn window(o: &SortOptions<'_>, len: i64) -> (i64, i64) {
    let start = o.limit_start.max(0).min(len);
    let count = o.limit_count.max(-1).min(len);
    let mut end = if count < 0 {
        len - 1
    } else {
        start + count - 1
    };
    let start = if start >= len {
        end = len - 2;
        len - 1
    } else {
        start
    };
    if end >= len {
        end = len - 1;
    }
    (start, end)
}

fn sort_generic(ctx: &mut Ctx<'_>, args: &Args<'_>, readonly: bool) -> CmdResult {
    let full_access = super::acl_check::full_read_access(ctx, args);
    let mut o = parse_options(args, readonly, full_access)?;
    let db = ctx.session.db;
    let ks = &mut ctx.state.keyspace;
    let value = match ks.get(db, args.get(1)) {
        None => Value::List(Shared::default()),
        Some(v @ (Value::List(_) | Value::Set(_) | Value::ZSet(_))) => v.clone(),
        Some(_) => return Err(Cow::Borrowed(errors::WRONGTYPE)),
    };
    // A set has no order of its own: a stored result (or one a script
    // reads) must not depend on the server's iteration order, so it is
    // sorted as strings.
    let stable = o.store.is_some() || super::scripting::running();
    if o.dont_sort && matches!(value, Value::Set(_)) && stable {
        o.dont_sort = false;
        o.alpha = true;
        o.by = None;
    }
    let (mut start, mut end) = window(&o, value_len(&value) as i64);
    let mut items = load(&value, &o, &mut start, &mut end);
    if !o.dont_sort {
        let weights = load_weights(ks, db, &o, &mut items);
        items.sort_by(|a, b| compare(&o, a, b));
        if weights.is_err() {
            return Err(Cow::Borrowed(
                "ERR One or more scores can't be converted into double",
            ));
        }
    }
    let chosen: &[Item] = if end >= start {
        items.get(start as usize..=end as usize).unwrap_or_default()
    } else {
        &[]
    };
    match o.store {
        None => reply_items(ctx, &o, chosen),
        Some(at) => store_items(ctx, args.get(at), &o, chosen),
    }
    Ok(())
}

fn reply_items(ctx: &mut Ctx<'_>, o: &SortOptions<'_>, items: &[Item]) {
    let db = ctx.session.db;
    let per_item = o.gets.len().max(1);
    ctx.reply.array(items.len() * per_item);
    for it in items {
        if o.gets.is_empty() {
            ctx.reply.bulk(&it.element);
        }
        for pattern in &o.gets {
            match lookup_by_pattern(&mut ctx.state.keyspace, db, pattern, &it.element) {
                Some(v) => ctx.reply.bulk(&v),
                None => ctx.reply.null(),
            }
        }
    }
}

fn store_items(ctx: &mut Ctx<'_>, dest: &[u8], o: &SortOptions<'_>, items: &[Item]) {
    let db = ctx.session.db;
    let ks = &mut ctx.state.keyspace;
    let mut list = ListValue::new();
    for it in items {
        if o.gets.is_empty() {
            list.push_back(Str::new(&it.element));
        }
        for pattern in &o.gets {
            let found = lookup_by_pattern(ks, db, pattern, &it.element);
            list.push_back(found.map_or_else(Str::default, |f| Str::new(&f)));
        }
    }
    let len = list.len();
    if len > 0 {
        ctx.propagate(&[b"DEL", dest]);
        for chunk in list
            .as_slices()
            .0
            .chunks(STORE_PUSH_CHUNK)
            .chain(list.as_slices().1.chunks(STORE_PUSH_CHUNK))
        {
            let mut parts: Vec<&[u8]> = Vec::with_capacity(chunk.len() + 2);
            parts.push(b"RPUSH");
            parts.push(dest);
            parts.extend(chunk.iter().map(|b| &b[..]));
            ctx.prop.push(db, &parts);
        }
        ctx.state
            .keyspace
            .set(db, dest, Value::List(Shared::new(list)), false);
        ctx.notify(crate::keyspace::events::LIST, "sortstore", dest);
    } else if ctx.state.keyspace.remove(db, dest).is_some() {
        ctx.notify(crate::keyspace::events::GENERIC, "del", dest);
        ctx.propagate(&[b"DEL", dest]);
    }
    ctx.reply.int(len as i64);
}

pub(super) fn sort(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    sort_generic(ctx, args, false)
}

pub(super) fn sort_ro(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    sort_generic(ctx, args, true)
}

/// SORT's keys: the sorted key, and the last `STORE` key, skipping the
/// arguments of LIMIT, GET and BY as Redis does.
fn sort_keys(args: &Args<'_>, out: &mut Vec<usize>) {
    if args.len() < 2 {
        return;
    }
    out.push(1);
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        let arg = args.get(i);
        if arg.eq_ignore_ascii_case(b"limit") {
            i += 2;
        } else if arg.eq_ignore_ascii_case(b"get") || arg.eq_ignore_ascii_case(b"by") {
            i += 1;
        } else if arg.eq_ignore_ascii_case(b"store") && i + 1 < args.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    out.extend(store);
}

/// SORT's ACL categories beyond those its flags imply.
const SORT_ACL: u64 = acl::DANGEROUS | acl::bit("set") | acl::bit("sortedset") | acl::bit("list");

/// SORT_RO's key: its source only (Redis finds its keys by a function
/// too, so COMMAND INFO flags it `movablekeys`).
fn sort_ro_keys(args: &Args<'_>, out: &mut Vec<usize>) {
    if args.len() > 1 {
        out.push(1);
    }
}

/// The commands this file implements.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("sort", -2, W, K1, "generic", "Sorts a list, set or sorted set, or stores the result.", sort)
        .with_key_finder_and_range(sort_keys, K1)
        .with_key_searches(&[one_at(1), UNKNOWN_KEYS, UNKNOWN_KEYS]).with_acl(SORT_ACL),
    cmd!("sort_ro", -2, R, K1, "generic", "Sorts a list, set or sorted set.", sort_ro)
        .with_key_finder_and_range(sort_ro_keys, K1)
        .with_key_searches(&[one_at(1), UNKNOWN_KEYS])
        .with_acl(SORT_ACL),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_read_as_strtod_reads_them() {
        assert_eq!(parse_weight(b""), Some(0.0));
        assert_eq!(parse_weight(b" 1.5"), Some(1.5));
        assert_eq!(parse_weight(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_weight(b"1e400"), None);
        assert_eq!(parse_weight(b"1e-400"), None);
        assert_eq!(parse_weight(b"nan"), None);
        assert_eq!(parse_weight(b"1.5 "), None);
        assert_eq!(parse_weight(b"not-a-double"), None);
        assert_eq!(parse_weight(b"--1"), None);
        assert_eq!(parse_weight(b"   "), None);
        assert_eq!(parse_weight(b"0x10"), Some(16.0));
        assert_eq!(parse_weight(b"-0x1.8p1"), Some(-3.0));
        assert_eq!(parse_weight(b"0x"), None);
        assert_eq!(parse_weight(b"0xg"), None);
    }

    #[test]
    fn limit_windows_clamp_as_redis_clamps() {
        let ranges = [(0, 4), (4, 5)];
        let args = Args::new(b"sortk", &ranges);
        let mut o = parse_options(&args, false, true).unwrap_or_else(|_| panic!("no options"));
        assert_eq!(window(&o, 5), (0, 4));
        o.limit_start = 5;
        o.limit_count = 10;
        assert_eq!(window(&o, 5), (4, 3));
        o.limit_start = -10;
        o.limit_count = 100;
        assert_eq!(window(&o, 5), (0, 4));
        o.limit_start = 2;
        o.limit_count = i64::MAX;
        assert_eq!(window(&o, 3), (2, 2));
        assert_eq!(window(&o, 0), (-1, -2));
    }
}
