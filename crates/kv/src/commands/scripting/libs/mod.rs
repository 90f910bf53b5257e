//! The Lua libraries Redis 7.0 gives scripts besides Lua's own: `cjson`,
//! `cmsgpack`, `bit` and `struct`, written in Rust to behave as the C
//! libraries Redis embeds do (same encodings, same limits, same error
//! texts).
//!
//! Each library function is a Rust (so C-level) function, as in Redis: a
//! script's frame stays on the stack even for `return cjson.decode(x)`,
//! so a failure names the script's line. A message the C library raises
//! with `luaL_error` carries the caller's position (`user_script:3: ...`,
//! nothing under `pcall`); errors the C library gets from the Lua core
//! (`table index is nil`) carry none. The scripts' `pcall` and `xpcall`
//! hand these failures over as plain strings, as Lua does for the C
//! libraries' errors.
//!
//! The library tables are read-only, as Redis 7.0 marks every table it
//! reaches from the globals: writing a field fails with
//! `Attempt to modify a readonly table`.

mod bit;
mod cjson;
mod cmsgpack;
mod structs;

use std::borrow::Cow;

use mlua::{Function, Lua, MultiValue, Table, Value};

/// Lua 5.1's `LUAI_MAXCSTACK`: how many stack slots one C function may use.
/// The C libraries fail with `stack overflow` past it, which bounds their
/// recursion; ours count slots the same way.
pub(crate) const MAX_C_STACK: usize = 8000;

/// 2^63, the first double past the 64-bit integers.
pub(crate) const TWO_63: f64 = 9_223_372_036_854_775_808.0;

/// Builds the libraries and stores them, read-only, in `globals`, with
/// the `pcall` and `xpcall` that turn their failures into strings.
pub fn register(lua: &Lua, globals: &Table<'_>) -> mlua::Result<()> {
    let kit = Kit;
    globals.raw_set("cjson", readonly(lua, cjson::module(lua, &kit)?)?)?;
    globals.raw_set("struct", readonly(lua, structs::module(lua, &kit)?)?)?;
    globals.raw_set("cmsgpack", readonly(lua, cmsgpack::module(lua, &kit)?)?)?;
    globals.raw_set("bit", readonly(lua, bit::module(lua, &kit)?)?)?;
    protected_calls(lua, globals)
}

/// A library function's failure as it travels through Lua: its full
/// message (position included).
#[derive(Debug)]
struct LibraryError(Vec<u8>);

impl std::fmt::Display for LibraryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

impl std::error::Error for LibraryError {}

/// The library failure inside `e`, if it is one.
fn library_error(e: &mlua::Error) -> Option<&LibraryError> {
    match e {
        mlua::Error::CallbackError { cause, .. } => library_error(cause),
        mlua::Error::ExternalError(inner) => inner.downcast_ref::<LibraryError>(),
        _ => None,
    }
}

/// Wraps the sandbox's `pcall` and `xpcall` so that a library failure
/// reaches the script as the string the C library would have raised.
fn protected_calls(lua: &Lua, globals: &Table<'_>) -> mlua::Result<()> {
    const WRAP: &str = r#"
local pcall, xpcall, plain = ...
local function finish(ok, ...)
  if ok then return true, ... end
  return false, plain((...))
end
local function safe_pcall(f, ...)
  return finish(pcall(f, ...))
end
local function safe_xpcall(f, handler, ...)
  return xpcall(f, function(e) return handler(plain(e)) end, ...)
end
return safe_pcall, safe_xpcall
"#;
    let plain = lua.create_function(|lua, v: Value| match &v {
        Value::Error(e) => match library_error(e) {
            Some(failure) => Ok(Value::String(lua.create_string(&failure.0)?)),
            None => Ok(v),
        },
        _ => Ok(v),
    })?;
    let pcall: Value = globals.raw_get("pcall")?;
    let xpcall: Value = globals.raw_get("xpcall")?;
    let (safe_pcall, safe_xpcall): (Function, Function) = lua
        .load(WRAP)
        .set_name("=libs")
        .call((pcall, xpcall, plain))?;
    globals.raw_set("pcall", safe_pcall)?;
    globals.raw_set("xpcall", safe_xpcall)?;
    Ok(())
}

/// Why a library function failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// A message for the script; `positioned` when the C library raises it
    /// with `luaL_error` (the caller's position goes in front).
    Raise { text: Vec<u8>, positioned: bool },
    /// The interpreter itself failed (memory): passed on as it is.
    Lua(mlua::Error),
}

impl From<mlua::Error> for Failure {
    fn from(e: mlua::Error) -> Self {
        Failure::Lua(e)
    }
}

/// What a library function gives back.
pub(crate) type Outcome<T> = Result<T, Failure>;

/// A `luaL_error`-style failure: the caller's position goes in front.
pub(crate) fn raise(text: impl Into<Vec<u8>>) -> Failure {
    Failure::Raise {
        text: text.into(),
        positioned: true,
    }
}

/// A failure raised by the Lua core inside the C library (no position).
pub(crate) fn raise_bare(text: impl Into<Vec<u8>>) -> Failure {
    Failure::Raise {
        text: text.into(),
        positioned: false,
    }
}

/// Registers functions as the C libraries' functions behave.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Kit;

impl Kit {
    /// A library function running `f` over its arguments.
    pub(crate) fn function<'lua, F>(&self, lua: &'lua Lua, f: F) -> mlua::Result<Function<'lua>>
    where
        F: for<'l> Fn(&'l Lua, Vec<Value<'l>>) -> Outcome<MultiValue<'l>> + 'static,
    {
        lua.create_function(move |lua, args: MultiValue| match f(lua, args.into_vec()) {
            Ok(values) => Ok(values),
            Err(Failure::Lua(e)) => Err(e),
            Err(Failure::Raise { text, positioned }) => {
                let mut message = if positioned {
                    position(lua)
                } else {
                    Vec::new()
                };
                message.extend_from_slice(&text);
                Err(mlua::Error::external(LibraryError(message)))
            }
        })
    }
}

/// `luaL_where(L, 1)`: `source:line: ` of the function that called the
/// running library function, empty when that is not Lua code.
fn position(lua: &Lua) -> Vec<u8> {
    let Some(frame) = lua.inspect_stack(1) else {
        return Vec::new();
    };
    let line = frame.curr_line();
    if line <= 0 {
        return Vec::new();
    }
    let source = frame.source();
    let short = source.short_src.as_deref().unwrap_or("?");
    format!("{short}:{line}: ").into_bytes()
}

/// A proxy of `table` whose fields read through and cannot be written.
fn readonly<'lua>(lua: &'lua Lua, table: Table<'lua>) -> mlua::Result<Table<'lua>> {
    const PROXY: &str = r#"
local lib, error, setmetatable = ...
return setmetatable({}, {
  __index = lib,
  __newindex = function() error("Attempt to modify a readonly table", 2) end,
  __metatable = false,
})
"#;
    let globals = lua.globals();
    let error: Function = globals.raw_get("error")?;
    let setmetatable: Function = globals.raw_get("setmetatable")?;
    lua.load(PROXY)
        .set_name("=libs")
        .call((table, error, setmetatable))
}

/// One value as a single-value result.
pub(crate) fn one(value: Value<'_>) -> MultiValue<'_> {
    MultiValue::from_vec(vec![value])
}

/// The name Lua gives the running library function in argument errors:
/// the field it was called through, `?` when unknown (under `pcall`).
fn function_name(lua: &Lua) -> String {
    // Level 0 is the running Rust function, whose name its caller knows.
    lua.inspect_stack(0)
        .and_then(|frame| frame.names().name.map(Cow::into_owned))
        .unwrap_or_else(|| "?".to_string())
}

/// `luaL_argerror`: `bad argument #n to 'name' (message)`.
pub(crate) fn arg_error(lua: &Lua, n: usize, message: &str) -> Failure {
    raise(format!(
        "bad argument #{n} to '{}' ({message})",
        function_name(lua)
    ))
}

/// `luaL_typerror`: `bad argument #n to 'name' (T expected, got U)`.
pub(crate) fn type_error(lua: &Lua, args: &[Value<'_>], n: usize, expected: &str) -> Failure {
    let got = type_name(args.get(n - 1));
    arg_error(lua, n, &format!("{expected} expected, got {got}"))
}

/// The type name Lua 5.1 reports for an argument (`no value` if absent).
pub(crate) fn type_name(v: Option<&Value<'_>>) -> &'static str {
    match v {
        None => "no value",
        Some(Value::Nil) => "nil",
        Some(Value::Boolean(_)) => "boolean",
        Some(Value::LightUserData(_)) | Some(Value::UserData(_)) | Some(Value::Error(_)) => {
            "userdata"
        }
        Some(Value::Integer(_)) | Some(Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Table(_)) => "table",
        Some(Value::Function(_)) => "function",
        Some(Value::Thread(_)) => "thread",
    }
}

/// `lua_tonumber`: numbers, and strings that read as numbers.
pub(crate) fn to_number(lua: &Lua, v: Option<&Value<'_>>) -> Outcome<Option<f64>> {
    Ok(match v {
        None | Some(Value::Nil) => None,
        Some(Value::Integer(i)) => Some(*i as f64),
        Some(Value::Number(n)) => Some(*n),
        Some(Value::String(_)) => v
            .cloned()
            .map(|v| lua.coerce_number(v))
            .transpose()?
            .flatten(),
        Some(_) => None,
    })
}

/// `luaL_checknumber`.
pub(crate) fn check_number(lua: &Lua, args: &[Value<'_>], n: usize) -> Outcome<f64> {
    to_number(lua, args.get(n - 1))?.ok_or_else(|| type_error(lua, args, n, "number"))
}

/// Lua 5.1's double to integer conversion, a C cast: out of range reads as
/// the lowest integer, as on x86-64.
pub(crate) fn to_integer(n: f64) -> i64 {
    if n.is_nan() || !(-TWO_63..TWO_63).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

/// `luaL_checkinteger`.
pub(crate) fn check_integer(lua: &Lua, args: &[Value<'_>], n: usize) -> Outcome<i64> {
    check_number(lua, args, n).map(to_integer)
}

/// `luaL_optinteger`: absent or nil reads as `default`.
pub(crate) fn opt_integer(lua: &Lua, args: &[Value<'_>], n: usize, default: i64) -> Outcome<i64> {
    match args.get(n - 1) {
        None | Some(Value::Nil) => Ok(default),
        _ => check_integer(lua, args, n),
    }
}

/// `luaL_checklstring`: strings, and numbers as Lua writes them.
pub(crate) fn check_bytes<'lua>(
    lua: &'lua Lua,
    args: &[Value<'lua>],
    n: usize,
) -> Outcome<mlua::String<'lua>> {
    let text = match args.get(n - 1) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(v @ (Value::Integer(_) | Value::Number(_))) => lua.coerce_string(v.clone())?,
        _ => None,
    };
    text.ok_or_else(|| type_error(lua, args, n, "string"))
}

/// C's `%.<precision>g`, as the C libraries print numbers.
pub(crate) fn format_g(value: f64, precision: usize) -> String {
    if value.is_nan() {
        return if value.is_sign_negative() {
            "-nan"
        } else {
            "nan"
        }
        .into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.into();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let precision = precision.max(1);
    // Rust rounds the exact binary value to the requested digits as printf
    // does; only the layout differs.
    let scientific = format!("{:.*e}", precision - 1, value);
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i64 = exponent.parse().unwrap_or(0);
    if exponent < -4 || exponent >= precision as i64 {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!(
            "{}e{sign}{:02}",
            strip_zeros(mantissa),
            exponent.unsigned_abs()
        )
    } else {
        let decimals = (precision as i64 - 1 - exponent).max(0) as usize;
        strip_zeros(&format!("{value:.decimals$}")).to_string()
    }
}

/// `%g` drops trailing zeros of the fraction, and a point left alone.
fn strip_zeros(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::format_g;

    #[test]
    fn format_g_matches_printf() {
        assert_eq!(format_g(0.1, 14), "0.1");
        assert_eq!(format_g(100.0, 14), "100");
        assert_eq!(format_g(1e15, 14), "1e+15");
        assert_eq!(format_g(123456789012345.0, 14), "1.2345678901234e+14");
        assert_eq!(format_g(0.0003, 14), "0.0003");
        assert_eq!(format_g(0.00003, 14), "3e-05");
        assert_eq!(format_g(1023.2, 14), "1023.2");
        assert_eq!(format_g(-5000.0, 14), "-5000");
        assert_eq!(format_g(1.0 / 3.0, 14), "0.33333333333333");
        assert_eq!(format_g(99999999999999.5, 14), "1e+14");
    }
}
