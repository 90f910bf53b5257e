//! Every directive Ferrite accepts, once: Redis 7.0's directives with
//! their old names (aliases), types, bounds and default texts, and
//! Ferrite's own (`log-device`, `aof-rewrite-*`...). The loader, CONFIG
//! GET/SET/REWRITE, INFO and `docs/configuration.md` all read this table.
//!
//! Directives Ferrite does not act on are still accepted and reported as
//! set, so tools and test suites written for Redis run; [`Effect::None`]
//! says why each has no effect.

/// How a directive's value is written and checked.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// `yes` or `no`.
    Bool,
    /// An integer within `min..=max`. `signed: false` compares (and
    /// prints the bounds) as unsigned 64-bit numbers, as Redis does for
    /// its unsigned settings, so `-1` is out of range rather than small.
    Num {
        /// Smallest value.
        min: i64,
        /// Largest value (`-1` stands for `u64::MAX` when unsigned).
        max: i64,
        /// Whether the value is compared as signed.
        signed: bool,
        /// How the text is read.
        unit: Unit,
    },
    /// One name out of a list (case-insensitive); shown as listed.
    Enum(&'static [&'static str]),
    /// A set of names out of a list (the first means "none of them").
    Flags(&'static [&'static str]),
    /// Any text.
    Text,
    /// A directive with its own syntax.
    Special(Special),
}

/// How a numeric directive's text is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// A plain decimal integer.
    Plain,
    /// A size: `42`, `1k` (1000), `1kb` (1024), `mb`, `gb`...
    Memory,
    /// A size, or a percentage `N%` stored as `-N`.
    MemoryPercent,
    /// An octal number.
    Octal,
}

/// Directives with a syntax of their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Special {
    /// The data directory.
    Dir,
    /// Snapshot points: pairs of seconds and changes.
    Save,
    /// Per client class: class, hard limit, soft limit, soft seconds.
    ClientOutputBufferLimit,
    /// Three OOM score adjustments.
    OomScoreAdjValues,
    /// Keyspace notification classes as letters.
    NotifyKeyspaceEvents,
    /// Listening addresses.
    Bind,
    /// `host port` of a master, or nothing.
    Replicaof,
    /// Percentiles INFO latencystats reports.
    LatencyTrackingInfoPercentiles,
    /// A CPU list (`0-3,8`, `0-7:2`) for pinning threads.
    CpuList,
}

/// Whether a directive changes what Ferrite does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Ferrite reads it.
    Acts,
    /// Accepted and reported, with no effect, for the reason given.
    None(&'static str),
}

/// One directive.
#[derive(Clone, Copy, Debug)]
pub struct Directive {
    /// The name CONFIG GET * reports.
    pub name: &'static str,
    /// Redis's older name for it, also accepted and reported.
    pub alias: Option<&'static str>,
    /// Its syntax.
    pub kind: Kind,
    /// The value before any file or flag sets it, as CONFIG GET shows it.
    pub default: &'static str,
    /// [`IMMUTABLE`], [`HIDDEN`]...
    pub flags: u8,
    /// Whether Ferrite acts on it.
    pub effect: Effect,
    /// One line for `docs/configuration.md`.
    pub doc: &'static str,
}

impl Directive {
    /// Whether `flag` is set.
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// CONFIG SET refuses it: set only in the file or on the command line.
pub const IMMUTABLE: u8 = 1;
/// Left out of CONFIG GET patterns; only its exact name shows it.
pub const HIDDEN: u8 = 1 << 1;
/// Takes several arguments (`save 900 1 300 10`).
pub const MULTI_ARG: u8 = 1 << 2;
/// CONFIG SET needs `enable-protected-configs` (Redis's protected set).
pub const PROTECTED: u8 = 1 << 3;
/// A secret: Redis hides it from logs.
pub const SENSITIVE: u8 = 1 << 4;
/// Ferrite fixes it at start-up though Redis changes it at run time:
/// CONFIG SET accepts the current value and refuses any other.
pub const STARTUP_ONLY: u8 = 1 << 5;

const I32_MIN: i64 = i32::MIN as i64;
const I32_MAX: i64 = i32::MAX as i64;
const U32_MAX: i64 = u32::MAX as i64;
const I64_MAX: i64 = i64::MAX;
/// `u64::MAX` seen as an `i64`.
const U64_MAX: i64 = -1;

const MAXMEMORY_POLICY: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];
const SYSLOG_FACILITY: &[&str] = &[
    "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
];
const LOGLEVEL: &[&str] = &["debug", "verbose", "notice", "warning"];
const SUPERVISED: &[&str] = &["upstart", "systemd", "auto", "no"];
const APPENDFSYNC: &[&str] = &["everysec", "always", "no"];
const SHUTDOWN_ON_SIGNAL: &[&str] = &["default", "save", "nosave", "now", "force"];
const REPL_DISKLESS_LOAD: &[&str] = &["disabled", "on-empty-db", "swapdb"];
const TLS_AUTH_CLIENTS: &[&str] = &["no", "yes", "optional"];
const OOM_SCORE_ADJ: &[&str] = &["no", "yes", "relative", "absolute"];
const ACL_PUBSUB_DEFAULT: &[&str] = &["allchannels", "resetchannels"];
const SANITIZE_DUMP_PAYLOAD: &[&str] = &["no", "yes", "clients"];
/// `no`, `yes`, or `local` (only from loopback connections).
pub const PROTECTED_ACTION: &[&str] = &["no", "yes", "local"];
const ENDPOINT_TYPE: &[&str] = &["ip", "hostname", "unknown-endpoint"];
const PROPAGATION_ERROR: &[&str] = &["ignore", "panic", "panic-on-replicas"];
const LOG_DEVICE: &[&str] = &["auto", "file", "pmem", "pmem-emulated", "wbuf"];

// Why directives have no effect in Ferrite, by subject.
const RDB: &str = "Ferrite's RDB saves (dump.rdb with appendonly no) and full syncs run on a thread and do not read it";
const REPL: &str = "not implemented by Ferrite's replication (docs/replication.md)";
const CLUSTER: &str = "not implemented by Ferrite's cluster (docs/cluster.md)";
const TLS: &str = "Ferrite's outgoing connections (the link to a master) are plain TCP; TLS is served to clients and replicas on `tls-port`";
const ENCODING: &str = "Ferrite's value encodings do not depend on size thresholds";
const ALLOCATOR: &str = "Ferrite uses the system allocator: no jemalloc, no active defragmentation";
const LAZYFREE: &str = "Ferrite frees evicted, expired and overwritten values on the event loop";
const PROCESS: &str = "`ferrite serve` runs in the foreground and logs to stderr";
const REDIS_AOF: &str =
    "Ferrite's log has its own format and rewrite (see the `aof-*` directives it acts on)";
const NOT_YET: &str = "the feature this tunes is not implemented in Ferrite";
const NETWORK: &str = "Ferrite's listener does not use this socket setting";

macro_rules! d {
    ($name:literal, $alias:expr, $kind:expr, $default:literal, $flags:expr, $effect:expr, $doc:literal) => {
        Directive {
            name: $name,
            alias: $alias,
            kind: $kind,
            default: $default,
            flags: $flags,
            effect: $effect,
            doc: $doc,
        }
    };
}

const fn num(min: i64, max: i64) -> Kind {
    Kind::Num {
        min,
        max,
        signed: true,
        unit: Unit::Plain,
    }
}
const fn unsigned(min: i64, max: i64) -> Kind {
    Kind::Num {
        min,
        max,
        signed: false,
        unit: Unit::Plain,
    }
}
const fn memory(min: i64, max: i64, signed: bool) -> Kind {
    Kind::Num {
        min,
        max,
        signed,
        unit: Unit::Memory,
    }
}

use Effect::{Acts, None as No};
use Kind::{Bool, Enum, Flags, Special as Sp, Text};

/// The table, Ferrite's own directives last.
#[rustfmt::skip]
pub static DIRECTIVES: &[Directive] = &[
    // Network and clients.
    d!("port", None, num(0, 65535), "6379", 0, Acts, "TCP port; at start-up 0 picks a free one, at run time 0 stops listening (as Redis)."),
    d!("bind", None, Sp(Special::Bind), "127.0.0.1", MULTI_ARG, Acts, "Addresses to listen on, TCP and TLS (Ferrite's default is loopback only): `*` every IPv4 address, `::*` every IPv6 one, a leading `-` skips an address not on this machine, empty listens on none. At run time the new addresses are all bound before the old listeners close; if one fails nothing changes."),
    d!("protected-mode", None, Bool, "yes", 0, Acts, "Refuse non-loopback clients when no password is set."),
    d!("maxclients", None, unsigned(1, U32_MAX), "10000", 0, Acts, "Most clients connected at once; more are refused."),
    d!("requirepass", None, Text, "", SENSITIVE, Acts, "Password of the default user; empty for none."),
    d!("timeout", None, num(0, I32_MAX), "0", 0, Acts, "Close clients idle this many seconds (0: never); replicas, blocked and subscribed clients are exempt, as in Redis."),
    d!("tcp-keepalive", None, num(0, I32_MAX), "300", 0, No(NETWORK), "TCP keepalive period in seconds."),
    d!("tcp-backlog", None, num(0, I32_MAX), "511", IMMUTABLE, No(NETWORK), "Listen backlog."),
    d!("unixsocket", None, Text, "", IMMUTABLE, Acts, "Path of a Unix socket to listen on, beside the TCP port: the same protocol, local clients only."),
    d!("unixsocketperm", None, Kind::Num { min: 0, max: 0o777, signed: false, unit: Unit::Octal }, "0", IMMUTABLE, Acts, "Permissions of the Unix socket, in octal (0: the umask decides)."),
    d!("socket-mark-id", None, unsigned(0, U32_MAX), "0", IMMUTABLE, No(NETWORK), "Mark set on listening sockets."),
    d!("bind-source-addr", None, Text, "", 0, Acts, "Source address of the replica's link to its master (empty: any); as in Redis, a source that cannot be bound is skipped."),
    d!("client-query-buffer-limit", None, Kind::Num { min: 1 << 20, max: I64_MAX, signed: false, unit: Unit::Memory }, "1073741824", 0, Acts, "Largest query buffer of one client."),
    d!("proto-max-bulk-len", None, memory(1 << 20, I64_MAX, true), "536870912", 0, Acts, "Longest bulk string a client may send."),
    d!("client-output-buffer-limit", None, Sp(Special::ClientOutputBufferLimit), "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60", MULTI_ARG, Acts, "Reply buffer limits per client class: hard bytes, soft bytes, soft seconds."),
    d!("maxmemory-clients", None, Kind::Num { min: -100, max: I64_MAX, signed: true, unit: Unit::MemoryPercent }, "0", 0, Acts, "Memory all clients may use before the largest are closed (0: no limit; N%: of maxmemory)."),
    d!("tracking-table-max-keys", None, unsigned(0, I64_MAX), "1000000", 0, No(NOT_YET), "Keys client-side caching tracks."),
    d!("io-threads", None, num(1, 128), "1", IMMUTABLE, No(NOT_YET), "Threads for client I/O."),
    d!("io-threads-do-reads", None, Bool, "no", IMMUTABLE, No(NOT_YET), "Whether I/O threads also read."),
    // General.
    d!("databases", None, num(1, 1024), "16", IMMUTABLE, Acts, "Number of databases (Ferrite allocates them at start, so at most 1024)."),
    d!("hz", None, num(0, I32_MAX), "10", 0, Acts, "Timer frequency (active expiry, housekeeping); 0 and values above 500 act as 1 and 500, as in Redis."),
    d!("dynamic-hz", None, Bool, "yes", 0, No(NOT_YET), "Raise hz with the number of clients."),
    d!("enable-debug-command", None, Enum(PROTECTED_ACTION), "no", IMMUTABLE, Acts, "Allow DEBUG: no, yes, or local (loopback clients only)."),
    d!("enable-protected-configs", None, Enum(PROTECTED_ACTION), "no", IMMUTABLE, Acts, "Allow CONFIG SET of protected directives (dir, dbfilename)."),
    d!("enable-module-command", None, Enum(PROTECTED_ACTION), "no", IMMUTABLE, Acts, "Allow MODULE: no, yes, or local (loopback clients only); Ferrite loads no modules."),
    d!("latency-tracking", None, Bool, "yes", 0, Acts, "Keep per-command latency histograms for INFO latencystats."),
    d!("latency-tracking-info-percentiles", None, Sp(Special::LatencyTrackingInfoPercentiles), "50 99 99.9", MULTI_ARG, Acts, "Percentiles INFO latencystats reports."),
    d!("maxmemory", None, memory(0, U64_MAX, false), "0", 0, Acts, "Memory limit: above it, commands that may grow memory are refused (0: none)."),
    d!("maxmemory-policy", None, Enum(MAXMEMORY_POLICY), "noeviction", 0, Acts, "What to do above maxmemory."),
    d!("maxmemory-samples", None, num(1, I32_MAX), "5", 0, Acts, "Keys sampled per eviction."),
    d!("maxmemory-eviction-tenacity", None, num(0, 100), "10", 0, No("Ferrite never evicts"), "Effort spent evicting."),
    d!("lfu-log-factor", None, num(0, I32_MAX), "10", 0, Acts, "LFU counter growth."),
    d!("lfu-decay-time", None, num(0, I32_MAX), "1", 0, Acts, "LFU counter decay in minutes."),
    d!("active-expire-effort", None, num(1, 10), "1", 0, No(NOT_YET), "Effort of active expiry."),
    d!("notify-keyspace-events", None, Sp(Special::NotifyKeyspaceEvents), "", 0, Acts, "Keyspace notification classes."),
    d!("slowlog-log-slower-than", None, num(-1, I64_MAX), "10000", 0, Acts, "Commands slower than this many microseconds go to the slow log."),
    d!("slowlog-max-len", None, unsigned(0, I64_MAX), "128", 0, Acts, "Length of the slow log."),
    d!("latency-monitor-threshold", None, num(0, I64_MAX), "0", 0, Acts, "Events slower than this many milliseconds are sampled."),
    d!("acllog-max-len", None, unsigned(0, I64_MAX), "128", 0, Acts, "Most entries ACL LOG keeps."),
    d!("aclfile", None, Text, "", IMMUTABLE, Acts, "File of ACL users (ACL LOAD, ACL SAVE); loaded at start-up, not with `user` lines."),
    d!("acl-pubsub-default", None, Enum(ACL_PUBSUB_DEFAULT), "resetchannels", 0, Acts, "Channels a new (or reset) user may use: none, or all."),
    d!("masteruser", None, Text, "", SENSITIVE, Acts, "User to authenticate to a master as."),
    d!("masterauth", None, Text, "", SENSITIVE, Acts, "Password for a master."),
    d!("activerehashing", None, Bool, "yes", 0, No(ENCODING), "Rehash main dictionaries incrementally."),
    d!("shutdown-timeout", None, num(0, I32_MAX), "10", 0, No(REPL), "Seconds SHUTDOWN waits for replicas."),
    d!("shutdown-on-sigint", None, Flags(SHUTDOWN_ON_SIGNAL), "default", MULTI_ARG, Acts, "SHUTDOWN flags used on SIGINT (`now` has no effect: shutdown does not wait for replicas)."),
    d!("shutdown-on-sigterm", None, Flags(SHUTDOWN_ON_SIGNAL), "default", MULTI_ARG, Acts, "SHUTDOWN flags used on SIGTERM (`now` has no effect: shutdown does not wait for replicas)."),
    d!("busy-reply-threshold", Some("lua-time-limit"), num(0, I64_MAX), "5000", 0, Acts, "Milliseconds a script runs before other clients are served, with BUSY replies."),
    d!("sanitize-dump-payload", None, Enum(SANITIZE_DUMP_PAYLOAD), "no", 0, No(NOT_YET), "Deep checks of RESTORE payloads."),
    d!("propagation-error-behavior", None, Enum(PROPAGATION_ERROR), "ignore", 0, No(REPL), "What a replica does on a failed replicated command."),
    d!("oom-score-adj", None, Enum(OOM_SCORE_ADJ), "no", 0, Acts, "Whether to set the process's OOM score: relative to the original, or absolute."),
    d!("oom-score-adj-values", None, Sp(Special::OomScoreAdjValues), "0 200 800", MULTI_ARG, Acts, "OOM scores of master, replica and child (Ferrite starts no child)."),
    d!("ignore-warnings", None, Text, "", 0, No(PROCESS), "Start-up warnings to silence."),
    // Process.
    d!("daemonize", None, Bool, "no", IMMUTABLE, No(PROCESS), "Run in the background."),
    d!("supervised", None, Enum(SUPERVISED), "no", IMMUTABLE, No(PROCESS), "Talk to upstart or systemd."),
    d!("pidfile", None, Text, "", IMMUTABLE, No(PROCESS), "File to write the process id to."),
    d!("loglevel", None, Enum(LOGLEVEL), "notice", 0, No("Ferrite's log level is set with RUST_LOG"), "Log verbosity."),
    d!("logfile", None, Text, "", IMMUTABLE, No(PROCESS), "File to log to."),
    d!("syslog-enabled", None, Bool, "no", IMMUTABLE, No(PROCESS), "Log to syslog."),
    d!("syslog-ident", None, Text, "redis", IMMUTABLE, No(PROCESS), "Syslog identity."),
    d!("syslog-facility", None, Enum(SYSLOG_FACILITY), "local0", IMMUTABLE, No(PROCESS), "Syslog facility."),
    d!("always-show-logo", None, Bool, "no", IMMUTABLE, No(PROCESS), "Print the logo at start-up."),
    d!("set-proc-title", None, Bool, "yes", IMMUTABLE, No(PROCESS), "Change the process title."),
    d!("proc-title-template", None, Text, "{title} {listen-addr} {server-mode}", 0, No(PROCESS), "Template of the process title."),
    d!("crash-log-enabled", None, Bool, "yes", 0, No(PROCESS), "Log a stack trace on a crash."),
    d!("crash-memcheck-enabled", None, Bool, "yes", 0, No(PROCESS), "Test memory after a crash."),
    d!("use-exit-on-panic", None, Bool, "no", HIDDEN, No(PROCESS), "Exit instead of aborting on a panic."),
    d!("disable-thp", None, Bool, "yes", IMMUTABLE, No(ALLOCATOR), "Turn transparent huge pages off."),
    d!("watchdog-period", None, num(0, I32_MAX), "0", HIDDEN, No(PROCESS), "Software watchdog period in milliseconds."),
    d!("server_cpulist", None, Sp(Special::CpuList), "", IMMUTABLE, Acts, "CPUs the event loop runs on (`0-3`, `0-7:2`); empty for any."),
    d!("bio_cpulist", None, Sp(Special::CpuList), "", IMMUTABLE, No("Ferrite has no background I/O threads"), "CPUs of background I/O threads."),
    d!("aof_rewrite_cpulist", None, Sp(Special::CpuList), "", IMMUTABLE, Acts, "CPUs the log rewrite's threads run on; empty for any."),
    d!("bgsave_cpulist", None, Sp(Special::CpuList), "", IMMUTABLE, No(RDB), "CPUs of the RDB child."),
    // Persistence: the log.
    d!("dir", None, Sp(Special::Dir), "./ferrite-data", PROTECTED | STARTUP_ONLY, Acts, "Data directory: the log and its rewrites live here."),
    d!("appendonly", None, Bool, "yes", 0, Acts, "Log every write (Ferrite's default is yes); at run time, yes starts the log with a rewrite and no closes it (docs/aof-runtime.md)."),
    d!("appendfsync", None, Enum(APPENDFSYNC), "everysec", 0, Acts, "When the log is durable: always (before the reply), everysec, or no (the OS decides)."),
    d!("appendfilename", None, Text, "appendonly.aof", IMMUTABLE, Acts, "Name of the log inside dir."),
    d!("appenddirname", None, Text, "appendonlydir", IMMUTABLE, No(REDIS_AOF), "Directory of Redis's multi-part AOF."),
    d!("aof-load-truncated", None, Bool, "yes", 0, Acts, "Start with a log whose tail is torn, cutting the tail."),
    d!("auto-aof-rewrite-percentage", None, num(0, I32_MAX), "100", 0, Acts, "Rewrite the log when it grew this much over its last rewritten size (0: never)."),
    d!("auto-aof-rewrite-min-size", None, memory(0, I64_MAX, true), "67108864", 0, Acts, "Smallest log size an automatic rewrite starts at."),
    d!("aof-rewrite-incremental-fsync", None, Bool, "yes", 0, No(REDIS_AOF), "Sync every 4 MB while rewriting."),
    d!("no-appendfsync-on-rewrite", None, Bool, "no", 0, No(REDIS_AOF), "Skip fsync while a rewrite runs."),
    d!("aof-use-rdb-preamble", None, Bool, "yes", 0, No(REDIS_AOF), "Rewrite the AOF base as RDB."),
    d!("aof-timestamp-enabled", None, Bool, "no", 0, No(REDIS_AOF), "Write timestamps into the AOF."),
    d!("aof-disable-auto-gc", None, Bool, "no", 0, No(REDIS_AOF), "Keep old AOF parts after a rewrite."),
    // Persistence: RDB.
    d!("save", None, Sp(Special::Save), "3600 1 300 100 60 10000", MULTI_ARG, Acts, "Snapshot points: seconds and changes, in pairs (with appendonly no, a BGSAVE of dump.rdb when both are reached)."),
    d!("dbfilename", None, Text, "dump.rdb", PROTECTED, Acts, "Name of the RDB file in dir (with appendonly no)."),
    d!("rdbcompression", None, Bool, "yes", 0, No(RDB), "Compress RDB strings."),
    d!("rdbchecksum", None, Bool, "yes", IMMUTABLE, No(RDB), "Checksum RDB files."),
    d!("rdb-del-sync-files", None, Bool, "no", 0, No(RDB), "Delete RDB files used only for replication."),
    d!("rdb-save-incremental-fsync", None, Bool, "yes", 0, No(RDB), "Sync every 4 MB while saving."),
    d!("stop-writes-on-bgsave-error", None, Bool, "yes", 0, No(RDB), "Refuse writes after a failed save."),
    d!("rdb-key-save-delay", None, num(I32_MIN, I32_MAX), "0", HIDDEN, Acts, "Testing: microseconds a log rewrite or an RDB production waits per key it writes (negative -n: one microsecond with a chance of 1/n), as Redis's RDB and AOF rewrite."),
    d!("key-load-delay", None, num(I32_MIN, I32_MAX), "0", HIDDEN, No(RDB), "Testing: delay per key loaded."),
    d!("loading-process-events-interval-bytes", None, num(1024, I32_MAX), "2097152", HIDDEN, No(RDB), "Bytes loaded between event loop turns."),
    // Encodings.
    d!("hash-max-listpack-entries", Some("hash-max-ziplist-entries"), unsigned(0, I64_MAX), "512", 0, No(ENCODING), "Largest hash kept as a listpack."),
    d!("hash-max-listpack-value", Some("hash-max-ziplist-value"), memory(0, I64_MAX, false), "64", 0, No(ENCODING), "Longest hash value kept in a listpack."),
    d!("list-max-listpack-size", Some("list-max-ziplist-size"), num(I32_MIN, I32_MAX), "-2", 0, No(ENCODING), "Size of quicklist nodes."),
    d!("list-compress-depth", None, num(0, I32_MAX), "0", 0, No(ENCODING), "Quicklist nodes left uncompressed at each end."),
    d!("set-max-intset-entries", None, unsigned(0, I64_MAX), "512", 0, No(ENCODING), "Largest set kept as an intset."),
    d!("zset-max-listpack-entries", Some("zset-max-ziplist-entries"), unsigned(0, I64_MAX), "128", 0, No(ENCODING), "Largest sorted set kept as a listpack."),
    d!("zset-max-listpack-value", Some("zset-max-ziplist-value"), memory(0, I64_MAX, false), "64", 0, No(ENCODING), "Longest member kept in a sorted set listpack."),
    d!("hll-sparse-max-bytes", None, memory(0, I64_MAX, false), "3000", 0, No(ENCODING), "Largest sparse HyperLogLog."),
    d!("stream-node-max-bytes", None, memory(0, I64_MAX, false), "4096", 0, Acts, "Largest stream node in bytes."),
    d!("stream-node-max-entries", None, num(0, I64_MAX), "100", 0, Acts, "Most entries in a stream node."),
    // Memory management.
    d!("activedefrag", None, Bool, "no", 0, No(ALLOCATOR), "Defragment memory while running."),
    d!("active-defrag-ignore-bytes", None, memory(1, I64_MAX, false), "104857600", 0, No(ALLOCATOR), "Fragmentation below which defrag waits."),
    d!("active-defrag-threshold-lower", None, num(0, 1000), "10", 0, No(ALLOCATOR), "Fragmentation percent defrag starts at."),
    d!("active-defrag-threshold-upper", None, num(0, 1000), "100", 0, No(ALLOCATOR), "Fragmentation percent of full effort."),
    d!("active-defrag-cycle-min", None, num(1, 99), "1", 0, No(ALLOCATOR), "Least CPU percent for defrag."),
    d!("active-defrag-cycle-max", None, num(1, 99), "25", 0, No(ALLOCATOR), "Most CPU percent for defrag."),
    d!("active-defrag-max-scan-fields", None, unsigned(1, I64_MAX), "1000", 0, No(ALLOCATOR), "Fields scanned per defrag step."),
    d!("jemalloc-bg-thread", None, Bool, "yes", 0, No(ALLOCATOR), "Purge memory on a jemalloc thread."),
    d!("lazyfree-lazy-eviction", None, Bool, "no", 0, No(LAZYFREE), "Free evicted values on a thread."),
    d!("lazyfree-lazy-expire", None, Bool, "no", 0, No(LAZYFREE), "Free expired values on a thread."),
    d!("lazyfree-lazy-server-del", None, Bool, "no", 0, No(LAZYFREE), "Free values the server deletes on a thread."),
    d!("lazyfree-lazy-user-del", None, Bool, "no", 0, Acts, "DEL acts as UNLINK."),
    d!("lazyfree-lazy-user-flush", None, Bool, "no", 0, Acts, "FLUSHDB and FLUSHALL default to ASYNC."),
    // Replication.
    d!("replicaof", Some("slaveof"), Sp(Special::Replicaof), "", IMMUTABLE | MULTI_ARG, Acts, "Master to replicate from."),
    d!("replica-serve-stale-data", Some("slave-serve-stale-data"), Bool, "yes", 0, Acts, "Serve reads while out of sync."),
    d!("replica-read-only", Some("slave-read-only"), Bool, "yes", 0, Acts, "Refuse writes on a replica."),
    d!("replica-lazy-flush", Some("slave-lazy-flush"), Bool, "no", 0, No(REPL), "Flush asynchronously before a full sync."),
    d!("replica-ignore-maxmemory", Some("slave-ignore-maxmemory"), Bool, "yes", 0, No(REPL), "Replicas ignore maxmemory."),
    d!("replica-announced", None, Bool, "yes", 0, No(REPL), "Show this replica to Sentinel."),
    d!("replica-ignore-disk-write-errors", None, Bool, "no", 0, No(REPL), "Keep replicating after a disk error."),
    d!("replica-priority", Some("slave-priority"), num(0, I32_MAX), "100", 0, No(REPL), "Promotion priority."),
    d!("replica-announce-ip", Some("slave-announce-ip"), Text, "", 0, Acts, "Address announced to the master."),
    d!("replica-announce-port", Some("slave-announce-port"), num(0, 65535), "0", 0, Acts, "Port announced to the master (0: the listening port)."),
    d!("repl-diskless-sync", None, Bool, "yes", 0, Acts, "Full syncs wait for more replicas (those that read the EOF form)."),
    d!("repl-diskless-sync-delay", None, num(0, I32_MAX), "5", 0, Acts, "Seconds a full sync waits for more replicas."),
    d!("repl-diskless-sync-max-replicas", None, num(0, I32_MAX), "0", 0, Acts, "Waiting replicas that start a full sync at once (0: no limit)."),
    d!("repl-diskless-load", None, Enum(REPL_DISKLESS_LOAD), "disabled", 0, Acts, "How a replica loads a full sync: `disabled` keeps serving the old dataset until the payload is whole; `on-empty-db` (when the dataset is empty) and `swapdb` report LOADING while it arrives, `swapdb` keeping the old dataset for a failed load, or serving it (`async_loading`) when the replication ID is unchanged."),
    d!("repl-disable-tcp-nodelay", None, Bool, "no", 0, No(REPL), "Batch replication packets."),
    d!("repl-ping-replica-period", Some("repl-ping-slave-period"), num(1, I32_MAX), "10", 0, Acts, "Seconds between pings to replicas."),
    d!("repl-timeout", None, num(1, I32_MAX), "60", 0, Acts, "Replication timeout in seconds."),
    d!("repl-backlog-size", None, memory(1, I64_MAX, true), "1048576", 0, Acts, "Replication backlog size."),
    d!("repl-backlog-ttl", None, num(0, I64_MAX), "3600", 0, Acts, "Seconds the backlog outlives its replicas."),
    d!("min-replicas-to-write", Some("min-slaves-to-write"), num(0, I32_MAX), "0", 0, Acts, "Replicas needed to accept writes."),
    d!("min-replicas-max-lag", Some("min-slaves-max-lag"), num(0, I32_MAX), "10", 0, Acts, "Lag of a replica counted as good."),
    // Cluster.
    d!("cluster-enabled", None, Bool, "no", IMMUTABLE, Acts, "Run as a cluster node."),
    d!("cluster-config-file", None, Text, "nodes.conf", IMMUTABLE, Acts, "The node's cluster state file."),
    d!("cluster-node-timeout", None, num(0, I64_MAX), "15000", 0, Acts, "Milliseconds before a node is failing."),
    d!("cluster-port", None, num(0, 65535), "0", IMMUTABLE, Acts, "Cluster bus port."),
    d!("cluster-announce-ip", None, Text, "", 0, Acts, "Address announced to the cluster."),
    d!("cluster-announce-hostname", None, Text, "", 0, Acts, "Host name announced to the cluster."),
    d!("cluster-announce-port", None, num(0, 65535), "0", 0, Acts, "Client port announced."),
    d!("cluster-announce-bus-port", None, num(0, 65535), "0", 0, Acts, "Bus port announced."),
    d!("cluster-announce-tls-port", None, num(0, 65535), "0", 0, No(CLUSTER), "TLS port announced."),
    d!("cluster-preferred-endpoint-type", None, Enum(ENDPOINT_TYPE), "ip", 0, Acts, "Endpoint shown in redirections."),
    d!("cluster-replica-validity-factor", Some("cluster-slave-validity-factor"), num(0, I32_MAX), "10", 0, No(CLUSTER), "How stale a replica may be to fail over."),
    d!("cluster-replica-no-failover", Some("cluster-slave-no-failover"), Bool, "no", 0, Acts, "Never fail over automatically."),
    d!("cluster-migration-barrier", None, num(0, I32_MAX), "1", 0, Acts, "Replicas a master keeps before one migrates."),
    d!("cluster-allow-replica-migration", None, Bool, "yes", 0, Acts, "Let replicas migrate."),
    d!("cluster-require-full-coverage", None, Bool, "yes", 0, Acts, "Stop when a slot is uncovered."),
    d!("cluster-allow-reads-when-down", None, Bool, "no", 0, Acts, "Serve reads while the cluster is down."),
    d!("cluster-allow-pubsubshard-when-down", None, Bool, "yes", 0, Acts, "Serve shard channels while down."),
    d!("cluster-link-sendbuf-limit", None, memory(0, U64_MAX, false), "0", 0, No(CLUSTER), "Send buffer limit of cluster links."),
    // TLS.
    d!("tls-port", None, num(0, 65535), "0", 0, Acts, "TLS port, beside `port` (0: none). Both may be set; `port 0` with a `tls-port` listens on TLS only."),
    d!("tls-cert-file", None, Text, "", 0, Acts, "Server certificate chain (PEM). CONFIG SET reloads it (and the key) for new connections."),
    d!("tls-key-file", None, Text, "", 0, Acts, "Server private key (PEM: PKCS#8, PKCS#1 or SEC1)."),
    d!("tls-key-file-pass", None, Text, "", 0, Acts, "Passphrase of an encrypted PKCS#8 `tls-key-file`."),
    d!("tls-client-cert-file", None, Text, "", 0, No(TLS), "Client certificate for outgoing links."),
    d!("tls-client-key-file", None, Text, "", 0, No(TLS), "Client private key."),
    d!("tls-client-key-file-pass", None, Text, "", 0, No(TLS), "Passphrase of the client key."),
    d!("tls-dh-params-file", None, Text, "", 0, Acts, "Diffie-Hellman parameters: read and checked, unused (rustls's key exchanges are all elliptic-curve)."),
    d!("tls-ca-cert-file", None, Text, "", 0, Acts, "CA certificates (PEM) that client certificates must chain to."),
    d!("tls-ca-cert-dir", None, Text, "", 0, Acts, "Directory of CA certificate files, read as with `tls-ca-cert-file`."),
    d!("tls-auth-clients", None, Enum(TLS_AUTH_CLIENTS), "yes", 0, Acts, "Client certificates: required (yes), checked if sent (optional), or not asked for (no)."),
    d!("tls-replication", None, Bool, "no", 0, No(TLS), "TLS for replication."),
    d!("tls-cluster", None, Bool, "no", 0, No(CLUSTER), "TLS for the cluster bus."),
    d!("tls-protocols", None, Text, "", 0, Acts, "TLS versions allowed: TLSv1.2 and/or TLSv1.3 (empty: both; older ones are refused)."),
    d!("tls-ciphers", None, Text, "", 0, Acts, "TLS 1.2 ciphers in OpenSSL syntax, among the six ECDHE AEAD suites rustls implements; others are refused."),
    d!("tls-ciphersuites", None, Text, "", 0, Acts, "TLS 1.3 suites: TLS_AES_256_GCM_SHA384, TLS_AES_128_GCM_SHA256, TLS_CHACHA20_POLY1305_SHA256."),
    d!("tls-prefer-server-ciphers", None, Bool, "no", 0, Acts, "Choose the cipher by the server's order rather than the client's."),
    d!("tls-session-caching", None, Bool, "yes", 0, Acts, "Let clients resume TLS sessions from a server-side cache."),
    d!("tls-session-cache-size", None, num(0, I32_MAX), "20480", 0, Acts, "Sessions the cache keeps (0: no bound)."),
    d!("tls-session-cache-timeout", None, num(0, I32_MAX), "300", 0, Acts, "Seconds a cached session can be resumed."),
    // Ferrite's own.
    d!("log-device", None, Enum(LOG_DEVICE), "auto", STARTUP_ONLY, Acts, "What the log is stored on: auto (persistent memory when dir is on DAX, else a file), file, pmem, pmem-emulated (a mapped file: survives a process crash, not a power failure), or wbuf (a file behind a persistent-memory write buffer)."),
    d!("log-wbuf-dir", None, Text, "", PROTECTED | STARTUP_ONLY, Acts, "With log-device wbuf: the directory of the logs' write buffers, on persistent memory (DAX; elsewhere a mapped file that survives a process crash, not a power failure); empty for the data directory."),
    d!("log-wbuf-size", None, memory(1 << 20, I64_MAX, false), "67108864", STARTUP_ONLY, Acts, "With log-device wbuf: bytes of persistent memory in each new log's write buffer."),
    d!("aof-rewrite-threads", None, num(0, 64), "0", 0, Acts, "Threads of a log rewrite; 0 for one per core."),
    d!("aof-rewrite-io-share", None, num(1, 100), "20", 0, Acts, "Percent of the time a rewrite may spend writing."),
    d!("aof-rewrite-cpu-share", None, num(0, 100), "5", 0, Acts, "Percent of the machine's CPU time (all cores) a rewrite may use when no core is idle and it is ahead of its log; 0 for no limit."),
    d!("aof-rewrite-lend-loop-core", None, Bool, "no", 0, Acts, "Let a rewrite burst use the event loop's core (a small-machine mechanism, off by default)."),
    d!("event-loop-unstack", None, Bool, "no", 0, Acts, "Move an unpinned event loop off a core where it keeps waiting (a small-machine mechanism, off by default)."),
    d!("aof-release-log-cache", None, Bool, "yes", 0, Acts, "Drop synced stretches of the log from the page cache."),
    d!("maxmemory-dram", None, memory(0, I64_MAX, true), "0", STARTUP_ONLY, Acts, "DRAM budget of the dataset: above it the coldest string values of 64 bytes or more move to the PM tier (0: no tier; docs/tier.md)."),
    d!("pm-tier-path", None, Text, "", STARTUP_ONLY, Acts, "File holding the PM tier's heap (empty: ferrite-pm-tier in dir); its contents are rebuilt from the log at each start."),
    d!("pm-tier-size", None, memory(0, I64_MAX, true), "1073741824", STARTUP_ONLY, Acts, "Bytes of the PM tier's heap; refused at start-up when larger than its file system's free space."),
    d!("aof-everysec-sync-bytes", None, memory(0, I64_MAX, true), "16777216", 0, Acts, "At everysec, also sync once this many bytes wait (0: only every second)."),
];

/// The directive named `name` (lower case), by its name or alias.
pub fn lookup(name: &str) -> Option<&'static Directive> {
    DIRECTIVES
        .iter()
        .find(|d| d.name == name || d.alias == Some(name))
}
