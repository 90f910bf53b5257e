//! The Lua interpreter behind EVAL: one Lua 5.1 state per event-loop
//! thread, the script cache (SHA1 of the body to compiled function), the
//! sandbox the scripts run in, and how a script's failure is worded.

use std::cell::RefCell;
use std::collections::HashMap;

use mlua::{Function, Lua, LuaOptions, MultiValue, RegistryKey, StdLib, Table, Value};

/// Registry name of the table the scripts' globals are read from.
pub const BASE: &str = "ferrite.base";
/// Registry name of the read-only proxy each script runs with as `_G`.
const ENV: &str = "ferrite.env";
/// The chunk name every script is compiled under, as Redis names it.
pub const CHUNK: &str = "@user_script";
/// The chunk name of function libraries (FUNCTION LOAD).
pub const FUNCTION_CHUNK: &str = "@user_function";

/// Builds the sandbox: reads of names that do not exist and every write of
/// a global fail, as in Redis 7.0, where the globals table is read-only.
/// `loadstring` compiles source (never bytecode) into the sandbox. Redis's Lua
/// has read-only tables; here the protected tables (the globals, `redis`)
/// show one read-only table as their metatable (`ro_meta`), which
/// `setmetatable` refuses to replace, so each trick fails with Redis's
/// "Attempt to modify a readonly table".
const SANDBOX: &str = r#"
local base = ...
local function readonly()
  error("Attempt to modify a readonly table", 2)
end
local ro_meta = {}
setmetatable(ro_meta, { __newindex = readonly, __metatable = false })
local raw_setmetatable = setmetatable
rawset(base, "setmetatable", function(t, mt)
  if getmetatable(t) == ro_meta then
    error("Attempt to modify a readonly table", 2)
  end
  return raw_setmetatable(t, mt)
end)
local redis = rawget(base, "redis")
rawset(base, "redis", raw_setmetatable({}, {
  __index = redis, __newindex = readonly, __metatable = ro_meta,
}))
-- A name the scripts read is looked up through two tables (the proxy,
-- then `base`) without calling any Lua function; only a name `base` does
-- not hold reaches `missing`, which the VM calls from the script's own
-- frame, so level 2 is the script's line.
raw_setmetatable(base, {
  __index = function(_, name)
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end,
})
local env = {}
raw_setmetatable(env, {
  __index = base,
  __newindex = readonly,
  __metatable = ro_meta,
})
rawset(base, "_G", env)
local raw_loadstring = loadstring
rawset(base, "loadstring", function(code, name)
  -- Source only, compiled into the sandbox: never precompiled bytecode.
  if type(code) == "string" and code:byte(1) == 27 then
    return nil, "binary code is not allowed"
  end
  local f, err = raw_loadstring(code, name)
  if f then setfenv(f, env) end
  return f, err
end)
return env, ro_meta, redis
"#;

/// Registry name of the metatable protected tables show.
pub const RO_META: &str = "ferrite.ro_meta";
/// Registry name of the `redis` table itself (scripts see a read-only
/// view of it).
pub const REDIS_API: &str = "ferrite.redis_api";

thread_local! {
    static LUA: RefCell<Option<Lua>> = const { RefCell::new(None) };
}

/// A per-thread interpreter, made on first use: EVAL's here, the
/// functions' in `library.rs`.
pub type Slot = std::thread::LocalKey<RefCell<Option<Lua>>>;

/// Runs `f` with the interpreter in `slot`, made by `make` on first use.
pub fn with_slot<R>(
    slot: &'static Slot,
    make: fn() -> mlua::Result<Lua>,
    f: impl FnOnce(&Lua) -> mlua::Result<R>,
) -> mlua::Result<R> {
    slot.with(|cell| {
        let mut held = cell.try_borrow_mut().map_err(mlua::Error::external)?;
        if held.is_none() {
            *held = Some(make()?);
        }
        match held.as_ref() {
            Some(lua) => f(lua),
            None => Err(mlua::Error::runtime("no Lua state")),
        }
    })
}

/// Drops the interpreter in `slot`; the next use makes a fresh one.
pub fn clear_slot(slot: &'static Slot) {
    slot.with(|cell| {
        if let Ok(mut held) = cell.try_borrow_mut() {
            *held = None;
        }
    });
}

/// Runs `f` with this thread's interpreter, creating it on first use.
pub fn with_lua<R>(f: impl FnOnce(&Lua) -> mlua::Result<R>) -> mlua::Result<R> {
    with_slot(&LUA, new_state, f)
}

/// Drops every cached script and starts a fresh interpreter (SCRIPT FLUSH).
pub fn reset() {
    clear_slot(&LUA);
}

/// What every run reaches without a lookup by name: registry references
/// made once per interpreter (its app data).
pub struct Handles {
    /// The error handler given to `xpcall`.
    handler: RegistryKey,
    /// Lua's own `xpcall`.
    xpcall: RegistryKey,
    /// Wraps a function and its two arguments in a closure without
    /// arguments, for Lua 5.1's `xpcall`, which passes none.
    apply: RegistryKey,
}

/// EVAL's interpreter only (its app data): the script cache, and the
/// `KEYS` and `ARGV` tables, refilled for every script rather than made
/// anew. Redis makes new ones; reusing them cannot be told apart, as a
/// script has nowhere to keep a reference to them from one run to the
/// next (the globals and the libraries are read-only).
struct EvalState {
    /// Lowercase SHA1 to compiled script.
    scripts: HashMap<String, Cached>,
    keys: RegistryKey,
    argv: RegistryKey,
}

/// A cached script: its compiled function and its shebang flags.
struct Cached {
    function: RegistryKey,
    flags: u32,
}

/// A fresh EVAL interpreter: [`new_interpreter`], an empty cache and
/// `KEYS` and `ARGV`.
pub fn new_state() -> mlua::Result<Lua> {
    let lua = new_interpreter()?;
    let state = {
        let base: Table = lua.named_registry_value(BASE)?;
        let keys = lua.create_table()?;
        let argv = lua.create_table()?;
        base.raw_set("KEYS", keys.clone())?;
        base.raw_set("ARGV", argv.clone())?;
        EvalState {
            scripts: HashMap::new(),
            keys: lua.create_registry_value(keys)?,
            argv: lua.create_registry_value(argv)?,
        }
    };
    lua.set_app_data(state);
    Ok(lua)
}

/// An interpreter with the libraries Redis offers scripts and the
/// sandbox, for EVAL or for functions.
pub fn new_interpreter() -> mlua::Result<Lua> {
    let lua = Lua::new_with(
        StdLib::TABLE | StdLib::STRING | StdLib::MATH,
        LuaOptions::default(),
    )?;
    prepare(&lua)?;
    Ok(lua)
}

/// Builds the sandbox's globals, the cache and the error handler.
fn prepare(lua: &Lua) -> mlua::Result<()> {
    let base = lua.create_table()?;
    for pair in lua.globals().pairs::<Value, Value>() {
        let (name, value) = pair?;
        base.raw_set(name, value)?;
    }
    for name in [
        "loadstring",
        "loadfile",
        "dofile",
        "load",
        "print",
        "module",
        "require",
    ] {
        base.raw_set(name, Value::Nil)?;
    }
    base.raw_set("redis", super::api::redis_table(lua)?)?;
    super::libs::register(lua, &base)?;
    let (env, ro_meta, redis): (Table, Table, Table) =
        lua.load(SANDBOX).set_name("=sandbox").call(base.clone())?;
    lua.set_named_registry_value(RO_META, ro_meta)?;
    lua.set_named_registry_value(REDIS_API, redis)?;
    lua.set_named_registry_value(BASE, base)?;
    lua.set_named_registry_value(ENV, env)?;
    let apply = lua
        .load("local f, a, b = ... return function() return f(a, b) end")
        .set_name("=apply")
        .into_function()?;
    let xpcall: Function = lua.globals().raw_get("xpcall")?;
    let handles = Handles {
        handler: lua.create_registry_value(lua.create_function(error_handler)?)?,
        xpcall: lua.create_registry_value(xpcall)?,
        apply: lua.create_registry_value(apply)?,
    };
    lua.set_app_data(handles);
    Ok(())
}

/// The scripts in this thread's cache and its interpreter's memory in
/// bytes, for INFO memory; both 0 while no script made an interpreter.
/// INFO must not make one: its tens of kilobytes would appear in
/// `used_memory` right after the INFO that reported it, and a client
/// that sets `maxmemory` a little above that figure would see keys
/// evicted for memory no data took.
pub fn cache_figures() -> (usize, usize) {
    LUA.with(|cell| {
        let Ok(held) = cell.try_borrow() else {
            return (0, 0);
        };
        let Some(lua) = held.as_ref() else {
            return (0, 0);
        };
        let count = lua
            .app_data_ref::<EvalState>()
            .map_or(0, |state| state.scripts.len());
        (count, lua.used_memory())
    })
}

/// The lowercase hex SHA1 of `body`, the name scripts are cached under.
pub fn sha1_hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

/// Whether a script with this SHA1 (lowercase) is cached.
pub fn exists(lua: &Lua, sha: &str) -> bool {
    lua.app_data_ref::<EvalState>()
        .is_some_and(|state| state.scripts.contains_key(sha))
}

fn no_state() -> mlua::Error {
    mlua::Error::runtime("not EVAL's interpreter")
}

/// Compiles and caches `body` unless cached; `Err` is the reply text.
pub fn load(lua: &Lua, body: &[u8]) -> Result<String, String> {
    let sha = sha1_hex(body);
    if exists(lua, &sha) {
        return Ok(sha);
    }
    let (flags, shebang_len) = super::flags::shebang(body).map_err(|e| format!("ERR {e}"))?;
    // The shebang's line feed stays, so line numbers are the body's.
    let code = body.get(shebang_len..).unwrap_or_default();
    let env: Table = lua.named_registry_value(ENV).map_err(internal)?;
    let compiled = lua
        .load(code)
        .set_name(CHUNK)
        .set_environment(env)
        .into_function();
    let function = match compiled {
        Ok(f) => f,
        Err(mlua::Error::SyntaxError { message, .. }) => {
            return Err(format!(
                "ERR Error compiling script (new function): {message}"
            ));
        }
        Err(e) => return Err(format!("ERR Error compiling script (new function): {e}")),
    };
    let function = lua.create_registry_value(function).map_err(internal)?;
    let mut state = lua
        .app_data_mut::<EvalState>()
        .ok_or_else(|| internal(no_state()))?;
    state
        .scripts
        .insert(sha.clone(), Cached { function, flags });
    Ok(sha)
}

/// The flags of the cached script `sha`, if it is cached.
pub fn cached_flags_opt(lua: &Lua, sha: &str) -> Option<u32> {
    let state = lua.app_data_ref::<EvalState>()?;
    state.scripts.get(sha).map(|cached| cached.flags)
}

/// The cached function for `sha` and its flags, if it is cached.
pub fn cached<'lua>(lua: &'lua Lua, sha: &str) -> mlua::Result<Option<(Function<'lua>, u32)>> {
    let state = lua.app_data_ref::<EvalState>().ok_or_else(no_state)?;
    match state.scripts.get(sha) {
        Some(cached) => Ok(Some((lua.registry_value(&cached.function)?, cached.flags))),
        None => Ok(None),
    }
}

/// Sets `KEYS` and `ARGV` for the next script: the same two tables,
/// emptied (whatever the last script added to them included) and filled.
pub fn set_arguments(lua: &Lua, keys: &[&[u8]], argv: &[&[u8]]) -> mlua::Result<()> {
    let (keys_table, argv_table): (Table, Table) = {
        let state = lua.app_data_ref::<EvalState>().ok_or_else(no_state)?;
        (
            lua.registry_value(&state.keys)?,
            lua.registry_value(&state.argv)?,
        )
    };
    refill(lua, &keys_table, keys)?;
    refill(lua, &argv_table, argv)
}

/// Empties `table` and fills it with `items`. (mlua's `Table::clear`
/// leaves a value on the Lua stack in its version here, so it is not
/// used.)
fn refill(lua: &Lua, table: &Table<'_>, items: &[&[u8]]) -> mlua::Result<()> {
    for i in 1..=table.raw_len() {
        table.raw_set(i, Value::Nil)?;
    }
    // Whatever else the last script stored in it (rare): one `next`
    // finds none in the common case, without collecting anything.
    if table.clone().pairs::<Value, Value>().next().is_some() {
        let rest = table
            .clone()
            .pairs::<Value, Value>()
            .map(|pair| pair.map(|(key, _)| key))
            .collect::<mlua::Result<Vec<Value>>>()?;
        for key in rest {
            table.raw_set(key, Value::Nil)?;
        }
    }
    for (i, item) in items.iter().enumerate() {
        // Text goes onto the Lua stack directly; other bytes through a
        // Lua string handle first (mlua's one way for them).
        match std::str::from_utf8(item) {
            Ok(text) => table.raw_set(i + 1, text)?,
            Err(_) => table.raw_set(i + 1, lua.create_string(item)?)?,
        }
    }
    Ok(())
}

/// Calls `function` under the error handler: `Ok` holds what it returned,
/// `Err` the error reply text (`... script: <sha>, on @user_script:N.`).
pub fn call<'lua>(
    lua: &'lua Lua,
    function: Function<'lua>,
    sha: &str,
    args: MultiValue<'lua>,
) -> Result<Value<'lua>, Failure> {
    let fetched = || -> mlua::Result<(Function, Function, Function)> {
        let handles = lua.app_data_ref::<Handles>().ok_or_else(no_state)?;
        Ok((
            lua.registry_value(&handles.handler)?,
            lua.registry_value(&handles.xpcall)?,
            lua.registry_value(&handles.apply)?,
        ))
    };
    let (handler, xpcall, apply) = fetched().map_err(|e| Failure::new(internal(e)))?;
    // Lua 5.1's xpcall passes no arguments: a closure carries them.
    let function = if args.is_empty() {
        function
    } else {
        apply
            .call::<_, Function>((function, args))
            .map_err(|e| Failure::new(internal(e)))?
    };
    let mut out = xpcall
        .call::<_, MultiValue>((function, handler))
        .map_err(|e| Failure::new(internal(e)))?
        .into_iter();
    match out.next() {
        Some(Value::Boolean(true)) => Ok(out.next().unwrap_or(Value::Nil)),
        _ => {
            let err = out.next().unwrap_or(Value::Nil);
            let counted = matches!(&err, Value::Table(t) if super::convert::counted(t));
            Err(Failure {
                text: failure_text(err, sha),
                counted,
            })
        }
    }
}

/// A script that failed: Redis's wording of the error, and whether
/// errorstats counted it already (an error a command replied, raised by
/// `redis.call`), so that it is counted once.
#[derive(Debug)]
pub struct Failure {
    pub text: String,
    pub counted: bool,
}

impl Failure {
    fn new(text: String) -> Failure {
        Failure {
            text,
            counted: false,
        }
    }
}

/// Words a script's failure as Redis 7.0 does.
fn failure_text(err: Value<'_>, sha: &str) -> String {
    let Value::Table(t) = err else {
        return format!("ERR {} script: {sha}", value_text(&err));
    };
    let text = t
        .raw_get::<_, Value>("err")
        .map(|v| value_text(&v))
        .unwrap_or_default();
    let source = t
        .raw_get::<_, Option<String>>("source")
        .ok()
        .flatten()
        .unwrap_or_else(|| CHUNK.to_string());
    match t.raw_get::<_, Option<i64>>("line") {
        Ok(Some(line)) => format!("{text} script: {sha}, on {source}:{line}."),
        _ => format!("{text} script: {sha}"),
    }
}

/// A Lua string or number as text; anything else as Lua would name it.
fn value_text(v: &Value<'_>) -> String {
    match v {
        Value::String(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
        Value::Number(n) => n.to_string(),
        Value::Integer(n) => n.to_string(),
        Value::Error(e) => e.to_string(),
        other => other.type_name().to_string(),
    }
}

/// The `xpcall` handler: turns any error into a table `{err=..., line=N}`
/// (a string error gets the `ERR` code), `N` the line of the script that
/// was running when it failed.
fn error_handler<'lua>(lua: &'lua Lua, err: Value<'lua>) -> mlua::Result<Table<'lua>> {
    let out = lua.create_table()?;
    match &err {
        Value::Table(t) if t.contains_key("err")? => {
            out.raw_set("err", t.raw_get::<_, Value>("err")?)?;
            let counted = super::convert::COUNTED;
            out.raw_set(counted, t.raw_get::<_, Value>(counted)?)?;
        }
        Value::Error(e) => {
            out.raw_set("err", rust_error_text(e))?;
            out.raw_set(super::convert::COUNTED, error_counted(e))?;
        }
        other => out.raw_set("err", format!("ERR {}", value_text(other)))?,
    }
    for level in 0..64 {
        let Some(frame) = lua.inspect_stack(level) else {
            break;
        };
        let source = frame.source().source;
        if let Some(name @ (CHUNK | FUNCTION_CHUNK)) = source.as_deref() {
            out.raw_set("source", name)?;
            out.raw_set("line", frame.curr_line())?;
            break;
        }
    }
    Ok(out)
}

/// The text of an error a Rust function of the `redis` table raised:
/// a failed `redis.call`'s reply as it is, anything else with `ERR`.
pub fn rust_error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => rust_error_text(cause),
        mlua::Error::ExternalError(inner) => {
            match inner.downcast_ref::<super::api::CallFailure>() {
                Some(failure) => failure.0.clone(),
                None => format!("ERR {inner}"),
            }
        }
        mlua::Error::RuntimeError(text) => format!("ERR {text}"),
        other => format!("ERR {other}"),
    }
}

/// Whether a Rust-side error is a `redis.call` failure whose error the
/// command counted already.
fn error_counted(e: &mlua::Error) -> bool {
    match e {
        mlua::Error::CallbackError { cause, .. } => error_counted(cause),
        mlua::Error::ExternalError(inner) => inner
            .downcast_ref::<super::api::CallFailure>()
            .is_some_and(|failure| failure.1),
        _ => false,
    }
}

fn internal(e: mlua::Error) -> String {
    format!("ERR {e}")
}
