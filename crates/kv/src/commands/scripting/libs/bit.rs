//! `bit`: LuaBitOp's 32-bit operations. Numbers go to 32 bits the way the C
//! library does it (adding 2^52 + 2^51 and keeping the low word of the
//! double, which rounds to nearest and wraps modulo 2^32), and results come
//! back as signed 32-bit numbers.

use mlua::{Lua, MultiValue, Table, Value};

use super::{arg_error, one, to_number, type_name, Kit, Outcome};

/// The C library's conversion of a number to 32 bits.
fn to_bits(n: f64) -> u32 {
    (n + 6_755_399_441_055_744.0).to_bits() as u32
}

/// Argument `n` as 32 bits; only a zero result is checked for not being a
/// number, as the C library checks.
fn arg(lua: &Lua, args: &[Value<'_>], n: usize) -> Outcome<u32> {
    let value = to_number(lua, args.get(n - 1))?;
    let bits = to_bits(value.unwrap_or(0.0));
    if bits == 0 && value.is_none() {
        let got = type_name(args.get(n - 1));
        return Err(arg_error(lua, n, &format!("number expected, got {got}")));
    }
    Ok(bits)
}

/// A 32-bit result as the signed number Lua sees.
fn result(bits: u32) -> MultiValue<'static> {
    one(Value::Integer(i64::from(bits as i32)))
}

/// The n-ary folds: the first argument, then the rest from the last down.
fn fold(lua: &Lua, args: &[Value<'_>], op: fn(u32, u32) -> u32) -> Outcome<u32> {
    let mut acc = arg(lua, args, 1)?;
    for n in (2..=args.len()).rev() {
        acc = op(acc, arg(lua, args, n)?);
    }
    Ok(acc)
}

/// The shifts and rotations: the count is taken modulo 32.
fn shift(lua: &Lua, args: &[Value<'_>], op: fn(u32, u32) -> u32) -> Outcome<u32> {
    let value = arg(lua, args, 1)?;
    let count = arg(lua, args, 2)? & 31;
    Ok(op(value, count))
}

/// `bit.tohex(x [, n])`: `n` hex digits (8 by default, upper case when
/// negative, at most 8).
fn tohex<'lua>(lua: &'lua Lua, args: &[Value<'lua>]) -> Outcome<MultiValue<'lua>> {
    let mut value = arg(lua, args, 1)?;
    let mut digits = if args.len() < 2 {
        8
    } else {
        arg(lua, args, 2)? as i32
    };
    let alphabet: &[u8; 16] = if digits < 0 {
        digits = digits.wrapping_neg();
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let digits = digits.clamp(0, 8) as usize;
    let mut out = vec![0u8; digits];
    for slot in out.iter_mut().rev() {
        *slot = alphabet[(value & 15) as usize];
        value >>= 4;
    }
    Ok(one(Value::String(lua.create_string(&out)?)))
}

type Op = for<'l> fn(&'l Lua, &[Value<'l>]) -> Outcome<u32>;

/// The library's functions, by name.
const FUNCTIONS: &[(&str, Op)] = &[
    ("tobit", |lua, a| arg(lua, a, 1)),
    ("bnot", |lua, a| arg(lua, a, 1).map(|b| !b)),
    ("band", |lua, a| fold(lua, a, |x, y| x & y)),
    ("bor", |lua, a| fold(lua, a, |x, y| x | y)),
    ("bxor", |lua, a| fold(lua, a, |x, y| x ^ y)),
    ("lshift", |lua, a| shift(lua, a, |x, n| x << n)),
    ("rshift", |lua, a| shift(lua, a, |x, n| x >> n)),
    ("arshift", |lua, a| {
        shift(lua, a, |x, n| ((x as i32) >> n) as u32)
    }),
    ("rol", |lua, a| shift(lua, a, u32::rotate_left)),
    ("ror", |lua, a| shift(lua, a, u32::rotate_right)),
    ("bswap", |lua, a| arg(lua, a, 1).map(u32::swap_bytes)),
];

/// Builds the `bit` table.
pub(super) fn module<'lua>(lua: &'lua Lua, kit: &Kit) -> mlua::Result<Table<'lua>> {
    let table = lua.create_table()?;
    for &(name, op) in FUNCTIONS {
        let f = kit.function(lua, move |lua, args| op(lua, &args).map(result))?;
        table.raw_set(name, f)?;
    }
    table.raw_set("tohex", kit.function(lua, |lua, args| tohex(lua, &args))?)?;
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::to_bits;

    #[test]
    fn conversion_wraps_and_rounds_like_the_c_library() {
        assert_eq!(to_bits(1.0), 1);
        assert_eq!(to_bits(-1.0), u32::MAX);
        assert_eq!(to_bits(4_294_967_296.0 + 5.0), 5);
        assert_eq!(to_bits(2.5), 2);
        assert_eq!(to_bits(3.5), 4);
        assert_eq!(to_bits(1_437_217_655.0), 1_437_217_655);
    }
}
