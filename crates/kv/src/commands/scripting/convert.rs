//! Conversions between RESP and Lua values, as Redis 7.0 makes them for
//! scripts speaking RESP2: a command's reply becomes Lua values, and the
//! script's result becomes the client's reply.

use mlua::{Lua, Table, Value};

use crate::resp::ReplyBuf;

/// Deepest nesting converted; deeper (or cyclic) tables end in an error
/// element rather than exhausting the stack.
const MAX_DEPTH: usize = 256;

/// Parses the RESP2 reply at `buf[*at..]` into a Lua value: integer to
/// number, bulk to string, nil bulk or array to `false`, array to table,
/// status to `{ok=...}`, error to `{err=...}`.
pub fn resp_to_lua<'lua>(lua: &'lua Lua, buf: &[u8], at: &mut usize) -> mlua::Result<Value<'lua>> {
    let line = next_line(buf, at)?;
    let (tag, rest) = line.split_first().ok_or_else(bad)?;
    match tag {
        b'+' | b'-' => {
            let t = lua.create_table()?;
            let field = if *tag == b'+' { "ok" } else { "err" };
            t.raw_set(field, lua.create_string(rest)?)?;
            Ok(Value::Table(t))
        }
        b':' => Ok(Value::Number(number(rest)? as f64)),
        b'$' => {
            let n = number(rest)?;
            if n < 0 {
                return Ok(Value::Boolean(false));
            }
            let end = at.checked_add(n as usize).ok_or_else(bad)?;
            let data = buf.get(*at..end).ok_or_else(bad)?;
            *at = end + 2;
            Ok(Value::String(lua.create_string(data)?))
        }
        b'*' => {
            let n = number(rest)?;
            if n < 0 {
                return Ok(Value::Boolean(false));
            }
            let t = lua.create_table()?;
            for i in 0..n {
                t.raw_set(i + 1, resp_to_lua(lua, buf, at)?)?;
            }
            Ok(Value::Table(t))
        }
        _ => Err(bad()),
    }
}

fn next_line<'b>(buf: &'b [u8], at: &mut usize) -> mlua::Result<&'b [u8]> {
    let rest = buf.get(*at..).ok_or_else(bad)?;
    let len = rest.windows(2).position(|w| w == b"\r\n").ok_or_else(bad)?;
    *at += len + 2;
    Ok(&rest[..len])
}

fn number(text: &[u8]) -> mlua::Result<i64> {
    crate::types::number::parse_i64(text).ok_or_else(bad)
}

fn bad() -> mlua::Error {
    mlua::Error::runtime("malformed reply")
}

/// Writes a script's result to `reply`: number to integer (truncated),
/// string to bulk, a table with `err` to an error, with `ok` to a status,
/// any other table to an array of its items up to the first nil, `true`
/// to 1, `false` and nil to a null.
pub fn lua_to_reply(value: &Value<'_>, reply: &mut ReplyBuf, depth: usize) {
    match value {
        Value::String(s) => reply.bulk(s.as_bytes()),
        Value::Integer(n) => reply.int(*n),
        Value::Number(n) => reply.int(truncate(*n)),
        Value::Boolean(true) => reply.int(1),
        Value::Table(_) if depth >= MAX_DEPTH => reply.error("ERR reached lua stack limit"),
        Value::Table(t) => table_to_reply(t, reply, depth),
        // A `redis.call` failure caught with Lua's `pcall`.
        Value::Error(e) => reply.error(&super::engine::rust_error_text(e)),
        _ => reply.null(),
    }
}

fn table_to_reply(t: &Table<'_>, reply: &mut ReplyBuf, depth: usize) {
    if let Ok(Value::String(s)) = t.raw_get::<_, Value>("err") {
        reply.error(&String::from_utf8_lossy(s.as_bytes()));
        return;
    }
    if let Ok(Value::String(s)) = t.raw_get::<_, Value>("ok") {
        let text = String::from_utf8_lossy(s.as_bytes()).replace(['\r', '\n'], " ");
        reply.simple(&text);
        return;
    }
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<_, Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(v),
        }
    }
    reply.array(items.len());
    for item in &items {
        lua_to_reply(item, reply, depth + 1);
    }
}

/// A Lua number as Redis turns it into an integer reply: truncated
/// towards zero (saturating where it does not fit).
fn truncate(n: f64) -> i64 {
    n as i64
}
