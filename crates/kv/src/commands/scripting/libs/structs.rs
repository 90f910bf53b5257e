//! `struct`: Roberto Ierusalimschy's binary packing library as Redis
//! builds it on x86-64 (`long` and `size_t` of 8 bytes, `int` of 4, `short`
//! of 2, native order little-endian, largest alignment 8).
//!
//! The format language: `>` big-endian, `<` little-endian, `!n` align to
//! at most `n` (a power of two; `!` alone is the native 8), `x` one zero
//! byte, `b B h H l L T` signed/unsigned char, short, long and size_t,
//! `iN IN` integers of N bytes (default 4, at most 32), `f d` float and
//! double, `cN` N bytes (`c0`: all of the string when packing, the length
//! given by the previous number when unpacking), `s` a zero-terminated
//! string, spaces ignored.

use mlua::{Lua, MultiValue, Table, Value};

use super::{
    arg_error, check_bytes, check_number, one, opt_integer, raise, Kit, Outcome, MAX_C_STACK,
};

/// Largest integer size `iN` accepts.
const MAX_INT_SIZE: usize = 32;
/// The native alignment `!` gives without a number.
const MAX_ALIGN: usize = 8;

/// The parsing state one format string walks through.
struct Format<'a> {
    text: &'a [u8],
    at: usize,
    little: bool,
    align: usize,
}

impl<'a> Format<'a> {
    /// The format as C reads it: up to its first zero byte.
    fn new(text: &'a [u8]) -> Self {
        let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
        Format {
            text: &text[..end],
            at: 0,
            little: true,
            align: 1,
        }
    }

    /// The next option character, if any.
    fn next_option(&mut self) -> Option<u8> {
        let c = *self.text.get(self.at)?;
        self.at += 1;
        Some(c)
    }

    /// A decimal count after an option, or `default` when none follows.
    fn number(&mut self, default: usize) -> Outcome<usize> {
        if !self.text.get(self.at).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut n: usize = 0;
        while let Some(&c) = self.text.get(self.at).filter(|c| c.is_ascii_digit()) {
            let digit = usize::from(c - b'0');
            if n > (i32::MAX as usize) / 10 || n * 10 > (i32::MAX as usize) - digit {
                return Err(raise("integral size overflow"));
            }
            n = n * 10 + digit;
            self.at += 1;
        }
        Ok(n)
    }

    /// The size of option `opt` (reading its count where it has one).
    fn size(&mut self, opt: u8) -> Outcome<usize> {
        Ok(match opt {
            b'b' | b'B' | b'x' => 1,
            b'h' | b'H' => 2,
            b'l' | b'L' | b'T' | b'd' => 8,
            b'f' => 4,
            b'c' => self.number(1)?,
            b'i' | b'I' => {
                let size = self.number(4)?;
                if size > MAX_INT_SIZE {
                    return Err(raise(format!(
                        "integral size {size} is larger than limit of {MAX_INT_SIZE}"
                    )));
                }
                size
            }
            _ => 0,
        })
    }

    /// Padding needed before an item of `size` at offset `len`.
    fn padding(&self, len: usize, opt: u8, size: usize) -> usize {
        if size == 0 || opt == b'c' {
            return 0;
        }
        let size = size.min(self.align);
        size.wrapping_sub(len & size.wrapping_sub(1)) & size.wrapping_sub(1)
    }

    /// The options that are not items: order, alignment, spaces.
    fn control(&mut self, lua: &Lua, opt: u8) -> Outcome<()> {
        match opt {
            b' ' => {}
            b'>' => self.little = false,
            b'<' => self.little = true,
            b'!' => {
                let align = self.number(MAX_ALIGN)?;
                if !align.is_power_of_two() {
                    return Err(raise(format!("alignment {align} is not a power of 2")));
                }
                self.align = align;
            }
            other => {
                let mut message = b"invalid format option '".to_vec();
                message.push(other);
                message.push(b'\'');
                let name = super::function_name(lua);
                let mut text = format!("bad argument #1 to '{name}' (").into_bytes();
                text.extend_from_slice(&message);
                text.push(b')');
                return Err(raise(text));
            }
        }
        Ok(())
    }
}

/// A double as the C library casts it to an unsigned `long` to pack it
/// (x86-64's conversions: NaN and too-negative numbers give 2^63, numbers
/// of 2^64 and more give 0).
fn integer_bits(n: f64) -> u64 {
    if n.is_nan() {
        1 << 63
    } else if n < 0.0 {
        super::to_integer(n) as u64
    } else if n < 18_446_744_073_709_551_616.0 {
        n as u64
    } else {
        0
    }
}

/// Writes the low `size` bytes of `value` in the chosen order.
fn put_integer(out: &mut Vec<u8>, mut value: u64, size: usize, little: bool) {
    let mut bytes = vec![0u8; size];
    for i in 0..size {
        let slot = if little { i } else { size - 1 - i };
        bytes[slot] = (value & 0xff) as u8;
        value = value.checked_shr(8).unwrap_or(0);
    }
    out.extend_from_slice(&bytes);
}

/// Reads a `size`-byte integer (only its last 8 bytes count, as in C).
fn get_integer(bytes: &[u8], little: bool, signed: bool, size: usize) -> f64 {
    let mut value: u64 = 0;
    let mut push = |b: u8| value = (value << 8) | u64::from(b);
    if little {
        bytes.iter().rev().for_each(|&b| push(b));
    } else {
        bytes.iter().for_each(|&b| push(b));
    }
    if !signed {
        return value as f64;
    }
    let shift = (size as u32).wrapping_mul(8).wrapping_sub(1);
    let mask = u64::MAX.wrapping_shl(shift);
    if value & mask != 0 {
        value |= mask;
    }
    value as i64 as f64
}

/// Bytes of a float or double in the chosen order.
fn ordered(mut bytes: Vec<u8>, little: bool) -> Vec<u8> {
    if !little {
        bytes.reverse();
    }
    bytes
}

/// `struct.pack(fmt, ...)`.
fn pack<'lua>(lua: &'lua Lua, args: &[Value<'lua>]) -> Outcome<MultiValue<'lua>> {
    let fmt = check_bytes(lua, args, 1)?;
    // The C function pushes a nil after its arguments before reading them,
    // so the first missing one reads as nil rather than as no value.
    let mut args = args.to_vec();
    args.push(Value::Nil);
    let args = args.as_slice();
    let mut f = Format::new(fmt.as_bytes());
    let mut out = Vec::new();
    let mut arg = 2;
    while let Some(opt) = f.next_option() {
        let mut size = f.size(opt)?;
        let pad = f.padding(out.len(), opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = check_number(lua, args, arg)?;
                arg += 1;
                put_integer(&mut out, integer_bits(n), size, f.little);
            }
            b'x' => out.push(0),
            b'f' => {
                let n = check_number(lua, args, arg)? as f32;
                arg += 1;
                out.extend(ordered(n.to_le_bytes().to_vec(), f.little));
            }
            b'd' => {
                let n = check_number(lua, args, arg)?;
                arg += 1;
                out.extend(ordered(n.to_le_bytes().to_vec(), f.little));
            }
            b'c' | b's' => {
                let s = check_bytes(lua, args, arg)?;
                arg += 1;
                let s = s.as_bytes();
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    return Err(arg_error(lua, arg, "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => f.control(lua, opt)?,
        }
    }
    Ok(one(Value::String(lua.create_string(&out)?)))
}

/// The number an integer, float or double option reads from `item`.
fn number_item(opt: u8, item: &[u8], little: bool, size: usize) -> Value<'static> {
    let bytes = ordered(item.to_vec(), little);
    Value::Number(match opt {
        b'f' => {
            let mut raw = [0u8; 4];
            raw.copy_from_slice(&bytes);
            f64::from(f32::from_le_bytes(raw))
        }
        b'd' => {
            let mut raw = [0u8; 8];
            raw.copy_from_slice(&bytes);
            f64::from_le_bytes(raw)
        }
        _ => get_integer(item, little, opt.is_ascii_lowercase(), size),
    })
}

/// `struct.unpack(fmt, data [, init])`: the values, then the position
/// after them.
fn unpack<'lua>(lua: &'lua Lua, args: &[Value<'lua>]) -> Outcome<MultiValue<'lua>> {
    let fmt = check_bytes(lua, args, 1)?;
    let data = check_bytes(lua, args, 2)?;
    let data = data.as_bytes();
    let start = opt_integer(lua, args, 3, 1)? as u64;
    if start == 0 {
        return Err(arg_error(lua, 3, "offset must be 1 or greater"));
    }
    // The C library keeps the position in a size_t: a negative start wraps
    // to a huge one and fails the length check below.
    let mut pos = (start - 1) as usize;
    let len = data.len();
    let mut f = Format::new(fmt.as_bytes());
    let mut out: Vec<Value> = Vec::new();
    let short = |lua: &Lua| arg_error(lua, 2, "data string too short");
    while let Some(opt) = f.next_option() {
        let mut size = f.size(opt)?;
        pos = pos.wrapping_add(f.padding(pos, opt, size));
        if size > len || pos > len - size {
            return Err(short(lua));
        }
        if args.len() + out.len() + 2 > MAX_C_STACK {
            return Err(raise("stack overflow (too many results)"));
        }
        let item = &data[pos..pos + size];
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' | b'f' | b'd' => {
                out.push(number_item(opt, item, f.little, size));
            }
            b'x' => {}
            b'c' => {
                if size == 0 {
                    let previous = match out.last() {
                        Some(v) => super::to_number(lua, Some(v))?,
                        None => None,
                    };
                    let Some(n) = previous else {
                        return Err(raise("format 'c0' needs a previous size"));
                    };
                    out.pop();
                    if n.is_nan() || n < 0.0 {
                        return Err(short(lua));
                    }
                    size = n as usize;
                    if size > len || pos > len - size {
                        return Err(short(lua));
                    }
                }
                out.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(end) = data[pos..].iter().position(|&b| b == 0) else {
                    return Err(raise("unfinished string in data"));
                };
                out.push(Value::String(lua.create_string(&data[pos..pos + end])?));
                size = end + 1;
            }
            _ => f.control(lua, opt)?,
        }
        pos += size;
    }
    out.push(Value::Integer(pos as i64 + 1));
    Ok(MultiValue::from_vec(out))
}

/// `struct.size(fmt)`: the packed size of a format of fixed size.
fn size<'lua>(lua: &'lua Lua, args: &[Value<'lua>]) -> Outcome<MultiValue<'lua>> {
    let fmt = check_bytes(lua, args, 1)?;
    let mut f = Format::new(fmt.as_bytes());
    let mut pos: usize = 0;
    while let Some(opt) = f.next_option() {
        let size = f.size(opt)?;
        pos = pos.wrapping_add(f.padding(pos, opt, size));
        if opt == b's' {
            return Err(arg_error(lua, 1, "option 's' has no fixed size"));
        }
        if opt == b'c' && size == 0 {
            return Err(arg_error(lua, 1, "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            f.control(lua, opt)?;
        }
        pos = pos.wrapping_add(size);
    }
    Ok(one(Value::Integer(pos as i64)))
}

/// Builds the `struct` table.
pub(super) fn module<'lua>(lua: &'lua Lua, kit: &Kit) -> mlua::Result<Table<'lua>> {
    let table = lua.create_table()?;
    table.raw_set("pack", kit.function(lua, |lua, a| pack(lua, &a))?)?;
    table.raw_set("unpack", kit.function(lua, |lua, a| unpack(lua, &a))?)?;
    table.raw_set("size", kit.function(lua, |lua, a| size(lua, &a))?)?;
    Ok(table)
}
