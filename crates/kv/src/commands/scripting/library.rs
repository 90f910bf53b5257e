//! Function libraries (FUNCTION LOAD): the registry that is part of the
//! dataset ([`Libraries`], in the server's state, logged and rewritten),
//! and their compiled form in a Lua interpreter of their own.
//!
//! A library's code runs once at load time with a restricted `redis`
//! table (`register_function`, `log`, the constants: no `redis.call`);
//! the functions it registers run later with the full one. Both see the
//! same read-only globals, whose lookups are switched between the two
//! sets as Redis switches its globals' `__index`.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use mlua::{Function, HookTriggers, Lua, MultiValue, Table, Value};

use super::engine;
use super::flags;

/// What FUNCTION LIST shows of a function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionMeta {
    /// `description` given to `register_function`.
    pub description: Option<Vec<u8>>,
    /// Its flags ([`flags`]).
    pub flags: u32,
}

/// One library: its code as loaded (header included) and its functions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Library {
    pub code: Vec<u8>,
    pub functions: BTreeMap<String, FunctionMeta>,
}

/// Every loaded library; function names are unique across them.
#[derive(Clone, Debug, Default)]
pub struct Libraries {
    libs: BTreeMap<String, Library>,
    /// Function name (lowercase: FCALL's names are case-insensitive, as
    /// in Redis) to the library defining it.
    owners: HashMap<String, String>,
}

impl Libraries {
    /// The libraries by name.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Library)> {
        self.libs.iter()
    }

    /// Number of libraries.
    pub fn len(&self) -> usize {
        self.libs.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.libs.is_empty()
    }

    /// Number of functions, all libraries together.
    pub fn function_count(&self) -> usize {
        self.owners.len()
    }

    /// The library called `name`.
    pub fn get(&self, name: &str) -> Option<&Library> {
        self.libs.get(name)
    }

    /// The library defining function `name` (in any case), and the
    /// function: its name as registered and its metadata.
    pub fn function(&self, name: &str) -> Option<(&str, &Library, &str, &FunctionMeta)> {
        let lib = self.owners.get(&name.to_ascii_lowercase())?;
        let library = self.libs.get(lib)?;
        let (registered, meta) = library
            .functions
            .iter()
            .find(|(f, _)| f.eq_ignore_ascii_case(name))?;
        Some((lib, library, registered, meta))
    }

    /// Adds (or replaces) library `name`; the caller checked collisions.
    pub fn insert(&mut self, name: String, library: Library) {
        self.remove(&name);
        for function in library.functions.keys() {
            self.owners
                .insert(function.to_ascii_lowercase(), name.clone());
        }
        self.libs.insert(name, library);
    }

    /// Removes library `name`; whether it existed.
    pub fn remove(&mut self, name: &str) -> bool {
        let Some(old) = self.libs.remove(name) else {
            return false;
        };
        for function in old.functions.keys() {
            self.owners.remove(&function.to_ascii_lowercase());
        }
        true
    }

    /// The first function of `library` another library (not `except`)
    /// already defines.
    pub fn collision<'a>(&self, library: &'a Library, except: Option<&str>) -> Option<&'a str> {
        library
            .functions
            .keys()
            .find(|f| {
                self.owners
                    .get(&f.to_ascii_lowercase())
                    .is_some_and(|owner| Some(owner.as_str()) != except)
            })
            .map(String::as_str)
    }
}

/// Registry name of the compiled libraries: name to `{code=, fns=}`.
const COMPILED: &str = "ferrite.libraries";
/// Registry name of the table `register_function` fills while loading.
const LOADING: &str = "ferrite.loading";
/// Registry name of the function that switches the globals' lookups.
const SWITCH: &str = "ferrite.switch";
/// Registry name of the libraries' globals.
const ENV: &str = "ferrite.function_env";
/// How long a library's code may run at load time, as in Redis.
const LOAD_TIMEOUT_MS: u128 = 500;
const NAME_RULE: &str = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// The globals of libraries: read-only, looking names up in the load-time
/// set (only `redis`, restricted) or the run-time set, as
/// `switch(true|false)` chooses.
const SANDBOX: &str = r#"
local run_base, load_redis, ro_meta = ...
local load_base = { redis = load_redis }
local current = run_base
local removed = { loadstring = true }
local function missing(_, name)
  error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
end
local function readonly()
  error("Attempt to modify a readonly table", 2)
end
setmetatable(load_redis, { __index = missing, __newindex = readonly, __metatable = ro_meta })
local env = {}
setmetatable(env, {
  __index = function(_, name)
    local value = rawget(current, name)
    if value ~= nil or removed[name] then return value end
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end,
  __newindex = readonly,
  __metatable = ro_meta,
})
local function switch(loading)
  if loading then current = load_base else current = run_base end
end
return env, switch
"#;

thread_local! {
    static LUA: RefCell<Option<Lua>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's function interpreter.
pub fn with_lua<R>(f: impl FnOnce(&Lua) -> mlua::Result<R>) -> mlua::Result<R> {
    engine::with_slot(&LUA, new_state, f)
}

/// Drops every compiled library (FUNCTION FLUSH).
pub fn reset() {
    engine::clear_slot(&LUA);
}

fn new_state() -> mlua::Result<Lua> {
    let lua = engine::new_interpreter()?;
    let base: Table = lua.named_registry_value(engine::BASE)?;
    let load_redis = load_redis_table(&lua)?;
    let ro_meta: Table = lua.named_registry_value(engine::RO_META)?;
    let (env, switch): (Table, Function) = lua
        .load(SANDBOX)
        .set_name("=function_sandbox")
        .call((base, load_redis, ro_meta))?;
    lua.set_named_registry_value(ENV, env)?;
    lua.set_named_registry_value(SWITCH, switch)?;
    lua.set_named_registry_value(COMPILED, lua.create_table()?)?;
    Ok(lua)
}

/// The `redis` table a library's code sees while it loads.
fn load_redis_table(lua: &Lua) -> mlua::Result<Table<'_>> {
    let full: Table = lua.named_registry_value(engine::REDIS_API)?;
    let t = lua.create_table()?;
    for pair in full.pairs::<String, Value>() {
        let (name, value) = pair?;
        if name == "log" || name.starts_with("LOG_") || name.starts_with("REDIS_VERSION") {
            t.raw_set(name, value)?;
        }
    }
    t.raw_set("register_function", lua.create_function(register_function)?)?;
    Ok(t)
}

/// Splits a library's header (`#!lua name=NAME`): its name and the length
/// of the header line. `Err` is the error text without its code.
pub fn parse_header(code: &[u8]) -> Result<(String, usize), String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    let Some(len) = code.iter().position(|&b| b == b'\n') else {
        return Err("Invalid library metadata".into());
    };
    let Some(parts) = flags::split_args(&code[..len]) else {
        return Err("Invalid library metadata".into());
    };
    let mut parts = parts.iter().map(Vec::as_slice);
    let Some(engine) = parts.next() else {
        return Err("Invalid library metadata".into());
    };
    let mut name: Option<String> = None;
    for part in parts {
        let text = String::from_utf8_lossy(part);
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(
                    "Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            name = Some(text[5..].to_string());
            continue;
        }
        return Err(format!("Invalid metadata value given: {text}"));
    }
    let Some(name) = name else {
        return Err("Library name was not given".into());
    };
    if !valid_name(&name) {
        return Err(NAME_RULE.into());
    }
    let engine = &engine[2..];
    if !engine.eq_ignore_ascii_case(b"lua") {
        return Err(format!(
            "Engine '{}' not found",
            String::from_utf8_lossy(engine)
        ));
    }
    Ok((name, len))
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Compiles library `code` and runs its load-time code: its name and
/// what it registered (also kept compiled in this thread's interpreter
/// until [`commit`]). `timeout` bounds the load-time run (not on replay).
/// `Err` is the error text without its code.
pub fn compile(code: &[u8], timeout: bool) -> Result<(String, Library), String> {
    let (name, header) = parse_header(code)?;
    let body = code.get(header..).unwrap_or_default();
    let compiled = with_lua(|lua| load(lua, body, timeout));
    let functions = compiled.map_err(|e| e.to_string())??;

    Ok((
        name,
        Library {
            code: code.to_vec(),
            functions,
        },
    ))
}

/// Runs a library's body in the load-time sandbox; leaves what it
/// registered in the LOADING table for [`commit`].
fn load(
    lua: &Lua,
    body: &[u8],
    timeout: bool,
) -> mlua::Result<Result<BTreeMap<String, FunctionMeta>, String>> {
    let env: Table = lua.named_registry_value(ENV)?;
    let chunk = match lua
        .load(body)
        .set_name(engine::FUNCTION_CHUNK)
        .set_environment(env)
        .into_function()
    {
        Ok(f) => f,
        Err(mlua::Error::SyntaxError { message, .. }) => {
            return Ok(Err(format!("Error compiling function: {message}")))
        }
        Err(e) => return Ok(Err(format!("Error compiling function: {e}"))),
    };
    let switch: Function = lua.named_registry_value(SWITCH)?;
    lua.set_named_registry_value(LOADING, lua.create_table()?)?;
    switch.call::<_, ()>(true)?;
    if timeout {
        let started = Instant::now();
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(100_000),
            move |_, _| {
                if started.elapsed().as_millis() > LOAD_TIMEOUT_MS {
                    return Err(mlua::Error::runtime("FUNCTION LOAD timeout"));
                }
                Ok(())
            },
        );
    }
    let ran = chunk.call::<_, ()>(());
    lua.remove_hook();
    switch.call::<_, ()>(false)?;
    if let Err(e) = ran {
        lua.unset_named_registry_value(LOADING)?;
        return Ok(Err(format!(
            "Error registering functions: {}",
            load_error(&e)
        )));
    }
    let loading: Table = lua.named_registry_value(LOADING)?;
    let mut out = BTreeMap::new();
    for pair in loading.pairs::<String, Table>() {
        let (name, entry) = pair?;
        let description: Option<mlua::String> = entry.raw_get("description")?;
        out.insert(
            name,
            FunctionMeta {
                description: description.map(|d| d.as_bytes().to_vec()),
                flags: entry.raw_get("flags")?,
            },
        );
    }
    Ok(Ok(out))
}

/// The text of a failure while a library loads, as Redis words it.
fn load_error(e: &mlua::Error) -> String {
    match e {
        // mlua appends a traceback to a Lua error: Redis shows none.
        mlua::Error::RuntimeError(text) => {
            let text = text.split("\nstack traceback:").next().unwrap_or_default();
            format!("ERR {text}")
        }
        mlua::Error::CallbackError { cause, .. } => load_error(cause),
        other => engine::rust_error_text(other),
    }
}

/// Keeps what the last [`compile`] registered as library `name`'s
/// compiled functions, for FCALL.
pub fn commit(name: &str, code: &[u8]) -> mlua::Result<()> {
    with_lua(|lua| {
        let loading: Table = lua.named_registry_value(LOADING)?;
        let entry = lua.create_table()?;
        entry.raw_set("code", lua.create_string(code)?)?;
        entry.raw_set("fns", loading)?;
        let compiled: Table = lua.named_registry_value(COMPILED)?;
        compiled.raw_set(name, entry)?;
        lua.unset_named_registry_value(LOADING)
    })
}

/// The compiled function `function` of library `lib` (whose code is
/// `code`), compiling the library in this thread's interpreter first if
/// it has not got it (a library loaded on another thread, or replaced).
pub fn compiled<'lua>(
    lua: &'lua Lua,
    lib: &str,
    code: &[u8],
    function: &str,
) -> mlua::Result<Result<Function<'lua>, String>> {
    let compiled: Table = lua.named_registry_value(COMPILED)?;
    let current = match compiled.raw_get::<_, Option<Table>>(lib)? {
        Some(entry) if entry.raw_get::<_, mlua::String>("code")?.as_bytes() == code => entry,
        _ => {
            let (_, header) = match parse_header(code) {
                Ok(found) => found,
                Err(e) => return Ok(Err(format!("ERR {e}"))),
            };
            if let Err(e) = load(lua, code.get(header..).unwrap_or_default(), false)? {
                return Ok(Err(format!("ERR {e}")));
            }
            let loading: Table = lua.named_registry_value(LOADING)?;
            let entry = lua.create_table()?;
            entry.raw_set("code", lua.create_string(code)?)?;
            entry.raw_set("fns", loading)?;
            compiled.raw_set(lib, entry.clone())?;
            lua.unset_named_registry_value(LOADING)?;
            entry
        }
    };
    let fns: Table = current.raw_get("fns")?;
    let entry: Table = fns.raw_get(function)?;
    Ok(Ok(entry.raw_get("callback")?))
}

/// `redis.register_function(name, callback)` or
/// `redis.register_function{function_name=, callback=, flags=,
/// description=}`, at load time only.
fn register_function(lua: &Lua, args: MultiValue) -> mlua::Result<()> {
    let Ok(loading) = lua.named_registry_value::<Table>(LOADING) else {
        return Err(mlua::Error::runtime(
            "redis.register_function can only be called on FUNCTION LOAD command",
        ));
    };
    let (name, callback, description, flags) = match args.len() {
        1 => named_arguments(args.into_iter().next().unwrap_or(Value::Nil))?,
        2 => {
            let mut it = args.into_iter();
            let name = match it.next() {
                Some(Value::String(s)) => s.to_str()?.to_string(),
                Some(Value::Integer(n)) => n.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                _ => {
                    return Err(fail(
                        "first argument to redis.register_function must be a string",
                    ))
                }
            };
            let Some(Value::Function(f)) = it.next() else {
                return Err(fail(
                    "second argument to redis.register_function must be a function",
                ));
            };
            (name, f, None, 0)
        }
        _ => return Err(fail("wrong number of arguments to redis.register_function")),
    };
    if !valid_name(&name) {
        return Err(fail(NAME_RULE));
    }
    if loading.contains_key(name.as_str())? {
        return Err(fail("Function already exists in the library"));
    }
    let entry = lua.create_table()?;
    entry.raw_set("callback", callback)?;
    entry.raw_set("description", description)?;
    entry.raw_set("flags", flags)?;
    loading.raw_set(name, entry)
}

type Registered<'lua> = (String, Function<'lua>, Option<mlua::String<'lua>>, u32);

fn named_arguments(arg: Value<'_>) -> mlua::Result<Registered<'_>> {
    let Value::Table(t) = arg else {
        return Err(fail("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments)."));
    };
    let (mut name, mut callback, mut description, mut fflags) = (None, None, None, 0);
    for pair in t.pairs::<Value, Value>() {
        let (key, value) = pair?;
        let Value::String(key) = key else {
            return Err(fail(
                "named argument key given to redis.register_function is not a string",
            ));
        };
        match key.to_str()?.to_ascii_lowercase().as_str() {
            "function_name" => {
                match value {
                    Value::String(s) => name = Some(s.to_str()?.to_string()),
                    _ => return Err(fail(
                        "function_name argument given to redis.register_function must be a string",
                    )),
                }
            }
            "description" => {
                match value {
                    Value::String(s) => description = Some(s),
                    _ => return Err(fail(
                        "description argument given to redis.register_function must be a string",
                    )),
                }
            }
            "callback" => match value {
                Value::Function(f) => callback = Some(f),
                _ => {
                    return Err(fail(
                        "callback argument given to redis.register_function must be a function",
                    ))
                }
            },
            "flags" => {
                let Value::Table(list) = value else {
                    return Err(fail("flags argument to redis.register_function must be a table representing function flags"));
                };
                for item in list.sequence_values::<Value>() {
                    let known = match item? {
                        Value::String(s) => flags::by_name(&s.as_bytes().to_ascii_lowercase()),
                        _ => None,
                    };
                    fflags |= known.ok_or_else(|| fail("unknown flag given"))?;
                }
            }
            _ => return Err(fail("unknown argument given to redis.register_function")),
        }
    }
    let name =
        name.ok_or_else(|| fail("redis.register_function must get a function name argument"))?;
    let callback =
        callback.ok_or_else(|| fail("redis.register_function must get a callback argument"))?;
    Ok((name, callback, description, fflags))
}

fn fail(text: &str) -> mlua::Error {
    mlua::Error::runtime(text)
}
