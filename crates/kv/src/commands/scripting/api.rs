//! The `redis` table scripts see: `call` and `pcall` (reaching the
//! running script's caller, `run.rs`), the reply helpers, `sha1hex`, `log` and the
//! replication constants.

use mlua::{Function, Lua, MultiValue, Table, Value};

/// The error `redis.call` raises for a failed command: its reply text,
/// which the script's error handler reports as it is, and whether
/// errorstats counted it already (the command replied it).
#[derive(Debug)]
pub struct CallFailure(pub String, pub bool);

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CallFailure {}

impl CallFailure {
    fn uncounted(text: String) -> CallFailure {
        CallFailure(text, false)
    }
}

/// Builds the `redis` table.
pub fn redis_table(lua: &Lua) -> mlua::Result<Table<'_>> {
    let redis = lua.create_table()?;
    // `call` and `pcall` are C functions, so the script's frame stays on
    // the stack (even for `return redis.call(...)`) for the error handler
    // to name the line. Made once: they reach the running script through
    // `run.rs`'s scoped slot.
    redis.raw_set("call", lua.create_function(super::run::call)?)?;
    redis.raw_set("pcall", lua.create_function(super::run::pcall)?)?;
    let acl_check = lua.create_function(|lua, args: MultiValue| {
        if !super::running() {
            return Err(mlua::Error::external(CallFailure::uncounted(
                "ERR redis.acl_check_cmd can only be called inside a script invocation".into(),
            )));
        }
        super::run::acl_check(lua, args)
    })?;
    redis.raw_set("acl_check_cmd", acl_check)?;
    redis.raw_set(
        "sha1hex",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(mlua::Error::runtime("wrong number of arguments"));
            }
            let value = args.into_iter().next().unwrap_or(Value::Nil);
            let text = lua.coerce_string(value)?;
            let bytes = text.as_ref().map(|s| s.as_bytes()).unwrap_or_default();
            Ok(super::engine::sha1_hex(bytes))
        })?,
    )?;
    redis.raw_set("error_reply", reply_maker(lua, "err")?)?;
    redis.raw_set("status_reply", reply_maker(lua, "ok")?)?;
    redis.raw_set("log", lua.create_function(log)?)?;
    redis.raw_set("set_repl", lua.create_function(set_repl)?)?;
    redis.raw_set("setresp", lua.create_function(setresp)?)?;
    // The debugger's entry points: without SCRIPT DEBUG running (which
    // Ferrite does not offer) `breakpoint` answers false and `debug` does
    // nothing, as in Redis when no debugger runs.
    redis.raw_set(
        "breakpoint",
        lua.create_function(|_, _: MultiValue| Ok(false))?,
    )?;
    redis.raw_set("debug", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    redis.raw_set(
        "replicate_commands",
        lua.create_function(|_, _: MultiValue| Ok(true))?,
    )?;
    for (name, value) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
    ] {
        redis.raw_set(name, value)?;
    }
    redis.raw_set("REDIS_VERSION", crate::commands::REDIS_VERSION)?;
    redis.raw_set(
        "REDIS_VERSION_NUM",
        version_num(crate::commands::REDIS_VERSION),
    )?;
    Ok(redis)
}

/// `redis.error_reply(text)` / `redis.status_reply(text)`: a table with
/// the one field `field` holding `text`.
fn reply_maker<'lua>(lua: &'lua Lua, field: &'static str) -> mlua::Result<Function<'lua>> {
    lua.create_function(move |lua, args: MultiValue| {
        let mut args = args.into_iter();
        let t = lua.create_table()?;
        // A misuse is answered with an error table, not raised.
        match (args.next(), args.next()) {
            (Some(Value::String(text)), None) if field == "err" => {
                t.raw_set(field, lua.create_string(error_text(text.as_bytes()))?)?
            }
            (Some(value @ Value::String(_)), None) => t.raw_set(field, value)?,
            _ => t.raw_set("err", "ERR wrong number or type of arguments")?,
        }
        Ok(t)
    })
}

/// An error reply's text as Redis 7.0 words what a script hands to
/// `redis.error_reply`: a leading `-` is dropped, and text without a space
/// (no error code) gets the code `ERR` in front.
fn error_text(given: &[u8]) -> Vec<u8> {
    let text = given.strip_prefix(b"-").unwrap_or(given);
    if text.contains(&b' ') {
        return text.to_vec();
    }
    [b"ERR ".as_slice(), text].concat()
}

/// `redis.log(level, message...)`: to the server's log (tracing).
fn log(lua: &Lua, args: MultiValue) -> mlua::Result<()> {
    if args.len() < 2 {
        return Err(mlua::Error::runtime(
            "redis.log() requires two arguments or more.",
        ));
    }
    let mut args = args.into_iter();
    let level = match args.next() {
        Some(Value::Integer(n)) => n,
        Some(Value::Number(n)) => n as i64,
        _ => {
            return Err(mlua::Error::runtime(
                "First argument must be a number (log level).",
            ))
        }
    };
    if !(0..=3).contains(&level) {
        return Err(mlua::Error::runtime("Invalid debug level."));
    }
    let mut message = Vec::new();
    for (i, part) in args.enumerate() {
        if i > 0 {
            message.push(b' ');
        }
        if let Some(s) = lua.coerce_string(part)? {
            message.extend_from_slice(s.as_bytes());
        }
    }
    let text = String::from_utf8_lossy(&message);
    match level {
        0 | 1 => tracing::debug!(target: "script", "{text}"),
        2 => tracing::info!(target: "script", "{text}"),
        _ => tracing::warn!(target: "script", "{text}"),
    }
    Ok(())
}

thread_local! {
    /// The running script's `redis.set_repl` flags (`REPL_ALL` at start).
    static REPL: std::cell::Cell<i64> = const { std::cell::Cell::new(REPL_ALL) };
}

const REPL_AOF: i64 = 1;
const REPL_ALL: i64 = 3;

thread_local! {
    /// The protocol the running script's commands reply in
    /// (`redis.setresp`): 2 at start.
    static RESP3: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Resets the replication flags and the protocol for a script starting.
pub fn reset_repl() {
    REPL.with(|r| r.set(REPL_ALL));
    RESP3.with(|r| r.set(false));
}

/// Whether the running script asked for RESP3 replies.
pub fn resp3() -> bool {
    RESP3.with(std::cell::Cell::get)
}

/// `redis.setresp(2|3)`.
fn setresp(_: &Lua, args: MultiValue) -> mlua::Result<()> {
    if args.len() != 1 {
        return Err(mlua::Error::runtime(
            "redis.setresp() requires one argument.",
        ));
    }
    let version = match args.into_iter().next() {
        Some(Value::Integer(n)) => n,
        Some(Value::Number(n)) => n as i64,
        _ => 0,
    };
    if version != 2 && version != 3 {
        return Err(mlua::Error::runtime("RESP version must be 2 or 3."));
    }
    RESP3.with(|r| r.set(version == 3));
    Ok(())
}

/// Whether the running script's commands go to the log now: Ferrite's
/// log feeds both persistence and replicas, so only `REPL_AOF` (in
/// `REPL_AOF` or `REPL_ALL`) keeps them.
pub fn logging() -> bool {
    REPL.with(|r| r.get() & REPL_AOF != 0)
}

/// `REDIS_VERSION_NUM`: `0x00MMmmpp` of `M.m.p`.
fn version_num(version: &str) -> i64 {
    version
        .split('.')
        .take(3)
        .fold(0, |acc, part| (acc << 8) | part.parse::<i64>().unwrap_or(0))
}

/// `redis.set_repl(flags)`: which of the following commands are logged.
fn set_repl(_: &Lua, args: MultiValue) -> mlua::Result<()> {
    if args.len() != 1 {
        return Err(mlua::Error::runtime(
            "redis.set_repl() requires two arguments.",
        ));
    }
    let flags = match args.into_iter().next() {
        Some(Value::Integer(n)) => n,
        Some(Value::Number(n)) => n as i64,
        _ => -1,
    };
    if !(0..=3).contains(&flags) {
        return Err(mlua::Error::runtime(
            "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
        ));
    }
    REPL.with(|r| r.set(flags));
    Ok(())
}
