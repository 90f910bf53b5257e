//! Conversions between RESP and Lua values, as Redis 7.0 makes them: a
//! command's reply (RESP2, or RESP3 after `redis.setresp(3)`) becomes Lua
//! values, and the script's result becomes the client's reply.

use mlua::{Lua, Table, Value};

use crate::resp::reply::Protocol;
use crate::resp::ReplyBuf;

/// Deepest nesting converted; deeper (or cyclic) tables end in an error
/// element rather than exhausting the stack.
const MAX_DEPTH: usize = 256;

/// Parses the reply at `buf[*at..]` into a Lua value, as Redis 7.0 does
/// for `redis.call`: integer to number, bulk to string, nil bulk or array
/// to `false`, array to table, status to `{ok=...}`, error to
/// `{err=...}`; and after `redis.setresp(3)` map to `{map={k=v}}`, set to
/// `{set={member=true}}`, double to `{double=n}`, null to nil, boolean to
/// a boolean, big number to `{big_number=s}`, verbatim string to
/// `{verbatim_string={format=f, string=s}}` (attributes are skipped).
pub fn resp_to_lua<'lua>(lua: &'lua Lua, buf: &[u8], at: &mut usize) -> mlua::Result<Value<'lua>> {
    let line = next_line(buf, at)?;
    let (tag, rest) = line.split_first().ok_or_else(bad)?;
    let wrap = |field: &str, value: Value<'lua>| -> mlua::Result<Value<'lua>> {
        let t = lua.create_table()?;
        t.raw_set(field, value)?;
        Ok(Value::Table(t))
    };
    match tag {
        b'+' => wrap("ok", Value::String(lua.create_string(rest)?)),
        b'-' => {
            // The command that replied the error has counted it already.
            let t = lua.create_table()?;
            t.raw_set("err", lua.create_string(rest)?)?;
            t.raw_set(COUNTED, true)?;
            Ok(Value::Table(t))
        }
        b':' => Ok(Value::Number(number(rest)? as f64)),
        b'$' | b'=' => {
            let Some(data) = blob(buf, at, rest)? else {
                return Ok(Value::Boolean(false));
            };
            if *tag == b'$' {
                return Ok(Value::String(lua.create_string(data)?));
            }
            let (format, text) = (
                data.get(..3).unwrap_or_default(),
                data.get(4..).unwrap_or_default(),
            );
            let t = lua.create_table()?;
            t.raw_set("format", lua.create_string(format)?)?;
            t.raw_set("string", lua.create_string(text)?)?;
            wrap("verbatim_string", Value::Table(t))
        }
        b'*' | b'~' | b'%' | b'|' | b'>' => aggregate(lua, buf, at, *tag, rest),
        b',' => {
            let text = std::str::from_utf8(rest).map_err(|_| bad())?;
            let n = match text {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                _ => text.parse().map_err(|_| bad())?,
            };
            wrap("double", Value::Number(n))
        }
        b'_' => Ok(Value::Nil),
        b'#' => Ok(Value::Boolean(rest == b"t")),
        b'(' => wrap("big_number", Value::String(lua.create_string(rest)?)),
        _ => Err(bad()),
    }
}

/// A bulk or verbatim payload (`None` for a nil bulk).
fn blob<'b>(buf: &'b [u8], at: &mut usize, len: &[u8]) -> mlua::Result<Option<&'b [u8]>> {
    let n = number(len)?;
    if n < 0 {
        return Ok(None);
    }
    let end = at.checked_add(n as usize).ok_or_else(bad)?;
    let data = buf.get(*at..end).ok_or_else(bad)?;
    *at = end + 2;
    Ok(Some(data))
}

/// Arrays, sets, maps; an attribute is read and the reply after it
/// returned instead.
fn aggregate<'lua>(
    lua: &'lua Lua,
    buf: &[u8],
    at: &mut usize,
    tag: u8,
    len: &[u8],
) -> mlua::Result<Value<'lua>> {
    let n = number(len)?;
    if n < 0 {
        return Ok(Value::Boolean(false));
    }
    let t = lua.create_table()?;
    match tag {
        b'%' | b'|' => {
            for _ in 0..n {
                let key = resp_to_lua(lua, buf, at)?;
                let value = resp_to_lua(lua, buf, at)?;
                t.raw_set(key, value)?;
            }
            if tag == b'|' {
                return resp_to_lua(lua, buf, at);
            }
            let out = lua.create_table()?;
            out.raw_set("map", t)?;
            Ok(Value::Table(out))
        }
        b'~' => {
            for _ in 0..n {
                t.raw_set(resp_to_lua(lua, buf, at)?, true)?;
            }
            let out = lua.create_table()?;
            out.raw_set("set", t)?;
            Ok(Value::Table(out))
        }
        _ => {
            for i in 0..n {
                t.raw_set(i + 1, resp_to_lua(lua, buf, at)?)?;
            }
            Ok(Value::Table(t))
        }
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
/// `double`, `big_number`, `verbatim_string`, `map` or `set` to those
/// replies, any other table to an array of its items up to the first nil;
/// booleans as the script's protocol (`redis.setresp`) says: RESP2 `true`
/// is 1 and `false` null, RESP3 gives booleans; nil is null.
///
/// Every error written is added to `errors` with whether it was counted
/// already (an error a command replied, passed on): the caller counts the
/// others in errorstats, as Redis counts each error reply once.
pub fn lua_to_reply(
    value: &Value<'_>,
    reply: &mut ReplyBuf,
    depth: usize,
    lua_resp3: bool,
    errors: &mut Vec<(String, bool)>,
) {
    match value {
        Value::String(s) => reply.bulk(s.as_bytes()),
        Value::Integer(n) => reply.int(*n),
        Value::Number(n) => reply.int(truncate(*n)),
        Value::Boolean(b) if lua_resp3 => boolean(reply, *b),
        Value::Boolean(true) => reply.int(1),
        Value::Table(_) if depth >= MAX_DEPTH => {
            let text = "ERR reached lua stack limit";
            reply.error(text);
            errors.push((text.to_string(), false));
        }
        Value::Table(t) => table_to_reply(t, reply, depth, lua_resp3, errors),
        // A `redis.call` failure caught with Lua's `pcall`.
        Value::Error(e) => {
            let text = super::engine::rust_error_text(e);
            reply.error(&text);
            errors.push((text, false));
        }
        _ => reply.null(),
    }
}

fn boolean(reply: &mut ReplyBuf, b: bool) {
    let text: &[u8] = match (reply.proto == Protocol::Resp3, b) {
        (true, true) => b"#t\r\n",
        (true, false) => b"#f\r\n",
        (false, true) => b":1\r\n",
        (false, false) => b":0\r\n",
    };
    reply.buf.extend_from_slice(text);
}

/// The field marking an error table whose error was counted in errorstats
/// when a command replied it (Redis 7.0 gives scripts the same field).
pub const COUNTED: &str = "ignore_error_stats_update";

/// Whether error table `t` was counted already.
pub fn counted(t: &Table<'_>) -> bool {
    matches!(t.raw_get::<_, Value>(COUNTED), Ok(Value::Boolean(true)))
}

/// The string field `name` of `t`, if it is one.
fn string_field<'lua>(t: &Table<'lua>, name: &str) -> Option<mlua::String<'lua>> {
    match t.raw_get::<_, Value>(name) {
        Ok(Value::String(s)) => Some(s),
        _ => None,
    }
}

fn table_to_reply(
    t: &Table<'_>,
    reply: &mut ReplyBuf,
    depth: usize,
    lua_resp3: bool,
    errors: &mut Vec<(String, bool)>,
) {
    if let Some(s) = string_field(t, "err") {
        let text = String::from_utf8_lossy(s.as_bytes()).into_owned();
        reply.error(&text);
        errors.push((text, counted(t)));
        return;
    }
    if let Some(s) = string_field(t, "ok") {
        let text = String::from_utf8_lossy(s.as_bytes()).replace(['\r', '\n'], " ");
        reply.simple(&text);
        return;
    }
    if let Ok(Value::Number(n)) = t.raw_get::<_, Value>("double") {
        reply.double(n);
        return;
    }
    if let Ok(Value::Integer(n)) = t.raw_get::<_, Value>("double") {
        reply.double(n as f64);
        return;
    }
    if let Some(s) = string_field(t, "big_number") {
        let text = String::from_utf8_lossy(s.as_bytes()).replace(['\r', '\n'], " ");
        if reply.proto == Protocol::Resp3 {
            reply
                .buf
                .extend_from_slice(format!("({text}\r\n").as_bytes());
        } else {
            reply.bulk(text.as_bytes());
        }
        return;
    }
    if let Ok(Value::Table(v)) = t.raw_get::<_, Value>("verbatim_string") {
        if let (Some(format), Some(text)) = (string_field(&v, "format"), string_field(&v, "string"))
        {
            verbatim(reply, format.as_bytes(), text.as_bytes());
            return;
        }
    }
    if let Ok(Value::Table(m)) = t.raw_get::<_, Value>("map") {
        let pairs: Vec<(Value, Value)> = m.pairs::<Value, Value>().filter_map(Result::ok).collect();
        reply.map(pairs.len());
        for (k, v) in &pairs {
            lua_to_reply(k, reply, depth + 1, lua_resp3, errors);
            lua_to_reply(v, reply, depth + 1, lua_resp3, errors);
        }
        return;
    }
    if let Ok(Value::Table(set)) = t.raw_get::<_, Value>("set") {
        let members: Vec<Value> = set
            .pairs::<Value, Value>()
            .filter_map(|p| p.ok().map(|(k, _)| k))
            .collect();
        reply.set(members.len());
        for m in &members {
            lua_to_reply(m, reply, depth + 1, lua_resp3, errors);
        }
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
        lua_to_reply(item, reply, depth + 1, lua_resp3, errors);
    }
}

/// A verbatim string: RESP3's `=` with its format, RESP2's bulk.
fn verbatim(reply: &mut ReplyBuf, format: &[u8], text: &[u8]) {
    if reply.proto != Protocol::Resp3 {
        reply.bulk(text);
        return;
    }
    let mut format = format.to_vec();
    format.resize(3, b' ');
    reply
        .buf
        .extend_from_slice(format!("={}\r\n", text.len() + 4).as_bytes());
    reply.buf.extend_from_slice(&format);
    reply.buf.push(b':');
    reply.buf.extend_from_slice(text);
    reply.buf.extend_from_slice(b"\r\n");
}

/// A Lua number as Redis turns it into an integer reply: truncated
/// towards zero (saturating where it does not fit).
fn truncate(n: f64) -> i64 {
    n as i64
}
