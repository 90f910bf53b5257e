//! Bitmap commands: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD and
//! BITFIELD_RO. Bitmaps are plain strings; bit 0 is the most significant
//! bit of the first byte, as in Redis.
//!
//! Every write logs itself as sent: each is deterministic given the keys'
//! states, and replay skips the offset limit (as Redis does for its master
//! and its log), so a bitmap grown under a larger `proto-max-bulk-len`
//! still loads.

use std::borrow::Cow;

use super::strings::get_str;
use super::table::*;
use super::{errors, int_arg, CmdError, CmdResult, Ctx};
use crate::keyspace::events::{GENERIC, STRING};
use crate::resp::Args;
use crate::types::number::parse_i64;
use crate::types::Value;

mod field;

/// SETBIT and GETBIT's offset refusal.
const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";
/// SETBIT's value refusal.
const BAD_BIT: &str = "ERR bit is not an integer or out of range";

/// Parses a bit offset: a non-negative integer whose byte lies below
/// `proto-max-bulk-len` (not checked on replay). With `hash_bits`, the
/// `#n` form means `n * bits` (BITFIELD); the product wraps as Redis's
/// does, then meets the same checks.
fn bit_offset(ctx: &Ctx<'_>, arg: &[u8], hash_bits: Option<u32>) -> Result<u64, CmdError> {
    let (digits, scale) = match (arg.first(), hash_bits) {
        (Some(b'#'), Some(bits)) => (&arg[1..], i64::from(bits)),
        _ => (arg, 1),
    };
    let offset = parse_i64(digits)
        .ok_or(Cow::Borrowed(BAD_OFFSET))?
        .wrapping_mul(scale);
    let limit = ctx.state.config.proto_max_bulk_len_bytes as u64;
    if offset < 0 || (!ctx.session.is_replay && (offset as u64 >> 3) >= limit) {
        return Err(Cow::Borrowed(BAD_OFFSET));
    }
    Ok(offset as u64)
}

/// The string at `key` for a bit write, zero-padded to hold bit `max_bit`,
/// and whether that created or grew it (a change even if no bit flips).
fn grown_string(ctx: &mut Ctx<'_>, key: &[u8], max_bit: u64) -> Result<(Vec<u8>, bool), CmdError> {
    let needed = usize::try_from(max_bit >> 3)
        .ok()
        .and_then(|b| b.checked_add(1))
        .ok_or(Cow::Borrowed(BAD_OFFSET))?;
    let db = ctx.session.db;
    match get_str(&mut ctx.state.keyspace, db, key)? {
        None => Ok((vec![0; needed], true)),
        Some(current) => {
            let mut bytes = current.to_vec();
            let grew = bytes.len() < needed;
            if grew {
                bytes.resize(needed, 0);
            }
            Ok((bytes, grew))
        }
    }
}

/// Stores a bit command's result at `key`, keeping its TTL.
fn store(ctx: &mut Ctx<'_>, key: &[u8], bytes: Vec<u8>) {
    let db = ctx.session.db;
    ctx.state
        .keyspace
        .set(db, key, Value::Str(bytes.into()), true);
}

/// Sets bit `offset` of an existing string long enough to hold it, in
/// place when no snapshot shares the string: `Some(old bit)` if done.
fn setbit_in_place(ctx: &mut Ctx<'_>, key: &[u8], offset: u64, on: u8) -> Option<u8> {
    let db = ctx.session.db;
    let byte = usize::try_from(offset >> 3).ok()?;
    let shift = 7 - (offset & 7) as u32;
    let Some(Value::Str(s)) = ctx.state.keyspace.get(db, key) else {
        return None;
    };
    let old = (s.get(byte)? >> shift) & 1;
    if old == on {
        return Some(old);
    }
    let Some(Value::Str(s)) = ctx.state.keyspace.get_mut(db, key) else {
        return None;
    };
    let flip = |bytes: &mut [u8]| {
        if let Some(b) = bytes.get_mut(byte) {
            *b ^= 1 << shift;
        }
    };
    if !s.change_in_place(flip) {
        return None;
    }
    Some(old)
}

pub(super) fn setbit(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let offset = bit_offset(ctx, args.get(2), None)?;
    let on = match parse_i64(args.get(3)) {
        Some(b @ (0 | 1)) => b as u8,
        _ => return Err(Cow::Borrowed(BAD_BIT)),
    };
    let key = args.get(1);
    if let Some(old) = setbit_in_place(ctx, key, offset, on) {
        if old != on {
            ctx.notify(STRING, "setbit", key);
            ctx.propagate_args(args);
        }
        ctx.reply.int(i64::from(old));
        return Ok(());
    }
    let (mut bytes, grew) = grown_string(ctx, key, offset)?;
    let byte = (offset >> 3) as usize;
    let shift = 7 - (offset & 7) as u32;
    let old = (bytes[byte] >> shift) & 1;
    if grew || old != on {
        bytes[byte] = (bytes[byte] & !(1 << shift)) | (on << shift);
        store(ctx, key, bytes);
        ctx.notify(STRING, "setbit", key);
        ctx.propagate_args(args);
    }
    ctx.reply.int(i64::from(old));
    Ok(())
}

pub(super) fn getbit(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let offset = bit_offset(ctx, args.get(2), None)?;
    let value = get_str(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    let byte = usize::try_from(offset >> 3).unwrap_or(usize::MAX);
    let bit = value
        .and_then(|v| v.get(byte))
        .map_or(0, |b| (b >> (7 - (offset & 7))) & 1);
    ctx.reply.int(i64::from(bit));
    Ok(())
}

/// Whether a range is counted in bytes or in bits (BITCOUNT, BITPOS).
fn unit_is_bit(arg: &[u8]) -> Result<bool, CmdError> {
    if arg.eq_ignore_ascii_case(b"BIT") {
        Ok(true)
    } else if arg.eq_ignore_ascii_case(b"BYTE") {
        Ok(false)
    } else {
        Err(Cow::Borrowed(errors::SYNTAX))
    }
}

/// Resolves `start..=end` (negative counts from the end) over a string of
/// `len` bytes into an inclusive range of bit positions, or `None` when
/// empty. In byte units, whole bytes are covered.
fn bit_range(start: i64, end: i64, len: usize, in_bits: bool) -> Option<(u64, u64)> {
    let total = if in_bits { len as i64 * 8 } else { len as i64 };
    let resolve = |i: i64| if i < 0 { (total + i).max(0) } else { i };
    let (start, end) = (resolve(start), resolve(end).min(total - 1));
    if start > end {
        return None;
    }
    let (start, end) = (start as u64, end as u64);
    Some(if in_bits {
        (start, end)
    } else {
        (start * 8, end * 8 + 7)
    })
}

/// The mask of the bits of byte `index` that lie within `first..=last`.
fn byte_mask(index: u64, first: u64, last: u64) -> u8 {
    let mut mask = 0xffu8;
    if index == first >> 3 {
        mask &= 0xff >> (first & 7);
    }
    if index == last >> 3 {
        mask &= 0xffu8 << (7 - (last & 7));
    }
    mask
}

/// Counts the set bits of `bytes` in the inclusive bit range.
fn count_bits(bytes: &[u8], first: u64, last: u64) -> u64 {
    let (lo, hi) = ((first >> 3) as usize, (last >> 3) as usize);
    let Some(span) = bytes.get(lo..=hi) else {
        return 0;
    };
    let mut total: u64 = 0;
    let mut words = span.chunks_exact(8);
    for word in &mut words {
        let mut buf = [0u8; 8];
        buf.copy_from_slice(word);
        total += u64::from(u64::from_ne_bytes(buf).count_ones());
    }
    total += words
        .remainder()
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum::<u64>();
    // The edge bytes were counted whole; take back the bits outside.
    let outside = |index: u64| {
        let byte = bytes[index as usize];
        u64::from((byte & !byte_mask(index, first, last)).count_ones())
    };
    total -= outside(first >> 3);
    if hi != lo {
        total -= outside(last >> 3);
    }
    total
}

pub(super) fn bitcount(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let Some(value) = get_str(&mut ctx.state.keyspace, ctx.session.db, args.get(1))? else {
        ctx.reply.int(0);
        return Ok(());
    };
    let range = match args.len() {
        2 => bit_range(0, -1, value.len(), false),
        4 | 5 => {
            let start = int_arg(args, 2)?;
            let end = int_arg(args, 3)?;
            // Redis answers this case before reading the unit.
            if start < 0 && end < 0 && start > end {
                ctx.reply.int(0);
                return Ok(());
            }
            let in_bits = args.len() == 5 && unit_is_bit(args.get(4))?;
            bit_range(start, end, value.len(), in_bits)
        }
        _ => return Err(Cow::Borrowed(errors::SYNTAX)),
    };
    let count = range.map_or(0, |(first, last)| count_bits(value, first, last));
    ctx.reply.int(count as i64);
    Ok(())
}

/// The first bit equal to `bit` in the inclusive bit range.
fn find_bit(bytes: &[u8], first: u64, last: u64, bit: u8) -> Option<u64> {
    let (lo, hi) = (first >> 3, last >> 3);
    (lo..=hi).find_map(|index| {
        let byte = bytes[index as usize];
        let wanted = if bit == 1 { byte } else { !byte };
        let hits = wanted & byte_mask(index, first, last);
        (hits != 0).then(|| index * 8 + u64::from(hits.leading_zeros()))
    })
}

pub(super) fn bitpos(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let bit = match int_arg(args, 2)? {
        b @ (0 | 1) => b as u8,
        _ => return Err(Cow::Borrowed("ERR The bit argument must be 1 or 0.")),
    };
    let Some(value) = get_str(&mut ctx.state.keyspace, ctx.session.db, args.get(1))? else {
        // A missing key is an endless run of zeros.
        ctx.reply.int(if bit == 1 { -1 } else { 0 });
        return Ok(());
    };
    if args.len() > 6 {
        return Err(Cow::Borrowed(errors::SYNTAX));
    }
    let start = if args.len() > 3 { int_arg(args, 3)? } else { 0 };
    let in_bits = args.len() == 6 && unit_is_bit(args.get(5))?;
    let end_given = args.len() > 4;
    let end = if end_given { int_arg(args, 4)? } else { -1 };
    let Some((first, last)) = bit_range(start, end, value.len(), in_bits) else {
        ctx.reply.int(-1);
        return Ok(());
    };
    let found = match find_bit(value, first, last, bit) {
        Some(at) => at as i64,
        // Without an explicit end the string counts as followed by zeros.
        None if bit == 0 && !end_given => value.len() as i64 * 8,
        None => -1,
    };
    ctx.reply.int(found);
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

/// Combines `sources` byte by byte, the shorter ones padded with zeros.
fn combine(op: BitOp, sources: &[Option<Vec<u8>>]) -> Vec<u8> {
    let len = sources.iter().flatten().map(Vec::len).max().unwrap_or(0);
    let byte_at = |s: &Option<Vec<u8>>, i: usize| s.as_ref().and_then(|v| v.get(i)).copied();
    (0..len)
        .map(|i| {
            let mut bytes = sources.iter().map(|s| byte_at(s, i).unwrap_or(0));
            let first = bytes.next().unwrap_or(0);
            match op {
                BitOp::Not => !first,
                BitOp::And => bytes.fold(first, |a, b| a & b),
                BitOp::Or => bytes.fold(first, |a, b| a | b),
                BitOp::Xor => bytes.fold(first, |a, b| a ^ b),
            }
        })
        .collect()
}

pub(super) fn bitop(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let name = args.get(1);
    let op = [
        (&b"AND"[..], BitOp::And),
        (b"OR", BitOp::Or),
        (b"XOR", BitOp::Xor),
        (b"NOT", BitOp::Not),
    ]
    .into_iter()
    .find(|(n, _)| name.eq_ignore_ascii_case(n))
    .map(|(_, op)| op)
    .ok_or(Cow::Borrowed(errors::SYNTAX))?;
    if op == BitOp::Not && args.len() != 4 {
        return Err(Cow::Borrowed(
            "ERR BITOP NOT must be called with a single source key.",
        ));
    }
    let db = ctx.session.db;
    let mut sources = Vec::with_capacity(args.len() - 3);
    for key in args.iter().skip(3) {
        sources.push(get_str(&mut ctx.state.keyspace, db, key)?.map(<[u8]>::to_vec));
    }
    let result = combine(op, &sources);
    let len = result.len();
    let dest = args.get(2);
    if len > 0 {
        ctx.state
            .keyspace
            .set(db, dest, Value::Str(result.into()), false);
        ctx.notify(STRING, "set", dest);
        ctx.propagate_args(args);
    } else if ctx.state.keyspace.remove(db, dest).is_some() {
        ctx.notify(GENERIC, "del", dest);
        ctx.propagate_args(args);
    }
    ctx.reply.int(len as i64);
    Ok(())
}

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("setbit", 4, W, K1, "bitmap", "Sets or clears one bit of a string.", setbit),
    cmd!("getbit", 3, RF, K1, "bitmap", "Returns one bit of a string.", getbit),
    cmd!("bitcount", -2, R, K1, "bitmap", "Counts the set bits of a string or a range of it.", bitcount),
    cmd!("bitpos", -3, R, K1, "bitmap", "Finds the first set or clear bit of a string.", bitpos),
    cmd!("bitop", -4, W, (2, -1, 1), "bitmap", "Combines strings bitwise into a key.", bitop),
    cmd!("bitfield", -2, W, K1, "bitmap", "Reads, writes and increments integers inside a string.", field::bitfield),
    cmd!("bitfield_ro", -2, RF, K1, "bitmap", "Reads integers inside a string.", field::bitfield_ro),
];
