//! Command properties, as bits: Redis's command flags (COMMAND INFO names
//! them), then Ferrite's own, which say how a command meets the rewrite.

/// Modifies data: logged, refused when the log failed.
pub const WRITE: u32 = 1;
/// Only reads data.
pub const READONLY: u32 = 1 << 1;
/// May grow memory: refused when memory is above `maxmemory`.
pub const DENYOOM: u32 = 1 << 2;
/// Allowed before AUTH (`no_auth`).
pub const NOAUTH: u32 = 1 << 3;
/// Runs even inside MULTI instead of being queued (MULTI, EXEC,
/// DISCARD, WATCH, UNWATCH, QUIT, RESET); not a flag COMMAND shows.
pub const NOQUEUE: u32 = 1 << 4;
/// Administrative (`admin`; ACL `@admin` and `@dangerous`).
pub const ADMIN: u32 = 1 << 5;
/// O(1) or O(log n) (`fast`).
pub const FAST: u32 = 1 << 6;
/// Reads the clock or randomness; Redis 7 no longer lists it, Ferrite
/// keeps it for the log (such commands log their effects).
pub const RANDOM: u32 = 1 << 7;
/// Refused inside MULTI (`no_multi`).
pub const NO_MULTI: u32 = 1 << 8;
/// Publish/subscribe (`pubsub`).
pub const PUBSUB: u32 = 1 << 9;
/// May block the client (`blocking`).
pub const BLOCKING: u32 = 1 << 10;
/// Allowed while loading (`loading`).
pub const LOADING: u32 = 1 << 11;
/// Allowed on a stale replica (`stale`).
pub const STALE: u32 = 1 << 12;
/// Refused in scripts (`noscript`).
pub const NOSCRIPT: u32 = 1 << 13;
/// Not shown to MONITOR (`skip_monitor`).
pub const SKIP_MONITOR: u32 = 1 << 14;
/// Not recorded by SLOWLOG (`skip_slowlog`).
pub const SKIP_SLOWLOG: u32 = 1 << 15;
/// Allowed while a script is busy (`allow_busy`).
pub const ALLOW_BUSY: u32 = 1 << 16;
/// Keys are optional (`no_mandatory_keys`).
pub const NO_MANDATORY_KEYS: u32 = 1 << 17;
/// May replicate though not a write (`may_replicate`).
pub const MAY_REPLICATE: u32 = 1 << 18;
/// Not allowed while a replica loads asynchronously
/// (`no_async_loading`).
pub const NO_ASYNC_LOADING: u32 = 1 << 19;
/// Served for a slot being imported after ASKING (`asking`); cluster mode
/// only, so outside it the flag is reported and nothing more.
pub const ASKING: u32 = 1 << 20;
/// Ferrite: touches whole databases rather than named keys (FLUSHDB,
/// FLUSHALL, SWAPDB); the rewrite captures every segment it names.
pub const WHOLE_DB: u32 = 1 << 24;
/// Ferrite: its log record sets the whole state of the keys it names
/// and reads no other key (DEL, UNLINK, MSET), so a running rewrite
/// need not pin them (`keyspace/supersede.rs`).
pub const SUPERSEDES: u32 = 1 << 25;
/// Ferrite: may name a key of another database than the client's
/// (MOVE, COPY ... DB): its touched segments and pins include it
/// ([`super::cross_db_key`]).
pub const CROSS_DB: u32 = 1 << 26;

/// The names COMMAND INFO gives Redis's flags, in Redis's order
/// (7.0 hides `may_replicate`).
pub const NAMES: &[(u32, &str)] = &[
    (WRITE, "write"),
    (READONLY, "readonly"),
    (DENYOOM, "denyoom"),
    (ADMIN, "admin"),
    (PUBSUB, "pubsub"),
    (NOSCRIPT, "noscript"),
    (BLOCKING, "blocking"),
    (LOADING, "loading"),
    (STALE, "stale"),
    (SKIP_MONITOR, "skip_monitor"),
    (SKIP_SLOWLOG, "skip_slowlog"),
    (ASKING, "asking"),
    (FAST, "fast"),
    (NOAUTH, "no_auth"),
    // `may_replicate` is a flag Redis 7.0 keeps out of COMMAND INFO.
    (NO_MANDATORY_KEYS, "no_mandatory_keys"),
    (NO_ASYNC_LOADING, "no_async_loading"),
    (NO_MULTI, "no_multi"),
    (ALLOW_BUSY, "allow_busy"),
];
