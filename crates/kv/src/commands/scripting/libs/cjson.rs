//! `cjson`: JSON as Lua CJSON 2.1.0 (the version Redis embeds) writes and
//! reads it, with its defaults: numbers printed with `%.14g`, NaN and
//! infinity refused when encoding but read when decoding (with hex and
//! leading zeros, through `strtod`), excessively sparse arrays refused,
//! nesting limited to 1000 both ways, `cjson.null` (a NULL light userdata)
//! for JSON null. The error texts are the C library's.
//!
//! Both directions walk with an explicit stack rather than recursion, so
//! the nesting the limits allow never exhausts the thread's stack.

use std::cell::RefCell;
use std::rc::Rc;

use mlua::{LightUserData, Lua, MultiValue, Table, TablePairs, Value};

use super::{
    arg_error, check_bytes, check_integer, format_g, one, raise, type_name, Kit, Outcome,
    MAX_C_STACK,
};

mod decode;

/// One `cjson` table's settings (each `cjson.new()` has its own).
#[derive(Debug, Clone)]
pub(super) struct Config {
    sparse_convert: bool,
    sparse_ratio: i64,
    sparse_safe: i64,
    encode_max_depth: i64,
    decode_max_depth: i64,
    /// 0 refuses NaN and infinity, 1 writes them, 2 writes them as null.
    encode_invalid: u8,
    decode_invalid: bool,
    keep_buffer: bool,
    precision: i64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sparse_convert: false,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_invalid: 0,
            decode_invalid: true,
            keep_buffer: true,
            precision: 14,
        }
    }
}

type Shared = Rc<RefCell<Config>>;

/// The NULL light userdata that stands for JSON null.
pub(super) fn null() -> Value<'static> {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// The type name `Cannot serialise ...` uses.
fn lua_type(v: &Value<'_>) -> &'static str {
    type_name(Some(v))
}

fn serialise_error(v: &Value<'_>, reason: &str) -> super::Failure {
    raise(format!("Cannot serialise {}: {reason}", lua_type(v)))
}

/// Writes a string with JSON's escapes as CJSON chooses them (`/` and DEL
/// escaped too).
fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\x08' => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\x0c' => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

fn write_number(out: &mut Vec<u8>, cfg: &Config, n: f64, v: &Value<'_>) -> Outcome<()> {
    if !n.is_finite() {
        match cfg.encode_invalid {
            0 => return Err(serialise_error(v, "must not be NaN or Inf")),
            1 if n.is_nan() => {
                out.extend_from_slice(b"nan");
                return Ok(());
            }
            2 => {
                out.extend_from_slice(b"null");
                return Ok(());
            }
            _ => {}
        }
    }
    out.extend_from_slice(format_g(n, cfg.precision as usize).as_bytes());
    Ok(())
}

/// The array length of `t` for encoding: `Some(n)` for an array of `n`
/// (zero means encode as an object), `None` for an object.
fn array_length(t: &Table<'_>, cfg: &Config) -> Outcome<Option<i64>> {
    let (mut max, mut items) = (0i32, 0i64);
    for pair in t.clone().pairs::<Value, Value>() {
        let (key, _) = pair?;
        let k = match key {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(None),
        };
        if k == 0.0 || k.floor() != k || k < 1.0 {
            return Ok(None);
        }
        // The C library keeps the largest index in an int; a larger one
        // wraps to the lowest int there, as the x86-64 conversion does.
        if k > f64::from(max) {
            max = if k < 2_147_483_648.0 {
                k as i32
            } else {
                i32::MIN
            };
        }
        items += 1;
    }
    let max = i64::from(max);
    if cfg.sparse_ratio > 0 && max > items * cfg.sparse_ratio && max > cfg.sparse_safe {
        if !cfg.sparse_convert {
            return Err(serialise_error(
                &Value::Table(t.clone()),
                "excessively sparse array",
            ));
        }
        return Ok(None);
    }
    Ok(Some(max))
}

/// An open container while encoding.
enum Open<'lua> {
    Array {
        t: Table<'lua>,
        next: i64,
        len: i64,
    },
    Object {
        pairs: TablePairs<'lua, Value<'lua>, Value<'lua>>,
        first: bool,
    },
}

impl Open<'_> {
    /// Stack slots the C encoder holds for this container's current item.
    fn slots(&self) -> usize {
        match self {
            Open::Array { .. } => 1,
            Open::Object { .. } => 2,
        }
    }
}

struct Encoder<'lua, 'c> {
    cfg: &'c Config,
    out: Vec<u8>,
    open: Vec<Open<'lua>>,
    slots: usize,
}

impl<'lua> Encoder<'lua, '_> {
    /// Writes a scalar, or opens a table.
    fn value(&mut self, v: Value<'lua>) -> Outcome<()> {
        match &v {
            Value::String(s) => write_string(&mut self.out, s.as_bytes()),
            Value::Integer(i) => write_number(&mut self.out, self.cfg, *i as f64, &v)?,
            Value::Number(n) => write_number(&mut self.out, self.cfg, *n, &v)?,
            Value::Boolean(b) => {
                self.out
                    .extend_from_slice(if *b { b"true".as_slice() } else { b"false" })
            }
            Value::Nil => self.out.extend_from_slice(b"null"),
            Value::LightUserData(p) if p.0.is_null() => self.out.extend_from_slice(b"null"),
            Value::Table(t) => self.open_table(t.clone())?,
            other => return Err(serialise_error(other, "type not supported")),
        }
        Ok(())
    }

    fn open_table(&mut self, t: Table<'lua>) -> Outcome<()> {
        let depth = self.open.len() as i64 + 1;
        if depth > self.cfg.encode_max_depth || self.slots + 3 > MAX_C_STACK {
            return Err(raise(format!(
                "Cannot serialise, excessive nesting ({depth})"
            )));
        }
        let open = match array_length(&t, self.cfg)? {
            Some(len) if len > 0 => {
                self.out.push(b'[');
                Open::Array { t, next: 1, len }
            }
            _ => {
                self.out.push(b'{');
                Open::Object {
                    pairs: t.pairs::<Value, Value>(),
                    first: true,
                }
            }
        };
        self.slots += open.slots();
        self.open.push(open);
        Ok(())
    }

    /// Writes the next item of the innermost open container, or closes it.
    fn step(&mut self) -> Outcome<()> {
        let Some(top) = self.open.last_mut() else {
            return Ok(());
        };
        let item = match top {
            Open::Array { t, next, len } => {
                if *next > *len {
                    None
                } else {
                    if *next > 1 {
                        self.out.push(b',');
                    }
                    let v: Value = t.raw_get(*next)?;
                    *next += 1;
                    Some(v)
                }
            }
            Open::Object { pairs, first } => match pairs.next() {
                None => None,
                Some(pair) => {
                    let (key, v) = pair?;
                    if !*first {
                        self.out.push(b',');
                    }
                    *first = false;
                    write_key(&mut self.out, self.cfg, &key)?;
                    Some(v)
                }
            },
        };
        match item {
            Some(v) => self.value(v),
            None => {
                if let Some(closed) = self.open.pop() {
                    self.slots -= closed.slots();
                    self.out.push(match closed {
                        Open::Array { .. } => b']',
                        Open::Object { .. } => b'}',
                    });
                }
                Ok(())
            }
        }
    }
}

/// An object key: strings as they are, numbers in quotes.
fn write_key(out: &mut Vec<u8>, cfg: &Config, key: &Value<'_>) -> Outcome<()> {
    match key {
        Value::String(s) => write_string(out, s.as_bytes()),
        Value::Integer(_) | Value::Number(_) => {
            let n = match key {
                Value::Integer(i) => *i as f64,
                Value::Number(n) => *n,
                _ => 0.0,
            };
            out.push(b'"');
            write_number(out, cfg, n, key)?;
            out.push(b'"');
        }
        other => {
            return Err(serialise_error(
                other,
                "table key must be a number or string",
            ))
        }
    }
    out.push(b':');
    Ok(())
}

fn encode<'lua>(lua: &'lua Lua, cfg: &Shared, args: Vec<Value<'lua>>) -> Outcome<MultiValue<'lua>> {
    if args.len() != 1 {
        return Err(arg_error(lua, 1, "expected 1 argument"));
    }
    let cfg = cfg.borrow().clone();
    let mut enc = Encoder {
        cfg: &cfg,
        out: Vec::new(),
        open: Vec::new(),
        slots: 1,
    };
    let mut args = args.into_iter();
    enc.value(args.next().unwrap_or(Value::Nil))?;
    while !enc.open.is_empty() {
        enc.step()?;
    }
    Ok(one(Value::String(lua.create_string(&enc.out)?)))
}

/// Checks a settings function's arguments (at most `count`).
fn settings_args<'lua>(lua: &Lua, args: &[Value<'lua>], count: usize) -> Outcome<()> {
    if args.len() > count {
        return Err(arg_error(lua, count + 1, "found too many arguments"));
    }
    Ok(())
}

fn is_given(args: &[Value<'_>], n: usize) -> bool {
    !matches!(args.get(n - 1), None | Some(Value::Nil))
}

/// An integer setting: set it when given (within `min..=max`), return it.
fn integer_option(
    lua: &Lua,
    args: &[Value<'_>],
    n: usize,
    setting: &mut i64,
    min: i64,
    max: i64,
) -> Outcome<Value<'static>> {
    if is_given(args, n) {
        let value = check_integer(lua, args, n)? as i32 as i64;
        if value < min || value > max {
            return Err(arg_error(
                lua,
                1,
                &format!("expected integer between {min} and {max}"),
            ));
        }
        *setting = value;
    }
    Ok(Value::Integer(*setting))
}

/// An enumerated setting: a boolean (true is `bool_true`) or one of
/// `options` by name; returned as a boolean when it is one.
fn enum_option<'lua>(
    lua: &'lua Lua,
    args: &[Value<'lua>],
    n: usize,
    setting: &mut u8,
    options: &[&str],
    bool_true: u8,
) -> Outcome<Value<'lua>> {
    if is_given(args, n) {
        match &args[n - 1] {
            Value::Boolean(b) => *setting = u8::from(*b) * bool_true,
            _ => {
                let name = check_bytes(lua, args, n)?;
                // Compared as C strings: up to the first zero byte.
                let name = name.as_bytes();
                let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
                let Some(index) = options.iter().position(|o| o.as_bytes() == name) else {
                    let shown = String::from_utf8_lossy(name);
                    return Err(arg_error(lua, n, &format!("invalid option '{shown}'")));
                };
                *setting = index as u8;
            }
        }
    }
    if *setting == 0 || *setting == bool_true {
        Ok(Value::Boolean(*setting != 0))
    } else {
        let name = options.get(usize::from(*setting)).copied().unwrap_or("");
        Ok(Value::String(lua.create_string(name)?))
    }
}

const ON_OFF: &[&str] = &["off", "on"];

/// A boolean setting kept as `bool`.
fn flag_option<'lua>(
    lua: &'lua Lua,
    args: &[Value<'lua>],
    n: usize,
    setting: &mut bool,
) -> Outcome<Value<'lua>> {
    let mut raw = u8::from(*setting);
    let out = enum_option(lua, args, n, &mut raw, ON_OFF, 1)?;
    *setting = raw != 0;
    Ok(out)
}

/// A settings function: checks the argument count, then runs `f`.
type Setter = for<'l> fn(&'l Lua, &[Value<'l>], &mut Config) -> Outcome<MultiValue<'l>>;

const SETTERS: &[(&str, usize, Setter)] = &[
    ("encode_sparse_array", 3, |lua, a, c| {
        let convert = flag_option(lua, a, 1, &mut c.sparse_convert)?;
        let ratio = integer_option(lua, a, 2, &mut c.sparse_ratio, 0, i64::from(i32::MAX))?;
        let safe = integer_option(lua, a, 3, &mut c.sparse_safe, 0, i64::from(i32::MAX))?;
        Ok(MultiValue::from_vec(vec![convert, ratio, safe]))
    }),
    ("encode_max_depth", 1, |lua, a, c| {
        let max = i64::from(i32::MAX);
        integer_option(lua, a, 1, &mut c.encode_max_depth, 1, max).map(one)
    }),
    ("decode_max_depth", 1, |lua, a, c| {
        let max = i64::from(i32::MAX);
        integer_option(lua, a, 1, &mut c.decode_max_depth, 1, max).map(one)
    }),
    ("encode_number_precision", 1, |lua, a, c| {
        integer_option(lua, a, 1, &mut c.precision, 1, 14).map(one)
    }),
    ("encode_keep_buffer", 1, |lua, a, c| {
        flag_option(lua, a, 1, &mut c.keep_buffer).map(one)
    }),
    ("encode_invalid_numbers", 1, |lua, a, c| {
        let options = &["off", "on", "null"];
        enum_option(lua, a, 1, &mut c.encode_invalid, options, 1).map(one)
    }),
    ("decode_invalid_numbers", 1, |lua, a, c| {
        flag_option(lua, a, 1, &mut c.decode_invalid).map(one)
    }),
];

/// Builds a `cjson` table with its own settings.
pub(super) fn module<'lua>(lua: &'lua Lua, kit: &Kit) -> mlua::Result<Table<'lua>> {
    let cfg: Shared = Rc::new(RefCell::new(Config::default()));
    let table = lua.create_table()?;
    let c = cfg.clone();
    table.raw_set(
        "encode",
        kit.function(lua, move |lua, a| encode(lua, &c, a))?,
    )?;
    let c = cfg.clone();
    let decoder = kit.function(lua, move |lua, a| {
        let settings = c.borrow().clone();
        decode::decode(lua, &settings, a)
    })?;
    table.raw_set("decode", decoder)?;
    for &(name, count, setter) in SETTERS {
        let c = cfg.clone();
        let f = kit.function(lua, move |lua, a| {
            settings_args(lua, &a, count)?;
            let mut settings = c.borrow().clone();
            let out = setter(lua, &a, &mut settings)?;
            *c.borrow_mut() = settings;
            Ok(out)
        })?;
        table.raw_set(name, f)?;
    }
    // `cjson.new()` gives another table with its own default settings
    // (not read-only: Redis protects only what exists when scripts start).
    let new = kit.function(lua, |lua, _| {
        let kit = Kit;
        Ok(one(Value::Table(module(lua, &kit)?)))
    })?;
    table.raw_set("new", new)?;
    table.raw_set("null", null())?;
    table.raw_set("_NAME", "cjson")?;
    table.raw_set("_VERSION", "2.1.0")?;
    Ok(table)
}
