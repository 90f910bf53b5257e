//! The command table: name, arity (Redis's convention: `n` exactly, `-n`
//! at least), flags, key positions, group and handler.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::flags::{ADMIN, DENYOOM, FAST, NOAUTH, NOQUEUE, RANDOM, READONLY, WRITE};
use super::{connection, hashes, keys, lists, server, sets, strings, transactions, zsets};
use super::{CmdResult, Ctx};
use crate::resp::Args;

/// A command handler.
pub type Handler = fn(&mut Ctx<'_>, &Args<'_>) -> CmdResult;

/// One command.
#[derive(Debug)]
pub struct CommandSpec {
    /// Lower-case name.
    pub name: &'static str,
    /// `n`: exactly n arguments (name included); `-n`: at least n.
    pub arity: i32,
    /// [`super::flags`] bits.
    pub flags: u32,
    /// First key, last key, step (COMMAND INFO).
    pub keys: (i32, i32, i32),
    /// Redis's command group.
    pub group: &'static str,
    /// One line for COMMAND DOCS.
    pub summary: &'static str,
    /// The implementation.
    pub handler: Handler,
}

impl CommandSpec {
    /// Whether `argc` arguments (name included) fit the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = i64::from(self.arity);
        if arity >= 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }
}

const W: u32 = WRITE | DENYOOM;
const WF: u32 = WRITE | DENYOOM | FAST;
const D: u32 = WRITE | FAST;
const R: u32 = READONLY;
const RF: u32 = READONLY | FAST;
const C: u32 = FAST;

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, $group:literal, $summary:literal, $handler:path) => {
        CommandSpec {
            name: $name,
            arity: $arity,
            flags: $flags,
            keys: $keys,
            group: $group,
            summary: $summary,
            handler: $handler,
        }
    };
}

const K1: (i32, i32, i32) = (1, 1, 1);
const KALL: (i32, i32, i32) = (1, -1, 1);
const K0: (i32, i32, i32) = (0, 0, 0);

/// Every command Ferrite implements, one per line so the table reads as a
/// table.
#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    // Strings.
    cmd!("get", 2, RF, K1, "string", "Returns the string value of a key.", strings::get),
    cmd!("set", -3, W, K1, "string", "Sets the string value of a key, with options.", strings::set),
    cmd!("setnx", 3, WF, K1, "string", "Sets a key only if it does not exist.", strings::setnx),
    cmd!("setex", 4, W, K1, "string", "Sets a key with an expiry in seconds.", strings::setex),
    cmd!("psetex", 4, W, K1, "string", "Sets a key with an expiry in milliseconds.", strings::psetex),
    cmd!("getset", 3, WF, K1, "string", "Sets a key and returns its old value.", strings::getset),
    cmd!("getdel", 2, D, K1, "string", "Returns a key's value and deletes it.", strings::getdel),
    cmd!("getex", -2, D, K1, "string", "Returns a key's value and changes its expiry.", strings::getex),
    cmd!("mget", -2, RF, KALL, "string", "Returns the values of keys.", strings::mget),
    cmd!("mset", -3, W, (1, -1, 2), "string", "Sets several keys.", strings::mset),
    cmd!("msetnx", -3, W, (1, -1, 2), "string", "Sets several keys only if none exists.", strings::msetnx),
    cmd!("incr", 2, WF, K1, "string", "Increments an integer by one.", strings::incr),
    cmd!("decr", 2, WF, K1, "string", "Decrements an integer by one.", strings::decr),
    cmd!("incrby", 3, WF, K1, "string", "Increments an integer.", strings::incrby),
    cmd!("decrby", 3, WF, K1, "string", "Decrements an integer.", strings::decrby),
    cmd!("incrbyfloat", 3, WF, K1, "string", "Increments a float.", strings::incrbyfloat),
    cmd!("append", 3, WF, K1, "string", "Appends to a string.", strings::append),
    cmd!("strlen", 2, RF, K1, "string", "Returns a string's length.", strings::strlen),
    cmd!("getrange", 4, R, K1, "string", "Returns a substring.", strings::getrange),
    cmd!("substr", 4, R, K1, "string", "Returns a substring (old name).", strings::getrange),
    cmd!("setrange", 4, W, K1, "string", "Overwrites part of a string.", strings::setrange),
    // Keys.
    cmd!("del", -2, WRITE, KALL, "keyspace", "Deletes keys.", keys::del),
    cmd!("unlink", -2, D, KALL, "keyspace", "Deletes keys.", keys::del),
    cmd!("exists", -2, RF, KALL, "keyspace", "Counts existing keys.", keys::exists),
    cmd!("touch", -2, RF, KALL, "keyspace", "Counts existing keys.", keys::touch),
    cmd!("type", 2, RF, K1, "keyspace", "Returns a key's type.", keys::type_),
    cmd!("rename", 3, WRITE, (1, 2, 1), "keyspace", "Renames a key.", keys::rename),
    cmd!("renamenx", 3, D, (1, 2, 1), "keyspace", "Renames a key if the new name is free.", keys::renamenx),
    cmd!("keys", 2, READONLY, K0, "keyspace", "Returns keys matching a pattern.", keys::keys),
    cmd!("scan", -2, READONLY, K0, "keyspace", "Iterates over keys.", keys::scan),
    cmd!("randomkey", 1, READONLY | RANDOM, K0, "keyspace", "Returns a random key.", keys::randomkey),
    cmd!("dbsize", 1, RF, K0, "server", "Returns the number of keys.", keys::dbsize),
    cmd!("expire", -3, D, K1, "keyspace", "Sets an expiry in seconds.", keys::expire),
    cmd!("pexpire", -3, D, K1, "keyspace", "Sets an expiry in milliseconds.", keys::pexpire),
    cmd!("expireat", -3, D, K1, "keyspace", "Sets an expiry as a Unix time.", keys::expireat),
    cmd!("pexpireat", -3, D, K1, "keyspace", "Sets an expiry as a Unix time in ms.", keys::pexpireat),
    cmd!("ttl", 2, RF, K1, "keyspace", "Returns the time to live in seconds.", keys::ttl),
    cmd!("pttl", 2, RF, K1, "keyspace", "Returns the time to live in ms.", keys::pttl),
    cmd!("expiretime", 2, RF, K1, "keyspace", "Returns the expiry as a Unix time.", keys::expiretime),
    cmd!("pexpiretime", 2, RF, K1, "keyspace", "Returns the expiry as a Unix time in ms.", keys::pexpiretime),
    cmd!("persist", 2, D, K1, "keyspace", "Removes an expiry.", keys::persist),
    // Hashes.
    cmd!("hset", -4, WF, K1, "hash", "Sets fields of a hash.", hashes::hset),
    cmd!("hmset", -4, WF, K1, "hash", "Sets fields of a hash (old form).", hashes::hmset),
    cmd!("hsetnx", 4, WF, K1, "hash", "Sets a field if it does not exist.", hashes::hsetnx),
    cmd!("hget", 3, RF, K1, "hash", "Returns a field's value.", hashes::hget),
    cmd!("hmget", -3, RF, K1, "hash", "Returns fields' values.", hashes::hmget),
    cmd!("hdel", -3, D, K1, "hash", "Deletes fields.", hashes::hdel),
    cmd!("hgetall", 2, R, K1, "hash", "Returns all fields and values.", hashes::hgetall),
    cmd!("hkeys", 2, R, K1, "hash", "Returns all fields.", hashes::hkeys),
    cmd!("hvals", 2, R, K1, "hash", "Returns all values.", hashes::hvals),
    cmd!("hlen", 2, RF, K1, "hash", "Returns the number of fields.", hashes::hlen),
    cmd!("hstrlen", 3, RF, K1, "hash", "Returns a value's length.", hashes::hstrlen),
    cmd!("hexists", 3, RF, K1, "hash", "Tells whether a field exists.", hashes::hexists),
    cmd!("hincrby", 4, WF, K1, "hash", "Increments an integer field.", hashes::hincrby),
    cmd!("hincrbyfloat", 4, WF, K1, "hash", "Increments a float field.", hashes::hincrbyfloat),
    cmd!("hrandfield", 2, READONLY | RANDOM, K1, "hash", "Returns a random field.", hashes::hrandfield),
    cmd!("hscan", -3, READONLY, K1, "hash", "Iterates over fields.", hashes::hscan),
    // Lists.
    cmd!("lpush", -3, WF, K1, "list", "Prepends elements.", lists::lpush),
    cmd!("rpush", -3, WF, K1, "list", "Appends elements.", lists::rpush),
    cmd!("lpushx", -3, WF, K1, "list", "Prepends if the list exists.", lists::lpushx),
    cmd!("rpushx", -3, WF, K1, "list", "Appends if the list exists.", lists::rpushx),
    cmd!("lpop", -2, D, K1, "list", "Removes and returns the first elements.", lists::lpop),
    cmd!("rpop", -2, D, K1, "list", "Removes and returns the last elements.", lists::rpop),
    cmd!("lrange", 4, R, K1, "list", "Returns a range of elements.", lists::lrange),
    cmd!("llen", 2, RF, K1, "list", "Returns the length.", lists::llen),
    cmd!("lindex", 3, R, K1, "list", "Returns an element by index.", lists::lindex),
    cmd!("lset", 4, W, K1, "list", "Sets an element by index.", lists::lset),
    cmd!("lrem", 4, WRITE, K1, "list", "Removes elements equal to a value.", lists::lrem),
    cmd!("ltrim", 4, WRITE, K1, "list", "Keeps only a range.", lists::ltrim),
    cmd!("linsert", 5, W, K1, "list", "Inserts before or after an element.", lists::linsert),
    // Sets.
    cmd!("sadd", -3, WF, K1, "set", "Adds members.", sets::sadd),
    cmd!("srem", -3, D, K1, "set", "Removes members.", sets::srem),
    cmd!("smembers", 2, R, K1, "set", "Returns all members.", sets::smembers),
    cmd!("sismember", 3, RF, K1, "set", "Tells whether a member exists.", sets::sismember),
    cmd!("smismember", -3, RF, K1, "set", "Tells whether members exist.", sets::smismember),
    cmd!("scard", 2, RF, K1, "set", "Returns the number of members.", sets::scard),
    cmd!("spop", -2, D | RANDOM, K1, "set", "Removes and returns random members.", sets::spop),
    cmd!("srandmember", -2, READONLY | RANDOM, K1, "set", "Returns random members.", sets::srandmember),
    cmd!("sinter", -2, R, KALL, "set", "Intersects sets.", sets::sinter),
    cmd!("sunion", -2, R, KALL, "set", "Unites sets.", sets::sunion),
    cmd!("sdiff", -2, R, KALL, "set", "Subtracts sets.", sets::sdiff),
    cmd!("sinterstore", -3, W, KALL, "set", "Stores an intersection.", sets::sinterstore),
    cmd!("sunionstore", -3, W, KALL, "set", "Stores a union.", sets::sunionstore),
    cmd!("sdiffstore", -3, W, KALL, "set", "Stores a difference.", sets::sdiffstore),
    cmd!("smove", 4, D, (1, 2, 1), "set", "Moves a member between sets.", sets::smove),
    cmd!("sscan", -3, READONLY, K1, "set", "Iterates over members.", sets::sscan),
    // Sorted sets.
    cmd!("zadd", -4, WF, K1, "sorted-set", "Adds members or updates scores.", zsets::zadd),
    cmd!("zincrby", 4, WF, K1, "sorted-set", "Increments a member's score.", zsets::zincrby),
    cmd!("zrem", -3, D, K1, "sorted-set", "Removes members.", zsets::zrem),
    cmd!("zscore", 3, RF, K1, "sorted-set", "Returns a member's score.", zsets::zscore),
    cmd!("zmscore", -3, RF, K1, "sorted-set", "Returns members' scores.", zsets::zmscore),
    cmd!("zcard", 2, RF, K1, "sorted-set", "Returns the number of members.", zsets::zcard),
    cmd!("zrank", 3, RF, K1, "sorted-set", "Returns a member's rank.", zsets::zrank),
    cmd!("zrevrank", 3, RF, K1, "sorted-set", "Returns a member's rank, highest first.", zsets::zrevrank),
    cmd!("zrange", -4, R, K1, "sorted-set", "Returns a range by rank, score or name.", zsets::zrange),
    cmd!("zrevrange", -4, R, K1, "sorted-set", "Returns a range by rank, highest first.", zsets::zrevrange),
    cmd!("zrangebyscore", -4, R, K1, "sorted-set", "Returns a range by score.", zsets::zrangebyscore),
    cmd!("zrevrangebyscore", -4, R, K1, "sorted-set", "Returns a range by score, highest first.", zsets::zrevrangebyscore),
    cmd!("zrangebylex", -4, R, K1, "sorted-set", "Returns a range by name.", zsets::zrangebylex),
    cmd!("zcount", 4, RF, K1, "sorted-set", "Counts members in a score range.", zsets::zcount),
    cmd!("zlexcount", 4, RF, K1, "sorted-set", "Counts members in a name range.", zsets::zlexcount),
    cmd!("zpopmin", -2, D, K1, "sorted-set", "Removes and returns the lowest members.", zsets::zpopmin),
    cmd!("zpopmax", -2, D, K1, "sorted-set", "Removes and returns the highest members.", zsets::zpopmax),
    cmd!("zscan", -3, READONLY, K1, "sorted-set", "Iterates over members.", zsets::zscan),
    // Transactions.
    cmd!("multi", 1, C | NOQUEUE, K0, "transactions", "Starts a transaction.", transactions::multi),
    cmd!("exec", 1, NOQUEUE, K0, "transactions", "Runs a transaction.", transactions::exec),
    cmd!("discard", 1, C | NOQUEUE, K0, "transactions", "Discards a transaction.", transactions::discard),
    cmd!("watch", -2, C | NOQUEUE, KALL, "transactions", "Watches keys for EXEC.", transactions::watch),
    cmd!("unwatch", 1, C | NOQUEUE, K0, "transactions", "Forgets watched keys.", transactions::unwatch),
    // Connection.
    cmd!("ping", -1, C, K0, "connection", "Returns PONG.", connection::ping),
    cmd!("echo", 2, C, K0, "connection", "Returns its argument.", connection::echo),
    cmd!("select", 2, C, K0, "connection", "Selects a database.", connection::select),
    cmd!("swapdb", 3, WRITE | FAST, K0, "server", "Swaps two databases.", connection::swapdb),
    cmd!("auth", -2, C | NOAUTH | NOQUEUE, K0, "connection", "Authenticates.", connection::auth),
    cmd!("hello", -1, C | NOAUTH | NOQUEUE, K0, "connection", "Handshakes and picks RESP2 or RESP3.", connection::hello),
    cmd!("quit", -1, C | NOAUTH | NOQUEUE, K0, "connection", "Closes the connection.", connection::quit),
    cmd!("reset", 1, C | NOAUTH | NOQUEUE, K0, "connection", "Resets the connection.", connection::reset),
    cmd!("client", -2, 0, K0, "connection", "Connection management.", connection::client),
    // Server.
    cmd!("info", -1, RANDOM, K0, "server", "Returns server information.", server::info),
    cmd!("config", -2, ADMIN, K0, "server", "Reads or changes the configuration.", server::config),
    cmd!("command", -1, RANDOM, K0, "server", "Describes commands.", server::command),
    cmd!("flushdb", -1, WRITE, K0, "server", "Deletes every key of the database.", server::flushdb),
    cmd!("flushall", -1, WRITE, K0, "server", "Deletes every key.", server::flushall),
    cmd!("time", 1, C | RANDOM, K0, "server", "Returns the server time.", server::time),
    cmd!("lastsave", 1, C | RANDOM, K0, "server", "Returns when data was last known durable.", server::lastsave),
    cmd!("shutdown", -1, ADMIN | NOQUEUE, K0, "server", "Flushes the log and stops.", server::shutdown),
    cmd!("bgrewriteaof", 1, ADMIN, K0, "server", "Rewrites the log (issue #5).", server::bgrewriteaof),
];

/// Longest command name, in bytes.
const NAME_LEN_MAX: usize = 32;

fn index() -> &'static HashMap<&'static str, &'static CommandSpec> {
    static INDEX: OnceLock<HashMap<&'static str, &'static CommandSpec>> = OnceLock::new();
    INDEX.get_or_init(|| COMMANDS.iter().map(|c| (c.name, c)).collect())
}

/// Finds a command by name, in any case.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    if name.len() > NAME_LEN_MAX {
        return None;
    }
    let mut lower = [0u8; NAME_LEN_MAX];
    for (d, s) in lower.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
    }
    let lower = std::str::from_utf8(&lower[..name.len()]).ok()?;
    index().get(lower).copied()
}
