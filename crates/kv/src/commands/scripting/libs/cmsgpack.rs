//! `cmsgpack`: MessagePack as lua-cmsgpack 0.4.0 (the version Redis embeds)
//! writes and reads it.
//!
//! Encoding choices: a number that is a whole 64-bit integer is written as
//! the smallest integer type that holds it, any other number as a float
//! when a float holds it exactly, else as a double; strings as str8/16/32
//! (fixstr under 32 bytes); a table whose keys are exactly 1..n is an
//! array (so an empty table is an empty array), any other table a map in
//! Lua's iteration order; tables nested 16 deep, functions and userdata
//! become nil. Decoding reads every type the encoder writes plus str8's
//! older raw forms, and stops with "Missing bytes in input." or "Bad data
//! format in input." as the C library does.

use mlua::{Lua, MultiValue, Table, Value};

use super::{
    arg_error, check_bytes, check_integer, one, opt_integer, raise, raise_bare, Kit, Outcome,
    MAX_C_STACK, TWO_63,
};

/// How deep tables are followed before they are written as nil (which
/// also ends circular references).
const MAX_NESTING: usize = 16;

/// Whether `n` is a whole number a 64-bit integer holds.
fn fits_i64(n: f64) -> bool {
    n.is_finite() && (-TWO_63..TWO_63).contains(&n) && n.trunc() == n
}

/// Whether `n` is a whole number a C `int` holds.
fn fits_int(n: f64) -> bool {
    n.is_finite() && (-2_147_483_648.0..2_147_483_648.0).contains(&n) && n.trunc() == n
}

fn encode_int(out: &mut Vec<u8>, n: i64) {
    match n {
        0..=127 => out.push(n as u8),
        128..=0xff => out.extend([0xcc, n as u8]),
        0x100..=0xffff => {
            out.push(0xcd);
            out.extend((n as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(0xce);
            out.extend((n as u32).to_be_bytes());
        }
        _ if n >= 0 => {
            out.push(0xcf);
            out.extend(n.to_be_bytes());
        }
        -32..=-1 => out.push(n as u8),
        -128..=-33 => out.extend([0xd0, n as u8]),
        -32768..=-129 => {
            out.push(0xd1);
            out.extend((n as i16).to_be_bytes());
        }
        -2_147_483_648..=-32769 => {
            out.push(0xd2);
            out.extend((n as i32).to_be_bytes());
        }
        _ => {
            out.push(0xd3);
            out.extend(n.to_be_bytes());
        }
    }
}

fn encode_double(out: &mut Vec<u8>, d: f64) {
    let f = d as f32;
    if f64::from(f) == d {
        out.push(0xca);
        out.extend(f.to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend(d.to_be_bytes());
    }
}

fn encode_bytes(out: &mut Vec<u8>, s: &[u8]) {
    let len = s.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend([0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend((len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend((len as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

/// Writes a container header: fix form up to 15, then 16 and 32 bits.
fn encode_header(out: &mut Vec<u8>, n: usize, fix: u8, wide: u8) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(wide);
        out.extend((n as u16).to_be_bytes());
    } else {
        out.push(wide + 1);
        out.extend((n as u32).to_be_bytes());
    }
}

fn encode_number(out: &mut Vec<u8>, n: f64) {
    if fits_i64(n) {
        encode_int(out, n as i64);
    } else {
        encode_double(out, n);
    }
}

/// Whether the keys of `t` are exactly 1..n.
fn is_array(t: &Table<'_>) -> mlua::Result<bool> {
    let (mut count, mut max) = (0i64, 0i64);
    for pair in t.clone().pairs::<Value, Value>() {
        let (key, _) = pair?;
        let n = match key {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(false),
        };
        if n <= 0.0 || !fits_int(n) {
            return Ok(false);
        }
        max = max.max(n as i64);
        count += 1;
    }
    Ok(max == count)
}

fn encode_value(out: &mut Vec<u8>, value: &Value<'_>, level: usize) -> mlua::Result<()> {
    match value {
        Value::String(s) => encode_bytes(out, s.as_bytes()),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_number(out, *i as f64),
        Value::Number(n) => encode_number(out, *n),
        Value::Table(t) if level < MAX_NESTING => encode_table(out, t, level)?,
        _ => out.push(0xc0),
    }
    Ok(())
}

fn encode_table(out: &mut Vec<u8>, t: &Table<'_>, level: usize) -> mlua::Result<()> {
    if is_array(t)? {
        let len = t.raw_len();
        encode_header(out, len, 0x90, 0xdc);
        for i in 1..=len {
            let item: Value = t.get(i)?;
            encode_value(out, &item, level + 1)?;
        }
    } else {
        let count = t.clone().pairs::<Value, Value>().count();
        encode_header(out, count, 0x80, 0xde);
        for pair in t.clone().pairs::<Value, Value>() {
            let (key, item) = pair?;
            encode_value(out, &key, level + 1)?;
            encode_value(out, &item, level + 1)?;
        }
    }
    Ok(())
}

/// `cmsgpack.pack(...)`: every argument encoded, one after another.
fn pack<'lua>(lua: &'lua Lua, args: &[Value<'lua>]) -> Outcome<MultiValue<'lua>> {
    if args.is_empty() {
        return Err(arg_error(lua, 0, "MessagePack pack needs input."));
    }
    let mut out = Vec::new();
    for value in args {
        encode_value(&mut out, value, 0)?;
    }
    Ok(one(Value::String(lua.create_string(&out)?)))
}

/// Why decoding stopped.
enum Stop {
    /// The input ended inside a value.
    Eof,
    /// A byte that starts no MessagePack value.
    BadFormat,
    /// Anything raised on the way (stack limits, nil or NaN map keys).
    Fail(super::Failure),
}

impl From<mlua::Error> for Stop {
    fn from(e: mlua::Error) -> Self {
        Stop::Fail(e.into())
    }
}

/// A cursor over the input, counting the Lua stack slots the C decoder
/// would hold (its limit is what bounds nesting).
struct Reader<'a, 'lua> {
    lua: &'lua Lua,
    data: &'a [u8],
    at: usize,
    slots: usize,
}

impl<'a, 'lua> Reader<'a, 'lua> {
    fn left(&self) -> usize {
        self.data.len() - self.at
    }

    /// The next `n` bytes, consumed.
    fn take(&mut self, n: usize) -> Result<&'a [u8], Stop> {
        if self.left() < n {
            return Err(Stop::Eof);
        }
        let bytes = &self.data[self.at..self.at + n];
        self.at += n;
        Ok(bytes)
    }

    /// A big-endian unsigned number of `n` bytes.
    fn uint(&mut self, n: usize) -> Result<u64, Stop> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    fn string(&mut self, len: usize) -> Result<Value<'lua>, Stop> {
        let bytes = self.take(len)?;
        Ok(Value::String(self.lua.create_string(bytes)?))
    }

    /// Reads one item: a whole scalar, or a container's header.
    fn item(&mut self) -> Result<Item<'lua>, Stop> {
        if self.left() < 1 {
            return Err(Stop::Eof);
        }
        if self.slots + 1 > MAX_C_STACK {
            return Err(Stop::Fail(raise(
                "stack overflow (too many return values at once; \
                 use unpack_one or unpack_limit instead.)",
            )));
        }
        let head = self.data[self.at];
        self.at += 1;
        let int = |v: i64| Item::Value(Value::Number(v as f64));
        Ok(match head {
            0xcc => int(self.uint(1)? as i64),
            0xd0 => int(i64::from(self.uint(1)? as u8 as i8)),
            0xcd => int(self.uint(2)? as i64),
            0xd1 => int(i64::from(self.uint(2)? as u16 as i16)),
            0xce => int(self.uint(4)? as i64),
            0xd2 => int(i64::from(self.uint(4)? as u32 as i32)),
            // Both 64-bit forms come back through a signed integer.
            0xcf | 0xd3 => int(self.uint(8)? as i64),
            0xc0 => Item::Value(Value::Nil),
            0xc3 => Item::Value(Value::Boolean(true)),
            0xc2 => Item::Value(Value::Boolean(false)),
            0xca => Item::Value(Value::Number(f64::from(f32::from_bits(
                self.uint(4)? as u32
            )))),
            0xcb => Item::Value(Value::Number(f64::from_bits(self.uint(8)?))),
            0xd9..=0xdb => {
                let width = 1 << (head - 0xd9);
                let len = self.uint(width)? as usize;
                Item::Value(self.string(len)?)
            }
            0xdc => Item::Array(self.uint(2)? as usize),
            0xdd => Item::Array(self.uint(4)? as usize),
            0xde => Item::Map(self.uint(2)? as usize),
            0xdf => Item::Map(self.uint(4)? as usize),
            b if b & 0x80 == 0 => int(i64::from(b)),
            b if b & 0xe0 == 0xe0 => int(i64::from(b as i8)),
            b if b & 0xe0 == 0xa0 => Item::Value(self.string(usize::from(b & 0x1f))?),
            b if b & 0xf0 == 0x90 => Item::Array(usize::from(b & 0x0f)),
            b if b & 0xf0 == 0x80 => Item::Map(usize::from(b & 0x0f)),
            _ => {
                self.at -= 1;
                return Err(Stop::BadFormat);
            }
        })
    }

    /// Reads one whole value, containers with an explicit stack (nesting
    /// is bounded only by the slot count, too deep for recursion).
    fn value(&mut self) -> Result<Value<'lua>, Stop> {
        let mut open: Vec<Open<'lua>> = Vec::new();
        loop {
            let Some(mut value) = self.start(&mut open)? else {
                continue;
            };
            loop {
                let Some(top) = open.last_mut() else {
                    return Ok(value);
                };
                if !self.store(top, value)? {
                    break;
                }
                value = self.close(open.pop());
            }
        }
    }

    /// Reads the next item: a finished value, or `None` when it opened a
    /// container (pushed on `open`).
    fn start(&mut self, open: &mut Vec<Open<'lua>>) -> Result<Option<Value<'lua>>, Stop> {
        let container = match self.item()? {
            Item::Value(v) => return Ok(Some(v)),
            Item::Array(len) => (len, true),
            Item::Map(len) => (len, false),
        };
        let t = self.lua.create_table()?;
        // The C array decoder checks for one more slot after its table.
        if container.1 && self.slots + 2 > MAX_C_STACK {
            return Err(Stop::Fail(raise(
                "stack overflow (in function mp_decode_to_lua_array)",
            )));
        }
        match container {
            (0, _) => return Ok(Some(Value::Table(t))),
            (len, true) => {
                // The table and the index sit on the C stack.
                self.slots += 2;
                open.push(Open::Array { t, next: 1, len });
            }
            (len, false) => {
                self.slots += 1;
                open.push(Open::Map {
                    t,
                    left: len,
                    key: None,
                });
            }
        }
        Ok(None)
    }

    /// Stores `value` in the innermost container; true when it is full.
    fn store(&mut self, top: &mut Open<'lua>, value: Value<'lua>) -> Result<bool, Stop> {
        match top {
            Open::Array { t, next, len } => {
                t.raw_set(*next, value)?;
                *next += 1;
                Ok(*next > *len)
            }
            Open::Map { t, left, key } => {
                let Some(k) = key.take() else {
                    *key = Some(value);
                    self.slots += 1;
                    return Ok(false);
                };
                self.slots -= 1;
                match &k {
                    Value::Nil => return Err(Stop::Fail(raise_bare("table index is nil"))),
                    Value::Number(n) if n.is_nan() => {
                        return Err(Stop::Fail(raise_bare("table index is NaN")))
                    }
                    _ => t.raw_set(k, value)?,
                }
                *left -= 1;
                Ok(*left == 0)
            }
        }
    }

    /// A full container, which becomes the value for its parent.
    fn close(&mut self, closed: Option<Open<'lua>>) -> Value<'lua> {
        match closed {
            Some(Open::Array { t, .. }) => {
                self.slots -= 2;
                Value::Table(t)
            }
            Some(Open::Map { t, .. }) => {
                self.slots -= 1;
                Value::Table(t)
            }
            None => Value::Nil,
        }
    }
}

/// What one header byte starts.
enum Item<'lua> {
    Value(Value<'lua>),
    Array(usize),
    Map(usize),
}

/// A container being filled while decoding.
enum Open<'lua> {
    Array {
        t: Table<'lua>,
        next: usize,
        len: usize,
    },
    Map {
        t: Table<'lua>,
        left: usize,
        key: Option<Value<'lua>>,
    },
}

/// Decodes up to `limit` values from `offset` (all of them when both are
/// zero; then no offset is returned first).
fn unpack_full<'lua>(
    lua: &'lua Lua,
    args: &[Value<'lua>],
    stack: usize,
    limit: i64,
    offset: i64,
) -> Outcome<MultiValue<'lua>> {
    let data = check_bytes(lua, args, 1)?;
    let data = data.as_bytes();
    let len = data.len();
    if offset < 0 || limit < 0 {
        return Err(raise(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32, len as i32
        )));
    }
    if offset as u64 > len as u64 {
        return Err(raise(format!(
            "Start offset {} greater than input length {}.",
            offset as i32, len as i32
        )));
    }
    let all = limit == 0 && offset == 0;
    let limit = if all { i64::from(i32::MAX) } else { limit };
    let mut reader = Reader {
        lua,
        data,
        at: offset as usize,
        slots: stack,
    };
    let mut out = Vec::new();
    while reader.left() > 0 && (out.len() as i64) < limit {
        match reader.value() {
            Ok(v) => out.push(v),
            Err(Stop::Eof) => return Err(raise("Missing bytes in input.")),
            Err(Stop::BadFormat) => return Err(raise("Bad data format in input.")),
            Err(Stop::Fail(f)) => return Err(f),
        }
        reader.slots += 1;
    }
    if !all {
        let next = if reader.left() == 0 {
            -1
        } else {
            reader.at as i64
        };
        out.insert(0, Value::Integer(next));
    }
    Ok(MultiValue::from_vec(out))
}

/// Builds the `cmsgpack` table.
pub(super) fn module<'lua>(lua: &'lua Lua, kit: &Kit) -> mlua::Result<Table<'lua>> {
    let table = lua.create_table()?;
    table.raw_set("pack", kit.function(lua, |lua, a| pack(lua, &a))?)?;
    let unpack = kit.function(lua, |lua, a| unpack_full(lua, &a, a.len(), 0, 0))?;
    table.raw_set("unpack", unpack)?;
    let unpack_one = kit.function(lua, |lua, a| {
        let offset = opt_integer(lua, &a, 2, 0)?;
        unpack_full(lua, &a, 1, 1, offset)
    })?;
    table.raw_set("unpack_one", unpack_one)?;
    let unpack_limit = kit.function(lua, |lua, a| {
        let limit = check_integer(lua, &a, 2)?;
        let offset = opt_integer(lua, &a, 3, 0)?;
        unpack_full(lua, &a, 1, limit, offset)
    })?;
    table.raw_set("unpack_limit", unpack_limit)?;
    table.raw_set("_NAME", "cmsgpack")?;
    table.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    table.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    table.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(table)
}
