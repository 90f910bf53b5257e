//! BITFIELD and BITFIELD_RO: integers of 1 to 64 bits (unsigned up to 63)
//! at any bit offset of a string, read, written or incremented with a
//! chosen overflow policy.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::{bit_offset, store};
use crate::commands::strings::get_str;
use crate::commands::{errors, CmdError, CmdResult, Ctx};
use crate::keyspace::events::STRING;
use crate::resp::{Args, ReplyBuf};
use crate::types::number::parse_i64;
use crate::types::Value;

/// The refusal of a malformed type, worded as Redis words it.
const BAD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

/// What an increment or a stored value does past the type's range.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Get,
    Set,
    IncrBy,
}

/// One parsed subcommand.
#[derive(Clone, Copy)]
struct FieldOp {
    op: Op,
    signed: bool,
    bits: u32,
    offset: u64,
    /// The value to store or the increment.
    operand: i64,
    overflow: Overflow,
}

/// Parses `i8`, `u16`...: signed up to 64 bits, unsigned up to 63 (the
/// reply could not carry a larger unsigned value).
fn field_type(arg: &[u8]) -> Result<(bool, u32), CmdError> {
    let bad = || Cow::Borrowed(BAD_TYPE);
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(bad()),
    };
    let bits = parse_i64(&arg[1..]).ok_or_else(bad)?;
    let max = if signed { 64 } else { 63 };
    if !(1..=max).contains(&bits) {
        return Err(bad());
    }
    Ok((signed, bits as u32))
}

/// Parses the subcommands; the second value says whether any writes.
fn parse_ops(ctx: &Ctx<'_>, args: &Args<'_>) -> Result<(Vec<FieldOp>, bool), CmdError> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut writes = false;
    let mut i = 2;
    while i < args.len() {
        let name = args.get(i);
        let remaining = args.len() - i - 1;
        let op = if name.eq_ignore_ascii_case(b"GET") && remaining >= 2 {
            Op::Get
        } else if name.eq_ignore_ascii_case(b"SET") && remaining >= 3 {
            Op::Set
        } else if name.eq_ignore_ascii_case(b"INCRBY") && remaining >= 3 {
            Op::IncrBy
        } else if name.eq_ignore_ascii_case(b"OVERFLOW") && remaining >= 1 {
            let policy = args.get(i + 1);
            overflow = [
                (&b"WRAP"[..], Overflow::Wrap),
                (b"SAT", Overflow::Sat),
                (b"FAIL", Overflow::Fail),
            ]
            .into_iter()
            .find(|(n, _)| policy.eq_ignore_ascii_case(n))
            .map(|(_, o)| o)
            .ok_or(Cow::Borrowed("ERR Invalid OVERFLOW type specified"))?;
            i += 2;
            continue;
        } else {
            return Err(Cow::Borrowed(errors::SYNTAX));
        };
        let (signed, bits) = field_type(args.get(i + 1))?;
        let offset = bit_offset(ctx, args.get(i + 2), Some(bits))?;
        let mut operand = 0;
        if op != Op::Get {
            writes = true;
            operand = parse_i64(args.get(i + 3)).ok_or(Cow::Borrowed(errors::NOT_INTEGER))?;
        }
        ops.push(FieldOp {
            op,
            signed,
            bits,
            offset,
            operand,
            overflow,
        });
        i += if op == Op::Get { 3 } else { 4 };
    }
    Ok((ops, writes))
}

/// A string as one BITFIELD sees it: the stored bytes (zero past their
/// end) under the bytes its writes changed, so no write copies the whole
/// string and a GET-only call copies nothing.
struct Overlay<'a> {
    base: &'a [u8],
    patch: BTreeMap<u64, u8>,
}

impl Overlay<'_> {
    fn byte(&self, index: u64) -> u8 {
        match self.patch.get(&index) {
            Some(&b) => b,
            None => usize::try_from(index)
                .ok()
                .and_then(|i| self.base.get(i))
                .copied()
                .unwrap_or(0),
        }
    }

    /// Reads `bits` bits at bit `offset` as an unsigned number.
    fn read(&self, offset: u64, bits: u32) -> u64 {
        (0..u64::from(bits)).fold(0u64, |acc, i| {
            let at = offset + i;
            (acc << 1) | u64::from((self.byte(at >> 3) >> (7 - (at & 7))) & 1)
        })
    }

    /// Reads a signed field: the unsigned bits, sign-extended.
    fn read_signed(&self, offset: u64, bits: u32) -> i64 {
        let raw = self.read(offset, bits);
        if bits < 64 && raw & (1 << (bits - 1)) != 0 {
            (raw | (u64::MAX << bits)) as i64
        } else {
            raw as i64
        }
    }

    /// Writes the low `bits` bits of `value` at bit `offset`.
    fn write(&mut self, offset: u64, bits: u32, value: u64) {
        for i in 0..u64::from(bits) {
            let at = offset + i;
            let bit = ((value >> (u64::from(bits) - 1 - i)) & 1) as u8;
            let shift = 7 - (at & 7);
            let byte = (self.byte(at >> 3) & !(1 << shift)) | (bit << shift);
            self.patch.insert(at >> 3, byte);
        }
    }
}

/// Copies the changed bytes into `bytes` (long enough for them).
fn apply_patch(bytes: &mut [u8], patch: &BTreeMap<u64, u8>) {
    for (&index, &b) in patch {
        if let Some(slot) = usize::try_from(index).ok().and_then(|i| bytes.get_mut(i)) {
            *slot = b;
        }
    }
}

/// `value + incr` for a signed field of `bits`: `Ok(sum)` in range, else
/// what the policy stores (`Err(None)` for FAIL).
fn add_signed(value: i64, incr: i64, bits: u32, overflow: Overflow) -> Result<i64, Option<i64>> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    // As unsigned, so the differences stay defined when `value` is out of
    // range; they are only compared once `value` is known to be in range.
    let room_up = (max as u64).wrapping_sub(value as u64) as i64;
    let room_down = min.wrapping_sub(value);
    let up =
        value > max || (bits != 64 && incr > room_up) || (value >= 0 && incr > 0 && incr > room_up);
    let down = !up
        && (value < min
            || (bits != 64 && incr < room_down)
            || (value < 0 && incr < 0 && incr < room_down));
    if !up && !down {
        return Ok(value.wrapping_add(incr));
    }
    match overflow {
        Overflow::Fail => Err(None),
        Overflow::Sat => Err(Some(if up { max } else { min })),
        Overflow::Wrap => {
            let mut sum = (value as u64).wrapping_add(incr as u64);
            if bits < 64 {
                let high = u64::MAX << bits;
                if sum & (1 << (bits - 1)) != 0 {
                    sum |= high;
                } else {
                    sum &= !high;
                }
            }
            Err(Some(sum as i64))
        }
    }
}

/// `value + incr` for an unsigned field of `bits` (at most 63), as
/// [`add_signed`] answers.
fn add_unsigned(value: u64, incr: i64, bits: u32, overflow: Overflow) -> Result<u64, Option<u64>> {
    let max = (1u64 << bits) - 1;
    let room_up = max.wrapping_sub(value) as i64;
    let room_down = (value as i64).wrapping_neg();
    let up = value > max || (incr > 0 && incr > room_up);
    let down = !up && incr < 0 && incr < room_down;
    if !up && !down {
        return Ok(value.wrapping_add(incr as u64));
    }
    match overflow {
        Overflow::Fail => Err(None),
        Overflow::Sat => Err(Some(if up { max } else { 0 })),
        Overflow::Wrap => Err(Some(value.wrapping_add(incr as u64) & max)),
    }
}

/// Runs one SET or INCRBY: the reply value (`None` when FAIL refused it)
/// and whether the field changed.
fn apply(bytes: &mut Overlay<'_>, op: &FieldOp) -> (Option<i64>, bool) {
    let (offset, bits) = (op.offset, op.bits);
    let (reply, old, new) = if op.signed {
        let old = bytes.read_signed(offset, bits);
        let (start, incr) = match op.op {
            Op::IncrBy => (old, op.operand),
            _ => (op.operand, 0),
        };
        let new = match add_signed(start, incr, bits, op.overflow) {
            Ok(v) | Err(Some(v)) => v,
            Err(None) => return (None, false),
        };
        let reply = if op.op == Op::IncrBy { new } else { old };
        (reply, old as u64, new as u64)
    } else {
        let old = bytes.read(offset, bits);
        let (start, incr) = match op.op {
            Op::IncrBy => (old, op.operand),
            _ => (op.operand as u64, 0),
        };
        let new = match add_unsigned(start, incr, bits, op.overflow) {
            Ok(v) | Err(Some(v)) => v,
            Err(None) => return (None, false),
        };
        let reply = if op.op == Op::IncrBy { new } else { old };
        (reply as i64, old, new)
    };
    bytes.write(offset, bits, new);
    (Some(reply), old != new)
}

/// Runs every op over `bytes`, replying; whether any field changed, and
/// whether any SET or INCRBY was carried out (on a created or grown
/// string, that alone makes Redis raise `setbit`).
fn run_ops(reply: &mut ReplyBuf, bytes: &mut Overlay<'_>, ops: &[FieldOp]) -> (bool, bool) {
    reply.array(ops.len());
    let (mut changed, mut wrote) = (false, false);
    for op in ops {
        if op.op == Op::Get {
            let value = if op.signed {
                bytes.read_signed(op.offset, op.bits)
            } else {
                bytes.read(op.offset, op.bits) as i64
            };
            reply.int(value);
            continue;
        }
        let (value, field_changed) = apply(bytes, op);
        changed |= field_changed;
        wrote |= value.is_some();
        match value {
            Some(v) => reply.int(v),
            None => reply.null(),
        }
    }
    (changed, wrote)
}

pub(in crate::commands) fn bitfield(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (ops, writes) = parse_ops(ctx, args)?;
    let (db, key) = (ctx.session.db, args.get(1));
    let base = get_str(&mut ctx.state.keyspace, db, key)?;
    let existed = base.is_some();
    let mut overlay = Overlay {
        base: base.unwrap_or_default(),
        patch: BTreeMap::new(),
    };
    if !writes {
        run_ops(ctx.reply, &mut overlay, &ops);
        return Ok(());
    }
    // The string grows to hold the farthest bit any write reaches.
    let highest = ops
        .iter()
        .filter(|o| o.op != Op::Get)
        .map(|o| o.offset + u64::from(o.bits) - 1)
        .max()
        .unwrap_or(0);
    let len_needed = usize::try_from(highest >> 3)
        .unwrap_or(usize::MAX)
        .saturating_add(1);
    let grows = !existed || overlay.base.len() < len_needed;
    let (field_changed, wrote) = run_ops(ctx.reply, &mut overlay, &ops);
    let changed = field_changed || grows;
    let raise = field_changed || (grows && wrote);
    let Overlay { base, patch } = overlay;
    if !changed {
        return Ok(());
    }
    // A grown key is logged too, though Redis would not replicate it when
    // every write failed: replay must rebuild the same bytes.
    let copy = if grows {
        let mut bytes = base.to_vec();
        bytes.resize(len_needed, 0);
        Some(bytes)
    } else {
        None
    };
    let in_place = copy.is_none()
        && match ctx.state.keyspace.get_mut(db, key) {
            Some(Value::Str(s)) => s.change_in_place(|bytes| apply_patch(bytes, &patch)),
            _ => false,
        };
    if !in_place {
        let mut bytes = copy.unwrap_or_else(|| match ctx.state.keyspace.get(db, key) {
            Some(Value::Str(s)) => s.to_vec(),
            _ => Vec::new(),
        });
        apply_patch(&mut bytes, &patch);
        store(ctx, key, bytes);
    }
    if raise {
        ctx.notify(STRING, "setbit", key);
    }
    ctx.propagate_args(args);
    Ok(())
}

pub(in crate::commands) fn bitfield_ro(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (ops, writes) = parse_ops(ctx, args)?;
    if writes {
        return Err(Cow::Borrowed(
            "ERR BITFIELD_RO only supports the GET subcommand",
        ));
    }
    let base = get_str(&mut ctx.state.keyspace, ctx.session.db, args.get(1))?;
    let mut overlay = Overlay {
        base: base.unwrap_or_default(),
        patch: BTreeMap::new(),
    };
    run_ops(ctx.reply, &mut overlay, &ops);
    Ok(())
}
